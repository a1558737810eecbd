#!/usr/bin/env bash
# Session 14, call 4: renumbered rows with their sources ascending (ops/relation_form.c); steps at
# 400k as built (by rule: renumbered), and on the graph renumbered before the call (Morton,
# bench/graph_relabel.py) by rule, with the op's renumbering off, and with it and the schedule off;
# ncu's per-kernel times of the hid-16 H 1 and H 4 steps at 400k by rule (3 steps, caches flushed).
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 120 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -40
D=/tmp/s14d; mkdir -p $D
timeout 100 python3 bench/graph_torch.py --only graph --sizes 400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
timeout 60 python3 bench/graph_relabel.py $D/radius_400k.bin $D/radius_400k_morton.bin --order morton
B=$R/bench/bench_edge_ops
run() { # file env...
  local f=$1; shift
  for k in 0 2; do
    env "$@" timeout 60 $B --graph $D/$f.bin --providers fused --only $k > $o/ops.log 2>&1
    echo "$f [$*] rc=$? $(grep -v '^{' $o/ops.log | grep fused)"
  done
}
for rnd in 1 2; do
  run radius_400k X=1
  run radius_400k_morton X=1
  run radius_400k_morton TIGA_EA_RENUM=0
  run radius_400k_morton TIGA_EA_RENUM=0 TIGA_EA_ORDER=0
done
echo "elapsed ${SECONDS}s"
for k in 0 2; do
  timeout 120 ncu --csv --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 1 > $o/ncu_$k.csv 2> $o/ncu_$k.err
  echo "ncu only $k rc=$?"
  python3 - $o/ncu_$k.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(float); c = collections.Counter()
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); v = v / 1000 if r[iu] == "nsecond" else v
    name = r[ik].split("(")[0].split("<")[0].replace("void ", "")[:40]
    t[name] += v; c[name] += 1
tot = sum(t.values())
for n, v in sorted(t.items(), key=lambda x: -x[1])[:16]:
    print(f"  {n:42s} {v/3:9.1f} us/step  (x{c[n]})")
print(f"  total {tot/3:.1f} us/step (3 steps)")
PY
done
echo "elapsed ${SECONDS}s"
