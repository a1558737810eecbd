#!/usr/bin/env bash
# Session 5, call 3: verification of the merged code (build-gpu-run from tools/gpu_pack.sh at the call's
# commit): the whole suite; compute-sanitizer memcheck on the new families and racecheck on the graph
# kernels' checks; the zero-copy check against PyTorch (DLPack); anomaly mode's cost on the char model.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
# One deadline for the call (the device allows 600 s): each step gets min(its limit, what is left).
END=${END_S:-540}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
timeout $(tl 200) $R/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$? $(tail -1 $o/tests.log)"
grep -E "^FAILED|\[FAIL\]" $o/tests.log | head -20
grep -A3 "Assertion Failed" $o/tests.log | grep -vE "^--$|Assertion Failed|^\[----\]   $" | head -16
TIGA_LIB=$R/libtiga.so PYTHONPATH=bindings/python timeout $(tl 60) python3 bindings/python/tests/gpu_check.py > $o/gpu_check.log 2>&1; echo "gpu_check rc=$?"; tail -4 $o/gpu_check.log
for cf in 0 1; do
  timeout $(tl 40) $R/examples/train_charlm --device cuda --dtype bf16 --steps 80 --eval-interval 100000 --eval-iters 1 --log-interval 20 \
    --sample-chars 0 --check-finite $cf --out $o/ch$cf --data examples/data/input.txt > $o/charlm_cf$cf.log 2>&1
  echo "charlm check-finite=$cf rc=$? $(grep -E 'step +80/' $o/charlm_cf$cf.log | tail -1)"
done
timeout $(tl 40) $R/examples/train_charlm --device cuda --dtype f16 --steps 80 --eval-interval 100000 --eval-iters 1 --log-interval 20 \
  --sample-chars 0 --out $o/chf16 --data examples/data/input.txt > $o/charlm_f16.log 2>&1; echo "charlm f16 rc=$? $(grep -E 'step +80/' $o/charlm_f16.log | tail -1)"
for t in test_elementwise test_zerocopy test_reliability test_gat test_graph test_lifetime test_radius; do
  (cd $R/tests && timeout $(tl 40) compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./$t --jobs 1 > $o/mc_$t.log 2>&1
   echo "memcheck $t rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_$t.log | tail -1) $(grep -h Synthesis $o/mc_$t.log | tail -1)")
done
(cd $R/tests && timeout $(tl 40) compute-sanitizer --tool racecheck --error-exitcode 99 ./test_graph --filter 'graph_cuda/providers*' --jobs 1 > $o/rc_graph.log 2>&1; echo "racecheck test_graph rc=$? $(grep -h 'RACECHECK SUMMARY' $o/rc_graph.log | tail -1)")
(cd $R/tests && timeout $(tl 40) compute-sanitizer --tool memcheck --error-exitcode 99 ./test_attention --filter 'attention_cuda/fused_csr*' --jobs 1 > $o/mc_csr.log 2>&1; echo "memcheck csr attention rc=$? $(grep -h 'ERROR SUMMARY' $o/mc_csr.log | tail -1)")
(cd $R/tests && timeout $(tl 40) compute-sanitizer --tool racecheck --error-exitcode 99 ./test_attention --filter 'attention_cuda/fused_csr*' --jobs 1 > $o/rc_csr.log 2>&1; echo "racecheck csr attention rc=$? $(grep -h 'RACECHECK SUMMARY' $o/rc_csr.log | tail -1)")
rm -rf $o/ch0 $o/ch1 $o/chf16
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
