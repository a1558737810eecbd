#!/usr/bin/env bash
# Session 6, call 3: the graph family beside PyTorch/PyG after this session's changes (GAT layer peak
# memory and time with the gradient hand-off; CSR attention with the locality schedule), on
# graph_torch.py's radius graphs; anomaly-mode cost on the char model (multi-tensor check); the
# schedules' kernel-level timings; compute-sanitizer memcheck and racecheck on the new kernels'
# tests. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
timeout $(tl 150) python3 bench/graph_torch.py --save-graph $OUT/g --sizes 100k,400k --only graph,a,b --no-compile > $o/graph_torch.log 2>&1; echo "graph_torch rc=$?"; tail -12 $o/graph_torch.log
for s in 100k:0.035 400k:0.022; do
  n=${s%%:*} c=${s##*:}
  timeout $(tl 50) $R/bench/bench_graph_ops --graph $OUT/g/radius_$n.bin --cutoff $c --only gat,csr > $o/graph_ops_$n.log 2>&1; echo "bench_graph_ops $n rc=$?"; tail -8 $o/graph_ops_$n.log
done
echo "elapsed ${SECONDS}s"
timeout $(tl 30) $R/bench/check_radius > $o/check_radius.log 2>&1; echo "check_radius rc=$?"; grep -E "PASS|FAIL|TIME" $o/check_radius.log | tail -3
for cf in 0 1 0 1; do
  timeout $(tl 40) $R/examples/train_charlm --device cuda --dtype bf16 --steps 80 --eval-interval 100000 --eval-iters 1 --log-interval 20 \
    --sample-chars 0 --check-finite $cf --out $o/ch$cf --data examples/data/input.txt > $o/charlm_cf$cf.log 2>&1
  echo "charlm check-finite=$cf rc=$? $(grep -E 'step +80/' $o/charlm_cf$cf.log | tail -1)"
done
rm -rf $o/ch0 $o/ch1
echo "elapsed ${SECONDS}s"
for t in test_edge_attention test_nonfinite; do
  for tool in memcheck racecheck; do
    (cd $R/tests && timeout $(tl 60) compute-sanitizer --tool $tool --error-exitcode 99 ./$t --jobs 1 > $o/${tool}_$t.log 2>&1
     echo "$tool $t rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $o/${tool}_$t.log | tail -1) $(grep -h Synthesis $o/${tool}_$t.log | tail -1)")
  done
done
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o $OUT/g
