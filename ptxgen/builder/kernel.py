"""@pg.kernel: trace a Python function once into a PrimFunc; build, assemble, launch it.

The build pipeline (passes, emit) is imported with this module, not by the first build:
every kernel is built, and importing it there made a first `k.ptx()` cost tens of times a
later one.  Compiling and launching are the runtime's (``runtime.launch_plan``), imported by
the first compile, ``params`` or launch through ``_launch_plan``: building PTX needs neither
the runtime nor the CUDA bindings."""
from __future__ import annotations

import operator
import sys
from _thread import RLock

from ..dtypes import dtype as _dtype
from ..emit.codegen import Codegen
from ..errors import ArchError, LaunchError, PtxgenError, TraceError
from ..ir import PLAIN_INT, Param, PrimFunc, Var
from ..passes import prepare, syncdebug
from ..target import parse_target
from . import context
from .cluster import check_cluster
from .control import GOOD_BLOCKS, GOOD_GRIDS, launch_dims
from .locate import deep_located, locate, signature_error
from .resources import resources_of
from .signature import ScalarType, annotated_params, param_from_annotation
from .tensor import Tensor, TensorHandle, make_buffer


class Kernel:
    """A traced kernel: .ir, .ptx(arch), .compile(arch), and a launch by calling it."""

    def __init__(self, fn, grid=None, block=None, name=None, dynamic_smem_bytes=None,
                 cluster=None):
        if not callable(fn) or not hasattr(fn, "__code__") and not hasattr(fn, "__wrapped__"):
            raise TraceError(f"{context.user_src()}: @pg.kernel decorates a Python function, "
                             f"got {fn!r}")
        self.fn = fn
        if _TORCH[0] is None:      # a later call under torch.compile reads no sys.modules
            _torch_if_imported()
        self.cluster = None if cluster is None else check_cluster(cluster)
        self.name = name or fn.__name__
        self._ptx_cache: dict = {}
        self._lock = RLock()      # _thread's: threading.RLock is a Python-level wrapper
        self._plan = None            # runtime.launch_plan.LaunchPlan, made by the first launch
        # a callable grid is computed per launch from the arguments (e.g. one CTA per tile);
        # the body then may not fix gridDim with cta_id(n)
        self._grid_fn = grid if callable(grid) else None
        args = (None if self._grid_fn else grid, block, dynamic_smem_bytes)
        try:
            self.ir = self._trace(*args)
        except RecursionError:   # a deep program: trace it again where recursion has room
            self.ir = deep_located(self._trace, args, "the kernel")

    # ---- tracing --------------------------------------------------------------------
    def _trace(self, grid, block, dyn) -> PrimFunc:
        fn = self.fn
        func = PrimFunc(self.name, [], [])
        src = f"{fn.__code__.co_filename.rsplit('/', 1)[-1]}:{fn.__code__.co_firstlineno}"
        try:   # a tuple checked before needs no call (an unhashable one: checked below);
            # ints only: (2.0,) and (True,) hash and compare equal to (2,) and (1,)
            g = GOOD_GRIDS.get(grid) if type(grid) is tuple and \
                set(map(type, grid)) <= PLAIN_INT else None
            b = GOOD_BLOCKS.get(block) if type(block) is tuple and \
                set(map(type, block)) <= PLAIN_INT else None
        except TypeError:
            g = b = None
        if grid is not None:
            func.grid = g or launch_dims("grid", _ints(grid), src)
        if block is not None:
            func.block = b or launch_dims("block", _ints(block), src)
        if dyn is not None and type(dyn) is not int:     # numpy integers become ints
            dyn = _ints(dyn)
        if dyn is not None:
            if isinstance(dyn, bool) or not isinstance(dyn, int) or dyn < 0:
                raise TraceError(f"{src}: dynamic_smem_bytes must be a non-negative int, got "
                                 f"{dyn!r}")
            func.dynamic_smem_reserve = dyn
        if self.cluster is not None:
            func.attrs["cluster"] = self.cluster
        ctx = context.TraceContext(func)
        if grid is not None:
            ctx.grid_set = dict.fromkeys(range(3), "the @pg.kernel decorator")
        if block is not None:
            ctx.block_set = dict.fromkeys(range(3), "the @pg.kernel decorator")
        args = []
        symbols: dict[int, Var] = {}
        context.push(ctx)      # once, for the parameters' buffers and the body
        ctx.param_src = src    # their errors name the kernel, not a line of its caller
        try:
            for pname, ann in annotated_params(fn):
                if isinstance(ann, str):
                    ann = param_from_annotation(pname, ann, fn, src)
                if isinstance(ann, Tensor):
                    if ann.scope != "global":
                        raise TraceError(f"{src}: tensor parameter '{pname}': parameters live "
                                         f"in global memory; got scope={ann.scope!r} (a "
                                         f"pg.Tensor of another scope is a type argument of "
                                         f"pg.alloc_tensor / pg.decl_tensor / pg.decl_tmem)")
                    for s in ann.shape:
                        if isinstance(s, Var):
                            symbols.setdefault(s.uid, s)
                    b = make_buffer(pname, ann.shape, ann.dtype, "global", ann.layout,
                                    ann.elem_offset, ann.byte_offset, ann.align, param=True)
                    func.params.append(Param(pname, "tensor", None, b))
                    args.append(TensorHandle(b))
                elif isinstance(ann, ScalarType) or (isinstance(ann, str) and ann):
                    dt = _dtype(ann.ptxgen_dtype if isinstance(ann, ScalarType) else ann)
                    if dt.lanes != 1 or dt.kind not in ("int", "uint", "float"):
                        raise TraceError(f"{src}: scalar parameter '{pname}' must be an int or "
                                         f"float type, got {dt}")
                    v = Var(pname, dt)
                    func.params.append(Param(pname, "scalar", v))
                    args.append(v)
                else:
                    raise TraceError(f"{src}: parameter '{pname}' needs an annotation: "
                                     f"pg.Tensor(shape, dtype) or a scalar type such as pg.int32")
            for v in symbols.values():
                func.params.append(Param(v.name, "symbol", v))
            ctx.param_src = None
            try:
                fn(*args)
                for fin in ctx.finalizers:
                    fin()
            except PtxgenError as e:
                locate(e)
                raise
            except TypeError as e:   # a pg call with wrong arguments: Python's own message
                err = signature_error(e)
                if err is None:
                    raise
                raise err from None
        finally:
            context.pop()
        self._ctx_resources = ctx.resources
        self._dims_set = (ctx.block_used, ctx.block_set, ctx.grid_set)   # see _declared
        self._declared_dims = None
        if self._grid_fn is not None:
            if ctx.grid_set:
                k, where = sorted(ctx.grid_set.items())[0]
                raise TraceError(f"{where}: the kernel's grid is a callable (computed per launch), "
                                 f"but gridDim.{'xyz'[k]} is fixed to {func.grid[k]} here; use "
                                 f"pg.cta_id() without an extent")
            func.attrs["grid"] = getattr(self._grid_fn, "__name__", "callable")
        if self.cluster is not None and self._grid_fn is None and ctx.grid_set:
            for k, (g, c) in enumerate(zip(func.grid, self.cluster)):
                if g % c:
                    raise TraceError(f"{src}: gridDim.{'xyz'[k]} = {g} is not a multiple of the "
                                     f"cluster's {c} CTAs along {'xyz'[k]} (cluster="
                                     f"{self.cluster}); the launch would fail")
        if func.dynamic_smem_reserve is not None and func.dynamic_smem_reserve < func.dynamic_smem_bytes:
            raise TraceError(f"{src}: pg.launch(dynamic_smem_bytes={func.dynamic_smem_reserve}) "
                             f"is less than the {func.dynamic_smem_bytes} bytes the shared.dyn "
                             f"arena needs")
        return func

    # ---- building ------------------------------------------------------------------
    def _build(self, target):
        func = prepare(self.ir, target)
        cg = Codegen(func, target, debug_bounds=_DEBUG["bounds"])
        text = cg.run()
        if "sync_sites" in func.attrs:       # sync debug mode: the record pointer's global
            text = syncdebug.declare(text)
        return _Built(text, cg, target)

    def built(self, arch="sm_90a"):
        key = (arch, _DEBUG["bounds"], syncdebug.MODE["sync"])   # the debug modes it was built in
        b = self._ptx_cache.get(key)
        if b is None:
            try:
                target = parse_target(arch)
            except ArchError as e:            # at the user's k.ptx / k.compile line
                raise ArchError(f"{context.user_src()}: {e}") from None
            with self._lock:
                b = self._ptx_cache.get(key)
                if b is None:
                    try:
                        b = self._build(target)
                    except RecursionError:
                        b = deep_located(self._build, (target,), "the kernel")
                    self._ptx_cache[key] = b
        return b

    def ptx(self, arch: str = "sm_90a") -> str:
        """The whole PTX module, ready for cuModuleLoadData or nvJitLink."""
        return self.built(arch).text

    def line_origin(self, arch="sm_90a"):
        return self.built(arch).origin

    @property
    def resources(self) -> dict:
        """Shared/tensor memory this kernel uses (composed across its pools), as a dict."""
        if "memory" in self._ctx_resources:
            return dict(self._ctx_resources)

        mem = resources_of(self.ir)
        return dict(mem.as_dict(), memory=mem)

    def compile(self, arch: str = "sm_90a"):
        """Assemble offline with nvJitLink; no GPU needed."""
        res = _launch_plan().compile_built(self.built(arch), arch)
        res.resources = dict(self.resources, registers=res.registers,
                             spill_bytes=res.spill_bytes)
        return res

    @property
    def params(self):
        """The runtime's ParamSpecs of the parameters a launch binds."""
        return _launch_plan().param_specs(self.ir)

    def __call__(self, *args, **kw):
        """``k(*args, grid=None, block=None, stream=None, dynamic_smem_bytes=None, **symbols)``:
        launch on the device of the tensor arguments (all on one; raw pointers: the current
        device), in torch's current stream there unless ``stream`` is given.  The first launch
        on a device builds for its arch (once per arch) and loads a module there.  A call with
        no keywords takes the generated fast launch once there is one (``LaunchPlan.fast``).

        Inside torch.compile the call is one graph break and the launch runs eagerly: Dynamo
        tracing the launch machinery would guard on (and, in some torch versions, fail while
        wrapping) sys.modules and the driver binding.  ``pg.torch_op`` keeps a kernel in the
        graph instead."""
        torch = _TORCH[0] or _torch_if_imported()
        if torch is not None and torch.compiler.is_compiling():
            return torch.compiler.disable(self._launch)(args, kw)
        self._launch(args, kw)

    def _launch(self, args, kw):
        plan = self._plan or self._make_plan()
        if not kw:
            fast = plan.fast
            if fast and not _DEBUG["bounds"] and not syncdebug.enabled() and fast(args):
                return
        plan.call(args, kw, _DEBUG["bounds"], syncdebug.RECORD if syncdebug.enabled() else None)

    def prepare(self, *args, **kw):
        """``k.prepare(*args, grid=None, block=None, stream=None, dynamic_smem_bytes=None,
        **symbols)`` -> a function launching this kernel as ``k(*args, ...)`` would, for new
        argument values of the same metadata: one positional per input, each tensor as its
        device pointer (``t.data_ptr()``), each scalar as a number.  Shape symbols, dims,
        shared memory and the device are those of ``args``, checked now as a launch checks
        them; a call checks its pointers (non-null, aligned) and scalars.  The caller keys a
        prepared launch by the metadata it was made for (a wrapper's shapes, dtypes, device:
        ``ptxgen.kernels``).  Without ``stream``, each call takes torch's current stream then.
        While a debug mode is on, calls go through ``k(...)`` itself."""
        plan = self._plan or self._make_plan()
        return plan.prepare(args, kw, self, ((_DEBUG, "bounds"), (syncdebug.MODE, "sync")))

    def _make_plan(self):
        with self._lock:
            if self._plan is None:
                self._plan = _launch_plan().LaunchPlan(
                    self.name, self.ir, self.built, grid_fn=self._grid_fn, cluster=self.cluster,
                    check_dims=self._check_launch_dims)
        return self._plan

    def _declared(self) -> tuple:
        """(block dims, grid dims) whose extent the body declared (thread_id/cta_id): their
        index bounds were used as facts, so a launch must keep them.  Asked by launches
        only, so worked out at the first one rather than per trace, and kept."""
        if self._declared_dims is None:
            block_used, block_set, grid_set = self._dims_set
            self._declared_dims = ({0, 1, 2} if block_used else
                                   {k for k, w in block_set.items() if "decorator" not in w},
                                   {k for k, w in grid_set.items() if "decorator" not in w})
        return self._declared_dims

    def _check_launch_dims(self, grid, block):
        """Refuse launch dims other than the traced ones where the body relied on them."""
        declared_block, declared_grid = self._declared()
        for what, given, traced, declared in (("block", block, self.ir.block, declared_block),
                                              ("grid", grid, self.ir.grid, declared_grid)):
            if given is None or callable(given):
                continue
            dims = (tuple(given) if isinstance(given, (tuple, list)) else (given,)) + (1, 1)
            for k in declared:
                if dims[k] != traced[k]:
                    raise LaunchError(
                        f"kernel '{self.name}' was traced with {what}Dim.{'xyz'[k]} = {traced[k]} "
                        f"(the generated code relies on it: thread/CTA ids, warp ids or tile "
                        f"scopes); launched with {dims[k]}")

    def unload(self):
        """Unload this kernel's modules (a later launch loads them again)."""
        if self._plan is not None:
            self._plan.unload()

    def __repr__(self):
        return f"<pg.Kernel {self.name}>"


