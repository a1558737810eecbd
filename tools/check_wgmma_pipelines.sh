#!/usr/bin/env bash
# Fails when ptxas serializes a wgmma pipeline in cuda/attention_sm90.cu. ptxas reports that only
# as an info line (C7510-C7519, "wgmma.mma_async instructions are serialized ..." under -v), never
# as a warning, and a serialized kernel is still correct, just much slower: this turns the silent
# performance regression into a failing test. Registered in CTest when the CUDA provider is built.
#   tools/check_wgmma_pipelines.sh [NVCC]
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=${1:-nvcc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$nvcc" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I include -I . --expt-relaxed-constexpr \
  -Xptxas -v -c cuda/attention_sm90.cu -o "$out/a.o" > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
if grep -E "C751[0-9]" "$out/log"; then
  echo "FAIL: ptxas serialized wgmma pipelines (see above)"
  exit 1
fi
echo "ok: $(grep -c 'Function properties' "$out/log") kernels, no serialized wgmma pipeline"
