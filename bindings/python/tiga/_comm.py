"""Data-parallel training through NCCL (tiga.h: tg_comm_*) and the tape's gradient-ready hook.

    id = tiga.comm_id_create()                 # rank 0; hand the bytes to the other ranks
    comm = tiga.Comm(runtime, nranks, rank, id)
    comm.broadcast_parameters(tape); comm.attach(tape)
    ... tape.backward(loss); comm.finish_gradients(tape); tape.adamw_step(...)
"""
from __future__ import annotations

import ctypes as C
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

from ._decls import CONSTANTS
from ._ffi import CALLBACK_TYPES, TigaError, check_global, lib, new_struct

__all__ = ["COMM_ID_BYTES", "Comm", "comm_id_create", "comm_id_write", "comm_id_read", "set_grad_ready_hook"]

COMM_ID_BYTES: int = CONSTANTS["TG_COMM_ID_BYTES"]


def comm_id_create() -> bytes:
    """A fresh rendezvous id (rank 0): TG_COMM_ID_BYTES bytes."""
    buf = (C.c_uint8 * COMM_ID_BYTES)()
    check_global(lib.tg_comm_id_create(buf, COMM_ID_BYTES))
    return bytes(buf)


def _id_buffer(comm_id: bytes) -> Any:
    if len(comm_id) != COMM_ID_BYTES:
        raise ValueError(f"tiga: a comm id has {COMM_ID_BYTES} bytes, got {len(comm_id)}")
    return (C.c_uint8 * COMM_ID_BYTES).from_buffer_copy(comm_id)


def comm_id_write(comm_id: bytes, path: Any) -> None:
    check_global(lib.tg_comm_id_write(_id_buffer(comm_id), COMM_ID_BYTES, str(path).encode()))


def comm_id_read(path: Any, timeout_s: float = 0.0) -> bytes:
    buf = (C.c_uint8 * COMM_ID_BYTES)()
    check_global(lib.tg_comm_id_read(str(path).encode(), float(timeout_s), buf, COMM_ID_BYTES))
    return bytes(buf)


class Comm:
    """One rank of a communicator on runtime's CUDA device (tg_comm_create)."""

    def __init__(self, runtime: Any, nranks: int, rank: int, comm_id: bytes, timeout_s: Optional[float] = None,
                 bucket_bytes: Optional[int] = None, host_wait: Optional[bool] = None):
        o = new_struct("tg_comm_options")
        if timeout_s is not None:
            o.timeout_s = float(timeout_s)
        if bucket_bytes is not None:
            o.bucket_bytes = int(bucket_bytes)
        if host_wait is not None:
            o.host_wait = int(bool(host_wait))
        h = C.c_void_p()
        check_global(lib.tg_comm_create(runtime.handle, int(nranks), int(rank), _id_buffer(comm_id), COMM_ID_BYTES,
                                        C.byref(o), C.byref(h)))
        self._h: int = h.value  # type: ignore[assignment]
        self._runtime = runtime  # the C comm holds its own reference; this keeps the Python object too
        self._fin = weakref.finalize(self, lib.tg_comm_destroy, self._h)

    @property
    def handle(self) -> int:
        if not self._fin.alive:
            raise ValueError("tiga: the comm is closed")
        return self._h

    def close(self) -> None:
        self._fin()

    def _check(self, status: int) -> None:
        if status != 0:
            raise TigaError(status, lib.tg_comm_error(self.handle).decode("utf-8", "replace"))

    def rank(self) -> Tuple[int, int]:
        """(rank, nranks)."""
        r, n = C.c_int(), C.c_int()
        self._check(lib.tg_comm_rank(self.handle, C.byref(r), C.byref(n)))
        return r.value, n.value

    def broadcast_parameters(self, tape: Any) -> None:
        self._check(lib.tg_comm_broadcast_parameters(self.handle, tape.handle))

    def attach(self, tape: Any) -> None:
        self._check(lib.tg_comm_attach(self.handle, tape.handle))

    def detach(self, tape: Any) -> None:
        self._check(lib.tg_comm_detach(self.handle, tape.handle))

    def finish_gradients(self, tape: Any) -> None:
        self._check(lib.tg_comm_finish_gradients(self.handle, tape.handle))


_hooks: Dict[int, Any] = {}  # tape handle -> the ctypes callback (kept alive while set)


def set_grad_ready_hook(tape: Any, fn: Optional[Callable[[Optional[int]], None]]) -> None:
    """fn(None) when a backward sweep begins, fn(param_id) when a parameter's gradient is final
    (tg_tape_set_grad_ready_hook). fn must not call the tape. None removes the hook."""
    if fn is None:
        null = C.cast(None, CALLBACK_TYPES["tg_grad_ready_fn"])
        check_global(lib.tg_tape_set_grad_ready_hook(tape.handle, null, None))
        _hooks.pop(tape.handle, None)
    else:
        no_id = CONSTANTS["TG_NO_ID"]

        def call(_tape: Any, param: int, _user: Any) -> None:
            fn(None if param == no_id else int(param))

        cb = CALLBACK_TYPES["tg_grad_ready_fn"](call)
        check_global(lib.tg_tape_set_grad_ready_hook(tape.handle, cb, None))
        _hooks[tape.handle] = cb
