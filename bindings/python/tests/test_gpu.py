"""On a GPU (the H200): a PyTorch CUDA tensor goes in without a copy (same pointer), and the
gradient comes out through torch.from_dlpack without a copy (same pointer), with the same numbers
as tg_tape_read_grad and PyTorch's autograd. Skips without torch + CUDA or a CUDA build of tiga."""
import numpy as np
import pytest

import tiga
from tiga import _dlpack

from conftest import cuda_runtime_or_skip

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)


def data_ptr(producer):
    _, addr = _dlpack.read_capsule(producer.__dlpack__())
    return addr


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_tensor_in_gradient_out(dtype):
    rt = cuda_runtime_or_skip()
    tape = tiga.Tape(rt)
    torch.manual_seed(0)
    xt = torch.randn(256, 64, device="cuda", dtype=dtype)
    wt = torch.randn(64, 32, device="cuda", dtype=dtype) * 0.1
    x = tape.borrow(xt, requires_grad=True)
    assert x.__dlpack_device__() == (2, 0)
    assert data_ptr(x) == xt.data_ptr(), "the CUDA tensor must be used in place"
    w = tape.parameter(wt.float().cpu().numpy(), dtype=tiga.F32 if dtype == torch.float32 else tiga.BF16)
    loss = tiga.sum(tiga.cast(tiga.tanh(tiga.matmul(x, w)), tiga.F32))
    tape.backward(loss)
    assert "cuda" in tape.explain()
    g = torch.from_dlpack(x.grad)
    assert g.device.type == "cuda" and g.dtype == dtype
    assert g.data_ptr() == data_ptr(x.grad), "the gradient must come out without a copy"
    ref = x.grad_numpy()
    np.testing.assert_array_equal(g.float().cpu().numpy(), np.asarray(ref, np.float32))
    xr = xt.detach().clone().float().requires_grad_(True)
    torch.tanh(xr @ wt.float()).sum().backward()
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    torch.testing.assert_close(g.float(), xr.grad, rtol=tol, atol=tol)
    gw = torch.from_dlpack(w.grad)
    assert gw.device.type == "cuda" and gw.shape == (64, 32)
    tape.reset()  # drops the borrowed tensor's capsule
    assert not tape._borrowed


def test_cuda_stream_and_errors():
    rt = cuda_runtime_or_skip()
    assert rt.cuda_stream != 0
    tape = tiga.Tape(rt)
    with pytest.raises(ValueError, match="dense row-major"):
        tape.borrow(torch.zeros(8, 8, device="cuda").t())
    host_rt_tape = tiga.Tape()
    with pytest.raises(tiga.TigaError, match="host-only"):
        host_rt_tape.borrow(torch.zeros(4, device="cuda"))
