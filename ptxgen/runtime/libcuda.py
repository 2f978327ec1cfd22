"""The CUDA driver (libcuda) through ctypes: the part of its API that ptxgen calls, in the
calling convention of ``cuda.bindings.driver``, so that ``runtime/driver.py`` can use either.

Why: importing cuda-bindings cost a first launch whose cubin is on disk about 54 ms of its
57 (``cuda.pathfinder`` to find the library, then the generated ``cuda.bindings.driver``
module; issue #18, an H200 host with torch imported).  This module opens ``libcuda.so.1``
(``nvcuda.dll`` on Windows) by its soname, the way the driver is installed, and binds each
entry point by the name ``cuda.h`` (CUDA 13.0) maps it to (``cuCtxPushCurrent`` is
``cuCtxPushCurrent_v2``, ``cuMemAlloc`` is ``cuMemAlloc_v2``, ...; the legacy default stream,
not the ``_ptsz`` per-thread one, as cuda-bindings does by default).  Importing this module,
opening the library and binding the core functions, then cuInit, took 1.4-2.0 ms where
``from cuda.bindings import driver`` and cuInit took 39-48 ms, in fresh processes on a 2-core
CPU machine against a stand-in libcuda.so.1 (tests/mockcuda), bytecode cached.

The convention: each ``cuX(...)`` returns ``(CUresult, *outputs)`` with the error as an int;
handles are ``CUcontext``/``CUmodule``/``CUfunction``/``CUstream``/``CUevent`` (pointer
objects that ``int()`` reads), devices and device pointers plain ints; enums are classes of
int constants that carry their ``name`` (``CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS``);
``cuuint64_t``/``cuuint32_t`` are checked ints; ``cuTensorMapEncodeTiled`` returns a
``CUtensorMap`` whose ``getPtr()`` addresses its 128 bytes; ``cuLaunchKernelEx`` takes a
``CUlaunchConfig`` whose ``attrs`` is set from a list of ``CUlaunchAttribute``.

The launch itself: ``launch_kernel_raw`` is cuLaunchKernel bound with no argument types, which
ctypes calls in less than half the time it takes with them (0.56 against 1.3 us a call to a
do-nothing C function of that signature, on that CPU machine; against the stand-in library
the bare call took 0.87 us, the bare cuda-bindings call 0.91 us).  It returns the CUresult as
an int, takes the grid, block and shared-memory sizes as Python ints (each below 2^31, as the
Launcher checks) and every pointer (function, stream, kernelParams, extra) as a pointer object
or None, which ``pointer_arg`` makes; ``runtime/launcher.py`` prepares them once per launcher
and stream.  ``launch_kernel_ex_raw`` is cuLaunchKernelEx bound the same way: a Kernel's own
launch (constant dims) passes it a config made once per stream (``launch_config_arg``), four
arguments instead of eleven (0.24-0.36 against 0.42-0.53 us a call to do-nothing C functions of
the two signatures, on the CPU machine of 2026-12-02).

``load()`` raises ``LibcudaNotFound`` where the library cannot be opened (no driver: the
caller says so, cuda-bindings would fail the same way) and another exception where it opens
but lacks a core entry point (the caller then falls back to cuda-bindings).  Entry points only
benchmarks, tensor maps or cluster launches use are bound on first use; one the driver lacks
returns CUDA_ERROR_NOT_FOUND.
"""
from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (POINTER, byref, c_char, c_char_p, c_float, c_int, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)

from .libcuda_types import (  # noqa: F401  (re-exported: the binding's public names)
    _POINTER_ATTR_TYPES, CUcontext, CUdevice_attribute, CUevent, CUevent_flags, CUfunction,
    CUfunction_attribute, CUjit_option, CUlaunchAttribute, CUlaunchAttributeID,
    CUlaunchAttributeValue, CUlaunchConfig, CUmodule, CUpointer_attribute, CUstream,
    CUstream_flags, CUtensorMap, CUtensorMap_st, CUtensorMapDataType, CUtensorMapFloatOOBfill,
    CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle, cuuint32_t, cuuint64_t,
    launch_config_arg, pointer_arg)

