#!/usr/bin/env bash
# Runs every benchmark beside its PyTorch counterpart in one call on the GPU machine.
#   ../shared/tools/gpu-prep        (here; builds build-gpu/ with bench binaries)
#   run: bash bench/run_gpu.sh [section...]     carry: ["build-gpu"]
# Sections: linear tape attention train (default: all). Logs go to $OUT (or out/bench/).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/bench}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
sections=${*:-linear tape attention train}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
for s in $sections; do
  case $s in
  linear)
    build-gpu/bench/bench_linear 2>&1 | tee "$out/linear_tiga.log"
    python3 bench/linear_torch.py 2>&1 | tee "$out/linear_torch.log" ;;
  tape)
    build-gpu/bench/bench_tape 2>&1 | tee "$out/tape.log" ;;
  attention)
    if [ -x build-gpu/bench/bench_attention ]; then
      build-gpu/bench/bench_attention --bench 2>&1 | tee "$out/attention_tiga.log"
      python3 bench/attention_torch.py 2>&1 | tee "$out/attention_torch.log"
    fi ;;
  train)
    if [ -x build-gpu/examples/train_charlm ]; then
      for mode in "--dtype bf16 --attention fused" "--dtype bf16 --attention fused --attn-dropout 0" \
                  "--dtype f32 --attention fused" "--dtype bf16 --attention composed" "--dtype f32 --attention composed"; do
        build-gpu/examples/train_charlm --device cuda $mode --steps 60 --eval-interval 1000 --eval-iters 1 --log-interval 20 \
          --sample-chars 0 --out "$out/train_tmp" --data examples/data/input.txt 2>&1 | sed "s/^/[$mode] /" |
          tee -a "$out/train_tiga.log" | tail -n 3
      done
    fi
    python3 bench/train_torch.py 2>&1 | tee "$out/train_torch.log" ;;
  esac
done
