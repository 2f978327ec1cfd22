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
and stream.

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

LIBRARY = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"
CUDA_ERROR_NOT_FOUND = 500


class LibcudaNotFound(OSError):
    """The driver library could not be opened: this machine has no (usable) NVIDIA driver."""


# ---- enums: int constants that know their name -------------------------------------------
class _Value(int):
    """One enumerator: an int (ctypes passes it as one) with the name cuda.h gives it."""

    def __repr__(self):
        return f"<{self.name}: {int(self)}>"


def _enum(cls_name: str, prefix: str, spec: str) -> type:
    """A class of enumerators from "NAME NAME=7 NAME ..." (a bare name: the previous value
    plus one, the first 0): attributes ``prefix + NAME``; ``by_value`` maps back."""
    ns: dict = {"by_value": {}}
    v = -1
    for item in spec.split():
        name, _, val = item.partition("=")
        v = int(val, 0) if val else v + 1
        m = _Value(v)
        m.name = prefix + name
        ns[m.name] = m
        ns["by_value"].setdefault(v, m)
    return type(cls_name, (), ns)


# Values from cuda.h (CUDA 13.0).  Device and function attributes are complete, since
# `device_attribute(name)` and `Function.attribute(name)` take any name.
CUdevice_attribute = _enum("CUdevice_attribute", "CU_DEVICE_ATTRIBUTE_", """
MAX_THREADS_PER_BLOCK=1 MAX_BLOCK_DIM_X MAX_BLOCK_DIM_Y MAX_BLOCK_DIM_Z MAX_GRID_DIM_X
MAX_GRID_DIM_Y MAX_GRID_DIM_Z MAX_SHARED_MEMORY_PER_BLOCK SHARED_MEMORY_PER_BLOCK=8
TOTAL_CONSTANT_MEMORY WARP_SIZE MAX_PITCH MAX_REGISTERS_PER_BLOCK REGISTERS_PER_BLOCK=12
CLOCK_RATE TEXTURE_ALIGNMENT GPU_OVERLAP MULTIPROCESSOR_COUNT KERNEL_EXEC_TIMEOUT INTEGRATED
CAN_MAP_HOST_MEMORY COMPUTE_MODE MAXIMUM_TEXTURE1D_WIDTH MAXIMUM_TEXTURE2D_WIDTH
MAXIMUM_TEXTURE2D_HEIGHT MAXIMUM_TEXTURE3D_WIDTH MAXIMUM_TEXTURE3D_HEIGHT
MAXIMUM_TEXTURE3D_DEPTH MAXIMUM_TEXTURE2D_LAYERED_WIDTH MAXIMUM_TEXTURE2D_LAYERED_HEIGHT
MAXIMUM_TEXTURE2D_LAYERED_LAYERS MAXIMUM_TEXTURE2D_ARRAY_WIDTH=27
MAXIMUM_TEXTURE2D_ARRAY_HEIGHT MAXIMUM_TEXTURE2D_ARRAY_NUMSLICES SURFACE_ALIGNMENT
CONCURRENT_KERNELS ECC_ENABLED PCI_BUS_ID PCI_DEVICE_ID TCC_DRIVER MEMORY_CLOCK_RATE
GLOBAL_MEMORY_BUS_WIDTH L2_CACHE_SIZE MAX_THREADS_PER_MULTIPROCESSOR ASYNC_ENGINE_COUNT
UNIFIED_ADDRESSING MAXIMUM_TEXTURE1D_LAYERED_WIDTH MAXIMUM_TEXTURE1D_LAYERED_LAYERS
CAN_TEX2D_GATHER MAXIMUM_TEXTURE2D_GATHER_WIDTH MAXIMUM_TEXTURE2D_GATHER_HEIGHT
MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE
MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE PCI_DOMAIN_ID TEXTURE_PITCH_ALIGNMENT
MAXIMUM_TEXTURECUBEMAP_WIDTH MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH
MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS MAXIMUM_SURFACE1D_WIDTH MAXIMUM_SURFACE2D_WIDTH
MAXIMUM_SURFACE2D_HEIGHT MAXIMUM_SURFACE3D_WIDTH MAXIMUM_SURFACE3D_HEIGHT
MAXIMUM_SURFACE3D_DEPTH MAXIMUM_SURFACE1D_LAYERED_WIDTH MAXIMUM_SURFACE1D_LAYERED_LAYERS
MAXIMUM_SURFACE2D_LAYERED_WIDTH MAXIMUM_SURFACE2D_LAYERED_HEIGHT
MAXIMUM_SURFACE2D_LAYERED_LAYERS MAXIMUM_SURFACECUBEMAP_WIDTH
MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS
MAXIMUM_TEXTURE1D_LINEAR_WIDTH MAXIMUM_TEXTURE2D_LINEAR_WIDTH
MAXIMUM_TEXTURE2D_LINEAR_HEIGHT MAXIMUM_TEXTURE2D_LINEAR_PITCH
MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT
COMPUTE_CAPABILITY_MAJOR COMPUTE_CAPABILITY_MINOR MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH
STREAM_PRIORITIES_SUPPORTED GLOBAL_L1_CACHE_SUPPORTED LOCAL_L1_CACHE_SUPPORTED
MAX_SHARED_MEMORY_PER_MULTIPROCESSOR MAX_REGISTERS_PER_MULTIPROCESSOR MANAGED_MEMORY
MULTI_GPU_BOARD MULTI_GPU_BOARD_GROUP_ID HOST_NATIVE_ATOMIC_SUPPORTED
SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO PAGEABLE_MEMORY_ACCESS CONCURRENT_MANAGED_ACCESS
COMPUTE_PREEMPTION_SUPPORTED CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM
CAN_USE_STREAM_MEM_OPS_V1 CAN_USE_64_BIT_STREAM_MEM_OPS_V1 CAN_USE_STREAM_WAIT_VALUE_NOR_V1
COOPERATIVE_LAUNCH COOPERATIVE_MULTI_DEVICE_LAUNCH MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
CAN_FLUSH_REMOTE_WRITES HOST_REGISTER_SUPPORTED PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES
DIRECT_MANAGED_MEM_ACCESS_FROM_HOST VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED
VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED=102 HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
HANDLE_TYPE_WIN32_HANDLE_SUPPORTED HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED
MAX_BLOCKS_PER_MULTIPROCESSOR GENERIC_COMPRESSION_SUPPORTED MAX_PERSISTING_L2_CACHE_SIZE
MAX_ACCESS_POLICY_WINDOW_SIZE GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
RESERVED_SHARED_MEMORY_PER_BLOCK SPARSE_CUDA_ARRAY_SUPPORTED
READ_ONLY_HOST_REGISTER_SUPPORTED TIMELINE_SEMAPHORE_INTEROP_SUPPORTED
MEMORY_POOLS_SUPPORTED GPU_DIRECT_RDMA_SUPPORTED GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS
GPU_DIRECT_RDMA_WRITES_ORDERING MEMPOOL_SUPPORTED_HANDLE_TYPES CLUSTER_LAUNCH
DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED CAN_USE_64_BIT_STREAM_MEM_OPS
CAN_USE_STREAM_WAIT_VALUE_NOR DMA_BUF_SUPPORTED IPC_EVENT_SUPPORTED MEM_SYNC_DOMAIN_COUNT
TENSOR_MAP_ACCESS_SUPPORTED HANDLE_TYPE_FABRIC_SUPPORTED UNIFIED_FUNCTION_POINTERS
NUMA_CONFIG NUMA_ID MULTICAST_SUPPORTED MPS_ENABLED HOST_NUMA_ID D3D12_CIG_SUPPORTED
MEM_DECOMPRESS_ALGORITHM_MASK MEM_DECOMPRESS_MAXIMUM_LENGTH VULKAN_CIG_SUPPORTED
GPU_PCI_DEVICE_ID GPU_PCI_SUBSYSTEM_ID HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
HOST_NUMA_MEMORY_POOLS_SUPPORTED HOST_NUMA_MULTINODE_IPC_SUPPORTED
HOST_MEMORY_POOLS_SUPPORTED HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
HOST_ALLOC_DMA_BUF_SUPPORTED ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED""")
CUfunction_attribute = _enum("CUfunction_attribute", "CU_FUNC_ATTRIBUTE_", """
MAX_THREADS_PER_BLOCK SHARED_SIZE_BYTES CONST_SIZE_BYTES LOCAL_SIZE_BYTES NUM_REGS PTX_VERSION
BINARY_VERSION CACHE_MODE_CA MAX_DYNAMIC_SHARED_SIZE_BYTES PREFERRED_SHARED_MEMORY_CARVEOUT
CLUSTER_SIZE_MUST_BE_SET REQUIRED_CLUSTER_WIDTH REQUIRED_CLUSTER_HEIGHT REQUIRED_CLUSTER_DEPTH
NON_PORTABLE_CLUSTER_SIZE_ALLOWED CLUSTER_SCHEDULING_POLICY_PREFERENCE""")
# the pointer attributes whose value is one integer (cuPointerGetAttribute reads these)
CUpointer_attribute = _enum("CUpointer_attribute", "CU_POINTER_ATTRIBUTE_", """
CONTEXT=1 MEMORY_TYPE DEVICE_POINTER HOST_POINTER BUFFER_ID=7 IS_MANAGED DEVICE_ORDINAL
RANGE_START_ADDR=11 RANGE_SIZE MAPPED""")
_POINTER_ATTR_TYPES = {1: c_void_p, 2: c_uint, 3: c_uint64, 4: c_void_p, 7: c_uint64,
                       8: c_int, 9: c_int, 11: c_uint64, 12: c_size_t, 13: c_int}