LIBRARY = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"
CUDA_ERROR_NOT_FOUND = 500


class LibcudaNotFound(OSError):
    """The driver library could not be opened: this machine has no (usable) NVIDIA driver."""


# ---- the library --------------------------------------------------------------------------
_P = POINTER
_int_p, _uint_p, _size_p, _u64_p = _P(c_int), _P(c_uint), _P(c_size_t), _P(c_uint64)
_ptr_p = _P(c_void_p)

# (C symbol, argtypes): the core entry points, bound when the library is opened.  Each name
# is what cuda.h (13.0) maps the API name to.
_CORE = {
    "cuInit": ("cuInit", [c_uint]),
    "cuDriverGetVersion": ("cuDriverGetVersion", [_int_p]),
    "cuGetErrorName": ("cuGetErrorName", [c_int, _P(c_char_p)]),
    "cuGetErrorString": ("cuGetErrorString", [c_int, _P(c_char_p)]),
    "cuDeviceGet": ("cuDeviceGet", [_int_p, c_int]),
    "cuDeviceGetCount": ("cuDeviceGetCount", [_int_p]),
    "cuDeviceGetName": ("cuDeviceGetName", [c_char_p, c_int, c_int]),
    "cuDeviceGetAttribute": ("cuDeviceGetAttribute", [_int_p, c_int, c_int]),
    "cuDevicePrimaryCtxRetain": ("cuDevicePrimaryCtxRetain", [_ptr_p, c_int]),
    "cuCtxGetCurrent": ("cuCtxGetCurrent", [_ptr_p]),
    "cuCtxSetCurrent": ("cuCtxSetCurrent", [c_void_p]),
    "cuCtxPushCurrent": ("cuCtxPushCurrent_v2", [c_void_p]),
    "cuCtxPopCurrent": ("cuCtxPopCurrent_v2", [_ptr_p]),
    "cuCtxGetDevice": ("cuCtxGetDevice", [_int_p]),
    "cuCtxSynchronize": ("cuCtxSynchronize", []),
    "cuModuleLoadData": ("cuModuleLoadData", [_ptr_p, c_void_p]),
    "cuModuleLoadDataEx": ("cuModuleLoadDataEx", [_ptr_p, c_void_p, c_uint, _P(c_int), _ptr_p]),
    "cuModuleUnload": ("cuModuleUnload", [c_void_p]),
    "cuModuleGetFunction": ("cuModuleGetFunction", [_ptr_p, c_void_p, c_char_p]),
    "cuFuncGetAttribute": ("cuFuncGetAttribute", [_int_p, c_int, c_void_p]),
    "cuFuncSetAttribute": ("cuFuncSetAttribute", [c_void_p, c_int, c_int]),
    "cuLaunchKernel": ("cuLaunchKernel", [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint,
                                          c_uint, c_uint, c_void_p, c_void_p, c_void_p]),
    "cuStreamCreate": ("cuStreamCreate", [_ptr_p, c_uint]),
    "cuStreamDestroy": ("cuStreamDestroy_v2", [c_void_p]),
    "cuStreamGetCtx": ("cuStreamGetCtx", [c_void_p, _ptr_p]),
    "cuStreamSynchronize": ("cuStreamSynchronize", [c_void_p]),
    "cuPointerGetAttribute": ("cuPointerGetAttribute", [c_void_p, c_int, c_uint64]),
}
# Bound on first use: tensor maps (CUDA 12.0), cluster launches (11.8), and what the copy
# benchmark and tests use (memory, copies, events).  Several C names: the first the driver
# has (cuEventElapsedTime_v2 is CUDA 12.8's).
_LAZY = {
    "cuTensorMapEncodeTiled": (("cuTensorMapEncodeTiled",),
                               [c_void_p, c_int, c_uint32, c_void_p, _u64_p, _u64_p,
                                _P(c_uint32), _P(c_uint32), c_int, c_int, c_int, c_int]),
    "cuLaunchKernelEx": (("cuLaunchKernelEx",),
                         [_P(CUlaunchConfig), c_void_p, c_void_p, c_void_p]),
    "cuDeviceTotalMem": (("cuDeviceTotalMem_v2",), [_size_p, c_int]),
    "cuMemGetInfo": (("cuMemGetInfo_v2",), [_size_p, _size_p]),
    "cuMemAlloc": (("cuMemAlloc_v2",), [_u64_p, c_size_t]),
    "cuMemFree": (("cuMemFree_v2",), [c_uint64]),
    "cuMemcpyHtoD": (("cuMemcpyHtoD_v2",), [c_uint64, c_void_p, c_size_t]),
    "cuMemcpyDtoH": (("cuMemcpyDtoH_v2",), [c_void_p, c_uint64, c_size_t]),
    "cuMemcpyDtoD": (("cuMemcpyDtoD_v2",), [c_uint64, c_uint64, c_size_t]),
    "cuMemcpyDtoDAsync": (("cuMemcpyDtoDAsync_v2",), [c_uint64, c_uint64, c_size_t, c_void_p]),
    "cuMemsetD8Async": (("cuMemsetD8Async",), [c_uint64, ctypes.c_ubyte, c_size_t, c_void_p]),
    "cuEventCreate": (("cuEventCreate",), [_ptr_p, c_uint]),
    "cuEventRecord": (("cuEventRecord",), [c_void_p, c_void_p]),
    "cuEventSynchronize": (("cuEventSynchronize",), [c_void_p]),
    "cuEventElapsedTime": (("cuEventElapsedTime_v2", "cuEventElapsedTime"),
                           [_P(c_float), c_void_p, c_void_p]),
    "cuEventDestroy": (("cuEventDestroy_v2",), [c_void_p]),
}
BOUND = {**{k: (v[0],) for k, v in _CORE.items()}, **{k: v[0] for k, v in _LAZY.items()}}


