#!/usr/bin/env bash
# Session 9, call 6: why the geometry fold was slower than its upper bound (run_s9e.sh: 0.923 vs
# 0.874 ms at 100k hid 16): per-kernel device time of one API step with the fold on and off (ncu,
# one metric), after k_unfold_w went from 132 x 256 threads to 512 x 512 (unrolled row loop);
# bench_edge_ops fold on / off at 100k and 400k; test_edge_attention's CUDA tests. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
D=/tmp/s9f; mkdir -p $D
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
(cd $R/tests && timeout 100 ./test_edge_attention --jobs 4 --filter 'edge_attention_cuda/*' > $o/test_ea.log 2>&1; echo "test_edge_attention CUDA rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
for c in 0 1; do
  for f in 1 0; do
    TIGA_EA_FOLD=$f timeout 60 ncu --metrics gpu__time_duration.sum --csv $R/bench/bench_edge_ops --graph $D/radius_100k.bin --providers fused --only $c --reps 2 --warmup 0 > $o/ncu_${c}_$f.csv 2> $o/ncu_${c}_$f.err
    echo "== config $c fold=$f (ncu rc=$?): us per step by kernel"
    python3 - $o/ncu_${c}_$f.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); u = r[ui]
    v = v / 1e3 if u in ("nsecond", "ns") else v if u in ("usecond", "us") else v * 1e3
    k = r[ki].split("(")[0][:60]; tot[k] += v; cnt[k] += 1
steps = max([c for k, c in cnt.items() if "k_fwd" in k] or [1])
tot = {k: v / steps for k, v in tot.items()}
print(f"  steps {steps}")
print(f"  total {sum(tot.values()):8.1f} us")
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:14]:
    print(f"  {v:8.1f}  {k}")
PY
  done
done
echo "elapsed ${SECONDS}s"
for s in 100k 400k; do
  for f in 1 0; do
    TIGA_EA_FOLD=$f timeout 40 $R/bench/bench_edge_ops --graph $D/radius_$s.bin --providers fused > $o/ea_${s}_$f.log 2>&1; echo "bench_edge_ops $s fold=$f rc=$?"; grep -v '^{' $o/ea_${s}_$f.log | grep fused
  done
done
echo "elapsed ${SECONDS}s"
