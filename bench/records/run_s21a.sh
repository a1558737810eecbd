#!/usr/bin/env bash
# Session 21, call 1: the self-attention products at hidden 64 (cuda_edge_products / _backward at
# hid 64: U = x ws + p wp, V = x wd - p wp) so that the slice kernels run without per-edge geometry,
# built without its code (GEO false: k_fwd_sl<1, 8, 1> 48 registers / 91 SASS an edge against 80 /
# 138, k_dst_sl 96 / 147 against 128 (116 B spilled) / 254, k_src_sl 78 / 159 against 96 / 227);
# with recompute_products the node makes the folded products in each pass (es->rpo).
# test_edge_attention; memcheck and racecheck on its CUDA tests; the point-cloud models at 400k
# against TIGA_EA_OWN=0 (the unfolded path, as submitted in session 20), two rounds; ncu of the
# seed --recompute step; PyTorch's seed model in the same call. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 > $o/ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/ea.log | tail -1)")
grep -h -B2 -A8 "FAIL\|Assertion" $o/ea.log | head -60
for tool in memcheck racecheck; do
  x=(); [ $tool = memcheck ] && x=(--leak-check full)
  (cd $R/tests && timeout 300 compute-sanitizer --tool $tool "${x[@]}" --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention CUDA tests rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)") &
done
wait
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for rnd in 1 2; do for own in 1 0; do for mh in "seed 1" "seed 1 --recompute"; do set -- $mh
  f=$o/pc_$1_h$2${3:+_rc}_own${own}_$rnd.log
  TIGA_EA_OWN=$own timeout 60 $P --model $1 --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads $2 --quiet ${3:-} > $f 2>&1
  echo "$1 H $2 ${3:-kept} own=$own r$rnd rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//') | $(grep -h '^loss' $f | cut -c1-50)"
done; done; done
echo "elapsed ${SECONDS}s"; pack
f=$o/ncu_seed_rc.csv
timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 6 --heads 1 --quiet --recompute > $f 2>&1; echo "ncu seed --recompute rc=$?"
python3 - $f <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
ks = [(r["Kernel Name"].split("(")[0].replace("void ", "")[:70], float(r["Metric Value"].replace(",", "")) / 1e3) for r in csv.DictReader(rows)]
st = [i for i, (n, _) in enumerate(ks) if "k_fwd_sl" in n]
spans = [(st[2 * s], st[2 * s + 2]) for s in range(2, 5) if 2 * s + 2 < len(st)]
for a, b in spans:
    print(f"  step: {b - a} launches, {sum(t for _, t in ks[a:b]):.1f} us")
a, b = spans[-1]
tot = collections.OrderedDict()
for n, t in ks[a:b]:
    tot[n] = tot.get(n, 0.0) + t
for n, t in sorted(tot.items(), key=lambda x: -x[1]):
    print(f"    {t:8.1f} us  {n}")
PY
echo "elapsed ${SECONDS}s"; pack
timeout 200 python3 bench/pointcloud_torch.py --model seed --sizes 400k --heads 1 > $o/pc_torch_seed_h1.log 2>&1; echo "pointcloud_torch seed H 1 rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_seed_h1.log
echo "elapsed ${SECONDS}s"; pack
