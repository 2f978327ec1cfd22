"""The per-launch path: bind arguments, resolve grid/block/stream, pack, cuLaunchKernel.

A Launcher is built once per (kernel, device) and then called for every launch, so all
the work that does not depend on the call's arguments (parameter layout, the pointer array,
dims of a constant grid, the context's handle) is done in ``__init__`` or cached on first use.
Every check runs before the driver is asked to launch.  In the steady state the launch is the
only driver call: it is made without asking which context is current, since the driver
refuses to launch a function of a context that is not current (CUDA_ERROR_INVALID_HANDLE; with
none current, CUDA_ERROR_INVALID_CONTEXT) and a refused launch does nothing.  Only a launch that
fails asks (cuCtxGetCurrent): when another device's context (or none) is current, as after
torch.cuda.set_device or in a new thread, it launches again in its own and leaves the thread's
context as it was; otherwise the error is the launch's.  A Launcher whose last launch found
another context current asks first until it finds its own current again, so a thread that keeps
another device current pays no refused launch each time.  An explicit raw stream handle adds
cuStreamGetCtx, to check that it belongs to the launch's device.

The launch call is cuda-bindings' cuLaunchKernel, given the function handle, ints for the dims
and the stream, and the address of the thread's kernelParams array (made once per thread with
the parameter storage), so a steady-state launch is that one call after filling the values.
"""
from __future__ import annotations

import operator
import sys
import threading

from ..errors import LaunchError
from . import cache, driver
from .args import Binder, ParamPacker, ParamSpec
from .launch_source import SUBMIT_TAIL, compiled, make_submit

# The legacy default stream (0), CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) are valid
# in every context, so they need no device check.
_ANY_CONTEXT_STREAMS = (0, 1, 2)
_torch_stream: list = [None, None]   # [torch module, its current-raw-stream function]
_modules = sys.modules


