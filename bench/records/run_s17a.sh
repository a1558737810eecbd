#!/usr/bin/env bash
# Session 17, call 1: tg_graph_attention_options.recompute_products (the per-node products made in
# temporary memory in each pass, nothing of [N, hidden] kept on the tape). test_edge_attention
# (stop on failure: the new variants and the two-layer memory test among them); the point-cloud
# steps at 400k (seed H 1, wide H 1 / H 4) with and without --recompute, two rounds; PyTorch's seed
# model at 400k H 1 in the same call; memcheck on test_edge_attention's CUDA tests; the GPU suite.
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 --verbose > $o/test_ea.log 2>&1); rc=$?
echo "test_edge_attention rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
grep -h "step peak" $o/test_ea.log
if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -40; pack; exit 1; fi
P=$R/examples/train_pointcloud
for rnd in 1 2; do
  for mh in "seed 1" "wide 1" "wide 4"; do set -- $mh
    for rc in "" "--recompute"; do
      f=$o/pc_$1_h$2${rc:+_rc}_$rnd.log
      timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet $rc > $f 2>&1
      echo "$1 H $2 ${rc:-kept} round $rnd rc=$? $(grep -h 'training step' $f)"
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
timeout 150 python3 bench/pointcloud_torch.py --model seed --sizes 400k --heads 1 > $o/pc_torch_seed_h1.log 2>&1; echo "pointcloud_torch seed H 1 rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_seed_h1.log
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
L=$((570 - SECONDS)); [ $L -gt 150 ] && L=150
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout '$L' $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite (limit ${L}s a test): $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
