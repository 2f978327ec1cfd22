"""The types of the ctypes libcuda binding (runtime/libcuda.py): enums that carry their names,
the handle classes, the checked cuuint types and the structs whose layouts are cuda.h 13.0's
(tests/test_libcuda.py compares them with the C compiler's), in cuda-bindings' spelling so
that runtime/driver.py reads either binding the same way."""
from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char, c_int, c_size_t, c_uint, c_uint64, c_void_p

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


def launch_config_arg(dims, smem: int, stream: int, attrs=()):
    """A pointer argument for ``launch_kernel_ex_raw``: a CUlaunchConfig of grid + block
    ``dims`` (6 ints), ``smem`` bytes of dynamic shared memory, stream handle ``stream`` and
    the CUlaunchAttribute list ``attrs``, passed by reference (``byref``, which ctypes passes
    as is; against a c_void_p of its address the H200's hosts gave 5.81 vs 5.95, 3.83 vs 3.92
    and 4.83 vs 4.81 us a bare call, one run each).  The argument keeps the config alive
    (``._obj``)."""
    cfg = CUlaunchConfig(*dims, smem, stream or None)
    cfg.attrs, cfg.numAttrs = attrs, len(attrs)
    return ctypes.byref(cfg)


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
