"""@pg.kernel: trace a Python function once into a PrimFunc; build, assemble, launch it."""
from __future__ import annotations

import inspect
import os
import re
from _thread import RLock
from types import FunctionType

from ..deep import run_deep, too_deep
from ..dtypes import dtype as _dtype
from ..errors import PtxgenError, TraceError
from ..ir import Param, PrimFunc, Var, cast, const
from . import context
from .control import GOOD_BLOCKS, GOOD_GRIDS, _launch_dims
from .tensor import Tensor, TensorHandle, make_buffer


_LOCATED = re.compile(r"^[^\s:]+\.py:\d+: ")


def _locate(e: PtxgenError):
    """Prefix an error raised while tracing with the user's file:line (the innermost
    traceback frame outside ptxgen), unless it already says where."""
    msg = str(e.args[0]) if e.args else ""
    if _LOCATED.match(msg):
        return
    where = None
    tb = e.__traceback__
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if not context.is_library(fname):
            where = f"{os.path.basename(fname)}:{tb.tb_lineno}"
        tb = tb.tb_next
    if where:
        e.args = (f"{where}: {msg}",) + tuple(e.args[1:])


def _deep(fn, args, what):
    """fn(*args) again under run_deep (see ptxgen/deep.py); a RecursionError even there is a
    located error (the emitter notes the statement it was in; else the innermost user frame)."""
    try:
        return run_deep(fn, *args)
    except RecursionError as e:
        where = getattr(e, "ptxgen_src", None)
        tb = e.__traceback__
        while where is None and tb is not None:
            if not context.is_library(tb.tb_frame.f_code.co_filename):
                where = f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
            tb = tb.tb_next
        raise too_deep(where or "", what) from None


_SIGNATURE = re.compile(r"^([\w.<>]+)\(\) (got an unexpected keyword argument|takes|missing|"
                        r"got multiple values|got some positional-only)")


def _signature_error(e: TypeError):
    """A TraceError at the user's line for a TypeError that Python raised while binding the
    arguments of a ptxgen function (`pg.alloc_shared(..., elem_offset=2)`), else None.  The
    call failed before the function ran, so no ptxgen frame is on the traceback."""
    m = _SIGNATURE.match(str(e))
    if m is None:
        return None
    where = None
    tb = e.__traceback__
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if fname.startswith(context._PKG_DIRS):
            where = None          # raised inside ptxgen: not a call made by the user
        elif not context.is_library(fname):
            where = f"{os.path.basename(fname)}:{tb.tb_lineno}"
        tb = tb.tb_next
    if where is None or m.group(1) not in _pg_names():
        return None
    return TraceError(f"{where}: {e}")


def _pg_names() -> set:
    """Qualified names of the functions and methods ptxgen's loaded modules define (an error
    path: gathered afresh, as modules load on first use)."""
    import sys

    out = set()
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.split(".")[0] != "ptxgen" or mod is None:
            continue
        for v in list(vars(mod).values()):
            if getattr(v, "__module__", None) != mod_name:
                continue
            if isinstance(v, type):
                out.update(getattr(m, "__qualname__", "") for m in vars(v).values()
                           if callable(m))
                out.add(v.__qualname__)
            elif callable(v):
                out.add(getattr(v, "__qualname__", ""))
    return out


class ScalarType:
    """pg.int32, pg.float32, ...: scalar parameter annotations and literal constructors."""

    def __init__(self, name):
        self.ptxgen_dtype = name

    def __call__(self, value):
        return const(value, self.ptxgen_dtype) if isinstance(value, (int, float)) \
            else cast(value, self.ptxgen_dtype)

    def __repr__(self):
        return f"pg.{self.ptxgen_dtype}"

    def __str__(self):
        return self.ptxgen_dtype


def _param_from_annotation(name, ann, fn, src):
    if isinstance(ann, str):
        ns = dict(fn.__globals__)
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                ns[var] = cell.cell_contents
            except ValueError:
                pass
        try:
            ann = eval(ann, ns)   # `from __future__ import annotations`
        except Exception as e:
            raise TraceError(f"{src}: cannot evaluate the annotation of '{name}' of "
                             f"{fn.__name__}: {e}") from None
    return ann


def _annotated_params(fn):
    """(name, annotation) of each parameter.  A plain function is read off its code object:
    inspect.signature costs as much as tracing a small kernel."""
    code = fn.__code__ if isinstance(fn, FunctionType) else None
    if code is None or hasattr(fn, "__wrapped__") or code.co_kwonlyargcount or \
            code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return [(n, p.annotation) for n, p in inspect.signature(fn).parameters.items()]
    anns = fn.__annotations__
    return [(n, anns.get(n, inspect.Parameter.empty))
            for n in code.co_varnames[:code.co_argcount]]


