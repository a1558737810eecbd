#!/usr/bin/env bash
# Fails when the checked-in cuda/wgmma.cuh is not what tools/gen_wgmma.py writes (someone edited
# the generated file, or changed the generator without regenerating). Needs Python 3, no CUDA.
#   tools/check_wgmma_generated.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$py" tools/gen_wgmma.py > "$tmp"
if ! diff -u cuda/wgmma.cuh "$tmp"; then
  echo "FAIL: cuda/wgmma.cuh differs from tools/gen_wgmma.py's output (regenerate: $py tools/gen_wgmma.py > cuda/wgmma.cuh)"
  exit 1
fi
echo "ok: cuda/wgmma.cuh is tools/gen_wgmma.py's output"
