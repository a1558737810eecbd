#!/usr/bin/env bash
# Session 19, call 2: the head's build (e9ff73b's library; session 18's last commit had not run on
# the H200): the GPU suite; then where the hidden-16 H 4 step at 400k spends its wall time —
# bench_edge_ops --only 2 (and --only 0) plainly, and the kernels' durations at the clocks the
# step runs at (ncu --clock-control none), summed per step, against the step's wall time; with
# nsys, when installed, the GPU timeline's idle gaps inside a step. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o/suite
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_relation|test_edge_attention" $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s19b; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
for k in 2 0; do
  for rnd in 1 2; do timeout 40 $B --graph $D/radius_400k.bin --providers fused --only $k > $o/ops_${k}_$rnd.log 2>&1; echo "400k --only $k: $(grep -v '^{' $o/ops_${k}_$rnd.log | grep fused | awk '{print $(NF-1), $NF}')"; done
  timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 1 > $o/ncu_all_$k.csv 2>&1; echo "ncu all kernels --only $k rc=$?"
  python3 - $o/ncu_all_$k.csv <<'PY'
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
ks = [(r["Kernel Name"].split("(")[0].replace("void ", "")[:60], float(r["Metric Value"].replace(",", "")) / 1e3) for r in csv.DictReader(rows)]
print(f"  {len(ks)} launches in all (setup, 3 timed steps, the peak step)")
# segments from one edge-attention forward kernel to the next: a middle one holds one step's kernels
starts = [i for i, (n, _) in enumerate(ks) if "k_fwd_" in n]
for s_i, s in enumerate(starts):
    e = starts[s_i + 1] if s_i + 1 < len(starts) else len(ks)
    seg = ks[s:e]
    print(f"  step {s_i}: {len(seg)} launches, {sum(t for _, t in seg):.1f} us")
s = starts[-2] if len(starts) > 1 else 0
e = starts[-1] if len(starts) > 1 else len(ks)
for n, t in ks[s:e]:
    print(f"    {t:8.1f} us  {n}")
PY
done
echo "elapsed ${SECONDS}s"; pack
if command -v nsys > /dev/null; then
  timeout 120 nsys profile --trace cuda --output $o/h4 --force-overwrite true $B --graph $D/radius_400k.bin --providers fused --only 2 --reps 5 --warmup 2 > $o/nsys.log 2>&1; echo "nsys rc=$?"
  nsys stats --report cuda_gpu_trace --format csv --output $o/h4 $o/h4.nsys-rep > /dev/null 2>&1; ls $o | grep h4
  python3 - $o/h4_cuda_gpu_trace.csv <<'PY'
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))
ev = [(int(x["Start (ns)"]), int(x["Duration (ns)"]), x["Name"][:50]) for x in r]
ev.sort()
fw = [i for i, e in enumerate(ev) if "k_fwd_" in e[2]]
for a, b in zip(fw, fw[1:]):
    seg = ev[a:b]
    span = seg[-1][0] + seg[-1][1] - seg[0][0]
    busy = sum(d for _, d, _ in seg)
    gaps = sorted(((seg[k + 1][0] - (seg[k][0] + seg[k][1]), seg[k][2], seg[k + 1][2]) for k in range(len(seg) - 1)), reverse=True)[:4]
    print(f"  step: {len(seg)} GPU ops, span {span/1e3:.1f} us, busy {busy/1e3:.1f} us, largest gaps " + "; ".join(f"{g/1e3:.1f} us {x} -> {y}" for g, x, y in gaps))
PY
else
  echo "no nsys"
fi
echo "elapsed ${SECONDS}s"; pack