def _torch_current_stream():
    """torch's "current raw stream of device d" function once torch has initialized CUDA,
    else None.  Looked up per torch module object, so removing torch (tests) is honoured."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch is _torch_stream[0]:
        return _torch_stream[1]
    if not torch.cuda.is_initialized():
        return None
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        def raw(dev, torch=torch):
            return torch.cuda.current_stream(dev).cuda_stream
    _torch_stream[:] = [torch, raw]
    return raw


def _explicit_stream(stream):
    """(raw handle, device ordinal the object says it belongs to, or None)."""
    h = getattr(stream, "cuda_stream", None)          # torch.cuda.Stream / ExternalStream
    if h is not None:
        return h, getattr(stream, "device_index", None)
    h = getattr(stream, "ptr", None)                  # cupy.cuda.Stream
    if h is not None:
        return h, getattr(stream, "device_id", None)
    try:
        if isinstance(stream, (float, str, bytes)):
            raise TypeError
        h = operator.index(stream) if hasattr(stream, "__index__") else int(stream)  # CUstream
    except (TypeError, ValueError):
        raise LaunchError(f"stream must be None, an int handle, or a torch/cupy/CUDA stream "
                          f"object, got {type(stream).__name__}") from None
    return h, None


def stream_handle(stream, device: int = 0) -> int:
    """A raw CUstream from: None (torch's current stream of ``device`` when torch has
    initialized CUDA, else the legacy default stream 0), an int, a torch stream
    (.cuda_stream), a cupy stream (.ptr) or a cuda-bindings CUstream."""
    if stream is None:
        raw = _torch_current_stream()
        return raw(device) if raw is not None else 0
    if stream.__class__ is int:
        return stream
    return _explicit_stream(stream)[0]


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


def own_target(launcher) -> tuple:
    """What ``own_launch_path``'s function reads of a Launcher, in one tuple: the Launcher,
    its thread-local storage, launch function and function handle."""
    return launcher, launcher._tls, launcher._launch, launcher.fn.handle


def _current_stream_source(env: dict, dev: str) -> list:
    """Source lines of a generated launch that set h to torch's current raw stream of device
    `dev` (an expression), with what they read added to `env`: the current-stream function as
    found now (torch has made CUDA tensors, so it initialized CUDA), else looked up per
    launch, as launch_own does."""
    raw = _torch_current_stream()
    env.update(raw=raw, ts=_torch_stream, modules=_modules, current=_torch_current_stream)
    if raw is not None:
        return [f"    h = raw({dev})"]
    return ["    raw = ts[1] if modules.get('torch') is ts[0] else current()",
            f"    h = 0 if raw is None else raw({dev})"]


def own_launch_path(binder, targets: dict, dims: tuple, smem: int, tensor_type,
                    dtype_objects: dict, name: str):
    """A Kernel's whole launch with no launch options, generated for its signature: the
    binder's checks of ``tensor_type`` tensors (``Binder.check_source``), then, with the
    ``own_target`` tuple that ``targets`` holds for their device (a Launcher of this kernel
    whose own dims are ``dims``, whose default dynamic shared memory is ``smem`` and that packs
    no tensor maps), the current stream and ``SUBMIT_TAIL``, with no call in between.  It
    returns True when it launched and False for anything it does not take as is (other
    arguments, a device not in ``targets``, every error), for the caller to run the general
    path, which launches or raises the exact error.  One Python call instead of five (call,
    bind, launch_own, _submit, the dims unpacked).  None where the binder cannot specialize
    the signature.  ``benchmarks/launch_overhead.py`` times it against the general path."""
    code = binder.check_source(tensor_type, dtype_objects, "return False")
    if code is None:
        return None
    env, lines, values = code
    env.update(targets=targets, DIMS=tuple(dims), last=driver.last_kernel)
    stream = _current_stream_source(env, "dev")
    src = "\n".join([
        "def launch_own_fast(args):", *lines,
        "    t = targets.get(dev)",
        "    if t is None:",
        "        return False",
        "    L, tls, launch, handle = t", *stream,
        SUBMIT_TAIL.format(
            values=values, launch_dims=", ".join(map(str, dims)), dims="DIMS", smem=int(smem),
            name=repr(name)) + "    return True"]) + "\n"
    return compiled(src, "launch_own_fast", env, name)


def prepared_launch_path(L, inputs: list, values: list, dims: tuple, smem: int, stream,
                         general, debug_flags=()):
    """The launch ``Launcher.prepared`` returns: one argument per kernel input (tensors as
    their device pointers, scalars as numbers), every other value fixed.  Per call it checks
    each pointer (an int, non-null, aligned) and packs the scalars (a value that does not fit
    is named by ``scalar_error``); anything it does not take, and every call while a debug
    mode is on (any ``mapping[key]`` of ``debug_flags``), goes to ``general``: the kernel's
    own launch, which raises the exact error or launches in that mode.  ``stream`` None:
    torch's current stream of the device per call, as a launch without ``stream=`` takes it."""
    binder = L.binder
    names = [f"a{j}" for j in range(len(inputs))]
    env = {"L": L, "tls": L._tls, "launch": L._launch, "handle": L.fn.handle,
           "last": driver.last_kernel, "general": general, "DIMS": tuple(dims),
           "bf16": binder.bf16_scalar}
    env.update((f"F{i}", flags) for i, (flags, _) in enumerate(debug_flags))
    debugging = " or ".join(f"F{i}[{key!r}]" for i, (_, key) in enumerate(debug_flags))
    checks, exprs = [], [repr(v) for v in values]    # symbols keep their prepared values
    for j, p in enumerate(inputs):
        i = binder.index[p.name]
        if p.kind == "tensor":
            checks.append(f"a{j}.__class__ is not int or a{j} % {p.align} or a{j} <= 0")
        exprs[i] = f"bf16({i}, a{j})" if i in binder.bf16 else f"a{j}"
    args = ", ".join(names)
    if stream is not None:
        get_stream = [f"    h = {int(stream)}"]
    else:
        get_stream = _current_stream_source(env, str(L.device))
    lines = [f"def launch_prepared({args}):"]
    if debugging:
        lines += [f"    if {debugging}:", f"        return general({args})"]
    if checks:
        lines += ["    if (" + "\n            or ".join(checks) + "):",
                  f"        return general({args})"]
    lines += get_stream
    packed = ", ".join(exprs)
    if L._builders:                  # tensor maps: their bytes from the values, per call
        env["B"] = L._builders
        lines += [f"    vals = [{packed}]", "    vals += [b(vals) for b in B]"]
        packed = "*vals"
    src = "\n".join(lines) + "\n" + SUBMIT_TAIL.format(
        values=packed, launch_dims=", ".join(map(str, dims)), dims="DIMS", smem=int(smem),
        name=repr(L.name)) + "\n"
    return compiled(src, "launch_prepared", env, L.name)


