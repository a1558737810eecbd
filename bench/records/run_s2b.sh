#!/usr/bin/env bash
# Session 2, second call: racecheck on the linear kernels, where a step's GPU time goes, and
# PyTorch's 5000-step run with nanoGPT's initialisation.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
which nsys ncu
(cd build-gpu/tests && timeout 150 compute-sanitizer --tool racecheck --error-exitcode 99 ./test_linear --jobs 1 \
  --filter 'linear_cuda/*' > $o/race.log 2>&1; echo "racecheck linear_cuda rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log) $(grep -h Synthesis $o/race.log)")
timeout 170 bash bench/profile_train.sh > $o/profile.txt 2>&1; echo "profile rc=$?"; head -50 $o/profile.txt
timeout 200 python3 bench/train_torch.py --full examples/data/input.txt --steps 5000 > $o/torch_full.log 2>&1
echo "torch full rc=$?"; grep torch_full $o/torch_full.log
