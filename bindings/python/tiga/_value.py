"""Values of a tape (integer ids) as Python objects: reading, writing, names, DLPack, operators."""
from __future__ import annotations

import ctypes as C
from typing import TYPE_CHECKING, Any, Tuple

import numpy as np

from . import _dlpack
from ._decls import CONSTANTS
from ._dtypes import MAX_DIMS, DType, Memory, as_array, numpy_dtype
from ._ffi import TigaError, lib

if TYPE_CHECKING:
    from ._core import Tape


def _dtype_of_dl(dt: Any) -> DType:
    key = (dt.code, dt.bits, dt.lanes)
    table = {(2, 32, 1): DType.F32, (2, 64, 1): DType.F64, (2, 16, 1): DType.F16, (4, 16, 1): DType.BF16,
             (0, 32, 1): DType.I32, (0, 64, 1): DType.I64, (1, 8, 1): DType.U8, (6, 8, 1): DType.U8}
    if key not in table:
        raise TypeError(f"tiga: no tiga dtype for DLPack dtype (code {dt.code}, bits {dt.bits}, lanes {dt.lanes})")
    return table[key]




class _Export:
    """What __dlpack__ exports: a value or its gradient."""

    def __init__(self, value: "Value", grad: bool):
        self.value, self.grad = value, grad

    def _flags(self, dl_device: Any = None) -> int:
        flags = CONSTANTS["TG_EXPORT_GRAD"] if self.grad else 0
        if dl_device is not None:
            flags |= CONSTANTS["TG_EXPORT_HOST"] if int(dl_device[0]) in (_dlpack.KDL_CPU, _dlpack.KDL_CUDA_HOST) \
                else CONSTANTS["TG_EXPORT_DEVICE"]
        return flags

    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        """A "dltensor" capsule over tiga's memory (no copy; tiga.h states how long it stays
        valid). The export waits for tiga's device work, so it is ready on any stream."""
        if copy:
            raise BufferError("tiga: __dlpack__(copy=True) is not supported; tiga exports views")
        t = self.value.tape
        ptr = C.c_void_p()
        t._check(lib.tg_tape_export_dlpack(t.handle, self.value.id, self._flags(dl_device), C.byref(ptr)))
        return _dlpack.capsule_from(ptr.value)  # type: ignore[arg-type]

    def __dlpack_device__(self) -> Tuple[int, int]:
        t = self.value.tape
        mem, dev = C.c_int(), C.c_int()
        t._check(lib.tg_tape_export_location(t.handle, self.value.id, self._flags(), C.byref(mem), C.byref(dev)))
        return (_dlpack.KDL_CUDA if mem.value == Memory.CUDA else _dlpack.KDL_CPU), dev.value


class Value:
    """A value of a tape (its integer id). Arithmetic operators record ops; .numpy() copies out."""

    __slots__ = ("tape", "id", "__weakref__")
    __array_priority__ = 100

    def __init__(self, tape: Tape, vid: int):
        self.tape, self.id = tape, int(vid)

    def __repr__(self) -> str:
        try:
            return f"Value(id={self.id}, shape={self.shape}, dtype={self.dtype.name})"
        except TigaError:
            return f"Value(id={self.id}, stale)"

    @property
    def shape(self) -> Tuple[int, ...]:
        nd = C.c_int()
        shp = (C.c_int64 * MAX_DIMS)()
        self.tape._check(lib.tg_tape_shape(self.tape.handle, self.id, C.byref(nd), shp, MAX_DIMS))
        return tuple(shp[i] for i in range(nd.value))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> DType:
        d = C.c_int()
        self.tape._check(lib.tg_tape_dtype(self.tape.handle, self.id, C.byref(d)))
        return DType(d.value)

    @property
    def numel(self) -> int:
        n = C.c_int64()
        self.tape._check(lib.tg_tape_numel(self.tape.handle, self.id, C.byref(n)))
        return n.value

    def numpy(self) -> np.ndarray:
        """A copy of the value (bf16 as ml_dtypes.bfloat16)."""
        out = np.empty(self.shape, numpy_dtype(self.dtype))
        self.tape._check(lib.tg_tape_read(self.tape.handle, self.id, out.ctypes.data, out.nbytes))
        return out

    def grad_numpy(self) -> np.ndarray:
        """A copy of the gradient (zeros when none has arrived)."""
        out = np.empty(self.shape, numpy_dtype(self.dtype))
        self.tape._check(lib.tg_tape_read_grad(self.tape.handle, self.id, out.ctypes.data, out.nbytes))
        return out

    def item(self) -> float:
        """A one-element value as a float (tg_tape_scalar)."""
        x = C.c_double()
        self.tape._check(lib.tg_tape_scalar(self.tape.handle, self.id, C.byref(x)))
        return x.value

    def write(self, data: Any) -> None:
        """Overwrites a parameter or (copied) input with data of the same shape and dtype."""
        a, _ = as_array(data, self.dtype)
        if a.shape != self.shape:
            raise ValueError(f"tiga: write of shape {a.shape} into a value of shape {self.shape}")
        self.tape._check(lib.tg_tape_write(self.tape.handle, self.id, a.ctypes.data, a.nbytes))

    @property
    def name(self) -> str:
        """A parameter's name (given, or "param.<k>"); settable."""
        n = C.c_size_t()
        self.tape._check(lib.tg_tape_name(self.tape.handle, self.id, None, 0, C.byref(n)))
        buf = C.create_string_buffer(n.value + 1)
        self.tape._check(lib.tg_tape_name(self.tape.handle, self.id, buf, n.value + 1, None))
        return buf.value.decode()

    @name.setter
    def name(self, name: str) -> None:
        self.tape._check(lib.tg_tape_set_name(self.tape.handle, self.id, name.encode()))

    # DLPack: the value itself; .grad is its gradient
    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        return _Export(self, False).__dlpack__(stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return _Export(self, False).__dlpack_device__()

    @property
    def grad(self) -> _Export:
        """The gradient as a DLPack producer: torch.from_dlpack(v.grad), np.from_dlpack(v.grad)."""
        return _Export(self, True)

    # operators (ops.py fills these in)
    def __add__(self, o: Any) -> "Value":
        from . import ops

        return ops.add(self, o)

    def __radd__(self, o: Any) -> "Value":
        from . import ops

        return ops.add(o, self)

    def __sub__(self, o: Any) -> "Value":
        from . import ops

        return ops.sub(self, o)

    def __rsub__(self, o: Any) -> "Value":
        from . import ops

        return ops.sub(o, self)

    def __mul__(self, o: Any) -> "Value":
        from . import ops

        return ops.scale(self, o) if isinstance(o, (int, float)) else ops.mul(self, o)

    def __rmul__(self, o: Any) -> "Value":
        from . import ops

        return ops.scale(self, o) if isinstance(o, (int, float)) else ops.mul(o, self)

    def __truediv__(self, o: float) -> "Value":
        from . import ops

        return ops.scale(self, 1.0 / float(o))

    def __neg__(self) -> "Value":
        from . import ops

        return ops.scale(self, -1.0)

    def __matmul__(self, o: "Value") -> "Value":
        from . import ops

        return ops.matmul(self, o)
