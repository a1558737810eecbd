#!/usr/bin/env bash
# Session 4, last call (build-gpu, the final code: run_s4h.sh's, with the backward's early dk / dv
# read limited to D = 64). The whole suite, memcheck of test_attention, the float64 check,
# racecheck on the mask cases, tiga's benchmark beside PyTorch's in this same call, a short
# training run.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
B=build-gpu/bench/bench_attention
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 120 build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; tail -1 $o/tests.log; grep -E "FAIL" $o/tests.log | head
(cd build-gpu/tests && timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./test_attention --jobs 1 > $o/mc_attn.log 2>&1; echo "memcheck test_attention rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_attn.log | tail -1)"; grep Synthesis $o/mc_attn.log)
timeout 60 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 99 $B --check mask > $o/race.log 2>&1; echo "racecheck rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log | tail -1)"
timeout 90 $B --bench > $o/ours.log 2>&1; echo "bench rc=$?"
timeout 150 python3 bench/attention_torch.py > $o/torch.log 2>&1; echo "torch rc=$?"
python3 bench/attention_torch.py --join $o/ours.log $o/torch.log > $o/join.txt 2>&1; cat $o/join.txt
for mode in "--dtype bf16 --attention fused --attn-dropout 0" "--dtype bf16 --attention fused"; do
  timeout 30 build-gpu/examples/train_charlm --device cuda $mode --steps 60 --eval-interval 1000 --eval-iters 1 --log-interval 20 \
    --sample-chars 0 --out $o/train_tmp --data examples/data/input.txt 2>&1 | sed "s/^/[$mode] /" | grep -E "step +(40|60)/|best val"
done
rm -rf $o/train_tmp
