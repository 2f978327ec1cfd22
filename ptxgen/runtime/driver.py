"""Thin layer over ``cuda.bindings.driver``: result checking, primary contexts, device facts,
streams, and `call` for everything else.  The one set of driver wrappers (bench uses it too).

Everything here imports the driver lazily, so that offline use (PTX -> cubin with nvJitLink)
never needs libcuda, and ``has_gpu()`` can answer False on a machine without one.
"""
from __future__ import annotations

import threading

from ..errors import CudaError

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
_driver_version: str | None = None
last_kernel = [None]                   # name of the last kernel launched (for sync errors)


def _load():
    """Import the bindings and cuInit once; remember why it failed so callers can say so."""
    global _drv, _init_error
    if _drv is not None:
        return _drv
    with _lock:
        if _drv is None and _init_error is None:
            try:
                from cuda.bindings import driver as d
                (err,) = d.cuInit(0)
                if err:
                    _init_error = f"cuInit failed: {_name(d, err)}"
                else:
                    _drv = d
            except Exception as e:  # missing libcuda raises from cuda.pathfinder
                _init_error = f"the CUDA driver could not be loaded ({type(e).__name__}: {e})"
    return _drv


def drv():
    """The driver module, initialized; raises CudaError where no usable driver exists."""
    d = _drv or _load()
    if d is None:
        raise CudaError(f"no usable CUDA driver: {_init_error}")
    return d


def _name(d, err) -> str:
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
    name = _name(d, err) if d is not None else STICKY.get(code, f"CUDA error {code}")
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
    d = _load()
    if d is None:
        return False
    try:
        err, n = d.cuDeviceGetCount()
        return not err and n > 0
    except Exception:
        return False


def driver_version() -> str:
    """cuDriverGetVersion as text ("13000"), or "none" without a driver; part of cache keys."""
    global _driver_version
    if _driver_version is None:
        try:
            from cuda.bindings import driver as d
            err, v = d.cuDriverGetVersion()
            _driver_version = "none" if err else str(v)
        except Exception:
            _driver_version = "none"
    return _driver_version


def current_device() -> int:
    """Ordinal of the current context's device, else 0 (torch's current device is honoured)."""
    d = drv()
    ctx = check(d.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx):
        return int(check(d.cuCtxGetDevice(), "cuCtxGetDevice"))
    return 0


def device_attribute(attr: str, device: int | None = None) -> int:
    d = drv()
    dev = check(d.cuDeviceGet(current_device() if device is None else device), "cuDeviceGet")
    a = getattr(d.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + attr)
    return int(check(d.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute"))


def device_arch(device: int | None = None) -> str:
    """The nvJitLink/ptxas arch for a device: "sm_90a" for 9.0.  The "a" (arch-specific
    features: wgmma, tcgen05) is added for 9.x and 10.x, the families ptxgen targets."""
    return arch_for(device_attribute("COMPUTE_CAPABILITY_MAJOR", device),
                    device_attribute("COMPUTE_CAPABILITY_MINOR", device))


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
                dev = check(d.cuDeviceGet(device), "cuDeviceGet")
                ctx = check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                _primary[device] = ctx
    return ctx


class context_scope:
    """Make ``ctx`` current for a block.  With no context current it is set and left current
    (what torch does too); with another one current it is pushed and popped again."""

    __slots__ = ("ctx", "pushed")

    def __init__(self, ctx):
        self.ctx, self.pushed = ctx, False

    def __enter__(self):
        d = drv()
        cur = check(d.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(cur) == int(self.ctx):
            return self
        if not int(cur):
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
