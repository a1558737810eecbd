"""DLPack capsules through ctypes: wrapping tiga's DLManagedTensor as a "dltensor" PyCapsule, and
reading a producer's capsule (PyTorch, CuPy, JAX, NumPy) for a zero-copy borrow."""
from __future__ import annotations

import ctypes as C
from typing import Any, Tuple

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST = 1, 2, 3
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT = 0, 1, 2, 4


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("device", DLDevice),
        ("ndim", C.c_int32),
        ("dtype", DLDataType),
        ("shape", C.POINTER(C.c_int64)),
        ("strides", C.POINTER(C.c_int64)),
        ("byte_offset", C.c_uint64),
    ]


class DLManagedTensor(C.Structure):
    pass


_Deleter = C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p), ("deleter", _Deleter)]

_NAME = b"dltensor"  # kept alive for the capsules' lifetime (module constant)
_USED = b"used_dltensor"

_api = C.pythonapi
_api.PyCapsule_New.restype = C.py_object
_api.PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]
_api.PyCapsule_IsValid.restype = C.c_int
_api.PyCapsule_IsValid.argtypes = [C.c_void_p, C.c_char_p]
_api.PyCapsule_GetPointer.restype = C.c_void_p
_api.PyCapsule_GetPointer.argtypes = [C.c_void_p, C.c_char_p]
_api.PyCapsule_GetName.restype = C.c_char_p
_api.PyCapsule_GetName.argtypes = [C.c_void_p]


@C.CFUNCTYPE(None, C.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    # Called with the capsule's raw address (refcount already 0: never turn it into an object).
    # A consumer renames a capsule it takes over to "used_dltensor" and calls the deleter itself.
    if _api.PyCapsule_IsValid(capsule, _NAME):
        ptr = _api.PyCapsule_GetPointer(capsule, _NAME)
        mt = DLManagedTensor.from_address(ptr)
        if mt.deleter:
            mt.deleter(C.cast(ptr, C.POINTER(DLManagedTensor)))


# Capsules may outlive this module at interpreter exit: keep the C thunk alive for good.
_api.Py_IncRef.argtypes = [C.py_object]
_api.Py_IncRef(_capsule_destructor)


def capsule_from(ptr: int) -> Any:
    """A "dltensor" capsule owning tiga's DLManagedTensor at ptr."""
    return _api.PyCapsule_New(ptr, _NAME, C.cast(_capsule_destructor, C.c_void_p))


def free_unwrapped(ptr: int) -> None:
    """Runs the deleter of a DLManagedTensor that never made it into a capsule."""
    mt = DLManagedTensor.from_address(ptr)
    if mt.deleter:
        mt.deleter(C.cast(ptr, C.POINTER(DLManagedTensor)))


def read_capsule(capsule: Any) -> Tuple[DLTensor, int]:
    """The DLTensor of a producer's unconsumed "dltensor" capsule and the address of its first
    element. The capsule stays the producer's: keeping it alive keeps the memory alive, and its
    destructor frees it once dropped."""
    addr = id(capsule)  # CPython: the object's address
    if not _api.PyCapsule_IsValid(addr, _NAME):
        name = _api.PyCapsule_GetName(addr)
        raise BufferError(f"tiga: expected a DLPack 'dltensor' capsule, got {name!r}")
    ptr = _api.PyCapsule_GetPointer(addr, _NAME)
    mt = DLManagedTensor.from_address(ptr)
    t = mt.dl_tensor
    return t, (t.data or 0) + t.byte_offset
