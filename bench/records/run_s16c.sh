#!/usr/bin/env bash
# Session 16, call 3: the register-tiled tall products (k_tall_ab2 / k_tall_atb2: 64 x 64 projections)
# and 2-D tg_matmul on the linear's path. test_linear (every CUDA test) and test_edge_attention (stop
# on failure); memcheck and racecheck on the tall tests; the point-cloud step (wide H 1 / H 4, seed H 1)
# at 100k / 400k; ncu per-kernel times of the wide H 1 step (caches kept). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for t in test_linear test_edge_attention; do
  (cd $R/tests && timeout 120 ./$t --jobs 4 > $o/$t.log 2>&1); rc=$?
  echo "$t rc=$rc $(grep -h Synthesis $o/$t.log | tail -1)"
  if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/$t.log | head -40; pack; exit 1; fi
done
P=$R/examples/train_pointcloud
for cfg in "wide 1" "wide 4" "seed 1"; do set -- $cfg; for n in 100000 400000; do
  timeout 60 $P --model $1 --heads $2 --device cuda --n $n --degree 17 --attention fused --steps 30 --quiet > $o/pc_$1_$2_$n.log 2>&1
  echo "$1 H $2 n $n rc=$? $(grep -h 'training step' $o/pc_$1_$2_$n.log | cut -c1-90)"
done; done
timeout 200 ncu --csv --cache-control none --metrics gpu__time_duration.sum $P --model wide --device cuda --n 400000 --degree 17 --attention fused --steps 3 --heads 1 --quiet > $o/ncu_wide.csv 2> $o/ncu_wide.err
echo "ncu wide rc=$?"
python3 - $o/ncu_wide.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(float); c = collections.Counter()
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); u = r[iu]
    v = v / 1000 if u in ("nsecond", "ns") else v * 1000 if u in ("msecond", "ms") else v
    name = r[ik] if r[ik].startswith("(") or r[ik].startswith("<") else r[ik].split("(")[0]
    name = name.replace("void ", "")[:60]
    t[name] += v; c[name] += 1
tot = sum(t.values())
print(f"  all kernels: {tot / 4:.1f} us a step (sum / 4), {sum(c.values())} launches")
for n, v in sorted(t.items(), key=lambda x: -x[1])[:22]:
    print(f"  {n:60s} {v / 4:8.1f} us/step  (x{c[n]}, {v / c[n]:.1f} us each)")
PY
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_linear --jobs 1 --filter 'linear_cuda/@(tall_skinny_products|matmul_2d_tall)' > $o/memcheck_lin.log 2>&1
echo "memcheck (tall tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_lin.log | tail -1) $(grep -h Synthesis $o/memcheck_lin.log | tail -1)")
(cd $R/tests && TIGA_TALL_TEST_QUICK=1 timeout 150 compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_linear --jobs 1 --filter 'linear_cuda/tall_skinny_products' > $o/racecheck_lin.log 2>&1
echo "racecheck (tall test, quick) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_lin.log | tail -1) $(grep -h Synthesis $o/racecheck_lin.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
