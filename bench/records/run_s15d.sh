#!/usr/bin/env bash
# Session 15, call 4: the products kernels' scattered accesses cut further — k_products_bwd adds the
# gradients by reductions (red.global.add, no old values fetched), k_products loads a node's
# elements by its quad and passes them by shuffles, k_rows_permute by float4. test_edge_attention
# (stop on failure); --check; bench_edge_ops 100k / 400k every config, two runs; ncu per-kernel
# times at 400k hid 16 (caches kept); memcheck on its CUDA tests; the GPU suite. Trimmed to the
# device time left (no racecheck: the shared-memory use is run_s15c.sh's, which racecheck passed;
# no PyTorch: run_s15c.sh's figures, the call before, same graphs). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
END=${END_S:-260}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 60 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1); rc=$?
echo "test_edge_attention rc=$rc $(grep -h Synthesis $o/test_ea.log | tail -1)"
if [ $rc -ne 0 ]; then grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -40; pack; exit 1; fi
D=/tmp/s15d; mkdir -p $D
timeout 60 python3 bench/edge_attention_torch.py --sizes 2k --no-compile --dump $D > $o/fx.log 2>&1
timeout 90 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1
B=$R/bench/bench_edge_ops
timeout 30 $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
for rnd in 1 2; do for s in 100k 400k; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_${s}_$rnd.log 2>&1; echo "bench_edge_ops $s round $rnd rc=$?"; grep -v '^{' $o/ea_ops_${s}_$rnd.log | grep fused
done; done
echo "elapsed ${SECONDS}s"; pack
timeout $(tl 60) ncu --csv --cache-control none --metrics gpu__time_duration.sum $B --graph $D/radius_400k.bin --providers fused --only 0 --reps 2 --warmup 1 > $o/ncu_0.csv 2> $o/ncu_0.err
echo "ncu (warm) only 0 rc=$?"
python3 - $o/ncu_0.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(float); c = collections.Counter()
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); u = r[iu]
    v = v / 1000 if u in ("nsecond", "ns") else v * 1000 if u in ("msecond", "ms") else v
    name = r[ik] if r[ik].startswith("(") or r[ik].startswith("<") else r[ik].split("(")[0]
    t[name.replace("void ", "")[:50]] += v; c[name.replace("void ", "")[:50]] += 1
for n, v in sorted(t.items(), key=lambda x: -x[1])[:10]:
    print(f"  {n:50s} {v / c[n]:8.1f} us/launch (x{c[n]})")
PY
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests && timeout $(tl 90) compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
echo "memcheck (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
L=$(tl 45)
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout '$L' $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite (limit ${L}s a test): $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
echo "elapsed ${SECONDS}s"; pack
