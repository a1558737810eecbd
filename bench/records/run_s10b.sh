#!/usr/bin/env bash
# Session 10, call 2: the lane kernels with (lse, D) pairs for k_src_ln, db1 out of registers in
# k_dst_ln, and the lanes-per-row rule by size (2^17 threads at H 1, 2^16 at H > 1). The GPU suite
# (binaries in parallel); memcheck and racecheck on test_edge_attention's CUDA tests; bench_edge_ops
# hid 16 H 1 / H 4 on the 100k / 400k graphs with the rule and with 1 / 2 lanes forced and packed;
# ncu per-kernel time of a step (rule). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 170 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_(edge_attention|graph|gat|radius) " $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -40
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout 160 compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/$tool.log 2>&1
  echo "$tool test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/$tool.log | tail -1) $(grep -h Synthesis $o/$tool.log | tail -1)"
done)
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s10b; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
for s in 100k 400k; do
  for k in 0 2; do
    for l in "" 0 1 2; do
      TIGA_EA_LANES=$l timeout 40 $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ops_${s}_${k}_$l.log 2>&1
      echo "$s cfg $k lanes '${l}' rc=$? $(grep -v '^{' $o/ops_${s}_${k}_$l.log | grep fused)"
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
for s in 100k 400k; do
  for k in 0 2; do
    timeout 60 ncu --metrics gpu__time_duration.sum --csv $B --graph $D/radius_$s.bin --providers fused --only $k --reps 2 --warmup 0 > $o/ncu_${s}_$k.csv 2> $o/ncu_${s}_$k.err
    echo "ncu $s cfg $k rc=$?: us per step:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]; t[k]+=v; c[k]+=1
n=max(c['k_fwd_ln'],1)
print(' '.join(f'{k} {t[k]/n:.1f}' for k in sorted(t, key=lambda k:-t[k])[:12]), f'| total {sum(t.values())/n:.1f}')
" $o/ncu_${s}_$k.csv)
  done
done
echo "elapsed ${SECONDS}s"; pack
# why k_unfold / k_fold take 155 / 79 us at 400k (cold): their speed of light, occupancy, stalls
timeout 90 ncu -k regex:'k_unfold$|k_fold' --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats $B --graph $D/radius_400k.bin --providers fused --only 0 --reps 1 --warmup 0 > $o/ncu_fold.txt 2>&1; echo "ncu fold rc=$?"
grep -E "k_unfold|k_fold|Duration|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Block Limit|Warp Cycles Per Issued" $o/ncu_fold.txt | head -60
echo "elapsed ${SECONDS}s"; pack
