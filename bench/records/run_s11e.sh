#!/usr/bin/env bash
# Session 11, call 9 (the submission's build): the slice kernels (f32 hidden 64: 8 lanes an edge,
# cuda/edge_attention_sl.cu), the locality schedule in the lane, slice and warp-per-row kernels
# (taken at >= 16 MiB of gathered rows; TIGA_EA_ORDER=0 / 1 forces it off / on) and the
# restructured lane walk. The GPU suite; memcheck and racecheck on test_edge_attention's CUDA tests;
# then beside PyTorch in this call: edge_attention_torch.py (eager, torch.compile) on 2k (check
# fixtures), 100k and 400k; bench_edge_ops on its dumps (every config; every config with
# TIGA_EA_ORDER=0; hid 64 with TIGA_EA_SLICE=0) and --check against PyTorch (by rule, schedule
# forced, slices off). Deadlines; logs in $OUT/logs.tgz. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-580}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
mkdir -p $o/suite
find $R/tests -maxdepth 1 -type f -executable -name 'test_*' | sort | xargs -P 6 -I{} bash -c 't={}; n=$(basename $t); (cd $(dirname $t) && timeout 170 $t --jobs 2 > '$o'/suite/$n.log 2>&1); echo "$n rc=$? $(grep -h Synthesis '$o'/suite/$n.log | tail -1)"' > $o/suite_summary.txt
echo "suite: $(grep -c ' rc=0 ' $o/suite_summary.txt) passed, $(grep -vc ' rc=0 ' $o/suite_summary.txt) failed"; grep -v ' rc=0 ' $o/suite_summary.txt
grep -E "test_(edge_attention|linear|gat) " $o/suite_summary.txt
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/suite/*.log | head -40
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout $(tl 120) compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/${tool}_ea.log 2>&1
  echo "$tool test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_ea.log | tail -1) $(grep -h Synthesis $o/${tool}_ea.log | tail -1)"
done
)
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s11e; mkdir -p $D
timeout $(tl 240) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch rc=$?"; grep -E "^\||^graph|FAIL" $o/ea_torch.log | grep -v "^| 2k"
B=$R/bench/bench_edge_ops
for s in 100k 400k; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
  TIGA_EA_ORDER=0 timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_${s}_noorder.log 2>&1; echo "bench_edge_ops $s TIGA_EA_ORDER=0 rc=$?"; grep -v '^{' $o/ea_ops_${s}_noorder.log | grep fused
  for k in 1 3; do
    TIGA_EA_SLICE=0 timeout $(tl 30) $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ea_ops_${s}_noslice_$k.log 2>&1; echo "  TIGA_EA_SLICE=0 rc=$? $(grep -v '^{' $o/ea_ops_${s}_noslice_$k.log | grep fused)"
  done
done
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
TIGA_EA_ORDER=1 timeout $(tl 30) $B --check $D > $o/ea_check_order.log 2>&1; echo "bench_edge_ops --check (schedule forced) rc=$? $(tail -1 $o/ea_check_order.log)"
TIGA_EA_SLICE=0 timeout $(tl 30) $B --check $D > $o/ea_check_noslice.log 2>&1; echo "bench_edge_ops --check (slices off) rc=$? $(tail -1 $o/ea_check_noslice.log)"
echo "elapsed ${SECONDS}s"; pack
