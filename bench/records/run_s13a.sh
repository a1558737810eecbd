#!/usr/bin/env bash
# Session 13, call 1: k_fwd_ln<4, 2> at one block a SM below 2^18 rows (the rule run_s12g.sh
# measured through a switch, now built). test_edge_attention; memcheck on its CUDA tests; beside
# PyTorch (eager, torch.compile) on 2k (fixtures), 100k, 400k: bench_edge_ops every config and
# --check; then where the point-cloud step at 400k goes: its step and phases, and ncu's per-kernel
# time over 3 steps. Carry ["gpu-carry"].
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
(cd $R/tests && timeout $(tl 120) compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
  echo "memcheck test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s13a; mkdir -p $D
timeout $(tl 240) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph" $o/ea_torch.log | grep -v "^| 2k"
B=$R/bench/bench_edge_ops
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
for s in 100k 400k; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
done
timeout $(tl 40) $B --graph $D/radius_400k.bin --providers fused --variant nopos > $o/ea_ops_400k_nopos.log 2>&1; echo "bench_edge_ops 400k --variant nopos (no geometry: the fold's upper bound) rc=$?"; grep -v '^{' $o/ea_ops_400k_nopos.log | grep fused
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc.log 2>&1; echo "train_pointcloud 400k fused rc=$?"; tail -2 $o/pc.log
timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet --profile > $o/pc_prof.log 2>&1; echo "train_pointcloud 400k --profile rc=$?"; tail -4 $o/pc_prof.log
timeout $(tl 150) ncu --clock-control none --metrics gpu__time_duration.sum --csv $P --device cuda --n 400000 --degree 17 --attention fused --steps 3 --quiet > $o/ncu_pc.csv 2> $o/ncu_pc.err
echo "ncu point cloud rc=$?"
python3 - $o/ncu_pc.csv <<'PY'
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]
h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else (v*1e3 if r[ui] in ('ms','msecond') else v)
    k=r[ki][:90]; t[k]+=v; c[k]+=1
tot=sum(t.values()); print(f"kernels {sum(c.values())}, total {tot/1e3:.3f} ms over 3 steps (+ data / graph set-up)")
for k in sorted(t,key=lambda k:-t[k])[:45]: print(f"{t[k]/3:9.1f} us/step  n={c[k]:4d}  {k}")
PY
echo "elapsed ${SECONDS}s"; pack
