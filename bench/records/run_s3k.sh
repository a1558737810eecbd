#!/usr/bin/env bash
# Session 3, last call, on the final code (after run_s3j.sh's change: the forward's tile class
# computed while S is in flight): the whole test suite on the H200, memcheck of the CUDA attention
# tests, the float64 check of every fused case, then tiga's attention benchmark beside PyTorch's
# (SDPA FLASH / EFFICIENT / cuDNN, flex_attention) in this same call.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
B=build-gpu/bench/bench_attention
timeout 200 build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; tail -1 $o/tests.log; grep -E "FAILED" $o/tests.log | head
(cd build-gpu/tests && timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./test_attention --jobs 1 --filter 'attention_cuda/*' > $o/mc_attn.log 2>&1; echo "memcheck attention_cuda rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_attn.log | tail -1)")
timeout 120 $B --check > $o/check1.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY" $o/check1.log | head
timeout 120 $B --bench > $o/ours.log 2>&1; echo "bench rc=$?"
timeout 300 python3 bench/attention_torch.py > $o/torch.log 2>&1; echo "torch rc=$?"
python3 bench/attention_torch.py --join $o/ours.log $o/torch.log > $o/join.txt 2>&1; cat $o/join.txt
