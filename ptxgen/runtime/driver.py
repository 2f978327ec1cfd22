"""Thin layer over the CUDA driver: result checking, primary contexts, device facts, streams,
and `call` for everything else.  The one set of driver wrappers (bench uses it too).

The binding is cuda-bindings' ``cuda.bindings.driver`` (each call returns ``(CUresult,
*outputs)``), imported by the first call that needs the driver, never by ``import ptxgen``:
offline use (PTX -> cubin with nvJitLink) never loads libcuda, and ``has_gpu()`` answers False
on a machine without one.  Facts that cannot change while the process runs (a device's arch
and attributes, which device a primary context belongs to) are asked once and kept, so
launches do not repeat driver queries.
"""
from __future__ import annotations

import sys
import threading

from ..errors import CudaError, LaunchError

# Errors after which the context cannot be used again (every later call returns the same code).
STICKY = {
    214: "CUDA_ERROR_ECC_UNCORRECTABLE", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    702: "CUDA_ERROR_LAUNCH_TIMEOUT", 710: "CUDA_ERROR_ASSERT",
    714: "CUDA_ERROR_HARDWARE_STACK_ERROR", 715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    716: "CUDA_ERROR_MISALIGNED_ADDRESS", 717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    718: "CUDA_ERROR_INVALID_PC", 719: "CUDA_ERROR_LAUNCH_FAILED",
    721: "CUDA_ERROR_TENSOR_MEMORY_LEAK",
}
STICKY_HINT = ("the CUDA context is now unusable (sticky error); re-run under compute-sanitizer "
               "to find the faulting access")

_lock = threading.RLock()
_drv = None
_init_error: str | None = None
_primary: dict[int, object] = {}       # device ordinal -> retained primary CUcontext
_ctx_device: dict[int, int] = {}       # int(primary CUcontext) -> its device ordinal
_attrs: dict[tuple, int] = {}          # (device, attribute name) -> value
_arch: dict[int, str] = {}             # device ordinal -> nvJitLink arch
_count: list = []                      # [device count], once known
_driver_version: str | None = None
last_kernel = [None]                   # name of the last kernel launched (for sync errors)


def _module():
    """cuda.bindings.driver, imported here so that only a driver call pays for it."""
    from cuda.bindings import driver as d
    return d


def _load():
    """Load the driver binding and cuInit once; remember why it failed so callers can say so."""
    global _drv, _init_error
    if _drv is not None:
        return _drv
    with _lock:
        if _drv is None and _init_error is None:
            try:
                d = _module()
                (err,) = d.cuInit(0)
                if err:
                    _init_error = f"cuInit failed: {error_name(d, err)}"
                else:
                    _drv = d
            except Exception as e:  # no libcuda: cuda.pathfinder's DynamicLibNotFoundError
                _init_error = f"the CUDA driver could not be loaded ({type(e).__name__}: {e})"
    return _drv


def drv():
    """The driver module, initialized; raises CudaError where no usable driver exists."""
    d = _drv or _load()
    if d is None:
        raise CudaError(f"no usable CUDA driver: {_init_error}")
    return d


def error_name(d, err) -> str:
    try:
        e, s = d.cuGetErrorName(err)
        if not e and s:
            return s.decode()
    except Exception:
        pass
    return f"CUDA error {int(err)}"


def _describe(d, err) -> str:
    try:
        e, s = d.cuGetErrorString(err)
        if not e and s:
            return s.decode()
    except Exception:
        pass
    return ""


def error(err, call: str, kernel: str | None = None, hint: str = "") -> CudaError:
    """Build the CudaError for a failed call; sticky codes say the context is gone."""
    code = int(err)
    d = _drv
    name = error_name(d, err) if d is not None else STICKY.get(code, f"CUDA error {code}")
    desc = _describe(d, err) if d is not None else ""
    where = f" for kernel '{kernel}'" if kernel else ""
    msg = f"{call} failed{where}: {name} ({code})" + (f": {desc}" if desc else "")
    if code in STICKY:
        msg += f"; {STICKY_HINT}"
    elif hint:
        msg += f"; {hint}"
    exc = CudaError(msg)
    exc.code, exc.call, exc.kernel, exc.sticky = code, call, kernel, code in STICKY
    return exc


