#!/usr/bin/env bash
# Packs what the GPU machine needs to run a gpu-prep build into a small folder (the device tool
# carries at most 64 MiB): the library, Criterion's runtime (rt/), every test, bench and example
# executable, and run-tests.sh — no object files.
# A CUDA-built libtiga and the benches are mostly device code (about 100 MB), so the folder travels
# as gpu-carry/build-gpu-run.tar.xz (about 22 MB); a device script unpacks it first.
#   ../shared/tools/gpu-prep && bash tools/gpu_pack.sh [build-gpu] [build-gpu-run]
#   device run: carry ["gpu-carry"], command: tar xJf gpu-carry/build-gpu-run.tar.xz && build-gpu-run/run-tests.sh
#   (or bench/records/run_*.sh, which unpack it themselves)
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-build-gpu} dst=${2:-build-gpu-run}
rm -rf "$dst"
mkdir -p "$dst/tests" "$dst/bench" "$dst/examples"
cp -a "$src"/libtiga.so* "$dst/"
cp -a "$src/rt" "$dst/rt"
cp "$src/run-tests.sh" "$dst/"
for d in tests bench examples; do
  find "$src/$d" -maxdepth 1 -type f -executable ! -name '*.so*' ! -name '*.sh' -exec cp {} "$dst/$d/" \;
done
strip --strip-debug "$dst"/tests/* "$dst"/bench/* "$dst"/examples/* 2>/dev/null || true
mkdir -p gpu-carry
tar cf - "$dst" | xz -6 -T2 > gpu-carry/build-gpu-run.tar.xz
du -sh "$dst" gpu-carry/build-gpu-run.tar.xz | awk '{print "packed: " $2 " " $1}'
echo "(carry limit: 64 MiB with the working tree)"
