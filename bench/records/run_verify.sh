#!/usr/bin/env bash
# Short verification call after refactors: the GPU suite, compute-sanitizer on the kernels that
# changed (memcheck + racecheck), and a 60-step training benchmark. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}"
o=$OUT
build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; grep -E "passed, |FAILED" $o/tests.log
grep -A3 "Assertion" $o/tests.log | head -20
grep -E "fused causal N=16384" $o/tests.log | head -2
cd build-gpu/tests
for t in test_softmax test_layernorm test_loss test_optim test_dropout test_elementwise; do
  timeout 40 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./$t --jobs 1 > $o/mem.log 2>&1
  m=$?
  timeout 40 compute-sanitizer --tool racecheck --error-exitcode 99 ./$t --jobs 1 > $o/race.log 2>&1
  echo "$t memcheck rc=$m $(grep -h 'ERROR SUMMARY' $o/mem.log) | racecheck rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log)"
done
cd ../..
timeout 60 build-gpu/examples/train_charlm --device cuda --dtype bf16 --attention fused --steps 60 --eval-interval 1000 \
  --eval-iters 1 --log-interval 20 --sample-chars 0 --out $o/tr 2>&1 | grep -E "ms/step" | tail -2
