#!/usr/bin/env bash
# Session 8, call 1: the library with session 7's edge-attention rule (packed kernels at hid 16)
# and anomaly mode's in-kernel checks (cast, unary, binary, dropout, layer norm) plus the single
# flag read per step: the GPU suite (binaries in parallel); then alone on the GPU the anomaly-mode
# cost on the char model (two runs each; a check-off run that reads the loss every step shows what
# one device wait a step costs); tg_edge_attention through the API beside PyTorch (eager and
# torch.compile) on the 100k / 400k radius graphs and on the 100k points with 4x the edges
# (peak growth at 4x E); then initcheck with --check-bulk-copy yes on one bf16 GEMM test.
# Logs under $OUT/logs.tgz. carry ["gpu-carry"] (tools/gpu_pack.sh, big benches removed).
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
# 1. the suite, 6 binaries at a time
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 170 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_(nonfinite|nonfinite_kernels|edge_attention|dot|charlm) " $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -40
echo "elapsed ${SECONDS}s"; pack
# 2. anomaly mode on the char model: ms/step of the window ending at step 199 (steps 150-199)
for rep in 1 2; do
  for v in "0 50" "1 50" "0 1"; do
    set -- $v
    log=$o/charlm_${1}_${2}_$rep.log
    timeout $(tl 30) $R/examples/train_charlm --device cuda --dtype bf16 --steps 200 --eval-interval 100000 --eval-iters 1 --log-interval $2 \
      --sample-chars 0 --check-finite $1 --out $o/ch --data examples/data/input.txt > $log 2>&1
    echo "charlm rep $rep check-finite=$1 log-interval=$2 rc=$? $(grep -E 'step +199/200' $log | tail -1 | cut -c1-120)"
    [ $2 = 1 ] && echo "  median ms/step of steps 150-199: $(grep -E 'step +1[5-9][0-9]/200' $log | sed -E 's/.*\| +([0-9.]+) ms\/step.*/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
  done
done
log=$o/charlm_overlap.log
TIGA_CHECK_FINITE_OVERLAP=1 timeout $(tl 30) $R/examples/train_charlm --device cuda --dtype bf16 --steps 200 --eval-interval 100000 --eval-iters 1 --log-interval 50 \
  --sample-chars 0 --check-finite 1 --out $o/ch --data examples/data/input.txt > $log 2>&1
echo "charlm check stream rc=$? $(grep -E 'step +199/200' $log | tail -1 | cut -c1-120)"
rm -rf $o/ch
echo "elapsed ${SECONDS}s"; pack
# 3. edge-MLP attention through the API beside PyTorch
D=$OUT/ea
timeout $(tl 200) python3 bench/edge_attention_torch.py --sizes 100k,400k,100k-x4 --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph" $o/ea_torch.log
for s in 100k 400k 100k-x4; do
  timeout $(tl 40) $R/bench/bench_edge_ops --graph $D/radius_$s.bin > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | tail -9
done
timeout $(tl 30) $R/bench/bench_edge_ops --check $D > $o/ea_ops_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_ops_check.log)"
rm -rf $D
echo "elapsed ${SECONDS}s"; pack
# 4. initcheck with bulk-copy tracking on a bf16 GEMM test (session 7's reports)
(cd $R/tests && timeout $(tl 120) compute-sanitizer --tool initcheck --check-bulk-copy yes --error-exitcode 99 ./test_linear --jobs 1 > $o/initbulk_linear.log 2>&1
 echo "initcheck --check-bulk-copy yes test_linear rc=$? $(grep -hE 'ERROR SUMMARY' $o/initbulk_linear.log | tail -1) $(grep -m1 -i 'unknown\|unrecognized\|invalid' $o/initbulk_linear.log)")
(cd $R/tests && timeout $(tl 120) compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 ./test_nonfinite_kernels --jobs 1 > $o/mem_nfk.log 2>&1
 echo "memcheck test_nonfinite_kernels rc=$? $(grep -hE 'ERROR SUMMARY' $o/mem_nfk.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
