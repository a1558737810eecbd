#!/usr/bin/env bash
# Session 4, last call (build-gpu, the final code: the D = 128 backward walks masks with its state
# in shared memory; the CUDA-core backward's two copies merged into one body). The whole suite,
# memcheck of the attention tests, the float64 check (default, the old kernels, every mask
# variant), racecheck on the mask cases, then tiga's benchmark beside PyTorch's in this same call.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT
B=build-gpu/bench/bench_attention
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 200 build-gpu/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$?"; tail -1 $o/tests.log; grep -E "FAIL" $o/tests.log | head
(cd build-gpu/tests && timeout 200 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./test_attention --jobs 1 > $o/mc_attn.log 2>&1; echo "memcheck test_attention rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_attn.log | tail -1)"; grep Synthesis $o/mc_attn.log)
timeout 100 $B --check > $o/check.log 2>&1; echo "check rc=$?"; grep -E "FAIL|SUMMARY" $o/check.log | head
timeout 100 $B --family 0 --check > $o/check0.log 2>&1; echo "check family 0 rc=$?"; grep -E "FAIL|SUMMARY" $o/check0.log | head
for f in 6 7 8; do timeout 60 $B --family $f --check mask > $o/check$f.log 2>&1; echo "check family $f rc=$?"; grep -E "FAIL|SUMMARY" $o/check$f.log | head -5; done
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 99 $B --check mask > $o/race.log 2>&1; echo "racecheck rc=$? $(grep -h 'RACECHECK SUMMARY' $o/race.log | tail -1)"
timeout 150 $B --bench > $o/ours.log 2>&1; echo "bench rc=$?"
timeout 300 python3 bench/attention_torch.py > $o/torch.log 2>&1; echo "torch rc=$?"
python3 bench/attention_torch.py --join $o/ours.log $o/torch.log > $o/join.txt 2>&1; cat $o/join.txt