CUjit_option = _enum("CUjit_option", "CU_JIT_", """
MAX_REGISTERS THREADS_PER_BLOCK WALL_TIME INFO_LOG_BUFFER INFO_LOG_BUFFER_SIZE_BYTES
ERROR_LOG_BUFFER ERROR_LOG_BUFFER_SIZE_BYTES OPTIMIZATION_LEVEL TARGET_FROM_CUCONTEXT TARGET
FALLBACK_STRATEGY GENERATE_DEBUG_INFO LOG_VERBOSE GENERATE_LINE_INFO CACHE_MODE""")
CUstream_flags = _enum("CUstream_flags", "CU_STREAM_", "DEFAULT NON_BLOCKING")
CUevent_flags = _enum("CUevent_flags", "CU_EVENT_",
                      "DEFAULT BLOCKING_SYNC DISABLE_TIMING=2 INTERPROCESS=4")
CUlaunchAttributeID = _enum("CUlaunchAttributeID", "CU_LAUNCH_ATTRIBUTE_", """
IGNORE ACCESS_POLICY_WINDOW COOPERATIVE SYNCHRONIZATION_POLICY CLUSTER_DIMENSION
CLUSTER_SCHEDULING_POLICY_PREFERENCE PROGRAMMATIC_STREAM_SERIALIZATION PROGRAMMATIC_EVENT
PRIORITY""")
CUtensorMapDataType = _enum("CUtensorMapDataType", "CU_TENSOR_MAP_DATA_TYPE_", """
UINT8 UINT16 UINT32 INT32 UINT64 INT64 FLOAT16 FLOAT32 FLOAT64 BFLOAT16 FLOAT32_FTZ TFLOAT32
TFLOAT32_FTZ 16U4_ALIGN8B 16U4_ALIGN16B 16U6_ALIGN16B""")
CUtensorMapInterleave = _enum("CUtensorMapInterleave", "CU_TENSOR_MAP_INTERLEAVE_",
                              "NONE 16B 32B")
