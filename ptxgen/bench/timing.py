"""GPU timing through the CUDA driver API (cuda-bindings), so benchmarks run without torch.

Every number here is measured with CUDA events recorded on one stream around each run
of the function, never with host clocks: the host only enqueues work, and host time
would include launch latency and Python overhead.  Between runs a memset larger than
L2 evicts the previous run's data, so each run starts as cold as a real kernel that
follows unrelated work (this is the protocol of Triton's ``do_bench``).

cuda-bindings is imported lazily, so ``import ptxgen.bench`` works on a machine
without the package or a driver; :func:`gpu_available` says why no GPU is usable.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CudaError

__all__ = ["gpu_available", "cu", "DeviceInfo", "init_device", "stream_handle",
           "create_stream", "synchronize", "L2Flusher", "do_bench"]


def _driver():
    from cuda.bindings import driver  # deferred: absent or driverless hosts still import us

    return driver


def cu(name: str, *args):
    """Call driver function ``name`` and return its results without the status code.

    Raises CudaError naming the call and the CUDA error, since a bare status enum from
    deep inside a sweep says nothing about which step failed.
    """
    drv = _driver()
    res = getattr(drv, name)(*args)
    err, rest = (res[0], res[1:]) if isinstance(res, tuple) else (res, ())
    if err != drv.CUresult.CUDA_SUCCESS:
        _, ename = drv.cuGetErrorName(err)
        _, edesc = drv.cuGetErrorString(err)
        dec = lambda b: b.decode() if isinstance(b, bytes) else str(b)  # noqa: E731
        raise CudaError(f"{name} failed: {dec(ename)} ({dec(edesc)})")
    return None if not rest else rest[0] if len(rest) == 1 else rest


def gpu_available() -> tuple[bool, str]:
    """(True, device name) if a CUDA device can be used, else (False, why).  Never raises:
    the CLI turns the reason into its one-line 'no GPU' message."""
    try:
        _driver()
    except Exception as e:  # noqa: BLE001 - any import failure means "no GPU here"
        return False, f"cuda-bindings not importable: {type(e).__name__}: {e}"
    try:
        cu("cuInit", 0)
        count = cu("cuDeviceGetCount")
        if count < 1:
            return False, "the driver reports no CUDA devices"
        name = cu("cuDeviceGetName", 256, cu("cuDeviceGet", 0))
        return True, name.split(b"\0", 1)[0].decode(errors="replace")
    except CudaError as e:
        return False, str(e)
    except Exception as e:  # noqa: BLE001 - e.g. libcuda.so not found by cuda.pathfinder
        msg = str(e).splitlines()[0] if str(e) else ""
        if "driver library" in msg or "libcuda" in msg:
            return False, "NVIDIA driver (libcuda) not found"
        return False, f"{type(e).__name__}: {msg}"[:200]


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    l2_bytes: int
    sm_count: int
    total_mem: int
    cc: tuple[int, int]


_DEVICES: dict[int, DeviceInfo] = {}


def init_device(ordinal: int = 0) -> DeviceInfo:
    """Make device ``ordinal``'s *primary* context current and describe the device.

    The primary context is the one the CUDA runtime (and so torch) uses, which lets torch
    tensors, cuMemAlloc buffers and ptxgen launches share pointers and streams.
    """
    drv = _driver()
    cu("cuInit", 0)
    dev = cu("cuDeviceGet", ordinal)
    ctx = cu("cuDevicePrimaryCtxRetain", dev)
    cu("cuCtxSetCurrent", ctx)
    if ordinal not in _DEVICES:
        A = drv.CUdevice_attribute
        attr = lambda a: cu("cuDeviceGetAttribute", a, dev)  # noqa: E731
        name = cu("cuDeviceGetName", 256, dev).split(b"\0", 1)[0].decode(errors="replace")
        _DEVICES[ordinal] = DeviceInfo(
            ordinal, name, attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), cu("cuDeviceTotalMem", dev),
            (attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
             attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)))
    return _DEVICES[ordinal]


def stream_handle(stream) -> int:
    """Raw CUstream address from None (legacy default stream), an int, a CUstream, or a
    torch stream; kernels and baselines all receive this one integer."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream / ExternalStream
        return int(stream.cuda_stream)
    return int(stream)  # CUstream supports __int__


def create_stream() -> int:
    """A non-blocking stream, so benchmark work never serializes with the legacy stream."""
    drv = _driver()
    return int(cu("cuStreamCreate", drv.CUstream_flags.CU_STREAM_NON_BLOCKING))