def _ints(x):
    """numpy (or other) integers in the decorator's launch settings as Python ints; anything
    else unchanged, for the tracer to judge."""
    try:
        if isinstance(x, (tuple, list)):
            return tuple([operator.index(v) for v in x])
        return x if x is None or x.__class__ is int or callable(x) else operator.index(x)
    except TypeError:
        return x


_PLAN = []


def _launch_plan():
    """ptxgen.runtime.launch_plan, imported by the first compile or launch rather than by
    `import ptxgen`: the one place the builder reaches the runtime."""
    if not _PLAN:
        from ..runtime import launch_plan
        _PLAN.append(launch_plan)
    return _PLAN[0]


class _Built:
    """PTX text plus the map from PTX line numbers to IR statements."""

    def __init__(self, text, cg, target):
        self.text = text
        self.codegen = cg
        self.entry = cg.kernel_name
        self.target = target

    def _body_start(self) -> int:
        """PTX lines before the first body line: found when an error report asks (origin),
        not per build."""
        lines = self.codegen.lines
        return self.text[:self.text.index(lines[0])].count("\n") if lines else 0

    def origin(self, lineno: int):
        k = lineno - 1 - self._body_start()
        cg = self.codegen
        if 0 <= k < len(cg.line_stmt):
            idx = cg.line_stmt[k]
            if 0 <= idx < len(cg.stmts):
                text, src = cg.stmts[idx]
                return f"IR statement: {text}" + (f"  (from {src})" if src else "")
        return None


