#!/usr/bin/env bash
# Where a training step's GPU time goes: Nsight Compute over a few steps of train_charlm (after
# warm-up), summed per kernel name. For the next round of step-time work (BENCHMARKS.md: the gap
# to PyTorch is in the memory-bound kernels around the GEMMs).
#   run: bash bench/profile_train.sh [extra train_charlm flags]     carry: ["build-gpu"]
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/build-gpu/rt:$PWD/build-gpu:${LD_LIBRARY_PATH:-}"
o=${OUT:-out/profile}
mkdir -p "$o"
# Every kernel of a 3-step run is profiled (one metric: a single replay pass each); the final
# evaluation (eval-iters 1, forward only) adds a little on top of the 3 training steps.
ncu --clock-control none --metrics gpu__time_duration.sum \
  --csv --log-file "$o/ncu.csv" build-gpu/examples/train_charlm --device cuda --dtype bf16 --attention fused \
  --steps 3 --eval-interval 1000 --eval-iters 1 --log-interval 10 --sample-chars 0 --out "$o/tr" "$@" >"$o/train.log" 2>&1
python3 - "$o/ncu.csv" <<'PY'
import csv, collections, sys
tot = collections.Counter(); cnt = collections.Counter()
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no kernels in the ncu log")
hdr = rows[0]; k = hdr.index("Kernel Name"); v = hdr.index("Metric Value")
for r in rows[1:]:
    try:
        t = float(r[v].replace(",", ""))
    except ValueError:
        continue
    name = r[k].split("(")[0][:70]
    tot[name] += t; cnt[name] += 1
all_ns = sum(tot.values())
print(f"{len(rows)-1} kernels, {all_ns/1e6:.2f} ms of GPU time (3 steps)")
for name, t in tot.most_common(40):
    print(f"{t/1e6:8.3f} ms {100*t/all_ns:5.1f}%  x{cnt[name]:<5d} {name}")
PY
