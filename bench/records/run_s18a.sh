#!/usr/bin/env bash
# Session 18, call 1: the per-node products' second forms (k_products with its element loops
# unrolled; k_products_bwd_q: a thread per (node, 4 units), no shared-memory staging) against the
# first forms (TIGA_EA_PRODUCTS=0) in the same call: test_edge_attention and test_linear (the
# latter also runs session 17's last commit, k_tall_ab's shared device functions, never run),
# memcheck and racecheck on test_edge_attention's CUDA tests, bench_edge_ops 400k / 100k hid 16
# H 1 / H 4 both forms, two rounds; ncu per-launch times of the products kernels; the seed
# point-cloud model at 400k; the GPU suite. Carry ["gpu-carry"].
# (TIGA_EA_PRODUCTS: switches in that build only, not in the tree.)
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for t in test_edge_attention test_linear; do
  (cd $R/tests && timeout 150 ./$t --jobs 4 > $o/$t.log 2>&1); rc=$?
  echo "$t rc=$rc $(grep -h Synthesis $o/$t.log | tail -1)"
  if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/$t.log | head -40; pack; exit 1; fi
done
D=/tmp/s18a; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$? $(ls $D)"
B=$R/bench/bench_edge_ops
for rnd in 1 2; do
  for g in 400k 100k; do
    for k in 0 2; do
      for e in "" "TIGA_EA_PRODUCTS=0"; do
        env $e timeout 30 $B --graph $D/radius_$g.bin --providers fused --only $k > $o/ops.log 2>&1; echo "$g/$k ${e:-new} round $rnd: $(grep -v '^{' $o/ops.log | grep fused | awk '{print $(NF-1), $NF}')"
      done
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
for e in "" "TIGA_EA_PRODUCTS=0"; do
  env $e timeout 90 ncu --csv --metrics gpu__time_duration.sum -k regex:k_products -c 12 $B --graph $D/radius_400k.bin --providers fused --only 0 --reps 3 --warmup 1 > $o/ncu_pr.csv 2>&1; echo "ncu products ${e:-new} rc=$?"
  python3 - $o/ncu_pr.csv <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
d = collections.defaultdict(list)
for r in csv.DictReader(rows):
    d[(r["Kernel Name"].split("(")[0], r.get("Metric Unit", ""))].append(float(r["Metric Value"].replace(",", "")))
for (k, u), v in sorted(d.items()):
    v.sort(); print(f"  {k}: {len(v)} launches, median {v[len(v)//2]:.1f} {u}")
PY
done
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
(cd $R/tests && timeout 200 compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/racecheck_ea.log 2>&1
echo "racecheck (CUDA tests) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_ea.log | tail -1) $(grep -h Synthesis $o/racecheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for mh in "seed 1" "seed 1 --recompute"; do set -- $mh
  f=$o/pc_$1_h$2${3:+_rc}.log
  timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet ${3:-} > $f 2>&1
  echo "$1 H $2 ${3:-kept} rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//')"
done
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
L=$((570 - SECONDS)); [ $L -gt 150 ] && L=150
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout '$L' $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite (limit ${L}s a test): $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
