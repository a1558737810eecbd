"""Minimal ctypes binding for tiga (libtiga.so): enough to build a tape, run backward and read
gradients from Python. Every call is checked: returning calls raise TigaError with the library's
message; op calls return ids and the tape's sticky status is checked by Tape.check()."""
import ctypes as C
import os

_lib = None
F32, F64, F16, BF16, I32, I64, U8 = range(7)
HOST, CUDA_FUSED, CUDA_COMPOSED = 1, 2, 3
REQUIRES_GRAD, NO_WEIGHT_DECAY = 1, 2
NO_ID = -1
ABSENT = -2
API_VERSION = 200  # tiga.h's TIGA_API_VERSION this file was written against


class TigaError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"{lib().tg_status_string(status).decode()}: {message}")
        self.status = status


def lib(path=None):
    """Loads libtiga (TIGA_LIB, or the build folder next to this file)."""
    global _lib
    if _lib is None:
        here = os.path.dirname(os.path.abspath(__file__))
        path = path or os.environ.get("TIGA_LIB") or os.path.join(here, "..", "..", "build", "libtiga.so")
        L = C.CDLL(path)
        I64P = C.POINTER(C.c_int64)
        sigs = {
            "tg_api_version": (C.c_int, []),
            "tg_status_string": (C.c_char_p, [C.c_int]),
            "tg_last_error": (C.c_char_p, []),
            "tg_runtime_create_host": (C.c_int, [C.POINTER(C.c_void_p)]),
            "tg_runtime_create_cuda": (C.c_int, [C.c_int, C.POINTER(C.c_void_p)]),
            "tg_runtime_destroy": (None, [C.c_void_p]),
            "tg_tape_create": (C.c_int, [C.c_void_p, C.POINTER(C.c_void_p)]),
            "tg_tape_destroy": (None, [C.c_void_p]),
            "tg_tape_status": (C.c_int, [C.c_void_p]),
            "tg_tape_error": (C.c_char_p, [C.c_void_p]),
            "tg_tape_reset": (C.c_int, [C.c_void_p]),
            "tg_tape_set_provider": (C.c_int, [C.c_void_p, C.c_int, C.c_void_p]),
            "tg_tape_input": (C.c_int, [C.c_void_p, C.c_int, C.c_int, I64P, C.c_void_p, C.c_size_t, C.c_uint, I64P]),
            "tg_tape_parameter": (C.c_int, [C.c_void_p, C.c_int, C.c_int, I64P, C.c_void_p, C.c_size_t, C.c_uint, I64P]),
            "tg_tape_read": (C.c_int, [C.c_void_p, C.c_int64, C.c_void_p, C.c_size_t]),
            "tg_tape_read_grad": (C.c_int, [C.c_void_p, C.c_int64, C.c_void_p, C.c_size_t]),
            "tg_tape_numel": (C.c_int, [C.c_void_p, C.c_int64, I64P]),
            "tg_tape_scalar": (C.c_int, [C.c_void_p, C.c_int64, C.POINTER(C.c_double)]),
            "tg_tape_backward": (C.c_int, [C.c_void_p, C.c_int64]),
            "tg_tape_explain": (C.c_int, [C.c_void_p, C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t)]),
        }
        for name, (res, args) in sigs.items():
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        for op in ["tg_add", "tg_sub", "tg_mul", "tg_matmul"]:
            getattr(L, op).restype, getattr(L, op).argtypes = C.c_int64, [C.c_void_p, C.c_int64, C.c_int64]
        for op in ["tg_relu", "tg_gelu", "tg_tanh", "tg_softmax", "tg_sum", "tg_mean"]:
            getattr(L, op).restype, getattr(L, op).argtypes = C.c_int64, [C.c_void_p, C.c_int64]
        L.tg_linear.restype, L.tg_linear.argtypes = C.c_int64, [C.c_void_p, C.c_int64, C.c_int64, C.c_int64]
        if L.tg_api_version() != API_VERSION:
            raise RuntimeError(f"libtiga at {path} has API version {L.tg_api_version()}; this binding needs {API_VERSION}")
        _lib = L
    return _lib


def _check(status, msg_fn):
    if status != 0:
        raise TigaError(status, msg_fn().decode())


class Tape:
    """A host runtime (or CUDA device `device`) and one tape. Values are f64 lists here."""

    def __init__(self, device=None):
        L = lib()
        self.rt, self.t = C.c_void_p(), C.c_void_p()
        if device is None:
            _check(L.tg_runtime_create_host(C.byref(self.rt)), L.tg_last_error)
        else:
            _check(L.tg_runtime_create_cuda(device, C.byref(self.rt)), L.tg_last_error)
        _check(L.tg_tape_create(self.rt, C.byref(self.t)), L.tg_last_error)

    def close(self):
        if self.rt:
            lib().tg_runtime_destroy(self.rt)  # destroys the tape too
            self.rt = self.t = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _err(self):
        return lib().tg_tape_error(self.t)

    def _value(self, fn, shape, data, flags):
        n = 1
        for s in shape:
            n *= s
        if len(data) != n:
            raise ValueError(f"{len(data)} values for shape {list(shape)} ({n} elements)")
        buf = (C.c_double * n)(*data)
        shp = (C.c_int64 * max(1, len(shape)))(*shape)
        out = C.c_int64(NO_ID)
        _check(fn(self.t, F64, len(shape), shp, buf, 8 * n, flags, C.byref(out)), self._err)
        return out.value

    def input(self, shape, data, requires_grad=False):
        return self._value(lib().tg_tape_input, shape, data, REQUIRES_GRAD if requires_grad else 0)

    def parameter(self, shape, data):
        return self._value(lib().tg_tape_parameter, shape, data, 0)

    def check(self):
        """Raises if an op call failed (the tape's sticky error)."""
        _check(lib().tg_tape_status(self.t), self._err)

    def op(self, name, *args):
        return getattr(lib(), "tg_" + name)(self.t, *args)

    def read(self, vid, grad=False):
        n = C.c_int64()
        _check(lib().tg_tape_numel(self.t, vid, C.byref(n)), self._err)
        buf = (C.c_double * n.value)()
        fn = lib().tg_tape_read_grad if grad else lib().tg_tape_read
        _check(fn(self.t, vid, buf, 8 * n.value), self._err)
        return list(buf)

    def scalar(self, vid):
        v = C.c_double()
        _check(lib().tg_tape_scalar(self.t, vid, C.byref(v)), self._err)
        return v.value

    def backward(self, loss):
        _check(lib().tg_tape_backward(self.t, loss), self._err)

    def explain(self):
        n = C.c_size_t()
        lib().tg_tape_explain(self.t, None, 0, C.byref(n))
        buf = C.create_string_buffer(n.value + 1)
        lib().tg_tape_explain(self.t, buf, n.value + 1, None)
        return buf.value.decode()
