#!/usr/bin/env bash
# Session 11, call 3: what bounds the lane kernels (TIGA_EA_GATHER=1: no gather overlap, the best of
# run_s11b.sh). ncu sections (SpeedOfLight, Occupancy, WarpStateStats, MemoryWorkloadAnalysis,
# SourceCounters summary) on one launch each of k_fwd_ln, k_dst_ln, k_src_ln at 400k, H 1 and H 4
# (hid 16), schedule on. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1 TIGA_EA_GATHER=1
o=$OUT/logs; mkdir -p $o
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
D=/tmp/s11c; mkdir -p $D
timeout $(tl 150) python3 bench/graph_torch.py --sizes 400k --only graph --no-compile --save-graph $D > $o/graph.log 2>&1; echo "graph_torch rc=$?"; ls -la $D
B=$R/bench/bench_edge_ops
for k in 0 2; do
  timeout $(tl 150) ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats -k 'regex:k_(fwd|dst|src)_ln' --launch-skip 3 --launch-count 3 $B --graph $D/radius_400k.bin --providers fused --only $k --reps 1 --warmup 1 > $o/ncu_sec_$k.txt 2> $o/ncu_sec_$k.err
  echo "ncu sections cfg $k rc=$?"
  grep -E "k_(fwd|dst|src)_ln|Duration|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Issue Slots|Warp Cycles Per Issued|Compute \(SM\) Throughput|DRAM Throughput|Local|Stall|spill" $o/ncu_sec_$k.txt | head -80
done
echo "elapsed ${SECONDS}s"; pack