class Launcher:
    """Launches one Function with checked arguments.

    ``grid``/``block`` are tuples of 1-3 ints, an int, or a callable that receives a dict of
    every parameter name to its value (symbols and scalars as numbers, tensors as passed)
    and returns such a tuple, e.g. ``grid=lambda a: (a["M"] // 128,)``.

    ``dynamic_smem_bytes`` is what a launch gets by default; ``min_dynamic_smem_bytes`` is
    what the kernel's dynamic shared memory (a pool or the shared.dyn arena) needs, below which
    a per-call override is refused: the kernel would access memory past its allocation.
    ``binder`` lets one Binder serve a kernel's launchers on several devices.  ``grid`` and
    ``block`` are a Kernel's own, which ``launch_own`` uses.

    ``param_builders`` fill the parameters no argument binds (kind "tmap", after the bound
    ones): each is called with the bound values and returns its value (a tensor map's bytes).
    ``cluster`` launches in thread-block clusters of that shape (cuLaunchKernelEx).
    ``programmatic`` launches with programmatic stream serialization (cuLaunchKernelEx): for
    a kernel that waits on the kernel ahead itself (pg.wait_on_dependent_grids).
    """

    def __init__(self, fn, params: list[ParamSpec], *, name: str, dynamic_smem_bytes: int = 0,
                 min_dynamic_smem_bytes: int = 0, binder: Binder | None = None,
                 param_builders=(), cluster=None, programmatic=False, grid=None, block=None):
        self.fn, self.name, self.params = fn, name, list(params)
        self._own = (grid, block)
        self._own_dims = None     # their dims, once launch_own has launched with them
        self._builders = tuple(param_builders)
        bound = [p for p in self.params if p.kind != "tmap"]
        self.dynamic_smem_bytes = operator.index(dynamic_smem_bytes)
        self.min_dynamic_smem_bytes = max(0, min_dynamic_smem_bytes)
        self.device = getattr(fn, "device", 0)
        if binder is None:       # a Launcher of its own: its Binder, pinned to its device
            binder = Binder(bound, name=name, device=getattr(fn, "device", None))
            self._bind = binder.specialize_for_torch() or binder.bind_device
        else:                    # a Kernel's: the Kernel binds, then calls launch()
            self._bind = binder.bind_device
        self.binder = binder
        d = driver.drv()
        self._launch = d.cuLaunchKernel if cluster is None and not programmatic else \
            _ex_launch(d, cluster, programmatic, name)
        self.packer = ParamPacker(self.params)
        # parameter storage per thread (cuLaunchKernel copies it, so it is free again when the
        # call returns): threads need no lock around fill + launch
        self._tls = threading.local()
        self._tls.p = self._storage_of(self.packer)
        self._grids: dict = {}
        self._blocks: dict = {}
        self._last_dims = (None, None, None)
        self._current_ctx = d.cuCtxGetCurrent
        self._ctx = int(fn.ctx)
        self._ask_first = False   # the last launch found another context current
        self._last = driver.last_kernel

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
        values, user, _ = self._bind(args, kwargs)
        self.launch(values, user, grid, block, stream, dynamic_smem_bytes)

    def launch(self, values, user, grid, block, stream=None, dynamic_smem_bytes=None) -> None:
        """Launch with arguments already bound (by this Launcher's Binder or one like it)."""
        last = self._last_dims          # (grid, block, their dims): one read, thread-safe
        if grid is last[0] and block is last[1]:   # a Kernel passes its own tuples each time
            dims = last[2]
        else:
            g = self._grids.get(grid) if grid.__class__ is tuple else None
            if g is None:
                g = self._dims(grid, self._grids, "grid", values, user)
            b = self._blocks.get(block) if block.__class__ is tuple else None
            if b is None:
                b = self._dims(block, self._blocks, "block", values, user)
            dims = g + b                 # gridDimX..Z, blockDimX..Z as cuLaunchKernel takes them
            if grid.__class__ is tuple and block.__class__ is tuple:
                self._last_dims = (grid, block, dims)
        smem = dynamic_smem_bytes
        if smem is None:
            smem = self.dynamic_smem_bytes
        elif smem.__class__ is not int or smem < self.min_dynamic_smem_bytes:
            smem = self._smem_override(smem)
        fn = self.fn
        if smem > fn.max_dynamic_smem:
            fn.ensure_dynamic_smem(smem, self.name)
        if stream is None:              # torch's current stream of our device, else 0
            raw = _torch_stream[1] if _modules.get("torch") is _torch_stream[0] else \
                _torch_current_stream()
            h = 0 if raw is None else raw(self.device)
        elif stream.__class__ is int and stream in _ANY_CONTEXT_STREAMS:
            h = stream
        else:
            h = self._checked_stream(stream)
        self._submit(values, dims, smem, h)

    def prepared(self, values, user, grid, block, stream, dynamic_smem_bytes, general,
                 debug_flags=()):
        """``prepared_launch_path`` for launches like this one (values bound by the Binder):
        the dims, dynamic shared memory and an explicit stream are resolved and checked here,
        once."""
        g = self._dims(grid, self._grids, "grid", values, user)
        b = self._dims(block, self._blocks, "block", values, user)
        smem = self.dynamic_smem_bytes if dynamic_smem_bytes is None else \
            self._smem_override(dynamic_smem_bytes)
        if smem > self.fn.max_dynamic_smem:
            self.fn.ensure_dynamic_smem(smem, self.name)
        h = None
        if stream is not None:
            h = stream if stream.__class__ is int and stream in _ANY_CONTEXT_STREAMS else \
                self._checked_stream(stream)
        return prepared_launch_path(self, self.binder.inputs, values, g + b, smem, h, general,
                                    debug_flags)

    def launch_own(self, values, user) -> None:
        """``launch`` with the Kernel's own grid and block, its default dynamic shared memory
        and the current stream: a Kernel's call with no launch options, the common one, with
        the same checks and steps and nothing that only options need (dims resolved once,
        the shared-memory opt-in done once: a function's limit only grows)."""
        dims = self._own_dims
        if dims is None:
            self._first_own(values, user)
            return
        raw = _torch_stream[1] if _modules.get("torch") is _torch_stream[0] else \
            _torch_current_stream()
        self._submit(values, dims, self.dynamic_smem_bytes, 0 if raw is None else raw(self.device))

    _submit = make_submit()

    def _first_own(self, values, user) -> None:
        grid, block = self._own
        self.launch(values, user, grid, block)
        last = self._last_dims
        if grid is last[0] and block is last[1] and \
                self.dynamic_smem_bytes <= self.fn.max_dynamic_smem:
            self._own_dims = last[2]      # constant dims (a callable grid never gets here)

    def _relaunch(self, err, dims, smem, h, kp) -> None:
        """A launch failed: launch again in our context if another one (or none) is current
        in this thread, else raise the launch's error."""
        here = self._current_ctx()
        if not here[0] and int(here[1]) == self._ctx:
            self._failed(err, dims, smem, h)
        cache.bump("launch_retries")
        self._ask_first = True
        self._in_our_context(dims, smem, h, kp)

    def _launch_asking(self, dims, smem, h, kp) -> None:
        """The launch, after asking which context is current (see the module docstring)."""
        here = self._current_ctx()
        if not here[0] and int(here[1]) == self._ctx:
            self._ask_first = False
            err = self._launch(self.fn.handle, *dims, smem, h, kp, 0)[0]
            if err:
                self._failed(err, dims, smem, h)
        else:
            self._in_our_context(dims, smem, h, kp)

    def _in_our_context(self, dims, smem, h, kp) -> None:
        # another device's context (or none) is current in this thread: run in ours, and
        # leave the thread's own one current again (torch's current device stays put)
        with driver.context_scope(self.fn.ctx):
            err = self._launch(self.fn.handle, *dims, smem, h, kp, 0)[0]
        if err:
            self._failed(err, dims, smem, h)

    def _storage_of(self, pk):
        """(pack_into, buffer, kernelParams address, the packer): the packer is kept so the
        pointer array that kernelParams addresses lives as long as the storage is used."""
        return (pk.struct.pack_into, pk.buffer, pk.kernel_params, pk)

    def _thread_storage(self):
        self._tls.p = p = self._storage_of(ParamPacker(self.params))
        return p

    def _smem_override(self, smem) -> int:
        try:
            n = operator.index(smem)
        except TypeError:
            raise LaunchError(f"kernel '{self.name}': dynamic_smem_bytes must be an integer, got "
                              f"{type(smem).__name__} {smem!r}") from None
        if n < 0:
            raise LaunchError(f"kernel '{self.name}': dynamic_smem_bytes={n} is negative")
        need = self.min_dynamic_smem_bytes
        if n < need:
            raise LaunchError(f"kernel '{self.name}': dynamic_smem_bytes={n} is less than the "
                              f"{need} bytes its dynamic shared memory (pool or shared.dyn arena) "
                              f"uses; pass at least {need}, or leave it out to get "
                              f"{self.dynamic_smem_bytes}")
        return n

    def _checked_stream(self, stream) -> int:
        """The handle of an explicitly passed stream, after checking it belongs to this
        launch's device: from the object where it says (torch, cupy), else from the driver."""
        h, dev = _explicit_stream(stream)
        if dev is None:
            if h in _ANY_CONTEXT_STREAMS:
                return h
            ctx = driver.stream_context(h)
            if ctx is None or ctx == self._ctx:
                return h
            dev = driver.context_device(ctx)
            if dev == self.device:   # a context of our device but not the primary one
                raise LaunchError(f"kernel '{self.name}': the stream belongs to a context of "
                                  f"cuda:{dev} other than its primary context, which ptxgen (and "
                                  f"torch, cupy) launch in; create the stream in the primary one")
        if dev != self.device:
            where = "another device" if dev is None else f"cuda:{dev}"
            raise LaunchError(f"kernel '{self.name}': the stream is on {where}, but the launch "
                              f"runs on cuda:{self.device} (where its arguments are); pass a "
                              f"stream of cuda:{self.device}")
        return h

    def _failed(self, err, dims, smem, h) -> None:
        """Slow path: a CudaError naming the kernel, with what may explain it."""
        g, b = dims[:3], dims[3:]
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


