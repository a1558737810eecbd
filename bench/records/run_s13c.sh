#!/usr/bin/env bash
# Session 13, call 3 (experiments through temporary switches, not in the library): the hidden-64
# slice kernels. TIGA_EA_SLMB="f,d,s" as run_s13b.sh; TIGA_EA_SL16="d,s" runs the destination /
# source pass with 16 lanes an edge where H * F is 64 (k_dst_sl<4, 16, 4> 167 registers, no
# spill: 3 blocks a SM instead of 2; k_src_sl<4, 16, 4> 126: 4 instead of 3; H 1: 141 / 102).
# test_edge_attention with SL16 1,1; --check; bench_edge_ops hid-64 configs at 100k / 400k per
# setting, two rounds; the point-cloud step at 400k per setting. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
END=${END_S:-400}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && TIGA_EA_SL16=1,1 timeout $(tl 150) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention (SL16 1,1) rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
D=/tmp/s13c; mkdir -p $D
timeout $(tl 120) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager, dumps) rc=$?"
B=$R/bench/bench_edge_ops
TIGA_EA_SL16=1,1 timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check (SL16 1,1) rc=$? $(tail -1 $o/ea_check.log)"
echo "elapsed ${SECONDS}s"; pack
run() { TIGA_EA_SLMB=$1 TIGA_EA_SL16=$2 timeout $(tl 30) $B --graph $D/radius_$3.bin --providers fused --only $4 2>&1 | grep -v '^{' | grep fused | awk '{print $(NF-1)}'; }
for round in 1 2; do for m in "1,1,1 0,0" "1,3,4 0,0" "1,1,1 1,0" "1,1,1 0,1" "1,1,1 1,1" "1,3,4 1,1" "1,1,4 1,0"; do
  set -- $m
  echo "round $round slmb $1 sl16 $2: 100k H1 $(run $1 $2 100k 1) H4 $(run $1 $2 100k 3) | 400k H1 $(run $1 $2 400k 1) H4 $(run $1 $2 400k 3)"
done; done | tee $o/sl.log
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for round in 1 2; do for m in "1,1,1 0,0" "1,1,1 1,0" "1,1,1 1,1" "1,1,4 1,0"; do
  set -- $m
  TIGA_EA_SLMB=$1 TIGA_EA_SL16=$2 timeout $(tl 60) $P --device cuda --n 400000 --degree 17 --attention fused --steps 30 --quiet > $o/pc.log 2>&1; echo "point cloud 400k round $round slmb $1 sl16 $2 rc=$? $(tail -1 $o/pc.log | cut -c1-50)"
done; done
echo "elapsed ${SECONDS}s"; pack
