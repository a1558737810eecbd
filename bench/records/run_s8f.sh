#!/usr/bin/env bash
# Session 8, call 6 (the last ~4 minutes of device time): where tg_edge_attention's API step goes at
# 100k, hid 16, H 1 (fused), for issue 14's next step: the step's wall time; every kernel of a few
# steps with its duration (ncu, one metric); the packed kernels' (k_fwd_pk, k_dst_pk, k_src_pk)
# occupancy, throughput and stall reasons. Same library as run_s8a.sh; bench_edge_ops rebuilt with
# --only. Output in $OUT (ncu text, CSV).
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
D=/tmp/s8f; mkdir -p $D
timeout 60 python3 bench/graph_torch.py --only graph --sizes 100k --save-graph $D > $OUT/graph.log 2>&1; echo "graph rc=$? $(grep '^graph' $OUT/graph.log)"
B="$R/bench/bench_edge_ops --graph $D/radius_100k.bin --providers fused --only 0"
timeout 30 $B --reps 20 --warmup 5 | grep -v '^{'
echo "elapsed ${SECONDS}s"
timeout 60 ncu --metrics gpu__time_duration.sum --csv $B --reps 3 --warmup 1 > $OUT/ncu_step.csv 2> $OUT/ncu_step.err; echo "ncu step rc=$?"
python3 - $OUT/ncu_step.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); v = v / 1e3 if r[ui] == "nsecond" else v if r[ui] == "usecond" else v * 1e3
    k = r[ki].split("(")[0][:70]; tot[k] += v; cnt[k] += 1
steps = max(cnt.values()) if cnt else 1
print(f"kernels over the profiled run ({len(rows) - 1} launches): total us, launches")
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:24]:
    print(f"  {v:9.1f} us  {cnt[k]:4d}x  {k}")
PY
echo "elapsed ${SECONDS}s"
timeout 70 ncu -k regex:'k_(fwd|dst|src)_pk' --launch-count 3 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats $B --reps 1 --warmup 0 > $OUT/ncu_pk.txt 2>&1; echo "ncu pk rc=$?"
grep -E "k_(fwd|dst|src)_pk|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Block Limit|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps|stall|Stall" $OUT/ncu_pk.txt | cut -c1-170 | head -90
echo "elapsed ${SECONDS}s"
timeout 40 ncu -k regex:'k_(fwd|dst|src)_pk' --launch-count 3 --metrics regex:'smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' $B --reps 1 --warmup 0 > $OUT/ncu_stall.txt 2>&1; echo "ncu stall rc=$?"
grep -E "k_(fwd|dst|src)_pk|stalled" $OUT/ncu_stall.txt | awk '/_pk/ {print; next} {if ($NF+0 >= 0.3) print}' | cut -c1-150 | head -60
echo "elapsed ${SECONDS}s"
