#!/usr/bin/env bash
# Session 12, call 6: after removing the tiled unfold (cuda_edge_unfold takes hid 16 only, the size
# the op folds; no change for the library's calls). test_edge_attention; memcheck on its CUDA
# tests; bench_edge_ops --check and the step at 100k / 400k. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-300}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && timeout $(tl 150) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/test_ea.log | head -30
(cd $R/tests && timeout $(tl 120) compute-sanitizer --tool memcheck --leak-check full --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter 'edge_attention_cuda/*' > $o/memcheck_ea.log 2>&1
  echo "memcheck test_edge_attention (CUDA tests) rc=$? $(grep -hE 'ERROR SUMMARY' $o/memcheck_ea.log | tail -1) $(grep -h Synthesis $o/memcheck_ea.log | tail -1)")
D=/tmp/s12f; mkdir -p $D
timeout $(tl 90) python3 bench/edge_attention_torch.py --sizes 2k,100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager) rc=$?"
B=$R/bench/bench_edge_ops
timeout $(tl 30) $B --check $D > $o/ea_check.log 2>&1; echo "bench_edge_ops --check rc=$? $(tail -1 $o/ea_check.log)"
for s in 100k 400k; do
  timeout $(tl 40) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
done
echo "elapsed ${SECONDS}s"; pack
