"""Shared fixtures. The suite runs against the installed package (tools/test_python.sh) or, with
TIGA_LIB=build/libtiga.so and PYTHONPATH=bindings/python, against a build tree."""
import os
import shutil

import numpy as np
import pytest

import tiga

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture
def tape():
    return tiga.Tape()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def have_torch():
    try:
        import torch  # noqa: F401

        return True
    except Exception:
        return False


def cuda_runtime_or_skip():
    """A tiga CUDA runtime, or skips: needs a CUDA build of libtiga and a GPU."""
    try:
        return tiga.Runtime(0)
    except tiga.TigaError as e:
        pytest.skip(f"no tiga CUDA runtime: {e}")


def c_compiler():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
