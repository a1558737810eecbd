#!/usr/bin/env bash
# Session 6, call 4: after the host-overhead cuts (parameter-gradient zeroing in one launch, no
# found-inf memset) and the anomaly check on its own stream: the whole GPU suite; the GAT on Cora
# beside PyG (10 seeds each); the anomaly-mode cost on the char model (overlapped and in order);
# memcheck on the tests of the changed tape paths. Logs in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
D=$OUT/ea
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-400}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
timeout $(tl 150) $R/run-tests.sh > $o/tests.log 2>&1; echo "tests rc=$? $(tail -1 $o/tests.log)"
grep -E "^FAILED|\[FAIL\]|Crash|Timed out" $o/tests.log | head -12
echo "elapsed ${SECONDS}s"
timeout $(tl 40) $R/examples/train_gat --device cuda --attention fused --seeds 10 --data examples/data/cora --out $o/gat --log-interval 5000 > $o/gat_fused.log 2>&1; echo "gat fused rc=$?"; tail -3 $o/gat_fused.log
timeout $(tl 15) $R/examples/train_gat --device cuda --attention fused --seeds 1 --profile --data examples/data/cora --out $o/gatp --log-interval 5000 > $o/gat_prof.log 2>&1; echo "gat profile rc=$?"; grep profile $o/gat_prof.log
timeout $(tl 70) python3 bench/gat_torch.py --seeds 10 --device cuda > $o/gat_torch.log 2>&1; echo "gat_torch rc=$?"; tail -2 $o/gat_torch.log | head -1
rm -rf $o/gat $o/gatp
for cf in 0 1 0 1; do
  timeout $(tl 30) $R/examples/train_charlm --device cuda --dtype bf16 --steps 80 --eval-interval 100000 --eval-iters 1 --log-interval 20 \
    --sample-chars 0 --check-finite $cf --out $o/ch --data examples/data/input.txt > $o/charlm_cf$cf.log 2>&1
  echo "charlm check-finite=$cf rc=$? $(grep -E 'step +79/80' $o/charlm_cf$cf.log | tail -1)"
done
TIGA_CHECK_FINITE_OVERLAP=0 timeout $(tl 30) $R/examples/train_charlm --device cuda --dtype bf16 --steps 80 --eval-interval 100000 --eval-iters 1 --log-interval 20 \
  --sample-chars 0 --check-finite 1 --out $o/ch --data examples/data/input.txt > $o/charlm_inorder.log 2>&1
echo "charlm check-finite=1 in order (TIGA_CHECK_FINITE_OVERLAP=0) rc=$? $(grep -E 'step +79/80' $o/charlm_inorder.log | tail -1)"
rm -rf $o/ch
echo "elapsed ${SECONDS}s"
for t in test_nonfinite test_providers test_optim; do
  (cd $R/tests && timeout $(tl 60) compute-sanitizer --tool memcheck --error-exitcode 99 ./$t --jobs 1 > $o/memcheck_$t.log 2>&1
   echo "memcheck $t rc=$? $(grep -h 'ERROR SUMMARY' $o/memcheck_$t.log | tail -1) $(grep -h Synthesis $o/memcheck_$t.log | tail -1)")
done
echo "elapsed ${SECONDS}s"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
