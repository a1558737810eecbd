#!/usr/bin/env bash
# Session 13, call 2 (experiment through a temporary switch, not in the library): the hidden-64
# slice kernels' register caps. TIGA_EA_SLMB="f,d,s" = minimum blocks a SM of k_fwd_sl / k_dst_sl /
# k_src_sl at FQ 8 (1 = as built: 96 / 183 / 152 registers at H 1, 125 / 252 / 167 at H 4; 5 / 3 / 4
# cap them at 96 / 168 / 128, spilling 0 / 0 / 24 B at H 1 and 116 / 408 / 156 B at H 4).
# test_edge_attention with the caps; bench_edge_ops (hid 64 configs) at 100k and 400k per setting,
# two rounds; the point-cloud step at 400k per setting. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-400}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && TIGA_EA_SLMB=5,3,4 timeout $(tl 150) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention (5,3,4) rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
D=/tmp/s13b; mkdir -p $D
timeout $(tl 120) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager, dumps) rc=$?"
B=$R/bench/bench_edge_ops
TIGA_EA_SLMB=5,3,4 timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check (5,3,4) rc=$? $(tail -1 $o/ea_check.log)"
echo "elapsed ${SECONDS}s"; pack
for round in 1 2; do for m in 1,1,1 5,1,1 1,3,1 1,1,4 5,3,4 1,3,4; do
  for s in 100k 400k; do for k in 1 3; do
    r=$(TIGA_EA_SLMB=$m timeout $(tl 30) $B --graph $D/radius_$s.bin --providers fused --only $k 2>&1 | grep -v '^{' | grep fused | awk '{print $(NF-1)}')
    echo "round $round slmb $m $s cfg $k ms $r"
  done; done
done; done | tee $o/slmb.log
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for m in 1,1,1 1,3,1 5,3,4 1,3,4; do
  TIGA_EA_SLMB=$m timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc_$m.log 2>&1; echo "point cloud 400k slmb $m rc=$? $(tail -1 $o/pc_$m.log | cut -c1-60)"
done
echo "elapsed ${SECONDS}s"; pack
