#!/usr/bin/env bash
# Session 7, call 3: after the packed edge-attention kernels (a warp per chunk of 16 segments, the
# score phase on 32 edges across segment boundaries): the float64 check and kernel timings, old
# (warp per row, TIGA_EA_KERNEL=old) beside new, and the edge-attention tests, with nothing else on
# the GPU; then, all at once: compute-sanitizer (memcheck, racecheck, initcheck) on the edge-
# attention, tg_dot_last, GAT and tg_comm tests, initcheck --check-bulk-copy on the bf16 binaries
# call 1 flagged, test_nonfinite per test, racecheck per test of the binaries call 1 could not
# finish; and the GAT on Cora beside PyG for accuracy (step times are run_s7b.sh's). Every job ends
# before the call's deadline; the summary lines are printed as they come. Logs under $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o/san
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-360}
left() { echo $((END - 25 - SECONDS)); }
tl() { local l=$(left); [ $l -gt $1 ] && l=$1; [ $l -lt 3 ] && l=1; echo $l; }
# 1. edge attention: the float64 check with the rows per chunk the check graphs take and with the
# 16-row chunks the 100k / 400k graphs take, and the tests, side by side; then the timings alone
(timeout $(tl 75) $R/bench/bench_edge_attention --check > $o/ea_check.log 2>&1; echo "bench_edge_attention --check rc=$? $(grep -c FAIL $o/ea_check.log) FAIL lines; $(tail -1 $o/ea_check.log)") &
(TIGA_EA_ROWS=16 timeout $(tl 75) $R/bench/bench_edge_attention --check > $o/ea_check16.log 2>&1; echo "TIGA_EA_ROWS=16 bench_edge_attention --check rc=$? $(grep -c FAIL $o/ea_check16.log) FAIL lines; $(tail -1 $o/ea_check16.log)") &
(cd $R/tests && timeout $(tl 60) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log)") &
wait
grep -h FAIL $o/ea_check.log $o/ea_check16.log | head -6
echo "elapsed ${SECONDS}s"
timeout $(tl 95) $R/bench/bench_edge_attention --bench --compare --only f32 > $o/ea_bench.log 2>&1; echo "bench_edge_attention --bench --compare --only f32 rc=$?"; tail -22 $o/ea_bench.log
echo "elapsed ${SECONDS}s"
# 2. everything else at once, each job bounded by the deadline
job() { # name command...
  local n=$1; shift; local s=$SECONDS t=$(( DEADLINE - $(date +%s) )); [ $t -lt 3 ] && { echo "$n skipped (time)"; return; }
  timeout $t "$@" > $o/san/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc $((SECONDS - s))s $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Synthesis|Unknown|unrecognized' $o/san/$n.log | tr '\n' ' ' | cut -c1-170)$([ $rc -eq 124 ] && echo ' TIMEOUT')"
}
DEADLINE=$(( $(date +%s) + END - 25 - SECONDS ))
export -f job; export o END R DEADLINE
cs() { echo "compute-sanitizer --tool $1 $([ $1 = memcheck ] && echo --leak-check full) $([ $1 = initcheck ] && echo --check-bulk-copy yes) --error-exitcode 99"; }
{
  for tool in racecheck memcheck initcheck; do echo "${tool}_test_edge_attention cd $R/tests && $(cs $tool) ./test_edge_attention --jobs 1"; done
  for t in test_dot test_comm test_gat; do for tool in memcheck racecheck initcheck; do echo "${tool}_$t cd $R/tests && $(cs $tool) ./$t --jobs 1"; done; done
  echo "gat_fused cd $PWD && $R/examples/train_gat --device cuda --attention fused --seeds 10 --data examples/data/cora --out $o/gat --log-interval 5000"
  echo "gat_torch cd $PWD && python3 bench/gat_torch.py --seeds 10 --device cuda"
  for t in test_linear test_mha test_charlm_f16; do echo "initcheck_bulk_$t cd $R/tests && $(cs initcheck) ./$t --jobs 1"; done
  for tool in memcheck initcheck racecheck; do
    (cd $R/tests && ./test_nonfinite --list 2>/dev/null) | awk -v tool=$tool -v c="$(cs $tool)" -v r=$R '/^[^ ].*: [0-9]+ test/{s=$1; sub(":","",s)} /^(├|└)/{n=$NF; printf "%s_nonfinite_%s_%s cd %s/tests && %s ./test_nonfinite --filter %s/%s --jobs 1\n", tool, s, n, r, c, s, n}'
  done
  (cd $R/tests && ./test_attention --list 2>/dev/null) | awk -v c="$(cs racecheck)" -v r=$R '/^[^ ].*: [0-9]+ test/{s=$1; sub(":","",s)} /^(├|└)/{n=$NF; printf "racecheck_attention_%s_%s cd %s/tests && %s ./test_attention --filter %s/%s --jobs 1\n", s, n, r, c, s, n}'
  (cd $R/tests && ./test_charlm_f16 --list 2>/dev/null) | awk -v c="$(cs racecheck)" -v r=$R '/^[^ ].*: [0-9]+ test/{s=$1; sub(":","",s)} /^(├|└)/{n=$NF; printf "racecheck_charlm_f16_%s_%s cd %s/tests && %s ./test_charlm_f16 --filter %s/%s --jobs 1\n", s, n, r, c, s, n}'
} > $o/jobs.txt
echo "jobs: $(wc -l < $o/jobs.txt)"
while read -r name rest; do printf '%s\0%s\0' "$name" "$rest"; done < $o/jobs.txt | xargs -0 -n 2 -P 14 bash -c 'job "$0" bash -c "$1"' | tee $o/jobs_summary.txt
grep -h "mean\|acc_mean" $o/san/gat_fused.log $o/san/gat_torch.log | tail -4
echo "jobs done: $(grep -c ' rc=0 ' $o/jobs_summary.txt) clean of $(wc -l < $o/jobs_summary.txt)"
echo "elapsed ${SECONDS}s"
rm -rf $o/gat
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
