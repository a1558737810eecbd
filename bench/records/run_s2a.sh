#!/usr/bin/env bash
# Session 2, first device call: the GPU suite (attention dropout CUDA paths included), racecheck on the
# shared-memory kernels not yet checked (linear, composed attention softmax, cast), a full 5000-step run
# with attention dropout 0.2 beside PyTorch's own 5000-step run, and a per-kernel profile of a step.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; grep -E "passed, |FAILED|Synthesis" $o/tests.log
grep -B2 -A6 "Assertion\|FAIL" $o/tests.log | head -40
cd build-gpu/tests
for t in "test_linear" "test_cast" "test_attention --filter attention_cuda/composed*" "test_mha --filter mha_cuda/*"; do
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 99 ./$t --jobs 1 > $o/race.log 2>&1
  echo "racecheck $t rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log) $(grep -h Synthesis $o/race.log)"
done
cd ../..
timeout 200 build-gpu/examples/train_charlm --device cuda --dtype bf16 --attention fused --attn-dropout 0.2 \
  --log-interval 500 --sample-chars 300 --out $o/full > $o/train_full.log 2>&1; echo "full train rc=$?"
grep -E "val|ms/step" $o/train_full.log | tail -30
timeout 170 python3 bench/train_torch.py --full examples/data/input.txt --steps 5000 > $o/torch_full.log 2>&1
echo "torch full rc=$?"; cat $o/torch_full.log | grep torch_full
timeout 150 bash bench/profile_train.sh > $o/profile.txt 2>&1; echo "profile rc=$?"; cat $o/profile.txt | head -40
