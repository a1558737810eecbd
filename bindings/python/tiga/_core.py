"""Runtimes, tapes and relations: the handles of tiga.h as Python objects.

Every handle is released by a weakref.finalize in whatever order the collector picks (the C side
is reference counted: a tape keeps its runtime, a relation its runtime, a node its relation, an
exported DLPack tensor its tape). Op failures raise TigaError at once with the library's message
(the tape keeps the error sticky until reset(), as in C)."""
from __future__ import annotations

import contextlib
import ctypes as C
import weakref
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _dlpack
from ._decls import CONSTANTS
from ._dtypes import (ABSENT, MAX_DIMS, NO_ID, DType, DTypeLike, InitKind, Memory, Provider, Reduce, RelationKind,
                      Side, Status, _shape_arg, as_array, numpy_dtype, to_dtype)
from ._ffi import TigaError, check_global, lib, new_struct
from ._value import Value, _dtype_of_dl

__all__ = ["ABSENT", "NO_ID", "DType", "InitKind", "Memory", "Provider", "Reduce", "RelationKind", "Side", "Status",
           "Runtime", "Relation", "Tape", "Init", "Value", "as_array", "numpy_dtype", "to_dtype", "_shape_arg",
           "DTypeLike", "MAX_DIMS"]


# ------------------------------------------------------------------ runtime


class Runtime:
    """A host runtime (device=None) or a CUDA runtime on `device`."""

    def __init__(self, device: Optional[int] = None):
        h = C.c_void_p()
        if device is None:
            check_global(lib.tg_runtime_create_host(C.byref(h)))
        else:
            check_global(lib.tg_runtime_create_cuda(int(device), C.byref(h)))
        self._h: int = h.value  # type: ignore[assignment]
        self.device = device
        self._fin = weakref.finalize(self, lib.tg_runtime_destroy, self._h)

    @property
    def handle(self) -> int:
        if not self._fin.alive:
            raise ValueError("tiga: the runtime is closed")
        return self._h

    def close(self) -> None:
        """Drops this object's reference now (tapes and relations keep theirs)."""
        self._fin()

    def _check(self, status: int) -> None:
        if status != 0:
            raise TigaError(status, lib.tg_runtime_error(self.handle).decode("utf-8", "replace"))

    @property
    def has_device(self) -> bool:
        return bool(lib.tg_runtime_has_device(self.handle))

    @property
    def error(self) -> str:
        return lib.tg_runtime_error(self.handle).decode("utf-8", "replace")

    def memory(self) -> Tuple[int, int]:
        """(current, peak) bytes of device memory."""
        cur, peak = C.c_size_t(), C.c_size_t()
        self._check(lib.tg_runtime_memory(self.handle, C.byref(cur), C.byref(peak)))
        return cur.value, peak.value

    def reset_peak(self) -> None:
        self._check(lib.tg_runtime_reset_peak(self.handle))

    def sync(self) -> None:
        self._check(lib.tg_runtime_sync(self.handle))

    def inject_alloc_failure(self, after: int) -> None:
        self._check(lib.tg_runtime_inject_alloc_failure(self.handle, int(after)))

    def alloc_failure_pending(self) -> int:
        """The device fault-injection countdown now (-1: fired or disarmed)."""
        n = C.c_int64()
        self._check(lib.tg_runtime_alloc_failure_pending(self.handle, C.byref(n)))
        return n.value

    @property
    def cuda_stream(self) -> int:
        """The runtime's cudaStream_t as an integer (0 on a host runtime)."""
        s = C.c_void_p()
        self._check(lib.tg_runtime_cuda_stream(self.handle, C.byref(s)))
        return s.value or 0

    def tape(self) -> "Tape":
        return Tape(self)


# ------------------------------------------------------------------ relations


