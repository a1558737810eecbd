#!/usr/bin/env bash
# Session 12, call 7 (experiment): the lane kernels' register caps. TIGA_EA_LNB (a temporary switch
# in this build) bit 1: k_fwd_ln<4, 2> at one block a SM (180 registers, no spill; by rule two
# blocks, 128 registers, 224 B spilled); bit 2: k_src_ln<1, 8> at one block (163 registers, no
# spill; by rule 128, 168 B spilled). test_edge_attention with both; the step at 100k / 400k,
# H 1 and H 4 (hid 16), each setting twice, alternating. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-280}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && TIGA_EA_LNB=3 timeout $(tl 100) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention (LNB 3) rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
D=/tmp/s12g; mkdir -p $D
timeout $(tl 90) python3 bench/graph_torch.py --sizes 100k,400k --only graph --no-compile --save-graph $D > $o/graph.log 2>&1; echo "graph_torch rc=$?"
B=$R/bench/bench_edge_ops
for rep in 1 2; do for v in 0 1 2 3; do for s in 100k 400k; do for k in 0 2; do
  TIGA_EA_LNB=$v timeout $(tl 20) $B --graph $D/radius_$s.bin --providers fused --only $k > $o/b_${rep}_${v}_${s}_$k.log 2>&1
  echo "rep $rep LNB $v $s cfg $k: $(grep -v '^{' $o/b_${rep}_${v}_${s}_$k.log | grep fused | awk '{print $(NF-1)}')"
done; done; done; done
echo "elapsed ${SECONDS}s"; pack
