#!/usr/bin/env bash
# Session 20, call 1: experiments for the hidden-16 H 4 step at 400k (the lane kernels' large-graph
# rule, switches in that build only): TIGA_EA_PF=1 / 2 (the next edge's rows prefetched into L1 /
# L2 in the three lane kernels), TIGA_EA_FWDMB=3 (the forward at three blocks a SM: 80 registers,
# no spill), TIGA_EA_PK=1 (the destination pass writes a 128-byte record [b1 + V | dout | (lse, D)]
# per row that the source pass gathers instead of three rows). test_edge_attention plainly and with
# the switches (its variant 7 forces the rule); bench_edge_ops 400k --only 2 for each setting, two
# rounds; the host phases of a step (--split 1); ncu per launch for two settings and the warp
# stall reasons of the lane kernels. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
D=/tmp/s20a; mkdir -p $D
(timeout 150 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?") &
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 > $o/ea_plain.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/ea_plain.log | tail -1)")
(cd $R/tests && TIGA_EA_PK=1 TIGA_EA_PF=1 TIGA_EA_FWDMB=3 timeout 150 ./test_edge_attention --jobs 4 > $o/ea_x1.log 2>&1; echo "test_edge_attention PK PF=1 FWDMB=3 rc=$? $(grep -h Synthesis $o/ea_x1.log | tail -1)")
(cd $R/tests && TIGA_EA_PK=1 TIGA_EA_PF=2 timeout 150 ./test_edge_attention --jobs 4 --filter 'edge_attention_cuda/fused_and*' > $o/ea_x2.log 2>&1; echo "test_edge_attention PK PF=2 rc=$? $(grep -h Synthesis $o/ea_x2.log | tail -1)")
wait
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
G4=$D/radius_400k.bin
for rnd in 1 2; do
  for v in "X=0" "TIGA_EA_PF=1" "TIGA_EA_PF=2" "TIGA_EA_FWDMB=3" "TIGA_EA_PK=1" "TIGA_EA_PK=1 TIGA_EA_FWDMB=3" "TIGA_EA_PK=1 TIGA_EA_FWDMB=3 TIGA_EA_PF=1" "TIGA_EA_PK=1 TIGA_EA_FWDMB=3 TIGA_EA_PF=2"; do
    f=$o/ops_$(echo $v | tr ' =' '__')_$rnd.log
    env $v timeout 60 $B --graph $G4 --providers fused --only 2 > $f 2>&1
    echo "400k H 4 [$v] r$rnd: $(grep -v '^{' $f | grep fused | awk '{print $(NF-1), $NF}')"
  done
  echo "elapsed ${SECONDS}s"; pack
done
for k in 2 0; do for g in 400k 100k; do
  f=$o/split_${k}_$g.log
  timeout 60 $B --graph $D/radius_$g.bin --providers fused --only $k --split 1 --reps 40 > $f 2>&1
  echo "$g --only $k: $(grep -v '^{' $f | grep fused | awk '{print $(NF-1), $NF}') | $(grep split $f)"
done; done
echo "elapsed ${SECONDS}s"; pack
for v in "X=0" "TIGA_EA_PK=1 TIGA_EA_FWDMB=3 TIGA_EA_PF=1"; do
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
echo "elapsed ${SECONDS}s"; pack
timeout 150 ncu --clock-control none --section WarpStateStats --section Occupancy --section LaunchStats -k regex:'k_(fwd|dst|src)_ln' -s 3 -c 3 $B --graph $G4 --providers fused --only 2 --reps 1 --warmup 1 > $o/ncu_stall.txt 2>&1; echo "ncu stall rc=$?"
grep -E "k_(fwd|dst|src)_ln|Stall|Warp Cycles|Issued|Achieved Occ|Registers" $o/ncu_stall.txt | head -60
echo "elapsed ${SECONDS}s"; pack
