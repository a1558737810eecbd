#!/usr/bin/env bash
# NOT RUN in session 21: no device machine could be had for it (see run_s21a.sh). It needs the
# build of bench/records/s21b_products_switches.patch applied on 2a9e12f (the three switches below).
# Session 21, call 2: the hidden-64 products kernels (run_s21a.sh's ncu on the H100: k_products<64>
# 105 us a launch, k_products_bwd<64> 235, against ~61 / ~65 us of HBM traffic). Two switches of
# this build: TIGA_EA_PQGS=0 turns off the forward's grid stride (at most 2048 blocks, each loading
# the weights once for many nodes, instead of a block per 16 nodes), TIGA_EA_PQPF=1 turns on the
# backward's next-node loads in flight (155 registers, three blocks a SM, against 128 and four).
# test_edge_attention under each; memcheck / racecheck on its CUDA tests with PF; the seed model at
# 400k kept and --recompute under the four settings, two rounds; ncu of the --recompute step with
# both; PyTorch's seed model in the same call; the GPU suite at the end. A third: TIGA_EA_SLCAP=1 runs the slice kernels at
# H 1, FQ 1 without geometry with one more block a SM in the backward passes (destination 6, 80
# registers and 28 B spilled; source 7, 72 registers) than as built (5 / 6 by registers).
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for sw in "TIGA_EA_PQGS=1 TIGA_EA_PQPF=0 TIGA_EA_SLCAP=0" "TIGA_EA_PQGS=0 TIGA_EA_PQPF=1 TIGA_EA_SLCAP=1"; do
  (cd $R/tests && env $sw timeout 150 ./test_edge_attention --jobs 8 > $o/ea_${sw// /_}.log 2>&1; echo "test_edge_attention $sw rc=$? $(grep -h Synthesis $o/ea_${sw// /_}.log | tail -1)")
done
for tool in memcheck racecheck; do
  x=(); [ $tool = memcheck ] && x=(--leak-check full)
  (cd $R/tests && TIGA_EA_PQPF=1 TIGA_EA_SLCAP=1 timeout 300 compute-sanitizer --tool $tool "${x[@]}" --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention CUDA tests (PF, SLCAP) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)") &
done
wait
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for rnd in 1 2; do for sw in "0 0 0" "1 0 0" "1 1 0" "1 1 1"; do for rc in "--recompute" ""; do
  set -- $sw; gs=$1 pf=$2 cap=$3
  f=$o/pc_seed${rc:+_rc}_gs${gs}_pf${pf}_cap${cap}_$rnd.log
  TIGA_EA_PQGS=$gs TIGA_EA_PQPF=$pf TIGA_EA_SLCAP=$cap timeout 60 $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads 1 --quiet $rc > $f 2>&1
  echo "seed ${rc:-kept} gs=$gs pf=$pf cap=$cap r$rnd rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//') | $(grep -h '^loss' $f | cut -c1-50)"
done; done; done
echo "elapsed ${SECONDS}s"; pack
f=$o/ncu_seed_rc.csv
TIGA_EA_PQPF=1 TIGA_EA_SLCAP=1 timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 6 --heads 1 --quiet --recompute > $f 2>&1; echo "ncu seed --recompute (gs 1, pf 1, cap 1) rc=$?"
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
for n, t in sorted(tot.items(), key=lambda x: -x[1])[:8]:
    print(f"    {t:8.1f} us  {n}")
PY
echo "elapsed ${SECONDS}s"; pack
timeout 200 python3 bench/pointcloud_torch.py --model seed --sizes 400k --heads 1 > $o/pc_torch_seed_h1.log 2>&1; echo "pointcloud_torch seed H 1 rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_seed_h1.log
echo "elapsed ${SECONDS}s"; pack
# the GPU suite on this build (default switches)
build-gpu-run/run-tests.sh > $o/suite.log 2>&1; echo "GPU suite rc=$? $(tail -1 $o/suite.log)"; grep FAILED $o/suite.log
echo "elapsed ${SECONDS}s"; pack
