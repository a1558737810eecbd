"""Zero-copy on the host: values and gradients out through DLPack (NumPy, PyTorch CPU), arrays and
DLPack tensors in through tape.borrow; same pointers, same numbers, and the memory rules."""
import gc

import ml_dtypes
import numpy as np
import pytest

import tiga
from tiga import _dlpack

from conftest import have_torch


def data_ptr(producer):
    """The address a fresh export of producer points at."""
    cap = producer.__dlpack__()
    _, addr = _dlpack.read_capsule(cap)
    return addr


def test_value_and_gradient_out_to_numpy(tape, rng):
    w0 = rng.standard_normal((4, 3))
    w = tape.parameter(w0)
    x = tape.input(rng.standard_normal((5, 4)))
    tape.backward(tiga.sum(tiga.linear(x, w)))
    a, g = np.from_dlpack(w), np.from_dlpack(w.grad)
    assert w.__dlpack_device__() == (1, 0) and w.grad.__dlpack_device__() == (1, 0)
    assert a.ctypes.data == data_ptr(w) and g.ctypes.data == data_ptr(w.grad), "exports must not copy"
    np.testing.assert_array_equal(a, w0)
    np.testing.assert_array_equal(g, w.grad_numpy())
    w.write(np.full((4, 3), 2.0))  # a view: the parameter's writes show through
    np.testing.assert_array_equal(a, 2.0)
    assert _dlpack.read_capsule(w.grad.__dlpack__(dl_device=(1, 0)))[1] == g.ctypes.data
    with pytest.raises(BufferError, match="copy=True"):
        w.__dlpack__(copy=True)
    c = tape.input(np.zeros(3))
    with pytest.raises(tiga.TigaError, match="does not require grad"):
        np.from_dlpack(c.grad)


def test_exports_outlive_the_tape(rng):
    tape = tiga.Tape()
    h = tape.parameter(np.arange(6, dtype=np.float16).reshape(2, 3))
    bf = tape.parameter(np.arange(4).astype(ml_dtypes.bfloat16))
    a = np.from_dlpack(h)
    cap = bf.__dlpack__()  # never consumed: its destructor frees it
    del tape, h, bf
    gc.collect()
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
    del cap, a
    gc.collect()


def test_borrow_numpy_in_place(tape, rng):
    arr = rng.standard_normal((3, 4)).astype(np.float32)
    x = tape.borrow(arr, requires_grad=True)
    assert data_ptr(x) == arr.ctypes.data, "a borrowed array must be read in place"
    y = tiga.sum(tiga.mul(x, x))
    tape.backward(y)
    np.testing.assert_allclose(x.grad_numpy(), 2 * arr, rtol=1e-6)
    with pytest.raises(tiga.TigaError, match="borrowed"):
        x.write(arr)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    np.testing.assert_array_equal(tape.borrow(ro).numpy(), ro)
    with pytest.raises(ValueError, match="C-contiguous"):
        tape.borrow(np.zeros((4, 4))[:, ::2])
    tape.reset()
    assert not tape._borrowed


@pytest.mark.skipif(not have_torch(), reason="needs torch")
def test_torch_cpu_both_ways(tape, rng):
    import torch

    t = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    x = tape.borrow(t, requires_grad=True)
    assert data_ptr(x) == t.data_ptr()
    w = tape.parameter(rng.standard_normal((4, 2)))
    tape.backward(tiga.sum(tiga.linear(x, w)))
    g = torch.from_dlpack(x.grad)
    assert g.data_ptr() == data_ptr(x.grad)
    np.testing.assert_array_equal(g.numpy(), np.broadcast_to(w.numpy().sum(1), (3, 4)))
    wt = torch.from_dlpack(w)
    assert wt.data_ptr() == data_ptr(w) and wt.dtype == torch.float64
    b = tape.parameter(np.ones(3, ml_dtypes.bfloat16))
    assert torch.from_dlpack(b).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="dense row-major"):
        tape.borrow(torch.zeros(4, 4).t())
    i = tape.borrow(torch.tensor([1, 2], dtype=torch.int64))
    assert i.dtype == tiga.I64
