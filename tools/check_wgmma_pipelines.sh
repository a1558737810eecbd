#!/usr/bin/env bash
# Fails when ptxas serializes a wgmma pipeline in cuda/attention_sm90.cu. ptxas reports that only
# as an info line (C7510-C7519, "wgmma.mma_async instructions are serialized ..." under -v), never
# as a warning, and a serialized kernel is still correct, just much slower: this turns the silent
# performance regression into a failing test. It also fails when a kernel spills more than
# SPILL_MAX bytes to local memory (default 256: the largest today is 148, in a sweep-only variant;
# a change that made the bf16 D = 128 backward spill 1118 bytes cost it 30 % and nothing else
# noticed). Registered in CTest when the CUDA provider is built.
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
spill_max=${SPILL_MAX:-256}
worst=$(grep -oE '[0-9]+ bytes spill stores' "$out/log" | awk '$1 > m {m = $1} END {print m + 0}')
if [ "$worst" -gt "$spill_max" ]; then
  awk -v m="$spill_max" '/Compiling entry function/ {f = $0}
    /bytes spill stores/ {for (i = 1; i + 3 <= NF; i++) if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^stores/ && $i + 0 > m) print f}' "$out/log"
  echo "FAIL: a kernel spills $worst bytes (more than $spill_max)"
  exit 1
fi
echo "ok: $(grep -c 'Function properties' "$out/log") kernels, no serialized wgmma pipeline, at most $worst bytes spilled"
