#!/usr/bin/env bash
# Session 5, call 5: the device fault-injection walk with the GPU-aware comparison (and how
# reproducible a device step is by itself); the four CUDA consumers of tools/test_consumers.sh (built
# on the development machine against gpu-prep's build, run here); a second same-call attention sample
# for issue 11's 3 % bar; compute-sanitizer initcheck on the new kernel families; the graph workloads
# at 400k through the public API.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-480}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
(cd $R/tests && timeout $(tl 90) ./test_fault_injection --verbose --jobs 1 > $o/fault.log 2>&1; echo "test_fault_injection rc=$?")
grep -E "walk|reference run|PASS|FAIL|problems" $o/fault.log | head -8
for b in app_shared app_static pc_shared pc_static; do
  echo "consumer $b: $(timeout 30 gpu-carry/consumers/$b 2>&1 | head -2) (rc=$?)"
done
timeout $(tl 100) $R/bench/bench_attention --bench > $o/attn_ours.log 2>&1; echo "bench_attention rc=$?"
timeout $(tl 170) python3 bench/attention_torch.py > $o/attn_torch.log 2>&1; echo "attention_torch rc=$?"
python3 bench/attention_torch.py --join $o/attn_ours.log $o/attn_torch.log > $o/attn_join.txt 2>&1; cat $o/attn_join.txt
echo "elapsed ${SECONDS}s"
for t in test_graph test_radius test_graph_geometry test_reduce test_elementwise test_zerocopy; do
  (cd $R/tests && timeout $(tl 40) compute-sanitizer --tool initcheck --error-exitcode 99 ./$t --jobs 1 > $o/ic_$t.log 2>&1
   echo "initcheck $t rc=$? $(grep -h 'ERROR SUMMARY' $o/ic_$t.log | tail -1) $(grep -h Synthesis $o/ic_$t.log | tail -1)")
done
(cd $R/tests && timeout $(tl 40) compute-sanitizer --tool initcheck --error-exitcode 99 ./test_attention --filter 'attention_cuda/fused_csr*' --jobs 1 > $o/ic_csr.log 2>&1; echo "initcheck csr attention rc=$? $(grep -h 'ERROR SUMMARY' $o/ic_csr.log | tail -1)")
timeout $(tl 40) python3 bench/graph_torch.py --save-graph $OUT/g --sizes 400k --only graph > $o/graph_save.log 2>&1; echo "graph save rc=$?"
timeout $(tl 120) $R/bench/bench_graph_ops --graph $OUT/g/radius_400k.bin --cutoff 0.022 > $o/graph_ops_400k.log 2>&1; echo "bench_graph_ops 400k rc=$?"; tail -8 $o/graph_ops_400k.log
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $OUT/g
