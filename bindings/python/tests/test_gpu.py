"""On a GPU (the H200): gpu_check.py's checks under pytest. Skips without torch + CUDA or a CUDA
build of tiga."""
import pytest

import gpu_check

torch, why = gpu_check.gpu_or_reason()
if torch is None:
    pytest.skip(why, allow_module_level=True)


def test_f32_tensor_in_gradient_out():
    gpu_check.check_tensor_in_gradient_out(torch, "float32")


def test_bf16_tensor_in_gradient_out():
    pytest.importorskip("ml_dtypes")
    gpu_check.check_tensor_in_gradient_out(torch, "bfloat16")


def test_stream_and_errors():
    gpu_check.check_stream_and_errors(torch)
