"""GPU timing through the CUDA driver API (cuda-bindings), so benchmarks run without torch.

Every number here is measured with CUDA events recorded on one stream around each run
of the function, never with host clocks: the host only enqueues work, and host time
would include launch latency and Python overhead.  Between runs a memset larger than
L2 evicts the previous run's data, so each run starts as cold as a real kernel that
follows unrelated work (this is the protocol of Triton's ``do_bench``).

The driver calls are runtime.driver's (one set of wrappers, one error format); its import
of cuda-bindings is lazy, so ``import ptxgen.bench`` works on a machine without the package
or a driver, and :func:`gpu_available` says why no GPU is usable.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CudaError
from ..runtime import driver
from ..runtime.driver import call
from ..runtime.launcher import stream_handle

__all__ = ["gpu_available", "DeviceInfo", "init_device", "L2Flusher", "do_bench"]


def gpu_available() -> tuple[bool, str]:
    """(True, device name) if a CUDA device can be used, else (False, why).  Never raises:
    the CLI turns the reason into its one-line 'no GPU' message."""
    try:
        if call("cuDeviceGetCount") < 1:
            return False, "the driver reports no CUDA devices"
        return True, driver.device_name(0)
    except CudaError as e:   # also: no cuda-bindings, no libcuda (runtime.driver says which)
        return False, str(e)
    except Exception as e:  # noqa: BLE001 - whatever else the bindings raise
        msg = str(e).splitlines()[0] if str(e) else ""
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
    call("cuCtxSetCurrent", driver.primary_context(ordinal))
    if ordinal not in _DEVICES:
        attr = lambda a: driver.device_attribute(a, ordinal)  # noqa: E731
        _DEVICES[ordinal] = DeviceInfo(
            ordinal, driver.device_name(ordinal), attr("L2_CACHE_SIZE"),
            attr("MULTIPROCESSOR_COUNT"), call("cuDeviceTotalMem", call("cuDeviceGet", ordinal)),
            (attr("COMPUTE_CAPABILITY_MAJOR"), attr("COMPUTE_CAPABILITY_MINOR")))
    return _DEVICES[ordinal]


def _stream(stream):
    """A CUstream for the raw driver calls, from anything runtime's stream_handle takes."""
    return driver.drv().CUstream(stream_handle(stream))


class L2Flusher:
    """Evicts L2 by writing a buffer twice its size, with a different byte each time so
    no layer can treat the write as a no-op."""

    def __init__(self, l2_bytes: int):
        self.nbytes = max(2 * int(l2_bytes), 1 << 20)
        self.ptr = int(call("cuMemAlloc", self.nbytes))
        self._byte = 0

    def flush(self, stream) -> None:
        self._byte = self._byte % 255 + 1
        call("cuMemsetD8Async", self.ptr, self._byte, self.nbytes, _stream(stream))

    def close(self) -> None:
        if self.ptr:
            call("cuMemFree", self.ptr)
            self.ptr = 0


_FLUSHERS: dict[int, L2Flusher] = {}


def _current_ordinal() -> int:
    if not int(call("cuCtxGetCurrent")):
        init_device(0)
    return driver.current_device()


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

    drv = driver.drv()
    s = _stream(stream)
    flusher = _flusher() if flush_l2 else None

    def one():
        if flusher is not None:
            flusher.flush(s)
        fn()

    one()  # first call: JIT, module load, lazy allocations
    call("cuStreamSynchronize", s)
    n_est = 5
    events = [call("cuEventCreate", drv.CUevent_flags.CU_EVENT_DEFAULT) for _ in range(2)]
    try:
        call("cuEventRecord", events[0], s)
        for _ in range(n_est):
            one()
        call("cuEventRecord", events[1], s)
        call("cuEventSynchronize", events[1])
        est_ms = max(call("cuEventElapsedTime", events[0], events[1]) / n_est, 1e-4)
    finally:
        for e in events:
            call("cuEventDestroy", e)

    n_warm = max(1, int(warmup_ms / est_ms))
    n_rep = max(1, int(rep_ms / est_ms))
    for _ in range(n_warm):
        one()
    starts = [call("cuEventCreate", drv.CUevent_flags.CU_EVENT_DEFAULT) for _ in range(n_rep)]
    ends = [call("cuEventCreate", drv.CUevent_flags.CU_EVENT_DEFAULT) for _ in range(n_rep)]
    try:
        for a, b in zip(starts, ends):
            if flusher is not None:
                flusher.flush(s)
            call("cuEventRecord", a, s)
            fn()
            call("cuEventRecord", b, s)
        call("cuEventSynchronize", ends[-1])
        times = np.array([call("cuEventElapsedTime", a, b) for a, b in zip(starts, ends)])
    finally:
        for e in starts + ends:
            call("cuEventDestroy", e)

    qs = sorted(set(quantiles) | {0.5})
    out = {_quantile_key(q): float(v) for q, v in zip(qs, np.quantile(times, qs))}
    out["n"] = int(n_rep)
    return out
