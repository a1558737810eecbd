#!/usr/bin/env bash
# Session 16, call 2: where the point-cloud step goes at 400k (ncu, caches kept: per-kernel times
# summed by name over the run's 4 steps — 3 timed + the peak model's one — and divided by 4), the
# wide model at H 1 and the seed model at H 1; the wall step of each beside it. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
P=$R/examples/train_pointcloud
for m in wide seed; do
  timeout 60 $P --model $m --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads 1 --quiet > $o/pc_$m.log 2>&1
  echo "$m H 1 rc=$? $(grep -h 'training step' $o/pc_$m.log)"
  timeout 200 ncu --csv --cache-control none --metrics gpu__time_duration.sum $P --model $m --device cuda --n 400000 --degree 17 --attention fused --steps 3 --heads 1 --quiet > $o/ncu_$m.csv 2> $o/ncu_$m.err
  echo "ncu $m rc=$?"
  python3 - $o/ncu_$m.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(float); c = collections.Counter()
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); u = r[iu]
    v = v / 1000 if u in ("nsecond", "ns") else v * 1000 if u in ("msecond", "ms") else v
    name = r[ik] if r[ik].startswith("(") or r[ik].startswith("<") else r[ik].split("(")[0]
    name = name.replace("void ", "")[:60]
    t[name] += v; c[name] += 1
tot = sum(t.values())
print(f"  all kernels: {tot / 4:.1f} us a step (sum / 4), {sum(c.values())} launches")
for n, v in sorted(t.items(), key=lambda x: -x[1])[:40]:
    print(f"  {n:60s} {v / 4:8.1f} us/step  (x{c[n]}, {v / c[n]:.1f} us each)")
PY
  echo "elapsed ${SECONDS}s"; pack
done
