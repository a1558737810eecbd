#!/usr/bin/env bash
# Links a tiny C program against an installed libtiga four ways — CMake find_package with
# tiga::tiga (shared) and tiga::tiga_static, pkg-config shared and pkg-config --static — runs each
# and checks its output. Host-only by default; TIGA_CUDA=ON builds the CUDA provider (the H200
# run): the static consumers then prove that libstdc++ and the CUDA libraries come with the
# exported target and with pkg-config's Libs.private, and the shared ones that the library runs.
#   bash tools/test_consumers.sh                 # host-only build
#   TIGA_CUDA=ON bash tools/test_consumers.sh    # CUDA build (a GPU, if present, is used too)
# TIGA_CONSUMER_PREBUILT=DIR installs from an already configured and built folder (gpu-prep's
# build-gpu) instead of configuring a new one; TIGA_CONSUMER_KEEP=DIR copies the install prefix and
# the four consumers there, so a GPU machine can run them (bench/records/run_s5e.sh).
# Prints "N passed, M failed"; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cuda=${TIGA_CUDA:-OFF}
build=${TIGA_CONSUMER_BUILD:-build-consumers-$(echo "$cuda" | tr '[:upper:]' '[:lower:]')}
jobs=${JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

for tool in cmake cc; do
  command -v $tool >/dev/null || { echo "FAIL: $tool not found (apt-get install cmake build-essential)"; exit 1; }
done

echo "== build and install libtiga (TIGA_CUDA=$cuda) into a temporary prefix"
if [ -n "${TIGA_CONSUMER_PREBUILT:-}" ]; then
  build=$TIGA_CONSUMER_PREBUILT
  echo "installing from the prebuilt folder $build"
else
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTIGA_CUDA="$cuda" -DTIGA_BUILD_TESTS=OFF \
  -DTIGA_BUILD_EXAMPLES=OFF -DTIGA_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
grep -E "^-- tiga" "$work/configure.log" || true
fi
cmake --build "$build" -j"$jobs" --target tiga tiga_static >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
cmake --install "$build" --prefix "$prefix" >/dev/null

mkdir -p "$work/app"
cat >"$work/app/main.c" <<'C'
/* y = sum(relu(x) * w): dy/dw = relu(x). Also tries a CUDA runtime (reported, not required). */
#include <stdio.h>
#include <string.h>

#include "tiga.h"
#include "tiga_dlpack.h"

int main(void) {
  if (tg_api_version() != TIGA_API_VERSION) {
    printf("FAIL: library API %d, header %d\n", tg_api_version(), TIGA_API_VERSION);
    return 1;
  }
  tg_runtime *rt;
  tg_tape *t;
  if (tg_runtime_create_host(&rt) || tg_tape_create(rt, &t)) return printf("FAIL: %s\n", tg_last_error()), 1;
  int64_t shape[1] = {4};
  double xs[4] = {-1, 2, -3, 4}, ws[4] = {0.5, 0.5, 0.5, 0.5}, g[4];
  tg_id x, w;
  tg_tape_input(t, TG_F64, 1, shape, xs, sizeof xs, 0, &x);
  tg_tape_parameter(t, TG_F64, 1, shape, ws, sizeof ws, 0, &w);
  tg_id y = tg_sum(t, tg_mul(t, tg_relu(t, x), w));
  struct DLManagedTensor *mt = NULL;
  if (tg_tape_status(t) || tg_tape_backward(t, y) || tg_tape_read_grad(t, w, g, sizeof g) ||
      tg_tape_export_dlpack(t, w, TG_EXPORT_GRAD, &mt))
    return printf("FAIL: %s\n", tg_tape_error(t)), 1;
  int ok = g[0] == 0 && g[1] == 2 && g[2] == 0 && g[3] == 4 && ((double *)mt->dl_tensor.data)[3] == 4;
  mt->deleter(mt);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  tg_runtime *dev = NULL;
  tg_status s = tg_runtime_create_cuda(0, &dev);
  printf("%s %s; cuda runtime: %s\n", ok ? "ok" : "FAIL: wrong gradient", tg_version_string(),
         s == TG_OK ? "yes" : tg_status_string(s));
  tg_runtime_destroy(dev);
  return ok ? 0 : 1;
}
C
cat >"$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(tiga_consumer LANGUAGES C)
find_package(tiga 0.2 REQUIRED)
add_executable(app_shared main.c)
target_link_libraries(app_shared PRIVATE tiga::tiga)
add_executable(app_static main.c)
target_link_libraries(app_static PRIVATE tiga::tiga_static)
CM

pass=0 fail=0
check() { # name binary [static]
  local name=$1 bin=$2 out
  if ! out=$("$bin" 2>&1) || [[ "$out" != ok* ]]; then
    echo "FAIL: $name: $out"
    fail=$((fail + 1))
    return
  fi
  if [ "${3:-}" = static ] && command -v ldd >/dev/null && ldd "$bin" | grep -q libtiga; then
    echo "FAIL: $name links libtiga dynamically: $(ldd "$bin" | grep libtiga)"
    fail=$((fail + 1))
    return
  fi
  echo "ok:   $name: $out"
  pass=$((pass + 1))
}

echo "== CMake consumers (find_package)"
if cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_BUILD_RPATH="$prefix/lib" >"$work/app.log" 2>&1 &&
  cmake --build "$work/app/build" >>"$work/app.log" 2>&1; then
  check "find_package tiga::tiga" "$work/app/build/app_shared"
  check "find_package tiga::tiga_static" "$work/app/build/app_static" static
else
  tail -n 30 "$work/app.log"
  echo "FAIL: the CMake consumer does not build"
  fail=$((fail + 2))
fi

echo "== pkg-config consumers"
if ! command -v pkg-config >/dev/null; then
  echo "SKIP: pkg-config not found (apt-get install pkg-config): 2 consumers not built"
  echo "$pass passed, $fail failed, 2 skipped"
  [ $fail -eq 0 ]
  exit
fi
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib64/pkgconfig:$prefix/share/pkgconfig"
libdir=$(pkg-config --variable=libdir tiga)
if cc -std=c11 "$work/app/main.c" -o "$work/app/pc_shared" $(pkg-config --cflags --libs tiga) \
  -Wl,-rpath,"$libdir" 2>"$work/pc1.log"; then
  check "pkg-config tiga" "$work/app/pc_shared"
else
  cat "$work/pc1.log"
  echo "FAIL: pkg-config shared link: cc main.c \$(pkg-config --cflags --libs tiga)"
  fail=$((fail + 1))
fi
# --static: the archive by name, then Libs.private (what a C program needs besides libtiga.a)
static_libs=$(pkg-config --static --libs tiga | sed -e 's/\(^\| \)-ltiga\( \|$\)/\1-l:libtiga.a\2/')
if cc -std=c11 "$work/app/main.c" -o "$work/app/pc_static" $(pkg-config --cflags tiga) $static_libs \
  -Wl,-rpath,"$libdir" 2>"$work/pc2.log"; then
  check "pkg-config --static tiga" "$work/app/pc_static" static
else
  cat "$work/pc2.log"
  echo "FAIL: pkg-config static link: cc main.c $static_libs"
  fail=$((fail + 1))
fi
if [ -n "${TIGA_CONSUMER_KEEP:-}" ]; then
  rm -rf "$TIGA_CONSUMER_KEEP" && mkdir -p "$TIGA_CONSUMER_KEEP"
  cp -a "$prefix" "$TIGA_CONSUMER_KEEP/prefix"
  for b in app/build/app_shared app/build/app_static app/pc_shared app/pc_static; do
    [ -f "$work/$b" ] && cp "$work/$b" "$TIGA_CONSUMER_KEEP/"
  done
  echo "kept the prefix and the consumers in $TIGA_CONSUMER_KEEP"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
