#!/usr/bin/env bash
# Session 7, call 3: after the fused edge-MLP attention kernel rework (ea-speed2) and the NCCL data
# parallelism (tg_comm): the edge-attention harness (float64 check; kernel timings), the API beside
# PyTorch eager / torch.compile on the same graphs, the edge-attention tests and the 1-rank comm
# tests and train_charlm --gpus 1; then compute-sanitizer memcheck / racecheck / initcheck on the
# changed tests. Logs under $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
D=$OUT/ea
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-330}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
timeout $(tl 70) $R/bench/bench_edge_attention --check > $o/ea_check.log 2>&1; echo "bench_edge_attention --check rc=$? $(grep -c FAIL $o/ea_check.log) FAIL lines"
grep FAIL $o/ea_check.log | head -5; tail -1 $o/ea_check.log
timeout $(tl 60) $R/bench/bench_edge_attention --bench > $o/ea_bench.log 2>&1; echo "bench_edge_attention --bench rc=$?"; tail -19 $o/ea_bench.log
(cd $R/tests && timeout $(tl 60) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log)")
for t in test_comm test_gat test_dot; do [ -x $R/tests/$t ] && (cd $R/tests && timeout $(tl 60) ./$t --jobs 2 > $o/$t.log 2>&1; echo "$t rc=$? $(grep -h Synthesis $o/$t.log)"); done
echo "elapsed ${SECONDS}s"
timeout $(tl 100) python3 bench/edge_attention_torch.py --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\|" $o/ea_torch.log
for s in 100k 400k; do
  timeout $(tl 40) $R/bench/bench_edge_ops --graph $D/radius_$s.bin > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | tail -9
done
echo "elapsed ${SECONDS}s"
[ -f bench/records/run_s7_nccl.sh ] && timeout $(tl 60) bash bench/records/run_s7_nccl.sh $R $o/nccl > $o/nccl.log 2>&1; echo "nccl script rc=$?"; tail -15 $o/nccl.log
echo "elapsed ${SECONDS}s"
L=$o/san; mkdir -p $L
for tool in memcheck racecheck initcheck; do
  extra=(); [ $tool = memcheck ] && extra=(--leak-check full); [ $tool = initcheck ] && extra=(--check-bulk-copy yes)
  for t in test_edge_attention test_comm; do
    [ -x $R/tests/$t ] || continue
    (cd $R/tests && timeout $(tl 200) compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 99 ./$t --jobs 1 > $L/${tool}_$t.log 2>&1; \
     echo "$tool $t rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Synthesis' $L/${tool}_$t.log | tr '\n' ' ' | cut -c1-160)") &
  done
done
wait
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $D