class Kernel:
    """A traced kernel: .ir, .ptx(arch), .compile(arch), and a launch by calling it."""

    def __init__(self, fn, grid=None, block=None, name=None, dynamic_smem_bytes=None):
        if not callable(fn) or not hasattr(fn, "__code__") and not hasattr(fn, "__wrapped__"):
            raise TraceError(f"{context.user_src()}: @pg.kernel decorates a Python function, "
                             f"got {fn!r}")
        self.fn = fn
        self.name = name or fn.__name__
        self._ptx_cache: dict = {}
        self._lock = RLock()      # _thread's: threading.RLock is a Python-level wrapper
        self._launchers: dict = {}
        # a callable grid is computed per launch from the arguments (e.g. one CTA per tile);
        # the body then may not fix gridDim with cta_id(n)
        self._grid_fn = grid if callable(grid) else None
        args = (None if self._grid_fn else grid, block, dynamic_smem_bytes)
        try:
            self.ir = self._trace(*args)
        except RecursionError:   # a deep program: trace it again where recursion has room
            self.ir = _deep(self._trace, args, "the kernel")

    # ---- tracing --------------------------------------------------------------------
    def _trace(self, grid, block, dyn) -> PrimFunc:
        fn = self.fn
        func = PrimFunc(self.name, [], [])
        src = f"{fn.__code__.co_filename.rsplit('/', 1)[-1]}:{fn.__code__.co_firstlineno}"
        try:   # a tuple checked before needs no call (an unhashable one: checked below)
            g = GOOD_GRIDS.get(grid) if type(grid) is tuple else None
            b = GOOD_BLOCKS.get(block) if type(block) is tuple else None
        except TypeError:
            g = b = None
        if grid is not None:
            func.grid = g or _launch_dims("grid", grid, src)
        if block is not None:
            func.block = b or _launch_dims("block", block, src)
        if dyn is not None:
            if isinstance(dyn, bool) or not isinstance(dyn, int) or dyn < 0:
                raise TraceError(f"{src}: dynamic_smem_bytes must be a non-negative int, got "
                                 f"{dyn!r}")
            func.dynamic_smem_reserve = dyn
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
            for pname, ann in _annotated_params(fn):
                if isinstance(ann, str):
                    ann = _param_from_annotation(pname, ann, fn, src)
                if isinstance(ann, Tensor):
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
                _locate(e)
                raise
            except TypeError as e:   # a pg call with wrong arguments: Python's own message
                err = _signature_error(e)
                if err is None:
                    raise
                raise err from None
        finally:
            context.pop()
        self._ctx_resources = ctx.resources
        # dims whose extent the body declared (thread_id/cta_id): their index bounds were used
        # as facts, so a launch must keep them
        self._declared = ({0, 1, 2} if ctx.block_used else
                          {k for k, w in ctx.block_set.items() if "decorator" not in w},
                          {k for k, w in ctx.grid_set.items() if "decorator" not in w})
        if self._grid_fn is not None:
            if ctx.grid_set:
                k, where = sorted(ctx.grid_set.items())[0]
                raise TraceError(f"{where}: the kernel's grid is a callable (computed per launch), "
                                 f"but gridDim.{'xyz'[k]} is fixed to {func.grid[k]} here; use "
                                 f"pg.cta_id() without an extent")
            func.attrs["grid"] = getattr(self._grid_fn, "__name__", "callable")
        if func.dynamic_smem_reserve is not None and func.dynamic_smem_reserve < func.dynamic_smem_bytes:
            raise TraceError(f"{src}: pg.launch(dynamic_smem_bytes={func.dynamic_smem_reserve}) "
                             f"is less than the {func.dynamic_smem_bytes} bytes the shared.dyn "
                             f"arena needs")
        return func

    # ---- building ------------------------------------------------------------------
    def _build(self, arch):
        parse_target, lower, Codegen = _BUILD_API or _build_api()
        target = parse_target(arch)
        ir = self.ir
        body, in_regs = lower(ir.body)
        func = PrimFunc(ir.name, ir.params, body, ir.grid, ir.block, ir.dynamic_smem_bytes,
                        ir.dynamic_smem_reserve, ir.attrs)
        cg = Codegen(func, target, debug_bounds=_DEBUG["bounds"])
        cg.local_in_regs = in_regs
        text = cg.run()
        return _Built(text, cg, target)

    def built(self, arch="sm_90a"):
        key = (arch, _DEBUG["bounds"])
        b = self._ptx_cache.get(key)
        if b is None:
            with self._lock:
                b = self._ptx_cache.get(key)
                if b is None:
                    try:
                        b = self._build(arch)
                    except RecursionError:
                        b = _deep(self._build, (arch,), "the kernel")
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
        from ..alloc import resources_of

        mem = resources_of(self.ir)
        return dict(mem.as_dict(), memory=mem)

    def compile(self, arch: str = "sm_90a"):
        """Assemble offline with nvJitLink; no GPU needed."""
        from ..runtime import compile_ptx

        b = self.built(arch)
        res = compile_ptx(b.text, arch, name=b.entry, line_origin=b.origin)
        res.resources = dict(self.resources, registers=res.registers,
                             spill_bytes=res.spill_bytes)
        return res

    @property
    def params(self):
        from ..runtime import ParamSpec
        from ..emit.codegen import reg_type_of

        out = []
        for p in self.ir.params:
            if p.kind == "tensor":
                b = p.buffer
                shape = tuple(s.name if isinstance(s, Var) else s for s in b.shape)
                out.append(ParamSpec(p.name, "tensor", b.dtype.name, ".u64", shape,
                                     _expected_strides(b), b.align))
            else:
                out.append(ParamSpec(p.name, p.kind, p.var.dtype.name, "." + reg_type_of(p.var.dtype)))
        return out

    def __call__(self, *args, grid=None, block=None, stream=None, dynamic_smem_bytes=None, **kw):
        from ..runtime import Launcher, Module, compile_ptx, device_arch

        arch = device_arch()
        lkey = (arch, _DEBUG["bounds"])
        launcher = self._launchers.get(lkey)
        if launcher is None:
            with self._lock:
                launcher = self._launchers.get(lkey)
                if launcher is None:
                    b = self.built(arch)
                    # assembled by nvJitLink (memory/disk cubin cache), then loaded: a second
                    # process loads the cached cubin without any JIT
                    res = compile_ptx(b.text, arch, name=b.entry, line_origin=b.origin)
                    mod = Module.load(cubin=res.cubin, name=b.entry, line_origin=b.origin)
                    f = self.ir
                    dyn = max(f.dynamic_smem_bytes, f.dynamic_smem_reserve or 0)
                    launcher = Launcher(mod.function(b.entry), self.params, name=self.name,
                                        dynamic_smem_bytes=dyn)
                    launcher.module = mod
                    self._launchers[lkey] = launcher
        if block is not None or grid is not None:
            self._check_launch_dims(grid, block)
        if grid is None:
            grid = self._grid_fn or self.ir.grid
        launcher(args, kw, grid=grid,
                 block=block if block is not None else self.ir.block, stream=stream,
                 dynamic_smem_bytes=dynamic_smem_bytes)

    def _check_launch_dims(self, grid, block):
        from ..errors import LaunchError

        for what, given, traced, declared in (("block", block, self.ir.block, self._declared[0]),
                                              ("grid", grid, self.ir.grid, self._declared[1])):
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
        for l in self._launchers.values():
            l.module.unload()
        self._launchers.clear()

    def __repr__(self):
        return f"<pg.Kernel {self.name}>"


