#!/usr/bin/env bash
# Session 19, call 1: an experiment behind TIGA_EA_XPROD=1 (that build only): with
# recompute_products at hidden 64 and x_src / x_dst both [N, 8] (the seed point-cloud model), the
# slice kernels make U[j] = x[j] w1_src and V[i] = x[i] w1_dst per edge / row from registers
# instead of gathering 256-byte U / V rows. test_edge_attention plainly and with the switch (its
# two-layer recompute test then compares the switch against kept products); the GPU suite on the
# head; ncu per launch (time, throughputs, occupancy) of the slice kernels in the seed model at 400k
# both ways; the seed model's steps both ways. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 > $o/ea_plain.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/ea_plain.log | tail -1)")
(cd $R/tests && TIGA_EA_XPROD=1 timeout 150 ./test_edge_attention --jobs 4 --verbose > $o/ea_xp.log 2>&1; echo "test_edge_attention XPROD rc=$? $(grep -h Synthesis $o/ea_xp.log | tail -1)"; grep -h "step peak" $o/ea_xp.log | head -2)
echo "elapsed ${SECONDS}s"; pack
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 8 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 150 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) not"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_relation|test_edge_attention" $o/suite_summary.txt
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for rnd in 1 2; do for e in TIGA_EA_XPROD=0 TIGA_EA_XPROD=1; do
  f=$o/pc_seed_${e#*=}_r$rnd.log
  env $e timeout 60 $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads 1 --recompute > $f 2>&1
  echo "seed H 1 rc $e rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//') | $(grep -h '^loss:' $f | cut -c1-70)"
done; done
echo "elapsed ${SECONDS}s"; pack
M=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
for x in 0 1; do
  TIGA_EA_XPROD=$x timeout 150 ncu --csv --metrics $M -k regex:'k_(fwd|dst|src)_sl' -s 6 -c 12 $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 4 --heads 1 --recompute --quiet > $o/ncu_$x.csv 2>&1; echo "ncu XPROD=$x rc=$?"
  python3 - $o/ncu_$x.csv <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
d = collections.defaultdict(list)
for r in csv.DictReader(rows):
    d[(r["Kernel Name"].split("(")[0][:40], r["Metric Name"])].append(float(r["Metric Value"].replace(",", "")))
ks = sorted({k for k, _ in d})
for k in ks:
    ms = {m: sorted(v)[len(v)//2] for (kk, m), v in d.items() if kk == k}
    n = len(d[(k, "gpu__time_duration.sum")])
    print(f"  {k}: n {n} " + " ".join(f"{m.split('__')[1].split('.')[0][:14]}={v:.1f}" for m, v in sorted(ms.items())))
PY
done
echo "elapsed ${SECONDS}s"; pack
