#!/usr/bin/env bash
# Session 4, call 4 (build-gpu, the code of run_s4c.sh): tiga's attention benchmark beside
# PyTorch's (SDPA FLASH / EFFICIENT / cuDNN, flex_attention) in this same call, then the time of
# the backward's O(N) passes (delta + zeroing, dq finish) on the mask case under ncu.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
B=build-gpu/bench/bench_attention
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 150 $B --bench > $o/ours.log 2>&1; echo "bench rc=$?"
timeout 330 python3 bench/attention_torch.py > $o/torch.log 2>&1; echo "torch rc=$?"
python3 bench/attention_torch.py --join $o/ours.log $o/torch.log > $o/join.txt 2>&1; cat $o/join.txt
timeout 60 ncu --section SpeedOfLight -k regex:"fa_delta|fa_dq_finish|fa_bwd_sm90" -c 3 $B --bench "mask50 f16 D=64" > $o/ncu.log 2>&1; echo "ncu rc=$?"
grep -E "^  [a-z_ ]*fa_|Duration" $o/ncu.log | head -12