CUtensorMapSwizzle = _enum("CUtensorMapSwizzle", "CU_TENSOR_MAP_SWIZZLE_", """
NONE 32B 64B 128B 128B_ATOM_32B 128B_ATOM_32B_FLIP_8B 128B_ATOM_64B""")
CUtensorMapL2promotion = _enum("CUtensorMapL2promotion", "CU_TENSOR_MAP_L2_PROMOTION_",
                               "NONE L2_64B L2_128B L2_256B")
CUtensorMapFloatOOBfill = _enum("CUtensorMapFloatOOBfill", "CU_TENSOR_MAP_FLOAT_OOB_FILL_",
                                "NONE NAN_REQUEST_ZERO_FMA")


class cuuint64_t(int):
    """cuda.h's cuuint64_t: an int checked to fit."""

    def __new__(cls, v=0):
        v = int(v)
        if not 0 <= v < 1 << 64:
            raise OverflowError(f"{v} does not fit in cuuint64_t")
        return super().__new__(cls, v)


class cuuint32_t(int):
    """cuda.h's cuuint32_t: an int checked to fit."""

    def __new__(cls, v=0):
        v = int(v)
        if not 0 <= v < 1 << 32:
            raise OverflowError(f"{v} does not fit in cuuint32_t")
        return super().__new__(cls, v)


