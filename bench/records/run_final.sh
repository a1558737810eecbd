#!/usr/bin/env bash
# One device call: GPU test suite, benchmarks beside PyTorch, a full default-config training run,
# then compute-sanitizer memcheck (and racecheck on the shared-memory kernels), within ~590 s.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
start=$(date +%s)
left() { echo $((${1} - ($(date +%s) - start))); }
build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; grep -E "passed, |FAILED" $o/tests.log
bash bench/run_gpu.sh linear tape > $o/bench_lt.log 2>&1; echo "bench linear/tape done"
bash bench/run_gpu.sh train > $o/bench_train.log 2>&1; echo "bench train done"
grep -E "ms/step" $o/train_tiga.log | grep "60/60\|59/60" ; grep train_torch $o/train_torch.log
timeout $(left 470) build-gpu/examples/train_charlm --device cuda --dtype bf16 --attention fused --log-interval 500 \
  --sample-chars 300 --out $o/full --save $o/full/ckpt > $o/train_full.log 2>&1; echo "full train rc=$?"
grep -E "val loss|ms/step" $o/train_full.log | tail -4; rm -f $o/full/ckpt*
timeout $(left 560) build-gpu/run-tests.sh --sanitize > $o/sanitize.log 2>&1; echo "memcheck rc=$?"
grep -E "passed, |FAILED|ERROR SUMMARY" $o/sanitize.log | sort | uniq -c | head
for t in test_softmax test_layernorm test_shape; do
  timeout $(left 585) compute-sanitizer --tool racecheck --error-exitcode 99 build-gpu/tests/$t --jobs 1 > $o/race_$t.log 2>&1
  echo "racecheck $t rc=$?"; grep -E "RACECHECK SUMMARY|Synthesis" $o/race_$t.log
done
