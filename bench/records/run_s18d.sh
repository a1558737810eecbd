#!/usr/bin/env bash
# Session 18, call 4: the submitted build (the graded order, the products kernels' final forms, no
# temporary switches). The GPU suite; memcheck on test_edge_attention's CUDA tests; bench_edge_ops
# at 400k (two rounds) and 100k; the point-cloud models at 400k; PyTorch's wide and seed models at
# 400k H 1 in the same call. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_edge_attention|test_linear|test_relation|test_radius|test_graph " $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout 150 compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s18d; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
run() { local l=$1; shift; env "$@" > $o/ops_$l.log 2>&1; echo "$l: $(grep -v '^{' $o/ops_$l.log | grep fused | awk '{print $(NF-1), $NF}' | tr '\n' ' ')"; }
for rnd in 1 2; do for k in 0 1 2 3; do run "400k_${k}_r$rnd" timeout 40 $B --graph $D/radius_400k.bin --providers fused --only $k; done; done
for k in 0 1 2 3; do run "100k_$k" timeout 40 $B --graph $D/radius_100k.bin --providers fused --only $k; done
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for mh in "seed 1" "seed 1 --recompute" "wide 1" "wide 1 --recompute" "wide 4"; do set -- $mh
  f=$o/pc_$1_h$2${3:+_rc}.log
  timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet ${3:-} > $f 2>&1
  echo "$1 H $2 ${3:-kept} rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//')"
done
echo "elapsed ${SECONDS}s"; pack
for m in wide seed; do
  timeout 200 python3 bench/pointcloud_torch.py --model $m --sizes 400k --heads 1 > $o/pc_torch_${m}_h1.log 2>&1; echo "pointcloud_torch $m H 1 rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_${m}_h1.log
  echo "elapsed ${SECONDS}s"; pack
done
