#!/usr/bin/env bash
# Session 9, call 8 (the submission's build): the geometry fold at hidden 16 only (k_fold; the unfold
# as one tiled pass over dU / dV with 2048 fixed blocks), session 8's edge kernels unchanged.
# Same steps as run_s9e.sh, plus ncu's per-kernel time of one step (100k, hid 16, H 1, fold on / off). The GPU suite (binaries in
# parallel); memcheck and racecheck on test_edge_attention's CUDA tests; bench_edge_ops fold on /
# off on the 100k / 400k graphs; then beside PyTorch in this call: edge_attention_torch.py (eager,
# torch.compile) on 2k (check fixtures), 100k and 400k, bench_edge_ops on its dumps (fold on and
# off) and --check against PyTorch; the point-cloud step at 400k (pointcloud_torch.py,
# train_pointcloud fold on / off). Deadlines; logs in $OUT/logs.tgz. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-575}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 170 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_(edge_attention|graph|gat|radius) " $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -40
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout $(tl 100) compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/$tool.log 2>&1
  echo "$tool test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/$tool.log | tail -1) $(grep -h Synthesis $o/$tool.log | tail -1)"
done)
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s9h; mkdir -p $D
timeout $(tl 230) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph|FAIL" $o/ea_torch.log | grep -v "^| 2k"
for s in 100k 400k; do
  for f in 1 0; do
    TIGA_EA_FOLD=$f timeout $(tl 40) $R/bench/bench_edge_ops --graph $D/radius_$s.bin --providers fused > $o/ea_ops_${s}_$f.log 2>&1; echo "bench_edge_ops $s fold=$f rc=$?"; grep -v '^{' $o/ea_ops_${s}_$f.log | grep fused
  done
done
for f in 1 0; do
  TIGA_EA_FOLD=$f timeout $(tl 60) ncu --metrics gpu__time_duration.sum --csv $R/bench/bench_edge_ops --graph $D/radius_100k.bin --providers fused --only 0 --reps 2 --warmup 0 > $o/ncu_$f.csv 2> $o/ncu_$f.err
  echo "ncu fold=$f rc=$?: $(grep -c k_fwd_pk $o/ncu_$f.csv) steps; us per step of k_fold / k_unfold / k_unfold_wsum / k_fwd_pk / k_dst_pk / k_src_pk:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0]; t[k]+=v; c[k]+=1
n=max(c['k_fwd_pk'],1); print(' '.join(f'{t[k]/n:.1f}' for k in ['k_fold','k_unfold','k_unfold_wsum','k_fwd_pk','k_dst_pk','k_src_pk']), f'total {sum(t.values())/n:.1f}')
" $o/ncu_$f.csv)
done
for f in 1 0; do
  TIGA_EA_FOLD=$f timeout $(tl 30) $R/bench/bench_edge_ops --check $D > $o/ea_check_$f.log 2>&1; echo "bench_edge_ops --check fold=$f rc=$? $(tail -1 $o/ea_check_$f.log)"
done
echo "elapsed ${SECONDS}s"; pack
for f in 1 0; do
  TIGA_EA_FOLD=$f timeout $(tl 50) $R/examples/train_pointcloud --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc_$f.log 2>&1; echo "train_pointcloud 400k fused fold=$f rc=$?"; tail -2 $o/pc_$f.log
done
timeout $(tl 120) python3 bench/pointcloud_torch.py --sizes 400k > $o/pc_torch.log 2>&1; echo "pointcloud_torch rc=$?"; grep -E "^\|" $o/pc_torch.log
echo "elapsed ${SECONDS}s"; pack
