"""tiga: a reverse-mode autodiff tape runtime (C, with a CUDA provider), from Python.

    import numpy as np, tiga
    tape = tiga.Tape()                                   # host runtime; tiga.Tape(tiga.Runtime(0)) for CUDA
    x = tape.input(np.random.rand(8, 3))
    w = tape.parameter(np.zeros((3, 1)), name="w")
    loss = tiga.mse(tiga.linear(x, w), np.ones((8, 1)))
    tape.backward(loss)
    tape.adamw_step(lr=1e-2)
    print(loss.item(), w.grad_numpy())

Values are integer ids of a tape (tiga.h); parameters persist across tape.reset(), every other
value is dropped by it. Errors raise tiga.TigaError with the library's message. Handles are freed
by finalizers in any order. Values and gradients are DLPack producers (torch.from_dlpack(v),
np.from_dlpack(v.grad)); tape.borrow(tensor) reads a host or CUDA tensor without a copy.
"""
from __future__ import annotations

from ._core import (ABSENT, NO_ID, LossScaler, inject_host_alloc_failure, DType, Init, InitKind, Memory, Provider, Reduce, Relation, RelationKind, Runtime,
                    Side, Status, Tape, Value, numpy_dtype, to_dtype)
from ._comm import COMM_ID_BYTES, Comm, comm_id_create, comm_id_read, comm_id_write, set_grad_ready_hook
from ._decls import CONSTANTS
from ._ffi import API_VERSION, TigaError, last_error, lib
from .ops import (GradcheckResult, add, attention, cast, concat, cross_entropy, dot_last, dropout, edge_attention,
                  elu, embedding, gat_attention, gelu, gradcheck, graph_attend, graph_displacement, graph_gather,
                  graph_reduce, graph_softmax, layernorm, leaky_relu, linear, matmul, mean, mha, mse, mul, relation_causal,
                  relation_concat, relation_csr, relation_dense, relation_mask, relation_radius,
                  relation_radius_value, relation_varlen, relu, reshape, scale, slice, softmax, split, sub, sum,
                  sum_last, tanh, transpose)

F32, F64, F16, BF16, I32, I64, U8 = DType.F32, DType.F64, DType.F16, DType.BF16, DType.I32, DType.I64, DType.U8
HOST, CUDA, CUDA_FUSED, CUDA_COMPOSED = Provider.HOST, Provider.CUDA_FUSED, Provider.CUDA_FUSED, Provider.CUDA_COMPOSED
SCALE_AUTO: float = CONSTANTS["TG_SCALE_AUTO"]


def version() -> str:
    """The library's version string, e.g. "0.2.0 (host)"."""
    return lib.tg_version_string().decode()


def api_version() -> int:
    """The library's TIGA_API_VERSION (checked against the header's at import)."""
    return int(lib.tg_api_version())


def library_path() -> str:
    """The libtiga this package loaded."""
    return lib._path  # type: ignore[attr-defined,no-any-return]


def get_include() -> str:
    """The folder with tiga.h and tiga_dlpack.h (installed with the package; the checkout's
    include/ when running from a source tree)."""
    import os

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
    if os.path.isdir(here):
        return here
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "include"))


def status_string(status: int) -> str:
    return lib.tg_status_string(int(status)).decode()


def dtype_size(dtype: object) -> int:
    return int(lib.tg_dtype_size(int(to_dtype(dtype))))  # type: ignore[arg-type]


def dtype_name(dtype: object) -> str:
    return lib.tg_dtype_name(int(to_dtype(dtype))).decode()  # type: ignore[arg-type]


def provider_name(provider: int) -> str:
    return lib.tg_provider_name(int(provider)).decode()


__version__ = "{}.{}.{}".format(CONSTANTS["TIGA_VERSION_MAJOR"], CONSTANTS["TIGA_VERSION_MINOR"],
                                CONSTANTS["TIGA_VERSION_PATCH"])

__all__ = [name for name in dir() if not name.startswith("_")]
