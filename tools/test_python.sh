#!/usr/bin/env bash
# The Python package's test: builds libtiga and installs the package from this checkout with pip
# (scikit-build-core + CMake) into a virtual environment, then runs its pytest suite
# (bindings/python/tests). Works on a fresh Debian with python3 and pip (installs python3-venv,
# cmake and a compiler with apt-get when missing); needs no network but PyPI.
#   TIGA_CUDA=ON bash tools/test_python.sh      # build the CUDA provider too (GPU tests run on a GPU)
#   TIGA_PY_VENV=DIR                            # the venv (default build-py/venv, reused)
# The venv sees the system's site-packages (a torch installed there enables the DLPack tests that
# need it); numpy, ml_dtypes, pytest and safetensors are installed into it when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v cc >/dev/null || missing+=(build-essential)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
if command -v python3 >/dev/null && ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

venv=${TIGA_PY_VENV:-build-py/venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "== venv ($venv)"
  python3 -m venv --system-site-packages "$venv"
fi
py="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
echo "== pip install ./bindings/python (TIGA_CUDA=${TIGA_CUDA:-OFF})"
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$py" -m pip install -q ./bindings/python
echo "   built and installed in $(($(date +%s) - start)) s"
"$py" -c "import pytest, safetensors" >/dev/null 2>&1 || "$py" -m pip install -q "pytest>=7" "safetensors>=0.4"

echo "== pytest bindings/python/tests"
# Run from outside the checkout so that `import tiga` is the installed package, not the source tree.
export TIGA_BUILD_DIR=${TIGA_BUILD_DIR:-$PWD/build}
cd bindings/python/tests
unset TIGA_LIB
"../../../$venv/bin/python" -m pytest -q -p no:cacheprovider . "$@"
