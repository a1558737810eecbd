#!/usr/bin/env bash
# Session 20, call 3: the submitted build — the lane kernels' trimmed edge loops (exp_ftz, LeakyReLU's
# derivative as a multiplier without the dropout code), the (H 4, F 2) large-graph rule now only for
# the forward (the backward passes hold their weights in registers at one block a SM), exp_ftz in
# the slice kernels. The GPU suite; memcheck and racecheck on test_edge_attention's CUDA tests;
# bench_edge_ops 400k (two rounds) and 100k, the four configs; the point-cloud models at 400k;
# ncu per launch at 400k hidden 16 H 4 and H 1; PyTorch's seed model at 400k in the same call.
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o/suite
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
D=/tmp/s20c; mkdir -p $D
(timeout 150 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?") &
for tool in memcheck racecheck; do
  x=(); [ $tool = memcheck ] && x=(--leak-check full)
  (cd $R/tests && timeout 280 compute-sanitizer --tool $tool "${x[@]}" --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention CUDA tests rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)") &
done
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_edge_attention|test_gat " $o/suite_summary.txt
wait
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
run() { local l=$1; shift; env "$@" > $o/ops_$l.log 2>&1; echo "$l: $(grep -v '^{' $o/ops_$l.log | grep fused | awk '{print $(NF-1), $NF}' | tr '\n' ' ')"; }
for rnd in 1 2; do for k in 0 1 2 3; do run "400k_${k}_r$rnd" timeout 60 $B --graph $D/radius_400k.bin --providers fused --only $k; done; done
for k in 0 1 2 3; do run "100k_$k" timeout 60 $B --graph $D/radius_100k.bin --providers fused --only $k; done
echo "elapsed ${SECONDS}s"; pack
for k in 2 0; do
  f=$o/ncu_$k.csv
  timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 1 > $f 2>&1; echo "ncu --only $k rc=$?"
  python3 - $f <<'PY'
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
ks = [(r["Kernel Name"].split("(")[0].replace("void ", "")[:60], float(r["Metric Value"].replace(",", "")) / 1e3) for r in csv.DictReader(rows)]
st = [i for i, (n, _) in enumerate(ks) if "k_fwd_" in n]
for a, b in zip(st, st[1:]):
    print(f"  span: {b - a} launches, {sum(t for _, t in ks[a:b]):.1f} us")
for n, t in ks[st[-2]:st[-1]]:
    print(f"    {t:8.1f} us  {n}")
PY
done
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for mh in "seed 1" "seed 1 --recompute" "wide 1"; do set -- $mh
  f=$o/pc_$1_h$2${3:+_rc}.log
  timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet ${3:-} > $f 2>&1
  echo "$1 H $2 ${3:-kept} rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//')"
done
echo "elapsed ${SECONDS}s"; pack
timeout 200 python3 bench/pointcloud_torch.py --model seed --sizes 400k --heads 1 > $o/pc_torch_seed_h1.log 2>&1; echo "pointcloud_torch seed H 1 rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_seed_h1.log
echo "elapsed ${SECONDS}s"; pack
