#!/usr/bin/env bash
# Session 14, call 7 (the submission's numbers): as run_s14f.sh, with the products kernels
# rewritten (a thread a node each way; run_s14d.sh's ncu: k_products_bwd 224 us, k_products 45 at
# 400k); the point cloud (hidden 64, unchanged) left out; ncu's per-kernel times of the hid-16 H 1
# step at 400k at the end.
# test_edge_attention; memcheck on its CUDA tests; beside PyTorch (eager, torch.compile) on 2k
# (fixtures), 100k, 400k: bench_edge_ops every config and --check (by rule, products off); the
# hid-16 steps with renumbering off; the point-cloud step at 400k (tiga's side); the GPU suite;
# racecheck on test_edge_attention's CUDA tests with the time left. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-520}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && timeout $(tl 90) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/test_ea.log | head -20
(cd $R/tests
timeout $(tl 120) compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s14f; mkdir -p $D
timeout $(tl 150) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph" $o/ea_torch.log | grep -v "^| 2k"
B=$R/bench/bench_edge_ops
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
TIGA_EA_OWN=0 timeout $(tl 30) $B --check $D > $o/ea_check_own0.log 2>&1; echo "bench_edge_ops --check (TIGA_EA_OWN=0) rc=$? $(tail -1 $o/ea_check_own0.log)"
for s in 100k 400k; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
done
for k in 0 2; do
  TIGA_EA_RENUM=0 timeout $(tl 20) $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ea_rn0.log 2>&1; echo "400k TIGA_EA_RENUM=0 rc=$? $(grep -v '^{' $o/ea_rn0.log | grep fused)"
  TIGA_EA_OWN=0 timeout $(tl 20) $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ea_own0.log 2>&1; echo "400k TIGA_EA_OWN=0 rc=$? $(grep -v '^{' $o/ea_own0.log | grep fused)"
  timeout $(tl 20) $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ea_r2.log 2>&1; echo "400k by rule again rc=$? $(grep -v '^{' $o/ea_r2.log | grep fused)"
done
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
L=$(tl 120)
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout '$L' $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite (limit ${L}s a test): $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
timeout $(tl 300) compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/racecheck_ea.log 2>&1
echo "racecheck test_edge_attention (CUDA tests) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_ea.log | tail -1) $(grep -h Synthesis $o/racecheck_ea.log | tail -1)"
grep -c "^\[RUN\]\|Test.*started" $o/racecheck_ea.log)
echo "elapsed ${SECONDS}s"; pack
timeout $(tl 60) ncu --csv --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only 0 --reps 2 --warmup 1 > $o/ncu_0.csv 2> $o/ncu_0.err
echo "ncu rc=$?"
python3 - $o/ncu_0.csv <<'PY'
import csv, sys, collections, statistics
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value")
d = collections.defaultdict(list)
for r in rows[1:]:
    d[r[ik].split("(")[0].replace("void ", "")[:60]].append(float(r[iv].replace(",", "")) / 1000)
for n, v in sorted(d.items(), key=lambda x: -statistics.median(x[1])):
    print(f"  {n:60s} n={len(v):3d} median {statistics.median(v):8.1f} us")
PY
echo "elapsed ${SECONDS}s"; pack

