#!/usr/bin/env bash
# tiga's test command (README): installs what is missing, builds the library (with the CUDA
# provider when nvcc is present), runs every Criterion suite through ctest, then rebuilds
# host-only with AddressSanitizer + UBSan and runs the suites again, failing on any sanitizer
# report (leaks included). CUDA tests skip with their reason on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v cc >/dev/null || missing+=(build-essential)
command -v pkg-config >/dev/null || missing+=(pkg-config)
pkg-config --exists criterion 2>/dev/null || missing+=(libcriterion-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
jobs=$(nproc)

echo "== build (build/)"
# The benchmarks compile the CUDA kernel files a second time into standalone harnesses; they are
# built for the GPU machine by ../shared/tools/gpu-prep, so the test build skips them by default
# (TIGA_BUILD_BENCH=ON builds them too). Every library .cu file is still compiled here.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIGA_CUDA="${TIGA_CUDA:-AUTO}" \
  -DTIGA_BUILD_BENCH="${TIGA_BUILD_BENCH:-OFF}" ${TIGA_CMAKE_ARGS:-} | grep -E "^-- tiga" || true
cmake --build build -j"$jobs"

echo "== tests (build/)"
set +e
ctest --test-dir build -V --timeout 1200 > build/ctest.log 2>&1
rc=$?
set -e
grep -E "^\s*[0-9]+/[0-9]+ Test|tests passed|tests failed" build/ctest.log || true
if [ $rc -ne 0 ]; then
  grep -E "\[FAIL\]|Assertion Failed|\[----\]" build/ctest.log | head -n 80 || true
  echo "test run failed (full log: build/ctest.log)"
  exit $rc
fi
skips=$(grep -oE "\[SKIP\] .*" build/ctest.log | sort -u || true)
if [ -n "$skips" ]; then
  echo "== skipped (with reason):"
  echo "$skips" | sed -E 's/^/   /' | cut -c1-220
fi

echo "== sanitizers (build-asan/, host-only, ASan + UBSan)"
cmake -S . -B build-asan -DTIGA_CUDA=OFF -DTIGA_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug \
  -DTIGA_BUILD_EXAMPLES=OFF -DTIGA_BUILD_BENCH=OFF | grep -E "^-- tiga" || true
cmake --build build-asan -j"$jobs"
set +e
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan -V --timeout 2400 > build-asan/ctest.log 2>&1
rc=$?
set -e
grep -E "tests passed|tests failed" build-asan/ctest.log || true
if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" build-asan/ctest.log; then
  grep -E -A12 "ERROR: (Address|Leak)Sanitizer|runtime error:" build-asan/ctest.log | head -n 80
  echo "sanitizer reports found (full log: build-asan/ctest.log)"
  exit 1
fi
if [ $rc -ne 0 ]; then
  grep -E "\[FAIL\]|Assertion Failed" build-asan/ctest.log | head -n 60 || true
  echo "sanitizer test run failed (full log: build-asan/ctest.log)"
  exit $rc
fi
echo "== python package (tools/test_python.sh)"
bash tools/test_python.sh
echo "== consumers: find_package and pkg-config, shared and static (tools/test_consumers.sh)"
bash tools/test_consumers.sh
echo "== all tests passed (regular and sanitizer builds, python package, consumers)"
