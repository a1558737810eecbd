#!/usr/bin/env bash
# Builds bench_attention alone (no CMake), for quick device calls: the mma.sync kernels for sm_90,
# the wgmma kernels for sm_90a, as the CMake build does, all with the bench-only sweep switches
# (TIGA_BENCH_SWITCHES: --family N).   tools/build_bench_attention.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-bench}
mkdir -p "$out"
F="-O3 -std=c++17 -I include -I . --expt-relaxed-constexpr -lineinfo -DTIGA_BENCH_SWITCHES=1"
nvcc $F -gencode=arch=compute_90a,code=sm_90a -c cuda/attention_sm90.cu -o "$out/attention_sm90.o" &
nvcc $F -gencode=arch=compute_90,code=sm_90 -Xcompiler -fopenmp bench/bench_attention.cu cuda/attention_fused.cu \
  cuda/attention_fused_fwd.cu cuda/attention_fused_bwd.cu -c --output-directory "$out" &
wait
nvcc -gencode=arch=compute_90,code=sm_90 "$out"/*.o -o "$out/bench_attention" -lgomp
echo "built $out/bench_attention"
