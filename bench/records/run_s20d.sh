#!/usr/bin/env bash
# Session 20, call 4: where the seed point-cloud step goes at the step's own clock (ncu
# --clock-control none, every kernel of steps 3-6 of a 6-step run at 400k, --recompute and kept
# products), for the next design of the hidden-64 kernels. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
P=$R/examples/train_pointcloud
for rc in "--recompute" ""; do
  f=$o/ncu_seed${rc:+_rc}.csv
  timeout 240 ncu --clock-control none --csv --metrics gpu__time_duration.sum $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 6 --heads 1 --quiet $rc > $f 2>&1; echo "ncu seed ${rc:-kept} rc=$?"
  python3 - $f <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
ks = [(r["Kernel Name"].split("(")[0].replace("void ", "")[:70], float(r["Metric Value"].replace(",", "")) / 1e3) for r in csv.DictReader(rows)]
st = [i for i, (n, _) in enumerate(ks) if "k_fwd_sl" in n]
# two layers a step: step s starts at the (2 s)-th forward slice launch; steps 3..5 (0-based 2..4)
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
done