def _ptr(v):
    """A pointer-sized argument from an int, a handle, a c_void_p, None."""
    if v is None or v.__class__ is int:
        return v
    if isinstance(v, c_void_p):
        return v.value
    return int(v)


def _writable(v):
    """(address, keep-alive) of a bytearray/memoryview, or None for other values."""
    if isinstance(v, (bytearray, memoryview)):
        b = (c_char * len(v)).from_buffer(v)
        return ctypes.addressof(b), b
    return None


class Driver:
    """The opened driver: ``cuX`` methods in cuda-bindings' convention, the enum and struct
    types as attributes (``d.CUfunction_attribute``, ``d.CUlaunchConfig``, ``d.cuuint64_t``)."""

    backend = "ctypes"
    library = LIBRARY
    CUdevice_attribute, CUfunction_attribute = CUdevice_attribute, CUfunction_attribute
    CUpointer_attribute, CUjit_option = CUpointer_attribute, CUjit_option
    CUstream_flags, CUevent_flags = CUstream_flags, CUevent_flags
    CUlaunchAttributeID, CUlaunchAttribute = CUlaunchAttributeID, CUlaunchAttribute
    CUlaunchAttributeValue, CUlaunchConfig = CUlaunchAttributeValue, CUlaunchConfig
    CUtensorMap, CUtensorMapDataType = CUtensorMap, CUtensorMapDataType
    CUtensorMapInterleave, CUtensorMapSwizzle = CUtensorMapInterleave, CUtensorMapSwizzle
    CUtensorMapL2promotion = CUtensorMapL2promotion
    CUtensorMapFloatOOBfill = CUtensorMapFloatOOBfill
    CUcontext, CUmodule, CUfunction, CUstream, CUevent = CUcontext, CUmodule, CUfunction, \
        CUstream, CUevent
    cuuint64_t, cuuint32_t = cuuint64_t, cuuint32_t
    pointer_arg = staticmethod(pointer_arg)
    launch_config_arg = staticmethod(launch_config_arg)

    def __init__(self, lib):
        self._lib = lib
        self._fn: dict = {}
        self._lock = threading.Lock()
        for api, (sym, argtypes) in _CORE.items():
            self._fn[api] = self._bind(sym, argtypes)     # AttributeError: no such symbol
        # cuLaunchKernel again, with no argument types: see the module docstring
        self.launch_kernel_raw = lib[_CORE["cuLaunchKernel"][0]]
        self.launch_kernel_raw.restype = c_int
        try:                        # and cuLaunchKernelEx (CUDA 12.0+) for prebuilt configs
            self.launch_kernel_ex_raw = lib[_LAZY["cuLaunchKernelEx"][0][0]]
            self.launch_kernel_ex_raw.restype = c_int
        except AttributeError:
            self.launch_kernel_ex_raw = None

    def _bind(self, sym, argtypes):
        f = self._lib[sym]          # a new function object per call (attribute access caches)
        f.restype, f.argtypes = c_int, argtypes
        return f

    def _lazy(self, api):
        f = self._fn.get(api)
        if f is None:
            syms, argtypes = _LAZY[api]
            with self._lock:
                for sym in syms:
                    try:
                        f = self._bind(sym, argtypes)
                        break
                    except AttributeError:
                        continue
                self._fn[api] = f or False
        return f or None

    def _missing(self, *outs):
        return (CUDA_ERROR_NOT_FOUND, *outs)

    # ---- initialization, errors, versions --------------------------------------------
    def cuInit(self, flags):
        return (self._fn["cuInit"](int(flags)),)

    def cuDriverGetVersion(self):
        v = c_int()
        return (self._fn["cuDriverGetVersion"](byref(v)), v.value)

    def cuGetErrorName(self, err):
        s = c_char_p()
        return (self._fn["cuGetErrorName"](int(err), byref(s)), s.value)

    def cuGetErrorString(self, err):
        s = c_char_p()
        return (self._fn["cuGetErrorString"](int(err), byref(s)), s.value)

    # ---- devices and contexts ---------------------------------------------------------
    def cuDeviceGet(self, ordinal):
        d = c_int()
        return (self._fn["cuDeviceGet"](byref(d), int(ordinal)), d.value)

    def cuDeviceGetCount(self):
        n = c_int()
        return (self._fn["cuDeviceGetCount"](byref(n)), n.value)

    def cuDeviceGetName(self, length, dev):
        buf = ctypes.create_string_buffer(int(length))
        return (self._fn["cuDeviceGetName"](buf, int(length), int(dev)), buf.raw)

    def cuDeviceGetAttribute(self, attrib, dev):
        v = c_int()
        return (self._fn["cuDeviceGetAttribute"](byref(v), int(attrib), int(dev)), v.value)

    def cuDeviceTotalMem(self, dev):
        f = self._lazy("cuDeviceTotalMem")
        if f is None:
            return self._missing(None)
        n = c_size_t()
        return (f(byref(n), int(dev)), n.value)

    def cuDevicePrimaryCtxRetain(self, dev):
        ctx = CUcontext()
        return (self._fn["cuDevicePrimaryCtxRetain"](byref(ctx), int(dev)), ctx)

    def cuCtxGetCurrent(self):
        ctx = CUcontext()
        return (self._fn["cuCtxGetCurrent"](byref(ctx)), ctx)

    def cuCtxSetCurrent(self, ctx):
        return (self._fn["cuCtxSetCurrent"](_ptr(ctx)),)

    def cuCtxPushCurrent(self, ctx):
        return (self._fn["cuCtxPushCurrent"](_ptr(ctx)),)

    def cuCtxPopCurrent(self):
        ctx = CUcontext()
        return (self._fn["cuCtxPopCurrent"](byref(ctx)), ctx)

    def cuCtxGetDevice(self):
        d = c_int()
        return (self._fn["cuCtxGetDevice"](byref(d)), d.value)

    def cuCtxSynchronize(self):
        return (self._fn["cuCtxSynchronize"](),)

    # ---- modules and functions --------------------------------------------------------
    def cuModuleLoadData(self, image):
        m = CUmodule()
        return (self._fn["cuModuleLoadData"](byref(m), image), m)

    def cuModuleLoadDataEx(self, image, numOptions, options, optionValues):
        """Option values: a bytearray (a log buffer the driver writes into) or an int (a
        size, a flag: passed in the pointer-sized slot, as the driver API takes it)."""
        n = int(numOptions)
        opts = (c_int * max(1, n))(*[int(o) for o in list(options)[:n]])
        vals = (c_void_p * max(1, n))()
        keep = []
        for i, v in enumerate(list(optionValues)[:n]):
            w = _writable(v)
            if w is not None:
                vals[i] = w[0]
                keep.append(w[1])
            else:
                vals[i] = int(v) or None
        m = CUmodule()
        err = self._fn["cuModuleLoadDataEx"](byref(m), image, n, opts, vals)
        del keep
        return (err, m)

    def cuModuleUnload(self, hmod):
        return (self._fn["cuModuleUnload"](_ptr(hmod)),)

    def cuModuleGetFunction(self, hmod, name):
        f = CUfunction()
        if isinstance(name, str):
            name = name.encode()
        return (self._fn["cuModuleGetFunction"](byref(f), _ptr(hmod), name), f)

    def cuFuncGetAttribute(self, attrib, hfunc):
        v = c_int()
        return (self._fn["cuFuncGetAttribute"](byref(v), int(attrib), _ptr(hfunc)), v.value)

    def cuFuncSetAttribute(self, hfunc, attrib, value):
        return (self._fn["cuFuncSetAttribute"](_ptr(hfunc), int(attrib), int(value)),)

    # ---- launches -----------------------------------------------------------------------
    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, kernelParams, extra):
        return (self._fn["cuLaunchKernel"](_ptr(f), gx, gy, gz, bx, by, bz, smem, _ptr(stream),
                                           _ptr(kernelParams), _ptr(extra) or None),)

    def cuLaunchKernelEx(self, config, f, kernelParams, extra):
        fn = self._lazy("cuLaunchKernelEx")
        if fn is None:
            return self._missing()
        return (fn(byref(config), _ptr(f), _ptr(kernelParams), _ptr(extra) or None),)

    def cuTensorMapEncodeTiled(self, tensorDataType, tensorRank, globalAddress, globalDim,
                               globalStrides, boxDim, elementStrides, interleave, swizzle,
                               l2Promotion, oobFill):
        fn = self._lazy("cuTensorMapEncodeTiled")
        if fn is None:
            return self._missing(None)
        r = int(tensorRank)
        m = CUtensorMap()
        err = fn(m.getPtr(), int(tensorDataType), r, _ptr(globalAddress),
                 (c_uint64 * max(1, r))(*map(int, globalDim)),
                 (c_uint64 * max(1, r - 1))(*map(int, globalStrides)),
                 (c_uint32 * max(1, r))(*map(int, boxDim)),
                 (c_uint32 * max(1, r))(*map(int, elementStrides)),
                 int(interleave), int(swizzle), int(l2Promotion), int(oobFill))
        return (err, m)

    # ---- streams, pointers, memory, events (benchmarks and tests) -------------------------
    def cuStreamCreate(self, flags):
        s = CUstream()
        return (self._fn["cuStreamCreate"](byref(s), int(flags)), s)

    def cuStreamDestroy(self, stream):
        return (self._fn["cuStreamDestroy"](_ptr(stream)),)

    def cuStreamGetCtx(self, stream):
        ctx = CUcontext()
        return (self._fn["cuStreamGetCtx"](_ptr(stream), byref(ctx)), ctx)

    def cuStreamSynchronize(self, stream):
        return (self._fn["cuStreamSynchronize"](_ptr(stream)),)

    def cuPointerGetAttribute(self, attribute, ptr):
        """The attributes whose value is one integer (CUpointer_attribute lists them)."""
        t = _POINTER_ATTR_TYPES.get(int(attribute))
        if t is None:
            return (1, None)          # CUDA_ERROR_INVALID_VALUE: not bound here
        v = t()
        err = self._fn["cuPointerGetAttribute"](byref(v), int(attribute), int(ptr))
        return (err, v.value or 0)

    def cuMemGetInfo(self):
        f = self._lazy("cuMemGetInfo")
        if f is None:
            return self._missing(None, None)
        free, total = c_size_t(), c_size_t()
        return (f(byref(free), byref(total)), free.value, total.value)

    def cuMemAlloc(self, bytesize):
        f = self._lazy("cuMemAlloc")
        if f is None:
            return self._missing(None)
        p = c_uint64()
        return (f(byref(p), int(bytesize)), p.value)

    def cuMemFree(self, dptr):
        return self._call("cuMemFree", int(dptr))

    def cuMemcpyHtoD(self, dst, src, nbytes):
        return self._call("cuMemcpyHtoD", int(dst), _ptr(src), int(nbytes))

    def cuMemcpyDtoH(self, dst, src, nbytes):
        return self._call("cuMemcpyDtoH", _ptr(dst), int(src), int(nbytes))

    def cuMemcpyDtoD(self, dst, src, nbytes):
        return self._call("cuMemcpyDtoD", int(dst), int(src), int(nbytes))

    def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        return self._call("cuMemcpyDtoDAsync", int(dst), int(src), int(nbytes), _ptr(stream))

    def cuMemsetD8Async(self, dst, uc, n, stream):
        return self._call("cuMemsetD8Async", int(dst), int(uc), int(n), _ptr(stream))

    def cuEventCreate(self, flags):
        f = self._lazy("cuEventCreate")
        if f is None:
            return self._missing(None)
        e = CUevent()
        return (f(byref(e), int(flags)), e)

    def cuEventRecord(self, event, stream):
        return self._call("cuEventRecord", _ptr(event), _ptr(stream))

    def cuEventSynchronize(self, event):
        return self._call("cuEventSynchronize", _ptr(event))

    def cuEventElapsedTime(self, start, end):
        f = self._lazy("cuEventElapsedTime")
        if f is None:
            return self._missing(None)
        ms = c_float()
        return (f(byref(ms), _ptr(start), _ptr(end)), ms.value)

    def cuEventDestroy(self, event):
        return self._call("cuEventDestroy", _ptr(event))

    def _call(self, api, *args):
        f = self._lazy(api)
        return self._missing() if f is None else (f(*args),)

    def __getattr__(self, name):
        # only names no attribute, method or type above provides get here
        if name.startswith(("cu", "CU")):
            raise AttributeError(f"{name} is not bound by ptxgen's ctypes CUDA driver "
                                 f"(ptxgen/runtime/libcuda.py binds what ptxgen calls); bind it "
                                 f"there, or set PTXGEN_DRIVER=bindings to use cuda-bindings")
        raise AttributeError(name)

    def __repr__(self):
        return f"<ptxgen ctypes CUDA driver ({self.library})>"


_opened: list = []
_open_lock = threading.Lock()


def open_library():
    """The CDLL of the driver; LibcudaNotFound where it cannot be opened."""
    loader = ctypes.WinDLL if os.name == "nt" else ctypes.CDLL
    try:
        return loader(LIBRARY)
    except OSError as e:
        raise LibcudaNotFound(f"{LIBRARY} could not be opened ({e}); this machine has no "
                              f"NVIDIA driver, or it is not on the loader's path") from None


def load() -> Driver:
    """The process's Driver, made once (cuInit is the caller's)."""
    if not _opened:
        with _open_lock:
            if not _opened:
                _opened.append(Driver(open_library()))
    return _opened[0]


__all__ = ["load", "Driver", "LibcudaNotFound", "LIBRARY", "BOUND", "pointer_arg",
           "CUlaunchConfig", "CUlaunchAttribute", "CUlaunchAttributeValue", "CUtensorMap",
           "CUtensorMap_st", "cuuint64_t", "cuuint32_t"]