def _ex_launch(d, cluster, programmatic, name):
    """cuLaunchKernel's signature and result over cuLaunchKernelEx with the launch attributes:
    the cluster dimension (the grid must be a whole number of clusters) and programmatic
    stream serialization."""
    cx, cy, cz = cluster or (1, 1, 1)
    attrs = [_cluster_attribute(d, cluster)] if cluster is not None else []
    if programmatic:
        attrs.append(_programmatic_attribute(d))
    # read-only once made: every thread's launches share them
    config, as_stream = d.CUlaunchConfig, d.CUstream

    def launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        if gx % cx or gy % cy or gz % cz:
            raise LaunchError(f"kernel '{name}': grid {(gx, gy, gz)} is not a whole number of "
                              f"clusters {tuple(cluster)}; make each grid dim a multiple")
        cfg = config()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = gx, gy, gz
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = bx, by, bz
        cfg.sharedMemBytes = smem
        cfg.hStream = as_stream(stream)
        cfg.attrs, cfg.numAttrs = attrs, len(attrs)
        if cx * cy * cz > 8:   # past the portable 8 CTAs (sm_90: up to 16) the function opts in
            driver.check(d.cuFuncSetAttribute(f, d.CUfunction_attribute.
                         CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                         "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)", name)
        return d.cuLaunchKernelEx(cfg, f, params, extra)
    return launch


def _programmatic_attribute(d):
    """The CUlaunchAttribute that lets a launch start before the kernel ahead completes."""
    attr = d.CUlaunchAttribute()
    attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    return attr


def _cluster_attribute(d, cluster):
    """The CUlaunchAttribute of a cluster launch of shape ``cluster``."""
    attr = d.CUlaunchAttribute()
    attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    return attr
