#!/usr/bin/env bash
# Session 11, call 1: the locality schedule in the edge-attention lane and warp-per-row kernels
# (the relation's cached order; TIGA_EA_ORDER=0 turns it off). test_edge_attention (all of it, with
# the new locality_schedule_same_results) and memcheck on that test; then eager PyTorch on the
# 100k / 400k radius graphs (for the dumps; no torch.compile in this call) and bench_edge_ops on
# every config with the schedule on and off; ncu per-kernel time of a step at 400k for H 4 hid 16
# and H 1 hid 64 (what the unmet targets spend). Deadlines; logs in $OUT/logs.tgz. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && timeout $(tl 150) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/test_ea.log | head -30
(cd $R/tests && timeout $(tl 120) compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/locality_schedule_same_results' > $o/memcheck_sched.log 2>&1
echo "memcheck locality_schedule rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_sched.log | tail -1) $(grep -h Synthesis $o/memcheck_sched.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s11a; mkdir -p $D
timeout $(tl 150) python3 bench/edge_attention_torch.py --sizes 100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager) rc=$?"; grep -E "^\||FAIL" $o/ea_torch.log
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
for s in 100k 400k; do
  timeout $(tl 60) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s (schedule) rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
  TIGA_EA_ORDER=0 timeout $(tl 60) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_${s}_noorder.log 2>&1; echo "bench_edge_ops $s TIGA_EA_ORDER=0 rc=$?"; grep -v '^{' $o/ea_ops_${s}_noorder.log | grep fused
done
echo "elapsed ${SECONDS}s"; pack
for k in 2 1; do
  timeout $(tl 80) ncu --metrics gpu__time_duration.sum --csv $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 0 > $o/ncu_400k_$k.csv 2> $o/ncu_400k_$k.err
  echo "ncu 400k cfg $k rc=$?: us per step:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]; t[k]+=v; c[k]+=1
n=max([c[k] for k in c if k.startswith('k_fwd')] or [1])
print(' '.join(f'{k} {t[k]/n:.1f}' for k in sorted(t, key=lambda k:-t[k])[:16]), f'| total {sum(t.values())/n:.1f}')
" $o/ncu_400k_$k.csv)
done
echo "elapsed ${SECONDS}s"; pack