class Relation:
    """A relation (which key each query may attend to; a graph's edges). Build it with the
    Runtime-level constructors in tiga.relations (dense, causal, mask, varlen, csr, concat,
    radius)."""

    def __init__(self, runtime: Runtime, handle: int):
        self.runtime = runtime
        self._h = handle
        self._fin = weakref.finalize(self, lib.tg_relation_destroy, handle)

    @property
    def handle(self) -> int:
        if not self._fin.alive:
            raise ValueError("tiga: the relation is closed")
        return self._h

    def close(self) -> None:
        self._fin()

    def info(self) -> Tuple[RelationKind, int, int, int]:
        """(kind, nq, nk, allowed pairs)."""
        kind, nq, nk, pairs = C.c_int(), C.c_int64(), C.c_int64(), C.c_int64()
        check_global(lib.tg_relation_info(self.handle, C.byref(kind), C.byref(nq), C.byref(nk), C.byref(pairs)))
        return RelationKind(kind.value), nq.value, nk.value, pairs.value

    def read_csr(self, batch: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """Destination-major CSR of batch entry `batch`: (row_ptr int64 [nq+1], col_idx int32 [E])."""
        _, nq, _, _ = self.info()
        row_ptr = np.zeros(nq + 1, np.int64)
        check_global(lib.tg_relation_read_csr(self.handle, int(batch), row_ptr.ctypes.data, row_ptr.nbytes, None, 0))
        col = np.zeros(int(row_ptr[-1]), np.int32)
        check_global(lib.tg_relation_read_csr(self.handle, int(batch), row_ptr.ctypes.data, row_ptr.nbytes,
                                              col.ctypes.data if col.size else None, col.nbytes))
        return row_ptr, col


# ------------------------------------------------------------------ tape


class Tape:
    """A tape on a runtime (a fresh host runtime when none is given)."""

    def __init__(self, runtime: Optional[Runtime] = None):
        self.runtime = runtime if runtime is not None else Runtime()
        h = C.c_void_p()
        check_global(lib.tg_tape_create(self.runtime.handle, C.byref(h)))
        self._h: int = h.value  # type: ignore[assignment]
        self._borrowed: List[Any] = []  # what borrowed inputs read, kept alive until reset
        self._fin = weakref.finalize(self, lib.tg_tape_destroy, self._h)

    @classmethod
    def _unowned(cls, handle: int, runtime: Runtime) -> "Tape":
        """A view of a tape the caller does not own (tg_gradcheck's callback)."""
        t = cls.__new__(cls)
        t.runtime, t._h, t._borrowed = runtime, handle, []
        t._fin = weakref.finalize(t, lambda: None)
        return t

    @property
    def handle(self) -> int:
        if not self._fin.alive:
            raise ValueError("tiga: the tape is closed")
        return self._h

    def close(self) -> None:
        """Drops this object's reference now (exported DLPack tensors keep theirs)."""
        self._fin()
        self._borrowed.clear()

    # -- errors
    @property
    def status(self) -> Status:
        return Status(lib.tg_tape_status(self.handle))

    @property
    def error(self) -> str:
        return lib.tg_tape_error(self.handle).decode("utf-8", "replace")

    def _check(self, status: int) -> None:
        if status != 0:
            raise TigaError(status, self.error)

    def _op(self, vid: int) -> "Value":
        if vid < 0:
            raise TigaError(lib.tg_tape_status(self.handle), self.error)
        return Value(self, vid)

    def check(self) -> None:
        """Raises the tape's sticky error, if any."""
        self._check(lib.tg_tape_status(self.handle))

    @property
    def runtime_handle(self) -> int:
        return lib.tg_tape_runtime(self.handle) or 0

    # -- state
    def reset(self) -> None:
        """Ends a step: drops step values (and what borrowed inputs held), keeps parameters."""
        self._check(lib.tg_tape_reset(self.handle))
        self._borrowed.clear()

    def set_seed(self, seed: int) -> None:
        self._check(lib.tg_tape_set_seed(self.handle, int(seed)))

    def set_grad_enabled(self, enabled: bool) -> bool:
        prev = C.c_int()
        self._check(lib.tg_tape_set_grad_enabled(self.handle, int(bool(enabled)), C.byref(prev)))
        return bool(prev.value)

    @contextlib.contextmanager
    def no_grad(self) -> Iterator[None]:
        prev = self.set_grad_enabled(False)
        try:
            yield
        finally:
            self.set_grad_enabled(prev)

    def set_provider(self, provider: Union[Provider, int]) -> Provider:
        prev = C.c_int()
        self._check(lib.tg_tape_set_provider(self.handle, int(provider), C.byref(prev)))
        return Provider(prev.value)

    @contextlib.contextmanager
    def provider(self, provider: Union[Provider, int]) -> Iterator[None]:
        """Ops called inside run on `provider`."""
        prev = self.set_provider(provider)
        try:
            yield
        finally:
            self.set_provider(prev)

    # -- values
    def input(self, data: Any, dtype: Optional[DTypeLike] = None, requires_grad: bool = False) -> "Value":
        """A step value holding a copy of data (array-like)."""
        a, d = as_array(data, dtype)
        ndim, shp = _shape_arg(a.shape)
        out = C.c_int64(NO_ID)
        flags = CONSTANTS["TG_REQUIRES_GRAD"] if requires_grad else 0
        self._check(lib.tg_tape_input(self.handle, int(d), ndim, shp, a.ctypes.data, a.nbytes, flags, C.byref(out)))
        return Value(self, out.value)

    def borrow(self, obj: Any, requires_grad: bool = False) -> "Value":
        """A step value over obj's memory without a copy: a NumPy array (C-contiguous, any
        writeable state) or any DLPack producer (PyTorch, CuPy, JAX; host or the runtime's CUDA
        device). obj is kept alive, and must not be changed, until reset()."""
        flags = CONSTANTS["TG_REQUIRES_GRAD"] if requires_grad else 0
        out = C.c_int64(NO_ID)
        if isinstance(obj, np.ndarray):
            if not obj.flags.c_contiguous:
                raise ValueError("tiga: borrow needs a C-contiguous array (np.ascontiguousarray copies)")
            d = to_dtype(obj.dtype)
            ndim, shp = _shape_arg(obj.shape)
            self._check(lib.tg_tape_input_borrowed(self.handle, int(d), ndim, shp, obj.ctypes.data, obj.nbytes,
                                                   int(Memory.HOST), 0, flags, C.byref(out)))
            self._borrowed.append(obj)
            return Value(self, out.value)
        dev_type, dev_id = obj.__dlpack_device__()
        if int(dev_type) == _dlpack.KDL_CUDA:
            stream = self.runtime.cuda_stream
            cap = obj.__dlpack__(stream=stream if stream else None)
        else:
            cap = obj.__dlpack__()
        t, addr = _dlpack.read_capsule(cap)
        d = _dtype_of_dl(t.dtype)
        shape = [t.shape[i] for i in range(t.ndim)]
        if t.strides:
            expect = 1
            for i in reversed(range(t.ndim)):
                if shape[i] != 1 and t.strides[i] != expect:
                    raise ValueError("tiga: borrow needs a dense row-major tensor (call .contiguous() first)")
                expect *= shape[i]
        numel = int(np.prod(shape)) if shape else 1
        mem = Memory.CUDA if t.device.device_type == _dlpack.KDL_CUDA else Memory.HOST
        if t.device.device_type not in (_dlpack.KDL_CPU, _dlpack.KDL_CUDA, _dlpack.KDL_CUDA_HOST):
            raise ValueError(f"tiga: cannot borrow memory of DLPack device type {t.device.device_type}")
        ndim, shp = _shape_arg(shape)
        self._check(lib.tg_tape_input_borrowed(self.handle, int(d), ndim, shp, addr,
                                               numel * int(lib.tg_dtype_size(int(d))), int(mem),
                                               t.device.device_id if mem == Memory.CUDA else 0, flags,
                                               C.byref(out)))
        self._borrowed.append((obj, cap))
        return Value(self, out.value)

    def parameter(self, data: Any = None, dtype: Optional[DTypeLike] = None, *, shape: Optional[Sequence[int]] = None,
                  name: Optional[str] = None, no_weight_decay: bool = False, init: Optional["Init"] = None) -> "Value":
        """A trainable parameter from data (array-like), or zeros / an initializer of `shape`."""
        flags = CONSTANTS["TG_NO_WEIGHT_DECAY"] if no_weight_decay else 0
        out = C.c_int64(NO_ID)
        if data is not None:
            a, d = as_array(data, dtype)
            ndim, shp = _shape_arg(a.shape)
            self._check(lib.tg_tape_parameter(self.handle, int(d), ndim, shp, a.ctypes.data, a.nbytes, flags,
                                              C.byref(out)))
        else:
            if shape is None:
                raise ValueError("tiga: parameter needs data or shape")
            d = to_dtype(dtype if dtype is not None else DType.F32)
            ndim, shp = _shape_arg(shape)
            if init is None:
                self._check(lib.tg_tape_parameter(self.handle, int(d), ndim, shp, None, 0, flags, C.byref(out)))
            else:
                self._check(lib.tg_tape_parameter_init(self.handle, int(d), ndim, shp, C.byref(init._struct()), flags,
                                                       C.byref(out)))
        v = Value(self, out.value)
        if name is not None:
            v.name = name
        return v

    def parameters(self) -> List["Value"]:
        n = C.c_size_t()
        self._check(lib.tg_tape_parameters(self.handle, None, 0, C.byref(n)))
        ids = (C.c_int64 * max(1, n.value))()
        self._check(lib.tg_tape_parameters(self.handle, ids, n.value, C.byref(n)))
        return [Value(self, ids[i]) for i in range(n.value)]

    def parameter_named(self, name: str) -> "Value":
        out = C.c_int64(NO_ID)
        self._check(lib.tg_tape_find_parameter(self.handle, name.encode(), C.byref(out)))
        return Value(self, out.value)

    # -- reverse mode and training
    def backward(self, loss: "Value", grad: Optional["Value"] = None) -> None:
        if grad is None:
            self._check(lib.tg_tape_backward(self.handle, loss.id))
        else:
            self._check(lib.tg_tape_backward_with(self.handle, loss.id, grad.id))

    def zero_grad(self) -> None:
        self._check(lib.tg_tape_zero_grad(self.handle))

    def sgd_step(self, lr: Optional[float] = None, momentum: Optional[float] = None, dampening: Optional[float] = None,
                 weight_decay: Optional[float] = None, nesterov: Optional[bool] = None) -> None:
        o = new_struct("tg_sgd_options")
        _set(o, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
             nesterov=None if nesterov is None else int(nesterov))
        self._check(lib.tg_sgd_step(self.handle, C.byref(o)))

    def adamw_step(self, lr: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                   eps: Optional[float] = None, weight_decay: Optional[float] = None) -> None:
        o = new_struct("tg_adamw_options")
        _set(o, lr=lr, eps=eps, weight_decay=weight_decay, beta1=betas and betas[0], beta2=betas and betas[1])
        self._check(lib.tg_adamw_step(self.handle, C.byref(o)))

    def adam_step(self, lr: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                  eps: Optional[float] = None, weight_decay: Optional[float] = None) -> None:
        o = new_struct("tg_adam_options")
        _set(o, lr=lr, eps=eps, weight_decay=weight_decay, beta1=betas and betas[0], beta2=betas and betas[1])
        self._check(lib.tg_adam_step(self.handle, C.byref(o)))

    def clip_grad_norm(self, max_norm: float, error_if_nonfinite: bool = False) -> float:
        """Scales gradients to global L2 norm <= max_norm; returns the norm before clipping.
        error_if_nonfinite: a NaN / inf norm raises (TG_ERR_NONFINITE) and changes nothing."""
        total = C.c_double()
        if not error_if_nonfinite:
            self._check(lib.tg_clip_grad_norm(self.handle, float(max_norm), C.byref(total)))
            return total.value
        o = new_struct("tg_clip_options")
        _set(o, max_norm=float(max_norm), error_if_nonfinite=1)
        self._check(lib.tg_clip_grad_norm_with(self.handle, C.byref(o), C.byref(total)))
        return total.value

    def set_check_finite(self, on: bool) -> bool:
        """Anomaly mode: the first NaN / inf an op or a backward node produces becomes an error
        naming the node. Returns the previous mode."""
        prev = C.c_int()
        self._check(lib.tg_tape_set_check_finite(self.handle, int(bool(on)), C.byref(prev)))
        return bool(prev.value)

    def save(self, path: Any) -> None:
        """Writes every parameter and its optimizer state as a safetensors file."""
        self._check(lib.tg_tape_save(self.handle, str(path).encode()))

    def load(self, path: Any) -> None:
        """Loads a safetensors checkpoint by parameter name (all or nothing)."""
        self._check(lib.tg_tape_load(self.handle, str(path).encode()))

    def explain(self) -> str:
        n = C.c_size_t()
        self._check(lib.tg_tape_explain(self.handle, None, 0, C.byref(n)))
        buf = C.create_string_buffer(n.value + 1)
        self._check(lib.tg_tape_explain(self.handle, buf, n.value + 1, None))
        return buf.value.decode("utf-8", "replace")

    def stats(self) -> Tuple[int, int]:
        """(nodes, saved-for-backward bytes)."""
        nodes, saved = C.c_size_t(), C.c_size_t()
        self._check(lib.tg_tape_stats(self.handle, C.byref(nodes), C.byref(saved)))
        return nodes.value, saved.value


def _set(struct: Any, **fields: Any) -> None:
    for k, v in fields.items():
        if v is not None:
            setattr(struct, k, v)


# ------------------------------------------------------------------ init


class Init:
    """An initializer (tg_init_options): Init.normal(std=0.02), Init.xavier_uniform(), ..."""

    def __init__(self, kind: Union[InitKind, int], a: float = 0.0, b: float = 1.0, gain: float = 1.0, seed: int = 0):
        self.kind, self.a, self.b, self.gain, self.seed = InitKind(kind), a, b, gain, seed

    @classmethod
    def normal(cls, mean: float = 0.0, std: float = 1.0, seed: int = 0) -> "Init":
        return cls(InitKind.NORMAL, mean, std, seed=seed)

    @classmethod
    def uniform(cls, low: float = 0.0, high: float = 1.0, seed: int = 0) -> "Init":
        return cls(InitKind.UNIFORM, low, high, seed=seed)

    @classmethod
    def xavier_uniform(cls, gain: float = 1.0, seed: int = 0) -> "Init":
        return cls(InitKind.XAVIER_UNIFORM, gain=gain, seed=seed)

    @classmethod
    def xavier_normal(cls, gain: float = 1.0, seed: int = 0) -> "Init":
        return cls(InitKind.XAVIER_NORMAL, gain=gain, seed=seed)

    @classmethod
    def constant(cls, value: float) -> "Init":
        return cls(InitKind.CONSTANT, value)

    def _struct(self) -> Any:
        o = new_struct("tg_init_options")
        o.kind, o.a, o.b, o.gain, o.seed = int(self.kind), self.a, self.b, self.gain, self.seed
        return o

    def fill(self, shape: Sequence[int], dtype: DTypeLike = DType.F32) -> np.ndarray:
        """The values tg_init_fill draws (F32 / F64)."""
        d = to_dtype(dtype)
        out = np.empty(tuple(shape), numpy_dtype(d))
        ndim, shp = _shape_arg(out.shape)
        check_global(lib.tg_init_fill(C.byref(self._struct()), int(d), ndim, shp, out.ctypes.data, out.nbytes))
        return out


# ------------------------------------------------------------------ loss scaling and fault injection


class LossScaler:
    """Dynamic loss scaling for f16 training (PyTorch's GradScaler): scale(tape, loss) before
    backward, unscale(tape) after it (returns found_inf: skip the optimizer step then)."""

    def __init__(self, init_scale: Optional[float] = None, growth_factor: Optional[float] = None,
                 backoff_factor: Optional[float] = None, growth_interval: Optional[int] = None):
        o = new_struct("tg_loss_scaler_options")
        _set(o, init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
             growth_interval=growth_interval)
        h = C.c_void_p()
        check_global(lib.tg_loss_scaler_create(C.byref(o), C.byref(h)))
        self._h = h.value
        self._fin = weakref.finalize(self, lib.tg_loss_scaler_destroy, self._h)

    def scale(self, tape: "Tape", loss: Value) -> Value:
        return tape._op(lib.tg_loss_scaler_scale(tape.handle, self._h, loss.id))

    def unscale(self, tape: "Tape") -> bool:
        found = C.c_int()
        tape._check(lib.tg_loss_scaler_unscale(tape.handle, self._h, C.byref(found)))
        return bool(found.value)

    def state(self) -> Tuple[float, int]:
        """(the current scale, finite steps since its last change)."""
        sc, tr = C.c_double(), C.c_int64()
        check_global(lib.tg_loss_scaler_state(self._h, C.byref(sc), C.byref(tr)))
        return sc.value, tr.value

    def set_state(self, scale: float, growth_tracker: int) -> None:
        """Restores a state() (a run resumed from a checkpoint keeps its scale)."""
        check_global(lib.tg_loss_scaler_set_state(self._h, float(scale), int(growth_tracker)))


def inject_host_alloc_failure(after: int) -> int:
    """Testing hook: this thread's host allocation after the next `after` fails once (< 0 disarms).
    Returns the countdown that was pending before."""
    pending = C.c_int64()
    check_global(lib.tg_inject_host_alloc_failure(int(after), C.byref(pending)))
    return pending.value