def _expected_strides(b):
    """Callable of bound symbols -> expected element strides (row-major or from the layout)."""
    if b.layout is not None:
        lay = b.layout
        shape = b.shape
        if not all(isinstance(s, int) for s in shape):
            return None

        def strides(_sym, lay=lay, shape=shape):
            out = []
            zero = [0] * len(shape)
            base = lay.apply(*zero, shape=shape)["m"]
            for d in range(len(shape)):
                if shape[d] == 1:
                    out.append(None)
                    continue
                c = list(zero)
                c[d] = 1
                out.append(lay.apply(*c, shape=shape)["m"] - base)
            return tuple(out)
        return strides
    shape = b.shape

    def strides(sym, shape=shape):
        dims = [s if isinstance(s, int) else sym[s.name] for s in shape]
        out, acc = [], 1
        for d in reversed(dims):
            out.insert(0, acc)
            acc *= d
        return tuple(out)
    return strides


_BUILD_API = None


def _build_api():
    """The emitter's entry points, imported by the first build rather than by `import ptxgen`;
    kept here because a from-import inside _build costs ~3 us per name per build."""
    global _BUILD_API
    from ..emit.codegen import Codegen
    from ..target import parse_target
    from ..passes.lower import lower

    _BUILD_API = (parse_target, lower, Codegen)
    return _BUILD_API


class _Built:
    """PTX text plus the map from PTX line numbers to IR statements."""

    def __init__(self, text, cg, target):
        self.text = text
        self.codegen = cg
        self.entry = cg.kernel_name
        self.target = target
        first_body = cg.lines[0] if cg.lines else None
        self._start = text[:text.index(first_body)].count("\n") if first_body else 0

    def origin(self, lineno: int):
        k = lineno - 1 - self._start
        cg = self.codegen
        if 0 <= k < len(cg.line_stmt):
            idx = cg.line_stmt[k]
            if 0 <= idx < len(cg.stmts):
                text, src = cg.stmts[idx]
                return f"IR statement: {text}" + (f"  (from {src})" if src else "")
        return None


_DEBUG = {"bounds": False}


def debug_bounds(on: bool = True) -> bool:
    """Build kernels that check every index against its buffer's extent and `trap`, printing
    the buffer's name, on a violation.  Off by default; kernels built with it off are
    unchanged.  Returns the previous setting."""
    prev = _DEBUG["bounds"]
    _DEBUG["bounds"] = bool(on)
    return prev


def kernel(fn=None, *, grid=None, block=None, name=None, dynamic_smem_bytes=None):
    """Decorator: trace the function once into a pg.Kernel."""
    def wrap(f):
        return Kernel(f, grid=grid, block=block, name=name, dynamic_smem_bytes=dynamic_smem_bytes)
    if fn is not None and callable(fn):
        return wrap(fn)
    return wrap
