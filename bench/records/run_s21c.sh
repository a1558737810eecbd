#!/usr/bin/env bash
# NOT RUN in session 21: no device machine could be had for it; left for a session with an H200.
# Session 21, call 3: the submitted build (the library of 2a9e12f, with the test refactor after it: the hidden-64 self-attention
# products, the slice kernels without geometry) on the H200 if one is lent: test_edge_attention,
# the seed point-cloud model at 400k kept and --recompute (two rounds) and unfolded
# (TIGA_EA_OWN=0, one round), PyTorch's seed model in the same call. (run_s21a.sh measured the same
# code on an H100 and ran the sanitizers and the GPU suite there; the device time left was ~500 s.)
# Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 8 > $o/ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/ea.log | tail -1)")
P=$R/examples/train_pointcloud
for run in "1 1" "1 0" "2 1" "2 0"; do for rc in "--recompute" ""; do set -- $run
  [ $1 = 2 ] && [ $2 = 0 ] && continue
  f=$o/pc_seed${rc:+_rc}_own$2_$1.log
  TIGA_EA_OWN=$2 timeout 60 $P --model seed --device cuda --n 400000 --degree 17 --attention fused --steps 30 --heads 1 --quiet $rc > $f 2>&1
  echo "seed ${rc:-kept} own=$2 r$1 rc=$? $(grep -h 'training step' $f | sed 's/(forward.*synchronised); //; s/ (a fresh.*//') | $(grep -h '^loss' $f | cut -c1-50)"
done; done
echo "elapsed ${SECONDS}s"; pack
timeout 200 python3 bench/pointcloud_torch.py --model seed --sizes 400k --heads 1 > $o/pc_torch_seed_h1.log 2>&1; echo "pointcloud_torch seed H 1 rc=$?"; grep -E "^\||compiled|FAIL" $o/pc_torch_seed_h1.log
echo "elapsed ${SECONDS}s"; pack
