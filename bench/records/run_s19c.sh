#!/usr/bin/env bash
# Session 19, call 3: compute-sanitizer over what session 18's record (docs/sanitizers.md) left:
# initcheck over the whole GPU suite (without backtraces: --show-backtrace no --print-limit 8, as
# session 8), and the six (tool, binary) jobs that did not finish in run_s18e.sh — racecheck
# test_linear:tall_skinny_products, memcheck test_linear, racecheck test_edge_attention, memcheck and
# racecheck test_comm, racecheck test_shape — each split into one job per Criterion test case. One
# pool of 15 jobs (bench/records/sanitize_suite.sh with a job list), TIGA_TEST_UNDER_SANITIZER=1.
# The build run_s19b.sh ran the suite on. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" TIGA_TEST_UNDER_SANITIZER=1
export INIT_ARGS="--show-backtrace no --print-limit 8"
o=$OUT/logs; mkdir -p $o/san
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
compute-sanitizer --version | tail -1
END=${END_S:-560}
cases() { # tool binary [suite/test filter regex]
  (cd "$R/tests" && "./$2" --list 2>/dev/null) |
    awk -v t="$1" -v b="$2" '/^[^ ].*: [0-9]+ test/{s=$1; sub(":","",s)} /^(├|└)/{print t, b, s "/" $NF}' | grep -E "${3:-.}"
}
bins=$(find "$R/tests" -maxdepth 1 -type f -executable -name 'test_*' -printf '%f\n' | sort)
J=$o/san/jobs.in
{
  cases racecheck test_linear 'tall_skinny_products$'
  cases racecheck test_edge_attention
  cases memcheck test_linear
  for b in test_linear test_mha test_edge_attention test_charlm_f16 test_attention test_graph; do echo "initcheck $b"; done
  cases initcheck test_nonfinite
  cases memcheck test_comm; cases racecheck test_comm; cases racecheck test_shape
  for b in $bins; do case " test_linear test_mha test_edge_attention test_charlm_f16 test_attention test_graph test_nonfinite " in
    *" $b "*) ;; *) echo "initcheck $b" ;; esac; done
} | awk '!seen[$0]++' > $J
echo "jobs: $(wc -l < $J)"
JOBS=$J timeout $((END - SECONDS)) bash bench/records/sanitize_suite.sh $R $o/san 15 500 "" > $o/san.log 2>&1
echo "sanitize_suite rc=$? after ${SECONDS}s: $(wc -l < $o/san/jobs.txt) jobs listed, $(wc -l < $o/san/summary.txt) finished"
echo "== finished with rc != 0 or errors in the summary:"
grep -vE ' rc=0 ' $o/san/summary.txt | cut -c1-220
grep -E ' rc=0 ' $o/san/summary.txt | grep -E 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|Failing: [1-9]|Crashing: [1-9]' | cut -c1-220
echo "== not finished:"
while read -r tool b f; do
  grep -q "^$tool $b${f:+:$f} rc=" $o/san/summary.txt || echo "$tool $b${f:+:$f}"
done < $o/san/jobs.txt
echo "== clean (rc 0, 0 errors / hazards): $(grep -E ' rc=0 ' $o/san/summary.txt | grep -vcE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]')"
echo "== per tool: $(for t in memcheck racecheck initcheck; do echo -n "$t $(grep -c "^$t " $o/san/summary.txt) finished ($(grep "^$t " $o/san/summary.txt | grep -c 'no CUDA call') without the tool); "; done)"
echo "== initcheck reports by binary (kernel names of the first reports):"
for log in $o/san/initcheck_*.log; do
  n=$(grep -m1 -E 'ERROR SUMMARY' $log)
  case "$n" in *"ERROR SUMMARY: 0 "*|"") continue ;; esac
  echo "$(basename $log .log): $n"
  grep -E '^=========     (at|by) |Uninitialized' $log | sed 's/0x[0-9a-f]*//g' | sort | uniq -c | sort -rn | head -4
done 2>/dev/null | head -60
cp $o/san/summary.txt $o/summary.txt 2>/dev/null; pack
