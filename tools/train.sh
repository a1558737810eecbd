#!/usr/bin/env bash
# Trains the character model (examples/train_charlm.c) from a fresh checkout: installs the build
# tools when missing, builds tiga and the example in Release (with the CUDA provider when nvcc is
# present), then runs build/examples/train_charlm with every argument passed through.
# The program picks cuda:0 when a CUDA device works (nanoGPT shakespeare_char config), else the
# host provider with a small config that finishes in a few minutes on 2 cores.
#   bash tools/train.sh                      # defaults for this machine
#   bash tools/train.sh --steps 1000 --out out/run1 --save out/run1/ckpt
#   bash tools/train.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v cc >/dev/null || missing+=(build-essential)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# With a working GPU build the CUDA provider (when nvcc is there); without one, skip compiling it:
# the run would use the host provider anyway. TIGA_CUDA=AUTO|ON|OFF overrides.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU: $(nvidia-smi -L | head -n 1)"
  cuda="${TIGA_CUDA:-AUTO}"
else
  echo "== no working GPU (nvidia-smi): building host-only; the example runs on the host provider"
  cuda="${TIGA_CUDA:-OFF}"
fi

echo "== build (build-release/, Release, TIGA_CUDA=$cuda)"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DTIGA_CUDA="$cuda" ${TIGA_CMAKE_ARGS:-} | grep -E "^-- tiga" || true
cmake --build build-release -j"$(nproc)" --target train_charlm

echo "== build-release/examples/train_charlm $*"
exec ./build-release/examples/train_charlm "$@"