def synchronize(stream=None) -> None:
    cu("cuStreamSynchronize", _driver().CUstream(stream_handle(stream)))


class L2Flusher:
    """Evicts L2 by writing a buffer twice its size, with a different byte each time so
    no layer can treat the write as a no-op."""

    def __init__(self, l2_bytes: int):
        self.nbytes = max(2 * int(l2_bytes), 1 << 20)
        self.ptr = int(cu("cuMemAlloc", self.nbytes))
        self._byte = 0

    def flush(self, stream) -> None:
        self._byte = self._byte % 255 + 1
        cu("cuMemsetD8Async", self.ptr, self._byte, self.nbytes,
           _driver().CUstream(stream_handle(stream)))

    def close(self) -> None:
        if self.ptr:
            cu("cuMemFree", self.ptr)
            self.ptr = 0


_FLUSHERS: dict[int, L2Flusher] = {}


def _current_ordinal() -> int:
    if not int(cu("cuCtxGetCurrent")):
        init_device(0)
    return int(cu("cuCtxGetDevice"))


def _flusher() -> L2Flusher:
    ordinal = _current_ordinal()
    if ordinal not in _FLUSHERS:
        _FLUSHERS[ordinal] = L2Flusher(init_device(ordinal).l2_bytes)
    return _FLUSHERS[ordinal]


def _quantile_key(q: float) -> str:
    return "median_ms" if q == 0.5 else f"q{round(q * 100):d}_ms"


def do_bench(fn, *, warmup_ms: float = 25, rep_ms: float = 100, flush_l2: bool = True,
             stream=None, quantiles=(0.2, 0.5, 0.8)) -> dict:
    """Time ``fn()`` (which must enqueue its GPU work on ``stream``) with CUDA events.

    Returns ``{"median_ms", "q20_ms", "q80_ms", ..., "n"}``: one key per quantile
    (0.5 is always reported, as ``median_ms``) and the number of timed runs.

    The run count comes from the budgets: five runs estimate the per-call time, then
    ``warmup_ms / est`` untimed and ``rep_ms / est`` timed runs follow (at least one of
    each).  Each timed run gets its own event pair, with the L2 flush enqueued *before*
    the start event, so the flush is never timed but keeps the GPU busy while the host
    enqueues the next call.  Quantiles over per-run times rather than a mean make one
    preempted or throttled run harmless.
    """
    import numpy as np

    drv = _driver()
    s = drv.CUstream(stream_handle(stream))
    flusher = _flusher() if flush_l2 else None

    def one():
        if flusher is not None:
            flusher.flush(s)
        fn()

    one()  # first call: JIT, module load, lazy allocations
    cu("cuStreamSynchronize", s)
    n_est = 5
    events = [cu("cuEventCreate", drv.CUevent_flags.CU_EVENT_DEFAULT) for _ in range(2)]
    try:
        cu("cuEventRecord", events[0], s)
        for _ in range(n_est):
            one()
        cu("cuEventRecord", events[1], s)
        cu("cuEventSynchronize", events[1])
        est_ms = max(cu("cuEventElapsedTime", events[0], events[1]) / n_est, 1e-4)
    finally:
        for e in events:
            cu("cuEventDestroy", e)

    n_warm = max(1, int(warmup_ms / est_ms))
    n_rep = max(1, int(rep_ms / est_ms))
    for _ in range(n_warm):
        one()
    starts = [cu("cuEventCreate", drv.CUevent_flags.CU_EVENT_DEFAULT) for _ in range(n_rep)]
    ends = [cu("cuEventCreate", drv.CUevent_flags.CU_EVENT_DEFAULT) for _ in range(n_rep)]
    try:
        for a, b in zip(starts, ends):
            if flusher is not None:
                flusher.flush(s)
            cu("cuEventRecord", a, s)
            fn()
            cu("cuEventRecord", b, s)
        cu("cuEventSynchronize", ends[-1])
        times = np.array([cu("cuEventElapsedTime", a, b) for a, b in zip(starts, ends)])
    finally:
        for e in starts + ends:
            cu("cuEventDestroy", e)

    qs = sorted(set(quantiles) | {0.5})
    out = {_quantile_key(q): float(v) for q, v in zip(qs, np.quantile(times, qs))}
    out["n"] = int(n_rep)
    return out
