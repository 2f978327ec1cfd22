"""A stand-in for ``cuda.bindings.driver`` with several devices, for launch tests on a machine
without a GPU (and for timing the Python side of a launch with the driver's cost taken out).
Each call returns ``(CUresult, *outputs)`` as cuda-bindings' do; the enums and structs that
need no driver (tensor maps, launch configs) are cuda-bindings' own.

It keeps what the checks under test depend on: a current context per thread (set / push /
pop), modules and functions that belong to the context they were loaded in (a launch of a
function from another context fails with CUDA_ERROR_INVALID_HANDLE, as on the real driver),
streams that belong to a context, and pointers that belong to a device.  Launches are
recorded, not run.

    fake = FakeDriver(archs=[(9, 0), (10, 0)])
    install(monkeypatch, fake)          # ptxgen.runtime.driver now talks to it
"""
from __future__ import annotations

import ctypes
import threading
from collections import Counter
from types import SimpleNamespace

from cuda.bindings import driver as _bindings

_ATTR = SimpleNamespace(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="cc_major",
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="cc_minor",
                        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN="smem_optin",
                        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms")
_FATTR = SimpleNamespace(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES="static_smem",
                         CU_FUNC_ATTRIBUTE_NUM_REGS="regs",
                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES="max_dyn")
_PATTR = SimpleNamespace(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL="ordinal")
_NAMES = {1: "CUDA_ERROR_INVALID_VALUE", 101: "CUDA_ERROR_INVALID_DEVICE",
          201: "CUDA_ERROR_INVALID_CONTEXT", 400: "CUDA_ERROR_INVALID_HANDLE",
          700: "CUDA_ERROR_ILLEGAL_ADDRESS"}
CTX_BASE = 0x1000   # the primary context of device d is CTX_BASE * (d + 1)


class Launch(SimpleNamespace):
    """One recorded cuLaunchKernel: device, function, grid, block, smem, stream, params."""


class FakeDriver:
    CUdevice_attribute = _ATTR
    CUfunction_attribute = _FATTR
    CUpointer_attribute = _PATTR
    # types and enums that need no driver: cuda-bindings' (tensor maps, cluster launches)
    L = _bindings
    CUtensorMapDataType, CUtensorMapInterleave = L.CUtensorMapDataType, L.CUtensorMapInterleave
    CUtensorMapSwizzle, CUtensorMapL2promotion = L.CUtensorMapSwizzle, L.CUtensorMapL2promotion
    CUtensorMapFloatOOBfill, cuuint64_t, cuuint32_t = L.CUtensorMapFloatOOBfill, L.cuuint64_t, \
        L.cuuint32_t
    CUlaunchConfig, CUlaunchAttribute, CUlaunchAttributeID, CUstream = L.CUlaunchConfig, \
        L.CUlaunchAttribute, L.CUlaunchAttributeID, L.CUstream
    del L

    def __init__(self, archs=((9, 0),), smem_optin=227 * 1024):
        self.archs = [tuple(a) for a in archs]
        self.smem_optin = smem_optin
        self._tls = threading.local()
        self._lock = threading.Lock()
        self.calls = Counter()            # driver function name -> number of calls
        self.launches: list[Launch] = []
        self.modules: dict[int, int] = {}     # module handle -> context
        self.functions: dict[int, tuple] = {}  # function handle -> (context, entry name)
        self.streams: dict[int, int] = {}     # stream handle -> context
        self.allocations: list[tuple] = []    # (base, size, device)
        self.param_bytes = 0              # bytes of packed parameters each Launch copies
        self.launch_result = 0
        self.cluster_launches: list = []  # the cluster shape of each launch that had one
        self.launch_attributes: list = []  # per cuLaunchKernelEx: attribute name -> value
        self._next = 0x10000

    # ---- helpers for tests -----------------------------------------------------------
    @staticmethod
    def ctx_of(device: int) -> int:
        return CTX_BASE * (device + 1)

    def alloc(self, device: int, size: int = 1 << 20) -> int:
        """A fake device allocation of ``device``; returns its 256-byte aligned base."""
        with self._lock:
            self._next += size + 256
            base = (self._next + 255) // 256 * 256 + 0x7F00_0000_0000
            self.allocations.append((base, size, device))
        return base

    def make_stream(self, device: int) -> int:
        with self._lock:
            self._next += 16
            h = 0x5000_0000 + self._next
            self.streams[h] = self.ctx_of(device)
        return h

    def _stack(self) -> list:
        s = getattr(self._tls, "stack", None)
        if s is None:
            s = self._tls.stack = []
        return s

    @property
    def current(self) -> int:
        s = self._stack()
        return s[-1] if s else 0

    def _count(self, name):
        self.calls[name] += 1

    def _device_of_ctx(self, ctx: int):
        d = ctx // CTX_BASE - 1
        return d if ctx % CTX_BASE == 0 and 0 <= d < len(self.archs) else None

    # ---- the driver API used by ptxgen.runtime ----------------------------------------
    def cuInit(self, flags):
        self._count("cuInit")
        return (0,)

    def cuDriverGetVersion(self):
        return (0, 13000)

    def cuDeviceGetCount(self):
        self._count("cuDeviceGetCount")
        return (0, len(self.archs))

    def cuDeviceGet(self, ordinal):
        self._count("cuDeviceGet")
        return (0, ordinal) if 0 <= ordinal < len(self.archs) else (101, None)

    def cuDeviceGetAttribute(self, attr, dev):
        self._count("cuDeviceGetAttribute")
        v = {"cc_major": self.archs[dev][0], "cc_minor": self.archs[dev][1],
             "smem_optin": self.smem_optin, "sms": 132}[attr]
        return (0, v)

    def cuDevicePrimaryCtxRetain(self, dev):
        self._count("cuDevicePrimaryCtxRetain")
        return (0, self.ctx_of(int(dev)))

    def cuCtxGetCurrent(self):
        self._count("cuCtxGetCurrent")
        return (0, self.current)

    def cuCtxSetCurrent(self, ctx):
        self._count("cuCtxSetCurrent")
        s = self._stack()
        if s:
            s[-1] = int(ctx)
        else:
            s.append(int(ctx))
        return (0,)

    def cuCtxPushCurrent(self, ctx):
        self._count("cuCtxPushCurrent")
        self._stack().append(int(ctx))
        return (0,)

    def cuCtxPopCurrent(self):
        self._count("cuCtxPopCurrent")
        s = self._stack()
        return (0, s.pop()) if s else (201, None)

    def cuCtxGetDevice(self):
        self._count("cuCtxGetDevice")
        d = self._device_of_ctx(self.current)
        return (201, None) if d is None else (0, d)

    def cuCtxSynchronize(self):
        return (0,) if self.current else (201,)

    def cuStreamSynchronize(self, h):
        return (0,)

    def cuModuleLoadData(self, image):
        self._count("cuModuleLoadData")
        if not self.current:
            return (201, None)
        with self._lock:
            self._next += 16
            h = self._next
            self.modules[h] = self.current
        return (0, h)

    def cuModuleGetFunction(self, mod, name):
        self._count("cuModuleGetFunction")
        ctx = self.modules.get(int(mod))
        if ctx is None or ctx != self.current:
            return (400, None)
        with self._lock:
            self._next += 16
            h = self._next
            self.functions[h] = (ctx, name.decode() if isinstance(name, bytes) else name)
        return (0, h)

    def cuModuleUnload(self, mod):
        self.modules.pop(int(mod), None)
        return (0,)

    def cuFuncGetAttribute(self, attr, fn):
        return (0, 0)

    def cuFuncSetAttribute(self, fn, attr, value):
        self._count("cuFuncSetAttribute")
        return (0,)

    def cuStreamGetCtx(self, h):
        self._count("cuStreamGetCtx")
        ctx = self.streams.get(int(h))
        return (400, None) if ctx is None else (0, ctx)

    def cuPointerGetAttribute(self, attr, ptr):
        self._count("cuPointerGetAttribute")
        for base, size, dev in self.allocations:
            if base <= ptr < base + size:
                return (0, dev)
        return (1, None)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        return (self._record("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, smem, stream,
                             params),)

    def cuLaunchKernelEx(self, c, f, params, extra):
        """c: a CUlaunchConfig; its cluster shape, if any, is noted, and every attribute in
        launch_attributes (name -> value)."""
        L = self.CUlaunchAttributeID
        seen = {}
        for a in c.attrs[:c.numAttrs]:
            if a.id == L.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
                dim = a.value.clusterDim
                self.cluster_launches.append((dim.x, dim.y, dim.z))
                seen["cluster"] = (dim.x, dim.y, dim.z)
            elif a.id == L.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
                seen["programmatic"] = a.value.programmaticStreamSerializationAllowed
            else:
                seen[str(a.id)] = None
        self.launch_attributes.append(seen)
        return (self._record("cuLaunchKernelEx", f, c.gridDimX, c.gridDimY, c.gridDimZ,
                             c.blockDimX, c.blockDimY, c.blockDimZ, c.sharedMemBytes,
                             int(c.hStream), params),)

    def _record(self, api, f, gx, gy, gz, bx, by, bz, smem, stream, params):
        """One launch as the driver would take it: a Launch recorded, or a refusal (400)."""
        self._count(api)
        ctx, entry = self.functions.get(int(f), (None, None))
        if ctx is None or ctx != self.current:
            return 400                    # a function of another (or no) context
        if stream not in (0, 1, 2) and self.streams.get(int(stream)) != ctx:
            return 400
        blob = b""
        if self.param_bytes and params:
            blob = ctypes.string_at(ctypes.c_void_p.from_address(params).value, self.param_bytes)
        self.launches.append(Launch(device=self._device_of_ctx(ctx), entry=entry,
                                    grid=(gx, gy, gz), block=(bx, by, bz), smem=smem,
                                    stream=stream, params=blob,
                                    thread=threading.get_ident()))
        return self.launch_result

    def cuGetErrorName(self, e):
        return (0, _NAMES.get(int(e), f"CUDA_ERROR_{int(e)}").encode())

    def cuGetErrorString(self, e):
        return (0, b"described")


def install(monkeypatch, fake: FakeDriver) -> FakeDriver:
    """Point ptxgen.runtime.driver at ``fake``, with every per-process cache emptied (and
    restored after the test), and hide torch so streams default to 0.  Modules of earlier
    tests still waiting for the collector are finalized first: their unload would otherwise
    run through this fake at a random point of the test and show in its call counts."""
    import gc
    import sys

    gc.collect()

    from ptxgen.runtime import driver, launcher

    monkeypatch.setattr(driver, "_drv", fake)
    monkeypatch.setattr(driver, "_init_error", None)
    monkeypatch.setattr(driver, "_primary", {})
    monkeypatch.setattr(driver, "_ctx_device", {})
    monkeypatch.setattr(driver, "_attrs", {})
    monkeypatch.setattr(driver, "_arch", {})
    monkeypatch.setattr(driver, "_count", [])
    monkeypatch.setattr(driver, "_driver_version", "13000")
    monkeypatch.setattr(launcher, "_torch_stream", [None, None])
    monkeypatch.setattr(driver, "_torch_device", [None, None])
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    _forget_torch(monkeypatch)
    return fake


# ---- a torch-like tensor: what ptxgen's torch reader touches, and nothing else -----------
class FakeDType:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


FLOAT32, FLOAT16 = FakeDType("float32"), FakeDType("float16")


class FakeTorchTensor:
    """Read like a torch.Tensor (the reader picks it by module name and data_ptr)."""

    __slots__ = ("_ptr", "_shape", "_strides", "_dev", "dtype", "is_cuda", "_contiguous")

    def __init__(self, ptr, shape, device=0, dtype=FLOAT32, strides=None):
        self._ptr, self._shape, self._dev, self.dtype = ptr, tuple(shape), device, dtype
        self.is_cuda = device is not None
        if strides is None:
            strides, acc = [], 1
            for n in reversed(self._shape):
                strides.insert(0, acc)
                acc *= n
        self._strides = tuple(strides)
        acc, self._contiguous = 1, True
        for n, st in zip(reversed(self._shape), reversed(self._strides)):
            if n != 1 and st != acc:
                self._contiguous = False
            acc *= n

    @property
    def shape(self):
        return self._shape

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides

    def is_contiguous(self):
        return self._contiguous

    def get_device(self):
        return self._dev if self.is_cuda else -1      # torch: -1 for CPU tensors

    @property
    def device(self):
        return SimpleNamespace(type="cuda" if self.is_cuda else "cpu", index=self._dev)


FakeTorchTensor.__module__ = "torch"


def register_torch_dtypes(monkeypatch):
    """Let ptxgen's torch reader name the fake dtypes without importing torch."""
    from ptxgen.runtime import args

    monkeypatch.setitem(args.torch_dt, FLOAT32, "float32")
    monkeypatch.setitem(args.torch_dt, FLOAT16, "float16")


def install_fake_torch(monkeypatch, initialized=False, device=0, stream=0):
    """A stand-in `torch` module in sys.modules whose Tensor is FakeTorchTensor: ptxgen then
    generates its torch launch path for the fake tensors.  ``stream`` is the current raw
    stream, or a callable of the device giving it."""
    import sys

    torch = type(sys)("torch")
    torch.Tensor, torch.float32, torch.float16 = FakeTorchTensor, FLOAT32, FLOAT16
    torch.dtype = type(FLOAT32)
    torch.cuda = type(sys)("torch.cuda")
    torch.cuda.is_initialized = lambda: initialized
    torch._C = type(sys)("torch._C")
    torch._C._cuda_getDevice = lambda: device
    torch._C._cuda_getCurrentRawStream = stream if callable(stream) else (lambda dev: stream)
    torch.compiler = type(sys)("torch.compiler")   # a kernel call asks it (never compiling)
    torch.compiler.is_compiling = lambda: False
    monkeypatch.setitem(sys.modules, "torch", torch)
    _forget_torch(monkeypatch)
    return torch


def _forget_torch(monkeypatch):
    """Empty the kernels' torch cell for this test (a kernel fills it with the torch it sees),
    so no test's torch, real or stand-in, stays in it for the next."""
    from ptxgen.builder import kernel

    monkeypatch.setattr(kernel, "_TORCH", [None])


SCALE_N = None    # the shape symbol of scale_kernel (set on its first use)


def scale_kernel():
    """out[i] = x[i] * s over (N,) float32 tensors, grid 2 x 128 threads: the kernel the
    stand-in driver tests launch."""
    import ptxgen as pg

    global SCALE_N
    if SCALE_N is None:
        SCALE_N = pg.var("N")

    @pg.kernel(grid=(2,), block=(128,))
    def scale(out: pg.Tensor((SCALE_N,), "float32"), x: pg.Tensor((SCALE_N,), "float32"),
              s: pg.float32):
        tx = pg.thread_id(128)
        out[tx] = x[tx] * s
    return scale
