#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ with clang under AddressSanitizer + UBSan (the
# host-only library compiled into them, with fuzzer coverage) and runs each for a while on a copy of
# its checked-in corpus (tests/fuzz/corpus/<name>/; the checkpoint fuzzer also gets fresh
# checkpoints from gen_checkpoint_seeds). Any crash, sanitizer report, leak or trap fails the run and
# leaves the input in build-fuzz/crash-<name>-*: once the bug is fixed, copy it into the corpus
# (it then also runs in the ordinary test suite as a fuzz_replay_<name> test).
#
#   tools/fuzz.sh                   every harness, TIGA_FUZZ_SECONDS each (default 60)
#   tools/fuzz.sh relation tape     some of them (checkpoint, relation, tape)
#   TIGA_FUZZ_SECONDS=600 tools/fuzz.sh tape
#   tools/fuzz.sh --replay          only replay the corpora (seconds, no fuzzing)
# CI: about 60 s per harness plus a build of ~1 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${TIGA_FUZZ_SECONDS:-60}
replay=0
targets=()
for a in "$@"; do
  case "$a" in
  --replay) replay=1 ;;
  checkpoint | relation | tape) targets+=("$a") ;;
  *)
    echo "usage: tools/fuzz.sh [--replay] [checkpoint|relation|tape ...]" >&2
    exit 2
    ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(checkpoint relation tape)

# clang with libFuzzer's runtime (Debian: the libclang-rt-N-dev package of clang N)
CC=${TIGA_FUZZ_CC:-clang}
probe() { echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' |
  "$CC" -fsanitize=fuzzer,address,undefined -x c - -o /tmp/tiga_fuzz_probe.$$ >/dev/null 2>&1; }
if ! command -v "$CC" >/dev/null || ! probe; then
  echo "== installing clang and libFuzzer"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null
  ver=$("$CC" --version | sed -nE 's/.*clang version ([0-9]+).*/\1/p' | head -n1)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "libclang-rt-${ver}-dev" >/dev/null 2>&1 || true
  probe || {
    echo "tools/fuzz.sh: $CC cannot link -fsanitize=fuzzer (install libclang-rt-<version>-dev)" >&2
    exit 1
  }
fi
rm -f /tmp/tiga_fuzz_probe.$$

out=build-fuzz
mkdir -p "$out/obj"
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cflags="-std=c11 -O1 -g -Iinclude -I. -Wall -Wextra -Werror $san"

echo "== build ($out/, $CC, ASan + UBSan + libFuzzer coverage)"
srcs=$(ls tape/*.c ops/*.c train/*.c host/*.c)
# one object per source, rebuilt when the source is newer (no header tracking: --clean rebuilds)
printf '%s\n' $srcs | xargs -P "$(nproc)" -I{} sh -c '
  o='"$out"'/obj/$(echo {} | tr / _).o
  if [ ! -f "$o" ] || [ {} -nt "$o" ] || [ -n "$(find include tape/internal.h tape/alloc.h -newer "$o" 2>/dev/null | head -n1)" ]; then
    '"$CC"' '"$cflags"' -fsanitize=fuzzer-no-link -c {} -o "$o" || exit 255
  fi'
rm -f "$out/libtiga_fuzz.a"
ar rcs "$out/libtiga_fuzz.a" "$out"/obj/*.o
for t in "${targets[@]}"; do
  if [ $replay = 1 ]; then
    "$CC" $cflags tests/fuzz/fuzz_$t.c tests/fuzz/replay_main.c "$out/libtiga_fuzz.a" -lm -o "$out/replay_$t"
  else
    "$CC" $cflags -fsanitize=fuzzer tests/fuzz/fuzz_$t.c "$out/libtiga_fuzz.a" -lm -o "$out/fuzz_$t"
  fi
done
"$CC" $cflags tests/fuzz/gen_checkpoint_seeds.c "$out/libtiga_fuzz.a" -lm -o "$out/gen_checkpoint_seeds"

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
rc=0
for t in "${targets[@]}"; do
  seeds=tests/fuzz/corpus/$t
  work=$out/corpus/$t
  mkdir -p "$work" "$seeds"
  [ "$t" = checkpoint ] && "$out/gen_checkpoint_seeds" "$work"
  if [ $replay = 1 ]; then
    echo "== replay $t"
    "$out/replay_$t" "$seeds" || rc=1
    continue
  fi
  echo "== fuzz $t (${secs} s; corpus $work + $seeds)"
  set +e
  "$out/fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$out/crash-$t-" "$work" "$seeds" >"$out/fuzz_$t.log" 2>&1
  r=$?
  set -e
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+.*DONE" "$out/fuzz_$t.log" | tr '\n' ' ' || true
  echo
  if [ $r -ne 0 ]; then
    grep -E -A30 "ERROR: |runtime error:|deadly signal|==ERROR" "$out/fuzz_$t.log" | head -n 60 || tail -n 40 "$out/fuzz_$t.log"
    echo "fuzz_$t FAILED (log: $out/fuzz_$t.log; input: $(ls -t "$out"/crash-$t-* 2>/dev/null | head -n1))"
    rc=1
  fi
done
[ $rc = 0 ] && echo "== fuzzing passed (${targets[*]})"
exit $rc
