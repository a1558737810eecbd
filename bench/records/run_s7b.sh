#!/usr/bin/env bash
# Session 7, call 2: after tg_dot_last (GAT's per-head score projections in one op): the GPU suite
# (binaries in parallel); then, with nothing else on the GPU, the GAT on Cora beside PyG (10 seeds
# each, step times), the anomaly-mode cost on the char model (check batches limited by bytes,
# in order, and the check stream), two runs each; then compute-sanitizer for what call 1 left
# (racecheck of the three binaries that timed out, split per test; memcheck / initcheck of
# test_nonfinite; initcheck of the four bf16/f16 binaries with --check-bulk-copy yes) and all three
# tools on the new / changed tests; tg_comm on one GPU (bench/records/run_s7_nccl.sh). Logs under $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-575}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
# 1. the suite, 6 binaries at a time
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -30
echo "elapsed ${SECONDS}s"
# 2. GAT on Cora beside PyG
timeout $(tl 60) $R/examples/train_gat --device cuda --attention fused --seeds 10 --data examples/data/cora --out $o/gat --log-interval 5000 > $o/gat_fused.log 2>&1; echo "gat fused rc=$?"; tail -3 $o/gat_fused.log
timeout $(tl 15) $R/examples/train_gat --device cuda --attention fused --seeds 1 --profile --data examples/data/cora --out $o/gatp --log-interval 5000 > $o/gat_prof.log 2>&1; echo "gat profile rc=$?"; grep profile $o/gat_prof.log
timeout $(tl 80) python3 bench/gat_torch.py --seeds 10 --device cuda > $o/gat_torch.log 2>&1; echo "gat_torch rc=$?"; tail -2 $o/gat_torch.log | head -1
timeout $(tl 30) $R/examples/train_gat --device cuda --attention fused --seeds 3 --data examples/data/cora --out $o/gat2 --log-interval 5000 > $o/gat_fused2.log 2>&1; echo "gat fused (again, 3 seeds) rc=$?"; tail -2 $o/gat_fused2.log
rm -rf $o/gat $o/gatp $o/gat2
echo "elapsed ${SECONDS}s"
# 3. anomaly mode on the char model: ms/step of the window ending at step 199 (steps 150-199)
for rep in 1 2; do
  for v in "0 -" "1 -" "1 16777216" "1 33554432" "1 67108864" "1 overlap"; do
    set -- $v; envs=()
    [ "$2" = overlap ] && envs=(TIGA_CHECK_FINITE_OVERLAP=1)
    [ "$2" != overlap ] && [ "$2" != - ] && envs=(TIGA_CHECK_FINITE_BATCH_BYTES=$2)
    log=$o/charlm_${1}_${2}_$rep.log
    env "${envs[@]}" timeout $(tl 30) $R/examples/train_charlm --device cuda --dtype bf16 --steps 200 --eval-interval 100000 --eval-iters 1 --log-interval 50 \
      --sample-chars 0 --check-finite $1 --out $o/ch --data examples/data/input.txt > $log 2>&1
    echo "charlm rep $rep check-finite=$1 batch=$2 rc=$? $(grep -E 'step +199/200' $log | tail -1 | cut -c1-120)"
  done
done
rm -rf $o/ch
echo "elapsed ${SECONDS}s"
# 4. tg_comm on one GPU: test_comm, train_charlm --gpus 1 against the plain run, the 1-GPU baselines
END_S=100 OUT=$o/nccl_out timeout $(tl 110) bash bench/records/run_s7_nccl.sh $R > $o/nccl.log 2>&1; echo "run_s7_nccl rc=$?"
sed -n '/==== run_s7_nccl summary/,$p' $o/nccl.log
echo "elapsed ${SECONDS}s"
# 5. sanitizers (timings are done)
S=bench/records
L=$o/san; mkdir -p $L
(bash $S/sanitize_split.sh $R $L racecheck 5 $(tl 400) "test_attention test_charlm_f16 test_nonfinite" > $L/race_split.log 2>&1) &
(bash $S/sanitize_split.sh $R $L memcheck 3 $(tl 400) "test_nonfinite" > $L/mem_split.log 2>&1; \
 bash $S/sanitize_split.sh $R $L initcheck 3 $(tl 400) "test_nonfinite" > $L/init_split.log 2>&1) &
(for t in test_linear test_mha test_edge_attention test_charlm_f16; do
   (cd $R/tests && timeout $(tl 400) compute-sanitizer --tool initcheck --check-bulk-copy yes --error-exitcode 99 ./$t --jobs 1 > $L/initbulk_$t.log 2>&1; \
    echo "initcheck --check-bulk-copy yes $t rc=$? $(grep -hE 'ERROR SUMMARY|Synthesis' $L/initbulk_$t.log | tr '\n' ' ' | cut -c1-160) $(grep -m1 -i 'unknown\|unrecognized' $L/initbulk_$t.log)") &
 done; wait) > $L/initbulk_summary.txt 2>&1 &
(for tool in memcheck racecheck initcheck; do for t in test_dot test_gat test_comm; do
   [ -x $R/tests/$t ] || continue
   extra=(); [ $tool = memcheck ] && extra=(--leak-check full)
   (cd $R/tests && timeout $(tl 300) compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 99 ./$t --jobs 1 > $L/${tool}_$t.log 2>&1; \
    echo "$tool $t rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Synthesis' $L/${tool}_$t.log | tr '\n' ' ' | cut -c1-160)")
 done; done) > $L/new_summary.txt 2>&1 &
wait
cat $L/initbulk_summary.txt $L/new_summary.txt
grep -v " rc=0 " $L/split_summary.txt; echo "split jobs: $(wc -l < $L/split_summary.txt), not clean: $(grep -vc ' rc=0 ' $L/split_summary.txt)"
awk '{print $1, $3, $4}' $L/split_summary.txt | sort -k3 -t' ' -n | tail -3
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
