"""The ctypes layer: loads libtiga, declares every function of tiga.h from _decls (generated from
the header), checks the library's API version, and defines the errors and the struct types."""
from __future__ import annotations

import ctypes as C
import os
import sys
from typing import Any, Dict

from . import _decls

API_VERSION: int = _decls.CONSTANTS["TIGA_API_VERSION"]

# C type (as _decls spells it) -> ctypes type. Every other pointer is a c_void_p: callers pass
# byref(...), arrays, buffers or addresses.
_SCALARS: Dict[str, Any] = {
    "void": None,
    "int": C.c_int,
    "unsigned": C.c_uint,
    "double": C.c_double,
    "size_t": C.c_size_t,
    "int32_t": C.c_int32,
    "int64_t": C.c_int64,
    "uint64_t": C.c_uint64,
    "uint8_t": C.c_uint8,
    "tg_id": C.c_int64,
    "const char *": C.c_char_p,
}


def ctype(name: str) -> Any:
    """The ctypes type of a C type from _decls."""
    if name in _SCALARS:
        return _SCALARS[name]
    if name in _decls.ENUMS:
        return C.c_int
    if name in _decls.TYPEDEFS:
        return ctype(_decls.TYPEDEFS[name])
    if name in _decls.CALLBACKS:
        return CALLBACK_TYPES[name]
    if name.endswith("*"):
        return C.c_void_p
    if name in STRUCT_TYPES:
        return STRUCT_TYPES[name]
    raise TypeError(f"tiga binding: no ctypes mapping for C type {name!r}")


CALLBACK_TYPES: Dict[str, Any] = {}
for _name, (_res, _params) in _decls.CALLBACKS.items():
    CALLBACK_TYPES[_name] = C.CFUNCTYPE(ctype(_res), *[ctype(t) for t, _ in _params])

STRUCT_TYPES: Dict[str, Any] = {}
for _name, _fields in _decls.STRUCTS.items():
    _cfields = []
    for _t, _n, _dims in _fields:
        _ct = ctype(_t)
        if _dims is not None:
            _ct = _ct * int(_decls.CONSTANTS.get(_dims, _dims))
        _cfields.append((_n, _ct))
    STRUCT_TYPES[_name] = type(_name, (C.Structure,), {"_fields_": _cfields})


def _candidates():
    env = os.environ.get("TIGA_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    names = {"darwin": ["libtiga.dylib"], "win32": ["tiga.dll"]}.get(sys.platform, ["libtiga.so"])
    for n in names:
        yield os.path.join(here, n)
    for entry in sorted(os.listdir(here)):
        if entry.startswith("libtiga.so."):
            yield os.path.join(here, entry)


def _load() -> C.CDLL:
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(path)
            continue
        lib = C.CDLL(path)
        got = lib.tg_api_version()
        if got // 100 != API_VERSION // 100:
            raise ImportError(
                f"tiga: {path} has API version {got}; this package was generated from tiga.h {API_VERSION} "
                "(the MAJOR.MINOR must match)")
        for fname, (res, params) in _decls.FUNCTIONS.items():
            f = getattr(lib, fname)
            f.restype = ctype(res)
            f.argtypes = [ctype(t) for t, _ in params]
        lib._path = path  # type: ignore[attr-defined]
        return lib
    raise ImportError("tiga: libtiga not found (looked at: " + ", ".join(tried) +
                      "); install the package with pip, or set TIGA_LIB to a built libtiga.so")


lib = _load()
STATUS = _decls.ENUMS["tg_status"]
STATUS_NAMES = {v: k for k, v in STATUS.items()}


class TigaError(RuntimeError):
    """A failed tiga call. `status` is the tg_status code, `status_name` its name (e.g.
    "TG_ERR_SHAPE"), and the message is the library's (tg_tape_error / tg_last_error)."""

    def __init__(self, status: int, message: str):
        self.status = int(status)
        self.status_name = STATUS_NAMES.get(self.status, "TG_ERR_UNKNOWN")
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


def last_error() -> str:
    return lib.tg_last_error().decode("utf-8", "replace")


def check_global(status: int) -> None:
    """Raises for a status whose message is tg_last_error() (no handle could hold it)."""
    if status != 0:
        raise TigaError(status, last_error())


def new_struct(name: str, init: Any = None) -> Any:
    """An options struct initialised by its tg_<name>_init function."""
    s = STRUCT_TYPES[name]()
    fn = init or getattr(lib, name + "_init")
    fn(C.byref(s))
    return s
