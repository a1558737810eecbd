"""tiga's enums and dtypes, and NumPy arrays as tiga sees them."""
from __future__ import annotations

import ctypes as C
import enum
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from ._decls import CONSTANTS, ENUMS

NO_ID: int = CONSTANTS["TG_NO_ID"]
ABSENT: int = CONSTANTS["TG_ABSENT"]
MAX_DIMS: int = CONSTANTS["TG_MAX_DIMS"]

DType = enum.IntEnum("DType", {k[3:]: v for k, v in ENUMS["tg_dtype"].items() if k != "TG_DTYPE_COUNT"})
Provider = enum.IntEnum("Provider", {k[12:]: v for k, v in ENUMS["tg_provider"].items()})
Memory = enum.IntEnum("Memory", {k[10:]: v for k, v in ENUMS["tg_memory"].items()})
RelationKind = enum.IntEnum("RelationKind", {k[7:]: v for k, v in ENUMS["tg_relation_kind"].items()})
InitKind = enum.IntEnum("InitKind", {k[8:]: v for k, v in ENUMS["tg_init_kind"].items()})
Reduce = enum.IntEnum("Reduce", {k[10:]: v for k, v in ENUMS["tg_graph_reduce_kind"].items()})
Side = enum.IntEnum("Side", {k[9:]: v for k, v in ENUMS["tg_graph_side"].items()})
Status = enum.IntEnum("Status", dict(ENUMS["tg_status"]))

DTypeLike = Union[DType, int, str, np.dtype, type]


def _bf16() -> Any:
    import ml_dtypes  # a dependency of the package; imported when bf16 is used

    return np.dtype(ml_dtypes.bfloat16)


_NP_OF = {DType.F32: np.dtype(np.float32), DType.F64: np.dtype(np.float64), DType.F16: np.dtype(np.float16),
          DType.I32: np.dtype(np.int32), DType.I64: np.dtype(np.int64), DType.U8: np.dtype(np.uint8)}
_NAMES = {"f32": DType.F32, "float32": DType.F32, "f64": DType.F64, "float64": DType.F64, "f16": DType.F16,
          "float16": DType.F16, "bf16": DType.BF16, "bfloat16": DType.BF16, "i32": DType.I32, "int32": DType.I32,
          "i64": DType.I64, "int64": DType.I64, "u8": DType.U8, "uint8": DType.U8, "bool": DType.U8}


def to_dtype(dt: DTypeLike) -> DType:
    """A tiga dtype from a DType, a name ("f32", "bfloat16", ...) or a NumPy dtype."""
    if isinstance(dt, DType):
        return dt
    if isinstance(dt, int) and not isinstance(dt, bool):
        return DType(dt)
    if isinstance(dt, str) and dt in _NAMES:
        return _NAMES[dt]
    d = np.dtype(dt)
    if d.name in _NAMES:
        return _NAMES[d.name]
    raise TypeError(f"tiga: no tiga dtype for {dt!r} (f32, f64, f16, bf16, i32, i64, u8/bool)")


def numpy_dtype(dt: DTypeLike) -> np.dtype:
    d = to_dtype(dt)
    return _bf16() if d == DType.BF16 else _NP_OF[d]


def _shape_arg(shape: Sequence[int]) -> Tuple[int, Any]:
    shape = tuple(int(s) for s in shape)
    if len(shape) > MAX_DIMS:
        raise ValueError(f"tiga: {len(shape)} dims; at most {MAX_DIMS}")
    return len(shape), (C.c_int64 * max(1, len(shape)))(*shape)


def as_array(data: Any, dtype: Optional[DTypeLike] = None) -> Tuple[np.ndarray, DType]:
    """A C-contiguous NumPy array of a tiga dtype (bool becomes u8; Python floats f64)."""
    a = np.asarray(data)
    if dtype is None:
        if a.dtype == np.bool_:
            a = a.astype(np.uint8)
        d = to_dtype(a.dtype)
    else:
        d = to_dtype(dtype)
        a = a.astype(numpy_dtype(d), copy=False)
    return np.asarray(a, order="C"), d


