#!/usr/bin/env bash
# Session 17, call 3: k_tall_bwd rewritten after call 2 measured the first form slower than the
# separate kernels (517 us against 61 + 97): now a thread takes a row slice and 4 columns with all K
# weight sums, and the row's lanes reduce their K partial dots for gX by a reduce-scatter.
# test_linear and test_edge_attention (stop on failure); memcheck on the tall test, racecheck on its
# quick form (k_tall_bwd at K 4 and 8 among its sizes); the point-cloud steps at 400k with
# TIGA_TALL_BWD=1 / 0 in the same call, two rounds; ncu per-launch times of the tall kernels in the
# seed step; the GPU suite. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for t in test_linear test_edge_attention; do
  (cd $R/tests && timeout 150 ./$t --jobs 4 > $o/$t.log 2>&1); rc=$?
  echo "$t rc=$rc $(grep -h Synthesis $o/$t.log | tail -1)"
  if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/$t.log | head -40; pack; exit 1; fi
done
(cd $R/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_linear --jobs 1 --filter 'linear_cuda/tall_skinny_products' > $o/memcheck_tall.log 2>&1
echo "memcheck tall rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_tall.log | tail -1) $(grep -h Synthesis $o/memcheck_tall.log | tail -1)")
(cd $R/tests && TIGA_TALL_TEST_QUICK=1 timeout 150 compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_linear --jobs 1 --filter 'linear_cuda/tall_skinny_products' > $o/racecheck_tall.log 2>&1
echo "racecheck tall (quick) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_tall.log | tail -1) $(grep -h Synthesis $o/racecheck_tall.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for rnd in 1 2; do
  for mh in "seed 1" "seed 1 --recompute" "wide 1" "wide 4"; do set -- $mh
    for tb in 1 0; do
      f=$o/pc_$1_h$2${3:+_rc}_tb${tb}_$rnd.log
      TIGA_TALL_BWD=$tb timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet ${3:-} > $f 2>&1
      echo "$1 H $2 ${3:-kept} TIGA_TALL_BWD=$tb round $rnd rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//')"
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
for tb in 1 0; do
  TIGA_TALL_BWD=$tb timeout 90 ncu --csv --metrics gpu__time_duration.sum -k regex:k_tall -c 40 $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 3 --quiet > $o/ncu_tall_$tb.csv 2>&1; echo "ncu tall TIGA_TALL_BWD=$tb rc=$?"
  python3 - $o/ncu_tall_$tb.csv <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
d = collections.defaultdict(list)
for r in csv.DictReader(rows):
    d[(r["Kernel Name"].split("(")[0], r.get("Grid Size", ""), r.get("Metric Unit", ""))].append(float(r["Metric Value"].replace(",", "")))
for (k, g, u), v in sorted(d.items()):
    v.sort(); print(f"  {k} grid {g}: {len(v)} launches, median {v[len(v)//2]:.1f} {u}")
PY
done
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
L=$((570 - SECONDS)); [ $L -gt 150 ] && L=150
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout '$L' $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite (limit ${L}s a test): $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