# ---- handles ------------------------------------------------------------------------------
class _Handle(c_void_p):
    """An opaque driver handle: a pointer ctypes passes as such; ``int()`` reads it and any
    object with ``__int__`` (a cuda-bindings handle, an int) makes one."""

    def __init__(self, value=None):
        super().__init__(None if value is None else
                         value if value.__class__ is int else int(value))

    def __int__(self):
        return self.value or 0

    def __eq__(self, other):
        try:
            return int(self) == int(other)
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(int(self))

    def __repr__(self):
        return f"<{type(self).__name__} {int(self):#x}>"


class CUcontext(_Handle):
    pass


class CUmodule(_Handle):
    pass


class CUfunction(_Handle):
    pass


class CUstream(_Handle):
    pass


class CUevent(_Handle):
    pass


def pointer_arg(v):
    """A pointer argument for ``launch_kernel_raw``: None for 0 (NULL), else a c_void_p."""
    if v.__class__ is not int:
        v = int(v or 0)
    return c_void_p(v) if v else None


# ---- structs (layouts of cuda.h 13.0) ---------------------------------------------------
class CUtensorMap_st(ctypes.Structure):
    """The cuda.h layout: 16 opaque quadwords (128 bytes; the header aligns it to 128 bytes
    in CUDA 13, 64 in 12.x: ``CUtensorMap`` places one at a 128-byte aligned address)."""
    _fields_ = [("opaque", c_uint64 * 16)]


class CUtensorMap:
    """A tensor map in host memory, 128-byte aligned; ``getPtr()`` is its address (as
    cuda-bindings names it), ``bytes(m)`` its 128 bytes, which a launch passes by value."""

    __slots__ = ("_storage", "_ptr")

    def __init__(self):
        self._storage = ctypes.create_string_buffer(128 + 127)     # zeroed
        a = ctypes.addressof(self._storage)
        self._ptr = a + (-a % 128)

    def getPtr(self) -> int:
        return self._ptr

    @property
    def opaque(self) -> list:
        return list(CUtensorMap_st.from_address(self._ptr).opaque)

    def __bytes__(self) -> bytes:
        return ctypes.string_at(self._ptr, 128)


class _ClusterDim(ctypes.Structure):
    _fields_ = [("x", c_uint), ("y", c_uint), ("z", c_uint)]


class CUlaunchAttributeValue(ctypes.Union):
    """64 bytes, 8-aligned (cuda.h's union holds pointers); the members ptxgen sets."""
    _fields_ = [("pad", c_char * 64), ("clusterDim", _ClusterDim), ("cooperative", c_int),
                ("priority", c_int), ("_align", c_void_p)]


class CUlaunchAttribute(ctypes.Structure):
    """``id`` reads back as its CUlaunchAttributeID enumerator; the C field is ``_id``."""
    _fields_ = [("_id", c_int), ("pad", c_char * 4), ("value", CUlaunchAttributeValue)]

    @property
    def id(self):
        return CUlaunchAttributeID.by_value.get(self._id, self._id)

    @id.setter
    def id(self, v):
        self._id = int(v)


class CUlaunchConfig(ctypes.Structure):
    """cuLaunchKernelEx's configuration.  ``attrs`` is set from a list of CUlaunchAttribute
    (copied into an array this object keeps; the C field is ``_attrs``); ``numAttrs`` is set
    separately, as in C and in cuda-bindings."""
    _fields_ = [("gridDimX", c_uint), ("gridDimY", c_uint), ("gridDimZ", c_uint),
                ("blockDimX", c_uint), ("blockDimY", c_uint), ("blockDimZ", c_uint),
                ("sharedMemBytes", c_uint), ("hStream", c_void_p),
                ("_attrs", POINTER(CUlaunchAttribute)), ("numAttrs", c_uint)]

    @property
    def attrs(self) -> list:
        return list(getattr(self, "_attr_list", ()))

    @attrs.setter
    def attrs(self, attrs):
        attrs = list(attrs)
        arr = (CUlaunchAttribute * max(1, len(attrs)))(*attrs)
        self._attr_list, self._attr_array = attrs, arr
        self._attrs = ctypes.cast(arr, POINTER(CUlaunchAttribute)) if attrs else None


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

    def __init__(self, lib):
        self._lib = lib
        self._fn: dict = {}
        self._lock = threading.Lock()
        for api, (sym, argtypes) in _CORE.items():
            self._fn[api] = self._bind(sym, argtypes)     # AttributeError: no such symbol
        # cuLaunchKernel again, with no argument types: see the module docstring
        self.launch_kernel_raw = lib[_CORE["cuLaunchKernel"][0]]
        self.launch_kernel_raw.restype = c_int

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
