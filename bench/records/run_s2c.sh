#!/usr/bin/env bash
# Session 2, third call: the GPU suite after the vectorised memory-bound kernels and the cuRAND
# dropout stream, compute-sanitizer on the changed kernels, the training benchmark beside PyTorch,
# and the per-kernel profile of a step.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; grep -E "passed, |FAILED" $o/tests.log
grep -B2 -A8 "Assertion\|FAIL" $o/tests.log | head -40
cd build-gpu/tests
for t in test_elementwise test_shape test_dropout test_cast test_layernorm; do
  timeout 60 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./$t --jobs 1 > $o/mem.log 2>&1
  m=$?
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 99 ./$t --jobs 1 > $o/race.log 2>&1
  echo "$t memcheck rc=$m $(grep -h 'ERROR SUMMARY' $o/mem.log) | racecheck rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log)"
done
cd ../..
bash bench/run_gpu.sh train > $o/bench_train.log 2>&1; echo "bench train done"
grep -E "ms/step" $o/train_tiga.log | grep "60/60\|59/60"; grep train_torch $o/train_torch.log
timeout 150 bash bench/profile_train.sh > $o/profile.txt 2>&1; echo "profile rc=$?"; head -45 $o/profile.txt
