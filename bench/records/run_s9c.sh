#!/usr/bin/env bash
# Session 9, call 3: where the packed edge-attention kernels' instructions go, per SASS instruction
# (ncu SourceCounters; the library is built with -lineinfo): k_fwd_pk, k_dst_pk, k_src_pk at 100k,
# hid 16, H 1 (bench_edge_ops --only 0). The per-instruction CSVs are mapped to source lines here
# (nvdisasm -g of the same objects). Library: session 8's build (gpu-carry, f19f80d).
# Carry: ["gpu-carry", "gpu-carry-s9"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
ncu --version | tail -1
D=/tmp/s9c; mkdir -p $D
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k --save-graph $D > $OUT/graph.log 2>&1; echo "graph rc=$?"
B="gpu-carry-s9/bench_edge_ops --graph $D/radius_100k.bin --providers fused --only 0 --reps 1 --warmup 0"
timeout 150 ncu -k regex:'k_(fwd|dst|src)_pk' --launch-count 3 --section SourceCounters --section InstructionStats -o $OUT/pk $B > $OUT/ncu_run.txt 2>&1; echo "ncu rc=$?"; tail -3 $OUT/ncu_run.txt
for k in fwd dst src; do
  timeout 60 ncu -i $OUT/pk.ncu-rep -k regex:k_${k}_pk --page source --print-source sass --csv > $OUT/src_$k.csv 2> $OUT/src_$k.err; echo "$k sass rc=$? $(wc -l < $OUT/src_$k.csv) lines"
done
head -3 $OUT/src_fwd.csv | cut -c1-400
timeout 60 ncu -i $OUT/pk.ncu-rep -k regex:k_fwd_pk --page details --print-details all > $OUT/details_fwd.txt 2>&1
grep -iE "executed|inst" $OUT/details_fwd.txt | head -20
ls -la $OUT
echo "elapsed ${SECONDS}s"
