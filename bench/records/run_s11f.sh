#!/usr/bin/env bash
# Session 11, call 10: the point-cloud training step at 400k points (2 layers, hidden 64, H 4: the
# slice kernels, in the radius builder's Morton schedule) beside PyTorch in the same call:
# train_pointcloud (fused, 30 steps) as built, with TIGA_EA_ORDER=0 and with TIGA_EA_SLICE=0, then
# bench/pointcloud_torch.py (eager, torch.compile); ncu per-kernel time of an edge-attention step
# (bench_edge_ops) at 400k for hid 16 and hid 64, H 1 and H 4. Deadlines; logs in $OUT/logs.tgz.
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-420}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
P=$R/examples/train_pointcloud
timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc.log 2>&1; echo "train_pointcloud 400k fused rc=$?"; tail -2 $o/pc.log
TIGA_EA_ORDER=0 timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc_noorder.log 2>&1; echo "train_pointcloud 400k fused TIGA_EA_ORDER=0 rc=$?"; tail -2 $o/pc_noorder.log
TIGA_EA_SLICE=0 timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc_noslice.log 2>&1; echo "train_pointcloud 400k fused TIGA_EA_SLICE=0 rc=$?"; tail -2 $o/pc_noslice.log
echo "elapsed ${SECONDS}s"; pack
timeout $(tl 200) python3 bench/pointcloud_torch.py --sizes 400k > $o/pc_torch.log 2>&1; echo "pointcloud_torch rc=$?"; grep -E "^\|" $o/pc_torch.log
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s11f; mkdir -p $D
timeout $(tl 60) python3 bench/graph_torch.py --sizes 400k --only graph --no-compile --save-graph $D > $o/graph.log 2>&1; echo "graph_torch rc=$?"
B=$R/bench/bench_edge_ops
for k in 0 1 2 3; do
  timeout $(tl 60) ncu --metrics gpu__time_duration.sum --csv $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 0 > $o/ncu_400k_$k.csv 2> $o/ncu_400k_$k.err
  echo "ncu 400k cfg $k rc=$?: us per step (kernels of the one-time relation build included, divided by 3):" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]; t[k]+=v; c[k]+=1
n=max([c[k] for k in c if k.startswith('k_fwd')] or [1])
print(' '.join(f'{k} {t[k]/n:.1f}' for k in sorted(t, key=lambda k:-t[k])[:12]), f'| total {sum(t.values())/n:.1f}')
" $o/ncu_400k_$k.csv)
done
echo "elapsed ${SECONDS}s"; pack
