#!/usr/bin/env bash
# Session 10, call 6 (the submission's build): run_s10e.sh's build with k_tall_sum over 32 slices of
# 32 outputs (run_s10e: the 8-slice version took 28 us a step at 100k). Same steps as run_s10d.sh.
# The GPU suite; memcheck and racecheck on test_edge_attention's CUDA tests and on test_linear's
# tall test (racecheck on its quick subset, TIGA_TALL_TEST_QUICK=1); then beside PyTorch in this call:
# edge_attention_torch.py (eager, torch.compile) on 2k (check fixtures), 100k and 400k;
# bench_edge_ops on its dumps (every config; the hid 16 configs again with TIGA_LINEAR_TALL=0 and
# with TIGA_EA_LANES=0) and --check against PyTorch; ncu per-kernel time of a step (100k, 400k,
# H 1, hid 16). Deadlines; logs in $OUT/logs.tgz. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-580}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 170 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_(edge_attention|linear|gat) " $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -40
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout $(tl 100) compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)"
done
# the tall test under memcheck (all of it) and racecheck (the shared-memory kernels' first sizes:
# racecheck on all 48 configurations outlasts the call)
timeout $(tl 80) compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_linear --jobs 1 --filter 'linear_cuda/tall_skinny_products' > $o/memcheck_tall.log 2>&1
echo "memcheck test_linear tall rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_tall.log | tail -1) $(grep -h Synthesis $o/memcheck_tall.log | tail -1)"
TIGA_TALL_TEST_QUICK=1 timeout $(tl 100) compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_linear --jobs 1 --filter 'linear_cuda/tall_skinny_products' > $o/racecheck_tall.log 2>&1
echo "racecheck test_linear tall (quick) rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_tall.log | tail -1) $(grep -h Synthesis $o/racecheck_tall.log | tail -1)"
)
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s10f; mkdir -p $D
timeout $(tl 240) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph|FAIL" $o/ea_torch.log | grep -v "^| 2k"
B=$R/bench/bench_edge_ops
for s in 100k 400k; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
  for k in 0 2; do
    TIGA_LINEAR_TALL=0 timeout $(tl 20) $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ea_ops_${s}_notall_$k.log 2>&1; echo "  TIGA_LINEAR_TALL=0 rc=$? $(grep -v '^{' $o/ea_ops_${s}_notall_$k.log | grep fused)"
    TIGA_EA_LANES=0 timeout $(tl 20) $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ea_ops_${s}_nolanes_$k.log 2>&1; echo "  TIGA_EA_LANES=0 rc=$? $(grep -v '^{' $o/ea_ops_${s}_nolanes_$k.log | grep fused)"
  done
done
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
TIGA_EA_LANES=0 timeout $(tl 30) $B --check $D > $o/ea_check_nolanes.log 2>&1; echo "bench_edge_ops --check (lanes off) rc=$? $(tail -1 $o/ea_check_nolanes.log)"
echo "elapsed ${SECONDS}s"; pack
for s in 100k 400k; do
  timeout $(tl 60) ncu --metrics gpu__time_duration.sum --csv $B --graph $D/radius_$s.bin --providers fused --only 0 --reps 2 --warmup 0 > $o/ncu_$s.csv 2> $o/ncu_$s.err
  echo "ncu $s cfg 0 rc=$?: us per step:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]; t[k]+=v; c[k]+=1
n=max(c['k_fwd_ln'],1)
print(' '.join(f'{k} {t[k]/n:.1f}' for k in sorted(t, key=lambda k:-t[k])[:14]), f'| total {sum(t.values())/n:.1f}')
" $o/ncu_$s.csv)
done
echo "elapsed ${SECONDS}s"; pack