_DEBUG = {"bounds": False}
_TORCH: list = [None]     # the torch module once a kernel has seen it imported


def _torch_if_imported():
    """torch where something has imported it (ptxgen never does), kept in _TORCH: a call that
    Dynamo traces then reads a one-element list, not sys.modules, once any kernel was made or
    launched after `import torch`."""
    torch = _TORCH[0] = sys.modules.get("torch")
    return torch


def debug_bounds(on: bool = True) -> bool:
    """Build kernels that check every index against its buffer's extent and `trap`, printing
    the buffer's name, on a violation.  Off by default; kernels built with it off are
    unchanged.  Returns the previous setting."""
    prev = _DEBUG["bounds"]
    _DEBUG["bounds"] = bool(on)
    return prev


def debug(sync: bool | None = None, bounds: bool | None = None) -> dict:
    """Debug builds: `sync=True` bounds every mbarrier wait and while_ loop (a hang raises
    SyncError; also PTXGEN_DEBUG=sync), `bounds=True` is debug_bounds.  Returns the previous
    settings; None leaves one as it is."""
    prev = {"sync": syncdebug.enabled(), "bounds": _DEBUG["bounds"]}
    if sync is not None:
        syncdebug.set_sync(sync)
    if bounds is not None:
        debug_bounds(bounds)
    return prev


def kernel(fn=None, *, grid=None, block=None, name=None, dynamic_smem_bytes=None, cluster=None):
    """Decorator: trace the function once into a pg.Kernel (`cluster=(x, y, z)`: launched in
    thread-block clusters of that shape, sm_90+)."""
    def wrap(f):
        return Kernel(f, grid=grid, block=block, name=name, dynamic_smem_bytes=dynamic_smem_bytes,
                      cluster=cluster)
    if fn is not None and callable(fn):
        return wrap(fn)
    return wrap
