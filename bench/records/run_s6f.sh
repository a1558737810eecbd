#!/usr/bin/env bash
# Session 6, call 6: the whole GPU suite on the final build (after the edge-attention backward
# rework and the opt-in check stream), and racecheck on the graph tests (the sliced walkers use
# warp shuffles and shared memory). Output in $OUT.
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz && export LD_LIBRARY_PATH=$PWD/build-gpu-run/rt:$PWD/build-gpu-run && timeout 150 build-gpu-run/run-tests.sh > $OUT/tests.log 2>&1; echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|\[FAIL\]" $OUT/tests.log | head; cd build-gpu-run/tests && timeout 90 compute-sanitizer --tool racecheck --error-exitcode 99 ./test_graph --jobs 1 > $OUT/rc_graph.log 2>&1; echo "racecheck test_graph rc=$? $(grep -h 'RACECHECK SUMMARY' $OUT/rc_graph.log | tail -1) $(grep -h Synthesis $OUT/rc_graph.log | tail -1)"