def check(result, call: str, kernel: str | None = None):
    """Unpack a bindings result tuple ``(CUresult, *outs)``; raise on failure."""
    err = result[0]
    if err:
        raise error(err, call, kernel)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def has_gpu() -> bool:
    """True when a driver loads and sees at least one device.  Never raises."""
    return device_count() > 0


def driver_version() -> str:
    """cuDriverGetVersion as text ("13000"), or "none" without a driver; recorded in disk
    cache entries."""
    global _driver_version
    if _driver_version is None:
        try:
            d = _drv or _module()     # no cuInit needed
            err, v = d.cuDriverGetVersion()
            _driver_version = "none" if err else str(v)
        except Exception:
            _driver_version = "none"
    return _driver_version


def loaded_driver_version() -> str | None:
    """driver_version() once this process uses the driver (it is launching), else None: a
    cache lookup made for an offline compile must not load libcuda to answer it."""
    return driver_version() if _drv is not None else None


def device_count() -> int:
    """Number of visible devices (0 without a usable driver); asked once per process."""
    if not _count:
        d = _load()
        n = 0
        if d is not None:
            try:
                err, n = d.cuDeviceGetCount()
                n = 0 if err else int(n)
            except Exception:
                n = 0
        _count.append(n)
    return _count[0]


_torch_device: list = [None, None]   # [torch module, its current-device function]


def _torch_current_device():
    """torch's current-device function once torch has initialized CUDA, else None.  torch
    may defer switching the CUDA device (no context is made current for a device it has not
    used yet), so its own answer is the one to follow while it is in charge."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch is _torch_device[0]:
        return _torch_device[1]
    try:
        if not torch.cuda.is_initialized():
            return None
    except AttributeError:
        return None
    f = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    _torch_device[:] = [torch, f]
    return f


def current_device() -> int:
    """The device a launch with no tensor arguments runs on: torch's current device when
    torch has initialized CUDA (``torch.cuda.set_device``, ``with torch.cuda.device(i)``),
    else the current context's device, else 0.  One call in the steady state."""
    f = _torch_current_device()
    if f is not None:
        return f()
    d = drv()
    err, ctx = d.cuCtxGetCurrent()
    c = 0 if err else int(ctx)
    if not c:
        return 0
    dev = _ctx_device.get(c)
    if dev is None:
        dev = int(check(d.cuCtxGetDevice(), "cuCtxGetDevice"))
        primary_context(dev)   # retained once; from then on its handle maps to ``dev``
    return dev


def context_device(ctx) -> int | None:
    """The device of a context handle (an int or CUcontext), or None if it is unknown."""
    c = int(ctx)
    dev = _ctx_device.get(c)
    if dev is not None or not c:
        return dev
    d = drv()
    try:
        with context_scope(ctx):
            err, dev = d.cuCtxGetDevice()
        return None if err else int(dev)
    except Exception:
        return None


