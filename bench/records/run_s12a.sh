#!/usr/bin/env bash
# Session 12, call 1: the step's memory (reshapes of leaves are views, tg_tape_backward_with reads
# the seed in place, the values' gradient goes into the reshaped leaf's, dU over U in the lane and
# slice kernels, 512 KiB small-block chunks). The GPU suite; memcheck on the CUDA tests of
# test_edge_attention, test_tape and test_shape, racecheck on the new edge-attention test; eager
# PyTorch dumps (2k fixtures, 100k, 400k); bench_edge_ops --check (by rule, slices off, lanes off)
# and every config at 100k / 400k (times and peaks; also with TIGA_EA_SLICE=0 / TIGA_EA_LANES=0,
# where dU gets its own buffer). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 170 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_(edge_attention|tape|shape|linear|gat) " $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -40
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
for t in "test_edge_attention edge_attention_cuda/*" "test_tape tape_cuda/*" "test_shape shape_cuda/*"; do
  set -- $t
  timeout $(tl 130) compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./$1 --jobs 1 --filter "$2" > $o/memcheck_$1.log 2>&1
  echo "memcheck $1 ($2) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_$1.log | tail -1) $(grep -h Synthesis $o/memcheck_$1.log | tail -1)"
done
timeout $(tl 60) compute-sanitizer --tool racecheck --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/values_view*' > $o/racecheck_view.log 2>&1
echo "racecheck values_view_and_dU_over_U rc=$? $(grep -hE 'RACECHECK SUMMARY' $o/racecheck_view.log | tail -1) $(grep -h Synthesis $o/racecheck_view.log | tail -1)"
)
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s12a; mkdir -p $D
timeout $(tl 120) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager) rc=$?"; grep -E "^\|" $o/ea_torch.log | grep -v "^| 2k"
B=$R/bench/bench_edge_ops
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
TIGA_EA_SLICE=0 timeout $(tl 30) $B --check $D > $o/ea_check_noslice.log 2>&1; echo "bench_edge_ops --check (slices off) rc=$? $(tail -1 $o/ea_check_noslice.log)"
TIGA_EA_LANES=0 timeout $(tl 30) $B --check $D > $o/ea_check_nolanes.log 2>&1; echo "bench_edge_ops --check (lanes off) rc=$? $(tail -1 $o/ea_check_nolanes.log)"
for s in 100k 400k; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
done
for k in 0 2; do
  TIGA_EA_LANES=0 timeout $(tl 30) $B --graph $D/radius_100k.bin --providers fused --only $k > $o/ea_ops_100k_nolanes_$k.log 2>&1; echo "  100k TIGA_EA_LANES=0 rc=$? $(grep -v '^{' $o/ea_ops_100k_nolanes_$k.log | grep fused)"
done
for k in 1 3; do
  TIGA_EA_SLICE=0 timeout $(tl 30) $B --graph $D/radius_100k.bin --providers fused --only $k > $o/ea_ops_100k_noslice_$k.log 2>&1; echo "  100k TIGA_EA_SLICE=0 rc=$? $(grep -v '^{' $o/ea_ops_100k_noslice_$k.log | grep fused)"
done
echo "elapsed ${SECONDS}s"; pack
