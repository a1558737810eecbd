#!/usr/bin/env bash
# Session 3, final call: the whole test suite on the H200, memcheck + racecheck of the attention
# tests, the float64 check of every fused case with the wgmma kernels (family 1) and without them
# (family 0), then tiga's attention benchmark beside PyTorch's (SDPA FLASH / EFFICIENT / cuDNN,
# flex_attention) in this same call, and a short training run without attention dropout (which
# takes the wgmma kernels) against the default (dropout: mma.sync kernels).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
B=build-gpu/bench/bench_attention
timeout 240 build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; tail -1 $o/tests.log; grep -E "FAILED|Synthesis" $o/tests.log | head -30
(cd build-gpu/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./test_attention --jobs 1 --filter 'attention_cuda/*' > $o/mc_attn.log 2>&1; echo "memcheck attention_cuda rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_attn.log | tail -1)")
(cd build-gpu/tests && timeout 120 compute-sanitizer --tool racecheck --error-exitcode 99 ./test_attention --jobs 1 --filter 'attention_cuda/fused_wgmma*' > $o/rc_attn.log 2>&1; echo "racecheck fused_wgmma rc=$? $(grep -h 'RACECHECK SUMMARY' $o/rc_attn.log | tail -1)")
(cd build-gpu/tests && timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 ./test_mha --jobs 1 > $o/mc_mha.log 2>&1; echo "memcheck mha rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_mha.log | tail -1)")
timeout 200 $B --check > $o/check1.log 2>&1; echo "check family1 rc=$?"; grep -E "FAIL|SUMMARY" $o/check1.log | head
timeout 200 $B --check --family 0 > $o/check0.log 2>&1; echo "check family0 rc=$?"; grep -E "FAIL|SUMMARY" $o/check0.log | head
timeout 120 $B --bench > $o/ours.log 2>&1; echo "bench rc=$?"
timeout 100 $B --bench --family 0 > $o/ours_mma.log 2>&1; echo "bench mma.sync rc=$?"
timeout 400 python3 bench/attention_torch.py > $o/torch.log 2>&1; echo "torch rc=$?"
python3 bench/attention_torch.py --join $o/ours.log $o/torch.log > $o/join.txt 2>&1; cat $o/join.txt
tail -20 $o/ours_mma.log
for mode in "--dtype bf16 --attention fused --attn-dropout 0" "--dtype bf16 --attention fused"; do
  timeout 60 build-gpu/examples/train_charlm --device cuda $mode --steps 60 --eval-interval 1000 --eval-iters 1 --log-interval 20 \
    --sample-chars 0 --out $o/train_tmp --data examples/data/input.txt 2>&1 | sed "s/^/[$mode] /" | tail -n 2
done
rm -rf $o/train_tmp
