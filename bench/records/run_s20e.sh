#!/usr/bin/env bash
# Session 20, call 5: other register caps for the slice kernels at H 1, FQ 1 (the seed point-cloud
# model, whose step is 82 % slice kernels: run_s20d.sh), switches of that build only:
# TIGA_EA_SLD=4 (destination pass at four blocks of 128 a SM: 128 registers, 140 B spilled; as
# built two, 161 registers = three resident), TIGA_EA_SLS=5 (source pass five: 8 B spilled; as built
# three, 116 registers = four resident), TIGA_EA_SLF=6 (forward six: no spill; as built five).
# test_edge_attention plainly and with all three; the seed model at 400k (--recompute and kept)
# per setting, two rounds; ncu per launch of the slice kernels for the best. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 > $o/ea_plain.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/ea_plain.log | tail -1)") &
(cd $R/tests && TIGA_EA_SLD=4 TIGA_EA_SLS=5 TIGA_EA_SLF=6 timeout 150 ./test_edge_attention --jobs 4 > $o/ea_x.log 2>&1; echo "test_edge_attention SLD SLS SLF rc=$? $(grep -h Synthesis $o/ea_x.log | tail -1)")
wait
echo "elapsed ${SECONDS}s"; pack
P=$R/examples/train_pointcloud
for rnd in 1 2; do
  for v in "X=0" "TIGA_EA_SLD=4" "TIGA_EA_SLS=5" "TIGA_EA_SLF=6" "TIGA_EA_SLD=4 TIGA_EA_SLS=5 TIGA_EA_SLF=6" "TIGA_EA_SLS=5 TIGA_EA_SLF=6"; do
    for rc in "--recompute" ""; do
      f=$o/pc_$(echo $v | tr ' =' '__')${rc:+_rc}_$rnd.log
      env $v timeout 60 $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads 1 --quiet $rc > $f 2>&1
      echo "seed ${rc:-kept} [$v] r$rnd rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//') | $(grep -h '^loss' $f | cut -c1-60)"
    done
  done
  echo "elapsed ${SECONDS}s"; pack
done
for v in "X=0" "TIGA_EA_SLD=4 TIGA_EA_SLS=5 TIGA_EA_SLF=6"; do
  f=$o/ncu_$(echo $v | tr ' =' '__').csv
  env $v timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum -k regex:'k_(fwd|dst|src)_sl' $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 4 --heads 1 --quiet --recompute > $f 2>&1; echo "ncu [$v] rc=$?"
  python3 - $f <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
d = collections.defaultdict(list)
for r in csv.DictReader(rows):
    d[r["Kernel Name"].split("(")[0].replace("void ", "")[:40]].append(float(r["Metric Value"].replace(",", "")) / 1e3)
for k, v in d.items():
    v = sorted(v); print(f"  {k}: n {len(v)} median {v[len(v)//2]:.1f} us")
PY
done
echo "elapsed ${SECONDS}s"; pack
