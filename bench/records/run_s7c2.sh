#!/usr/bin/env bash
# Session 7, call 3b (run as one command line right after run_s7c.sh, same carry gpu-carry-ea): the
# warp-per-row edge-attention kernels, whose shared pieces the packed rework changed (16-byte aligned
# weight rows), through the float64 check at both chunk sizes and under memcheck and racecheck.
tar xJf gpu-carry-ea/ea.tar.xz; B=$PWD/build-gpu-run/bench/bench_edge_attention; o=$OUT
for r in 0 16; do (TIGA_EA_KERNEL=old TIGA_EA_ROWS=$r timeout 60 $B --check > $o/old$r.log 2>&1; echo "old rows=$r --check rc=$? $(grep -c FAIL $o/old$r.log) FAIL; $(tail -1 $o/old$r.log)") & done; wait
for t in racecheck memcheck; do (TIGA_EA_KERNEL=old timeout 170 compute-sanitizer --tool $t --error-exitcode 99 $B --check > $o/old_$t.log 2>&1; echo "old $t rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/old_$t.log | tail -1); $(grep -v '^=' $o/old_$t.log | tail -1)") & done; wait; rm -f $o/bench_edge_attention.log
