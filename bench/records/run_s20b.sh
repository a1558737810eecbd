#!/usr/bin/env bash
# Session 20, call 2: the lane kernels' edge loops trimmed (e^x by ex2.approx.ftz without __expf's
# subnormal fix-up; LeakyReLU's derivative as a multiplier mk in {1, slope}: rs += dz mk, z = x mk —
# ptxas / SASS per edge: dst<4, 2> 404 -> 382 instructions, fwd<4, 2> 258 -> 222, dst<1, 8> 222 ->
# 204, fwd<1, 8> 134 -> 122), and two switches of that build for the (H 4, F 2) large-graph rule:
# TIGA_EA_DSTFR=1 (the destination pass with its weights held in registers: 365 instructions, 255
# registers) and TIGA_EA_SRC1=1 (the source pass at one block a SM with its weights in registers:
# 373 instructions, 202 registers, no spill; as built 449 with 124 B spilled at two blocks).
# test_edge_attention plainly and under both switches; bench_edge_ops 400k H 4 each setting, two
# rounds; 400k H 1 and 100k; ncu per launch. Baseline (the same bench, the untrimmed kernels):
# run_s20a.sh, 1.037 / 1.038 ms at 400k H 4. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
D=/tmp/s20b; mkdir -p $D
(timeout 150 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?") &
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 > $o/ea_plain.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/ea_plain.log | tail -1)")
(cd $R/tests && TIGA_EA_DSTFR=1 TIGA_EA_SRC1=1 timeout 150 ./test_edge_attention --jobs 4 --filter 'edge_attention_cuda/fused_and*' > $o/ea_x.log 2>&1; echo "test_edge_attention DSTFR SRC1 rc=$? $(grep -h Synthesis $o/ea_x.log | tail -1)")
wait
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
G4=$D/radius_400k.bin
for rnd in 1 2; do
  for v in "X=0" "TIGA_EA_DSTFR=1" "TIGA_EA_SRC1=1" "TIGA_EA_DSTFR=1 TIGA_EA_SRC1=1"; do
    f=$o/ops_$(echo $v | tr ' =' '__')_$rnd.log
    env $v timeout 60 $B --graph $G4 --providers fused --only 2 > $f 2>&1
    echo "400k H 4 [$v] r$rnd: $(grep -v '^{' $f | grep fused | awk '{print $(NF-1), $NF}')"
  done
  for k in 0; do f=$o/ops400_${k}_$rnd.log; timeout 60 $B --graph $G4 --providers fused --only $k > $f 2>&1; echo "400k --only $k r$rnd: $(grep -v '^{' $f | grep fused | awk '{print $(NF-1), $NF}')"; done
  for k in 0 2; do f=$o/ops100_${k}_$rnd.log; timeout 60 $B --graph $D/radius_100k.bin --providers fused --only $k > $f 2>&1; echo "100k --only $k r$rnd: $(grep -v '^{' $f | grep fused | awk '{print $(NF-1), $NF}')"; done
  echo "elapsed ${SECONDS}s"; pack
done
for v in "X=0" "TIGA_EA_DSTFR=1 TIGA_EA_SRC1=1"; do
  f=$o/ncu_$(echo $v | tr ' =' '__').csv
  env $v timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B --graph $G4 --providers fused --only 2 --reps 2 --warmup 1 > $f 2>&1; echo "ncu [$v] rc=$?"
  python3 - $f <<'PY'
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
ks = [(r["Kernel Name"].split("(")[0].replace("void ", "")[:60], float(r["Metric Value"].replace(",", "")) / 1e3) for r in csv.DictReader(rows)]
st = [i for i, (n, _) in enumerate(ks) if "k_fwd_" in n]
for a, b in zip(st, st[1:]):
    print(f"  span: {b - a} launches, {sum(t for _, t in ks[a:b]):.1f} us")
for n, t in ks[st[-2]:st[-1]]:
    print(f"    {t:8.1f} us  {n}")
PY
done
f=$o/ncu_h1.csv
timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum $B --graph $G4 --providers fused --only 0 --reps 2 --warmup 1 > $f 2>&1; echo "ncu H 1 rc=$?"
python3 - $f <<'PY'
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
ks = [(r["Kernel Name"].split("(")[0].replace("void ", "")[:60], float(r["Metric Value"].replace(",", "")) / 1e3) for r in csv.DictReader(rows)]
st = [i for i, (n, _) in enumerate(ks) if "k_fwd_" in n]
for n, t in ks[st[-2]:st[-1]]:
    print(f"    {t:8.1f} us  {n}")
PY
echo "elapsed ${SECONDS}s"; pack
