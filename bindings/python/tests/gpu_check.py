#!/usr/bin/env python3
"""Zero-copy on a GPU, self-checking, without pytest or pip (the H200 has neither network nor,
perhaps, pytest): a PyTorch CUDA tensor goes into a tape without a copy (same pointer), and the
gradient comes out through torch.from_dlpack without a copy (same pointer), with the same numbers
as tg_tape_read_grad and close to PyTorch's autograd.

    TIGA_LIB=build-gpu/libtiga.so PYTHONPATH=bindings/python python3 bindings/python/tests/gpu_check.py

Needs numpy and torch with CUDA; bf16 also ml_dtypes (skipped without). Prints one line per check
and "N passed, M failed"; exits 1 on any failure, 0 with everything skipped when no GPU is usable.
test_gpu.py runs the same checks under pytest."""
import sys

import numpy as np

import tiga  # PYTHONPATH=bindings/python (and TIGA_LIB) for a build tree, or the installed package
from tiga import _dlpack


def data_ptr(producer):
    _, addr = _dlpack.read_capsule(producer.__dlpack__())
    return addr


def check_tensor_in_gradient_out(torch, dtype_name):
    torch_dtype = getattr(torch, dtype_name)
    rt = tiga.Runtime(0)
    tape = tiga.Tape(rt)
    torch.manual_seed(0)
    xt = torch.randn(256, 64, device="cuda", dtype=torch_dtype)
    wt = torch.randn(64, 32, device="cuda", dtype=torch_dtype) * 0.1
    x = tape.borrow(xt, requires_grad=True)
    assert x.__dlpack_device__() == (2, 0), x.__dlpack_device__()
    assert data_ptr(x) == xt.data_ptr(), "the CUDA tensor was copied on the way in"
    w = tape.parameter(wt.float().cpu().numpy(), dtype=tiga.F32 if dtype_name == "float32" else tiga.BF16)
    loss = tiga.sum(tiga.cast(tiga.tanh(tiga.matmul(x, w)), tiga.F32))
    tape.backward(loss)
    assert "cuda" in tape.explain(), tape.explain()
    g = torch.from_dlpack(x.grad)
    assert g.device.type == "cuda" and g.dtype == torch_dtype, (g.device, g.dtype)
    assert g.data_ptr() == data_ptr(x.grad), "the gradient was copied on the way out"
    ref = np.asarray(x.grad_numpy(), np.float32)
    got = g.float().cpu().numpy()
    assert np.array_equal(got, ref), f"from_dlpack vs tg_tape_read_grad: max diff {np.abs(got - ref).max()}"
    xr = xt.detach().clone().float().requires_grad_(True)
    torch.tanh(xr @ wt.float()).sum().backward()
    tol = 1e-4 if dtype_name == "float32" else 5e-2
    err = (g.float() - xr.grad).abs().max().item()
    assert err <= tol * (1 + xr.grad.abs().max().item()), f"vs torch autograd: max abs error {err}"
    gw = torch.from_dlpack(w.grad)
    assert gw.device.type == "cuda" and tuple(gw.shape) == (64, 32)
    lt = torch.from_dlpack(loss)
    assert abs(lt.item() - loss.item()) == 0
    tape.reset()
    assert not tape._borrowed
    return f"{dtype_name}: x in at {xt.data_ptr():#x} (same), grad out at {g.data_ptr():#x} (same), " \
           f"max |grad - torch| = {err:.2e}"


def check_stream_and_errors(torch):
    rt = tiga.Runtime(0)
    assert rt.cuda_stream != 0
    tape = tiga.Tape(rt)
    try:
        tape.borrow(torch.zeros(8, 8, device="cuda").t())
        raise AssertionError("a transposed tensor was accepted")
    except ValueError as e:
        assert "dense row-major" in str(e)
    try:
        tiga.Tape().borrow(torch.zeros(4, device="cuda"))
        raise AssertionError("device memory accepted by a host runtime")
    except tiga.TigaError as e:
        assert "host-only" in str(e), str(e)
    return f"stream {rt.cuda_stream:#x}; refusals named"


def gpu_or_reason():
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return None, f"no torch ({e})"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA device"
    try:
        tiga.Runtime(0)
    except tiga.TigaError as e:
        return None, f"no tiga CUDA runtime ({e})"
    return torch, None


def main():
    torch, why = gpu_or_reason()
    if torch is None:
        print(f"SKIP: {why}")
        print("0 passed, 0 failed")
        return 0
    checks = [("f32 tensor in, gradient out", lambda: check_tensor_in_gradient_out(torch, "float32"))]
    try:
        import ml_dtypes  # noqa: F401

        checks.append(("bf16 tensor in, gradient out", lambda: check_tensor_in_gradient_out(torch, "bfloat16")))
    except ImportError:
        print("SKIP: bf16 (no ml_dtypes)")
    checks.append(("stream and errors", lambda: check_stream_and_errors(torch)))
    passed = failed = 0
    for name, fn in checks:
        try:
            print(f"ok:   {name}: {fn()}")
            passed += 1
        except Exception as e:  # noqa: BLE001
            print(f"FAIL: {name}: {type(e).__name__}: {e}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
