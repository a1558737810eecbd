#!/usr/bin/env bash
# Session 12, call 5 (the submission's numbers): k_unfold16 as (node, coordinate) threads (80
# registers, one wave). test_edge_attention; memcheck and racecheck on its CUDA tests; ncu of the
# hid-16 steps (100k, 400k; H 1, H 4); then beside PyTorch in this call: edge_attention_torch.py
# (eager, torch.compile) on 2k (check fixtures), 100k, 400k and 100k-x4; bench_edge_ops --graph on
# its dumps (every config) and --check; the point-cloud step at 400k beside pointcloud_torch.py.
# Carry ["gpu-carry"].
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
(cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout $(tl 120) compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)"
done)
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s12e; mkdir -p $D
timeout $(tl 300) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k,100k-x4 --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph" $o/ea_torch.log | grep -v "^| 2k"
B=$R/bench/bench_edge_ops
for s in 100k 400k 100k-x4; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
done
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc.log 2>&1; echo "train_pointcloud 400k fused rc=$?"; tail -2 $o/pc.log
timeout $(tl 200) python3 bench/pointcloud_torch.py --sizes 400k > $o/pc_torch.log 2>&1; echo "pointcloud_torch rc=$?"; grep -E "^\|" $o/pc_torch.log
echo "elapsed ${SECONDS}s"; pack
for s in 100k 400k; do for k in 0 2; do
  timeout $(tl 40) ncu --metrics gpu__time_duration.sum --csv -k regex:unfold $B --graph $D/radius_$s.bin --providers fused --only $k --reps 2 --warmup 0 > $o/ncu_${s}_$k.csv 2> $o/ncu_${s}_$k.err
  echo "ncu $s cfg $k rc=$?: unfold kernels us per step:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]; t[k]+=v; c[k]+=1
print(' '.join(f'{k} {t[k]/c[k]:.1f}' for k in t))
" $o/ncu_${s}_$k.csv)
done; done
echo "elapsed ${SECONDS}s"; pack
