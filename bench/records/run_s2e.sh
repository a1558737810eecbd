#!/usr/bin/env bash
# Session 2, final call: the GPU suite (stops here if anything fails), compute-sanitizer on the
# kernels changed last, the training benchmark beside PyTorch, the full 5000-step default run
# and the per-kernel profile of a step.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
build-gpu/run-tests.sh > $o/tests.log 2>&1; rc=$?; echo "tests rc=$rc"; grep -E "passed, |FAILED" $o/tests.log
if [ $rc -ne 0 ]; then grep -B2 -A8 "Assertion\|FAIL" $o/tests.log | head -60; exit 1; fi
cd build-gpu/tests
for t in test_optim test_layernorm; do
  timeout 60 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./$t --jobs 1 > $o/mem.log 2>&1
  m=$?
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 99 ./$t --jobs 1 > $o/race.log 2>&1
  echo "$t memcheck rc=$m $(grep -h 'ERROR SUMMARY' $o/mem.log) | racecheck rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log)"
done
cd ../..
bash bench/run_gpu.sh train > $o/bench_train.log 2>&1; echo "bench train done"
grep -E "ms/step" $o/train_tiga.log | grep "60/60\|59/60"; grep train_torch $o/train_torch.log
timeout 170 build-gpu/examples/train_charlm --device cuda --log-interval 500 --sample-chars 300 --out $o/full \
  > $o/train_full.log 2>&1; echo "full train rc=$?"
grep -E "^train:|val|ms/step" $o/train_full.log | tail -30
timeout 60 bash bench/profile_train.sh > $o/profile.txt 2>&1; echo "profile rc=$?"; head -24 $o/profile.txt
