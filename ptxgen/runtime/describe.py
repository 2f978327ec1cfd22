"""What a tensor-like launch argument is: (pointer, shape, element strides or None for
row-major, dtype name, device), read from a torch tensor, a ``__cuda_array_interface__``
array, a DLPack producer or capsule, or a host array (which a launch refuses).

The Binder (args.py) picks an extractor once per argument type and reads torch tensors
inline on its hot path; this module holds the readers themselves and the dtype-name tables
they share.  No GPU is touched: every reader works on stand-in objects.
"""
from __future__ import annotations

import ctypes
import numbers
import operator

from ..dtypes import ALL_SCALARS

# describe() returns (ptr, shape, element strides or None for row-major, dtype name, device),
# device being an ordinal, -1 (a CUDA pointer of unknown device) or "cpu"/"<other place>".
torch_dt: dict = {}
_typestr_cache: dict = {}
_DL_CODES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
             (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
             (2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (4, 16): "bfloat16",
             (6, 8): "bool", (10, 8): "float8_e4m3fn", (12, 8): "float8_e5m2",
             (17, 4): "float4_e2m1fn"}


_dl: list = []   # [the DLTensor struct type, PyCapsule_GetPointer]: made for the first capsule


def _dl_types():
    if not _dl:
        class DLTensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                        ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                        ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.POINTER(ctypes.c_int64)),
                        ("byte_offset", ctypes.c_uint64)]

        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        _dl[:] = [DLTensor, get]
    return _dl


def dlpack_describe(capsule):
    """Read a legacy "dltensor" capsule without consuming it; its destructor frees it later,
    while the producer object the user passed keeps the memory alive for the launch."""
    dl_tensor, capsule_ptr = _dl_types()
    t = dl_tensor.from_address(capsule_ptr(capsule, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    name = _DL_CODES.get((t.code, t.bits), f"dlpack(code={t.code}, bits={t.bits})")
    if t.lanes != 1:
        name += f"x{t.lanes}"
    dev = {1: "cpu", 2: t.device_id, 3: -1, 13: t.device_id}.get(t.device_type,
                                                                   f"DLPack device {t.device_type}")
    return (t.data or 0) + t.byte_offset, shape, strides, name, dev


def _typestr_name(ts: str):
    r = _typestr_cache.get(ts)
    if r is None:
        import numpy as np
        try:
            dt = np.dtype(ts)
            r = (dt.name, dt.itemsize)
        except TypeError:
            r = (ts, 1)
        _typestr_cache[ts] = r
    return r


def torch_dtype_name(dt) -> str:
    import torch
    for n in ALL_SCALARS:
        if getattr(torch, n, None) is not None:
            torch_dt[getattr(torch, n)] = n
    return torch_dt.get(dt) or str(dt).replace("torch.", "")


def torch_dtypes() -> dict:
    """ptxgen dtype name -> [torch dtype objects], for ``Binder.specialize``; {} without torch
    imported (a launch never imports torch itself)."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    out: dict = {}
    for n in ALL_SCALARS:
        dt = getattr(torch, n, None)
        if dt is not None and dt.__class__ is torch.dtype:
            torch_dt[dt] = n
            out.setdefault(n, []).append(dt)
    return out


def from_torch(t, need_strides):
    """(Binder.bind_device reads torch tensors inline, the same way: the hot path.)"""
    if not t.is_cuda:
        return 0, (), None, "", ("cpu" if t.device.type == "cpu" else str(t.device))
    name = torch_dt.get(t.dtype) or torch_dtype_name(t.dtype)
    strides = None if not need_strides or t.is_contiguous() else t.stride()
    return t.data_ptr(), t.shape, strides, name, t.get_device()


class ArgProblem(Exception):
    """Raised by an extractor; ``Binder`` prefixes the argument's name."""


def _from_cai(a, need_strides):
    d = a.__cuda_array_interface__
    data = d.get("data")
    if not isinstance(data, (tuple, list)) or not data or not hasattr(data[0], "__index__"):
        raise ArgProblem(f"its __cuda_array_interface__ has no 'data' (pointer, read-only) "
                          f"pair (got {data!r}); pass an array that owns device memory")
    ptr = data[0] if data[0].__class__ is int else operator.index(data[0])
    name, itemsize = _typestr_name(d["typestr"])
    shape = tuple(d["shape"])
    # the interface does not say which device; objects that also speak DLPack (cupy) do
    dev = -1
    where = getattr(a, "__dlpack_device__", None)
    if where is not None:
        kind, ordinal = where()
        if kind == 2 or kind == 13:      # kDLCUDA, kDLCUDAManaged
            dev = ordinal
    bs = d.get("strides") if need_strides else None
    if bs is not None:
        bs = tuple(bs)
        if any(s % itemsize for s in bs):
            return ptr, shape, ("bytes", bs, itemsize), name, dev
        bs = tuple(s // itemsize for s in bs)
    return ptr, shape, bs, name, dev


def _from_dlpack(a, need_strides):
    dev_type, _ = a.__dlpack_device__()
    if dev_type == 1:
        return 0, (), None, "", "cpu"
    return dlpack_describe(a.__dlpack__())


def _from_host(a, need_strides):
    return 0, (), None, "", "cpu"


def from_integer(a, need_strides):
    """A marker: numpy (or other) integers are raw pointers, which Binder.bind_device turns
    into Python ints itself."""
    raise AssertionError("Binder.bind_device handles integers")


EXTRACT: dict = {}


def extractor(obj):
    """Pick how to read a tensor-like object; cached per type when the type itself (not
    just this instance) provides the protocol."""
    tp = type(obj)
    if tp.__module__.startswith("torch") and hasattr(tp, "data_ptr"):
        f = from_torch
    elif isinstance(obj, numbers.Integral) and tp is not bool:   # before numpy's interfaces
        f = from_integer
    elif hasattr(obj, "__cuda_array_interface__"):
        f = _from_cai
    elif hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        f = _from_dlpack
    elif hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        f = _from_host
    else:
        return None
    if f is from_torch or f is from_integer or hasattr(tp, "__cuda_array_interface__") or \
            hasattr(tp, "__dlpack__") or f is _from_host:
        EXTRACT[tp] = f
    return f
