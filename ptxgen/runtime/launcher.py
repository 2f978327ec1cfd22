"""The per-launch path: bind arguments, resolve grid/block/stream, pack, cuLaunchKernel.

A Launcher is built once per (kernel, device) and then called for every launch, so all
the work that does not depend on the call's arguments (parameter layout, the pointer array,
dims of a constant grid) is done in ``__init__`` or cached on first use.
"""
from __future__ import annotations

import operator
import sys
import threading
from struct import error as struct_error

from ..errors import LaunchError
from . import driver
from .args import Binder, ParamPacker, ParamSpec

_INVALID_CONTEXT, _INVALID_HANDLE = 201, 400


def stream_handle(stream, device: int = 0) -> int:
    """A raw CUstream from: None (torch's current stream when torch has initialized CUDA,
    else the legacy default stream 0), an int, a torch stream (.cuda_stream), a cupy
    stream (.ptr) or a cuda-bindings CUstream."""
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream
        return 0
    if stream.__class__ is int:
        return stream
    h = getattr(stream, "cuda_stream", None)
    if h is None:
        h = getattr(stream, "ptr", None)
    if h is None:
        try:
            h = int(stream) if hasattr(stream, "__int__") else None
        except (TypeError, ValueError):
            h = None
        if h is None:
            raise LaunchError(f"stream must be None, an int handle, or a torch/cupy/CUDA stream "
                              f"object, got {type(stream).__name__}") from None
    return h


def _normalize(dims, what: str, kernel: str) -> tuple:
    try:
        t = (operator.index(dims),) if not isinstance(dims, (tuple, list)) else \
            tuple(operator.index(x) for x in dims)
    except TypeError:
        t = None
    if t is None or not 1 <= len(t) <= 3 or min(t) < 1:
        hint = "; pass grid=(...) to the call or set it with pg.launch" if dims is None else ""
        raise LaunchError(f"kernel '{kernel}': {what} must be 1 to 3 positive integers, "
                          f"got {dims!r}{hint}")
    t = t + (1,) * (3 - len(t))
    if what == "block":
        n = t[0] * t[1] * t[2]
        if n > 1024 or t[2] > 64:
            raise LaunchError(f"kernel '{kernel}': block {tuple(dims)} has {n} threads; a block "
                              f"holds at most 1024 (and at most 64 in z)")
    elif t[0] >= 2**31 or t[1] > 65535 or t[2] > 65535:
        raise LaunchError(f"kernel '{kernel}': grid {tuple(dims)} is too large (x < 2^31, "
                          f"y and z <= 65535)")
    return t


class Launcher:
    """Launches one Function with checked arguments.

    ``grid``/``block`` are tuples of 1-3 ints, an int, or a callable that receives a dict of
    every parameter name to its value (symbols and scalars as numbers, tensors as passed)
    and returns such a tuple, e.g. ``grid=lambda a: (a["M"] // 128,)``.
    """

    def __init__(self, fn, params: list[ParamSpec], *, name: str, dynamic_smem_bytes: int = 0):
        self.fn, self.name, self.params = fn, name, list(params)
        self.dynamic_smem_bytes = dynamic_smem_bytes
        self.binder = Binder(self.params, name=name, device=getattr(fn, "device", None))
        self.packer = ParamPacker(self.params)
        self._pack = self.packer.struct.pack_into
        self._buf, self._kp = self.packer.buffer, self.packer.kernel_params
        self._lock = threading.Lock()         # the buffer is shared: fill + launch is atomic
        self._grids: dict = {}
        self._blocks: dict = {}
        self._launch = driver.drv().cuLaunchKernel
        self._device = getattr(fn, "device", 0)

    def _dims(self, spec, cache: dict, what: str, values, user) -> tuple:
        if spec.__class__ is tuple or spec.__class__ is int:
            r = cache.get(spec)
            if r is None:
                r = _normalize(spec, what, self.name)
                if len(cache) < 256:
                    cache[spec] = r
            return r
        if callable(spec):
            spec = spec(self.environment(values, user))
        return _normalize(spec, what, self.name)

    def environment(self, values, user) -> dict:
        """Parameter name -> value, as callables for grid/block receive it."""
        env = {p.name: v for p, v in zip(self.params, values)}
        for p, a in zip(self.binder.inputs, user):
            if p.kind == "tensor":
                env[p.name] = a
        return env

    def __call__(self, args: tuple, kwargs: dict, *, grid, block, stream=None,
                 dynamic_smem_bytes=None) -> None:
        values, user = self.binder.bind(args, kwargs)
        g = self._dims(grid, self._grids, "grid", values, user)
        b = self._dims(block, self._blocks, "block", values, user)
        smem = self.dynamic_smem_bytes if dynamic_smem_bytes is None else dynamic_smem_bytes
        if smem > self.fn.max_dynamic_smem:
            self.fn.ensure_dynamic_smem(smem, self.name)
        h = stream_handle(stream, self._device)
        with self._lock:
            try:
                self._pack(self._buf, 0, *values)
            except (struct_error, OverflowError, TypeError):
                self.binder.scalar_error(values)
                raise
            err = self._launch(self.fn.handle, g[0], g[1], g[2], b[0], b[1], b[2], smem, h,
                               self._kp, 0)[0]
            if err:
                self._failed(err, g, b, smem, h)
        driver.last_kernel[0] = self.name

    def _failed(self, err, g, b, smem, h) -> None:
        """Slow path.  A thread with no (or another) current context gets ours and retries;
        anything else becomes a CudaError naming the kernel."""
        code = int(err)
        if code in (_INVALID_CONTEXT, _INVALID_HANDLE):
            d = driver.drv()
            cur = driver.check(d.cuCtxGetCurrent(), "cuCtxGetCurrent", self.name)
            if int(cur) != int(self.fn.ctx):
                with driver.context_scope(self.fn.ctx):
                    err = self._launch(self.fn.handle, g[0], g[1], g[2], b[0], b[1], b[2], smem,
                                       h, self._kp, 0)[0]
                if not err:
                    return
        hint = ""
        module = getattr(self.fn, "module", None)
        if module is not None and not module.loaded:
            hint = f"module '{module.name}' was unloaded; load it again and rebuild the Launcher"
        elif int(err) == 701:
            hint = (f"block {b} needs more registers or shared memory than an SM has; use a "
                    f"smaller block or cap registers (.maxnreg)")
        elif int(err) == 1:
            hint = f"grid {g}, block {b}, dynamic shared memory {smem} bytes, stream {h:#x}"
        raise driver.error(err, "cuLaunchKernel", self.name, hint=hint)