def pointer_device(ptr: int) -> int:
    """Device ordinal that owns device pointer ``ptr`` (-1 if the driver cannot say: host
    memory, an unknown pointer).  For array objects that do not say where they live."""
    d = drv()
    try:
        err, dev = d.cuPointerGetAttribute(
            d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    except Exception:
        return -1
    return -1 if err else int(dev)


def stream_context(handle: int) -> int | None:
    """int(CUcontext) a stream belongs to, or None where the driver does not say."""
    d = drv()
    try:
        err, ctx = d.cuStreamGetCtx(handle)
    except Exception:
        return None
    return None if err else int(ctx)


def _device(d, ordinal: int):
    """cuDeviceGet, with a message naming the ordinal when the process has no such device."""
    n = device_count()
    if not 0 <= ordinal < n:
        raise LaunchError(f"there is no cuda:{ordinal}: this process sees {n} CUDA "
                          f"device{'s' if n != 1 else ''}")
    return check(d.cuDeviceGet(ordinal), "cuDeviceGet")


def device_attribute(attr: str, device: int | None = None) -> int:
    """cuDeviceGetAttribute by short name ("MULTIPROCESSOR_COUNT"); cached per device."""
    dev_no = current_device() if device is None else device
    key = (dev_no, attr)
    v = _attrs.get(key)
    if v is None:
        d = drv()
        dev = _device(d, dev_no)
        a = getattr(d.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + attr)
        v = _attrs[key] = int(check(d.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute"))
    return v


def device_arch(device: int | None = None) -> str:
    """The nvJitLink/ptxas arch for a device: "sm_90a" for 9.0.  The "a" (arch-specific
    features: wgmma, tcgen05) is added for 9.x and 10.x, the families ptxgen targets.
    ``device`` defaults to the current device; the answer is kept per device."""
    dev = current_device() if device is None else device
    a = _arch.get(dev)
    if a is None:
        a = _arch[dev] = arch_for(device_attribute("COMPUTE_CAPABILITY_MAJOR", dev),
                                  device_attribute("COMPUTE_CAPABILITY_MINOR", dev))
    return a


def arch_for(major: int, minor: int) -> str:
    return f"sm_{major}{minor}" + ("a" if major in (9, 10) else "")


def primary_context(device: int):
    """Retain (once per process) and return the device's primary context, the one torch and
    cupy use, so pointers and streams from them are valid in our modules."""
    ctx = _primary.get(device)
    if ctx is None:
        d = drv()
        with _lock:
            ctx = _primary.get(device)
            if ctx is None:
                dev = _device(d, device)
                ctx = check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                _ctx_device[int(ctx)] = device
                _primary[device] = ctx
    return ctx


class context_scope:
    """Make ``ctx`` current for a block, and leave the thread's current device as it was:
    another current context is pushed over and popped back.  With none current, device 0's
    primary context is set and left current (a thread without a context is on device 0 for
    the CUDA runtime, and so for torch, anyway; later launches then find it current); any
    other is pushed and popped, so that it does not become the thread's current device."""

    __slots__ = ("ctx", "pushed")

    def __init__(self, ctx):
        self.ctx, self.pushed = ctx, False

    def __enter__(self):
        d = drv()
        cur = check(d.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(cur) == int(self.ctx):
            return self
        if not int(cur) and _ctx_device.get(int(self.ctx)) == 0:
            check(d.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        else:
            check(d.cuCtxPushCurrent(self.ctx), "cuCtxPushCurrent")
            self.pushed = True
        return self

    def __exit__(self, *exc):
        if self.pushed:
            check(drv().cuCtxPopCurrent(), "cuCtxPopCurrent")


def synchronize(stream=None, *, kernel: str | None = None, device: int | None = None) -> None:
    """Wait for the GPU and turn an asynchronous launch failure into a CudaError.

    Launches return before the kernel runs, so a fault shows up here; the message names the
    last kernel launched in this process when ``kernel`` is not given.
    """
    from .launcher import stream_handle

    d = drv()
    name = kernel or last_kernel[0]
    dev = current_device() if device is None else device
    with context_scope(primary_context(dev)):
        if stream is None:
            check(d.cuCtxSynchronize(), "cuCtxSynchronize", name)
        else:
            check(d.cuStreamSynchronize(stream_handle(stream, dev)), "cuStreamSynchronize", name)


def call(name: str, *args, kernel: str | None = None):
    """Call driver function `name` and return its outputs as `check` unpacks them: the
    wrapper for one-off calls (events, memory, copies) that need no function of their own."""
    return check(getattr(drv(), name)(*args), name, kernel)


def device_name(device: int | None = None) -> str:
    d = drv()
    dev = check(d.cuDeviceGet(current_device() if device is None else device), "cuDeviceGet")
    return call("cuDeviceGetName", 256, dev).split(b"\0", 1)[0].decode(errors="replace")


def create_stream(non_blocking: bool = True) -> int:
    """A new stream's raw handle; non-blocking streams never serialize with the legacy one."""
    d = drv()
    flags = d.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else \
        d.CUstream_flags.CU_STREAM_DEFAULT
    return int(call("cuStreamCreate", flags))
