"""The tracing context: where statements go while a kernel function runs once.

Errors raised while tracing carry the user's file and line, found by walking the
stack to the first frame outside the ptxgen package.
"""
from __future__ import annotations

import linecache
import os
import re
import threading
from sys import _getframe

from ..errors import TraceError, is_library
from ..ir import (Alloc, BinOp, BufferPtr, Cast, Const, DeclBuffer, Let, Load, Not, PrimFunc,
                  Select, SpecialReg, Stmt, Var)

_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]")
_FOR = re.compile(r"^\s*for\s+([A-Za-z_]\w*)\s+in\b")
# (id of a user code object, instruction offset) -> (that code object, its Site): a frame's
# f_lineno is computed from the code's line table at every read, its f_lasti is not; the
# entry keeps the code object alive, so its id is not reused while the entry exists
_SITES: dict = {}
_LINES: dict = {}       # (co_filename, line) -> Site: one Site per line


class Site:
    """A line of user code: its "file:line" and the names it binds, read once per line
    (a trace asks for them at every statement)."""
    __slots__ = ("src", "assigned", "loop_var")

    def __init__(self, filename: str | None, line: int = 0):
        if filename is None:
            self.src, self.assigned, self.loop_var = "<unknown>", None, None
            return
        self.src = f"{os.path.basename(filename)}:{line}"
        text = linecache.getline(filename, line)
        m = _ASSIGN.match(text)
        self.assigned = m.group(1) if m else None     # `name = pg.something(...)`
        m = _FOR.match(text)
        self.loop_var = m.group(1) if m else None     # `for name in pg.serial(...)`


_NOWHERE = Site(None)


def user_site(depth: int = 2) -> Site:
    """The line of the innermost frame outside ptxgen, searched from `depth` frames above
    this call (2: the caller of the function that asks, usually already the user's line).
    A public API call looks it up once and hands it to its helpers (`at=`)."""
    f = _getframe(depth)
    while f is not None:
        code = f.f_code
        key = (id(code), f.f_lasti)   # not the code object: hashing one costs a microsecond
        hit = _SITES.get(key)         # only user lines are kept: a hit needs no package check
        if hit is not None:
            return hit[1]
        fn = code.co_filename
        if not is_library(fn):
            line = (fn, f.f_lineno)
            site = _LINES.get(line)
            if site is None:
                site = _LINES[line] = Site(fn, f.f_lineno)
            if len(_SITES) >= 1 << 16:   # code made at run time (exec) must not pile up
                _SITES.clear()
            _SITES[key] = (code, site)
            return site
        f = f.f_back
    return _NOWHERE


def user_src() -> str:
    return user_site(3).src


def assigned_name(default: str, at: Site | None = None) -> str:
    """The variable name on the left of the user's `name = pg.something(...)` line
    (`at`: that line, if the caller has it)."""
    name = (at or user_site(3)).assigned
    return default if name is None else name


def fail(msg: str) -> TraceError:
    """A TraceError located at the user's line (raise the returned object); while the
    parameters are made, that is the kernel's first line."""
    ctx = trace_state.ctx
    where = ctx.param_src if ctx is not None and ctx.param_src else user_src()
    return TraceError(f"{where}: {msg}")


def launch_extent(ctx, which: str, dim: str) -> int:
    """blockDim/gridDim.<dim> as the launch gave it (pg.launch in the body, the decorator, or
    an earlier id that declared it), for an id asked without an extent (pg.thread_id())."""
    k = "xyz".find(dim) if isinstance(dim, str) and len(dim) == 1 else -1
    if k < 0:
        raise fail(f"dim must be 'x', 'y' or 'z', got {dim!r}")
    seen = ctx.block_set if which == "block" else ctx.grid_set
    if k not in seen:
        fn = "thread_id" if which == "block" else "cta_id"
        raise fail(f"pg.{fn}(dim={dim!r}) without an extent takes {which}Dim.{dim} from the "
                   f"launch, but nothing gave it: call pg.launch({which}=...) before it, give "
                   f"@pg.kernel({which}=...), or pass the extent: pg.{fn}(n, dim={dim!r})")
    return (ctx.func.block if which == "block" else ctx.func.grid)[k]


class TraceContext:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.bodies = [func.body]
        self.element_coords = {}    # uid of a pg.tile coords() Var -> (region, dim)
        # uid of a Var or Buffer whose body has closed -> where: a loop var's loop site (str),
        # else (the body's kind, its site, "bound"/"allocated"/"declared") for what a body bound
        self.dead_loop_vars: dict = {}
        self.arena = None
        self.block_set: dict[int, str] = {}    # dim index -> where it was set
        self.grid_set: dict[int, str] = {}
        self.last_closed_if = None
        self.names: dict[str, int] = {}
        self.pools: list = []
        self.finalizers: list = []             # callables run when tracing ends
        self.active_mask: list = []            # conditions of enclosing if_ blocks
        self.while_conds: list = []            # conditions of enclosing while_ loops
        self.nc_loads: dict = {}               # root uid -> (root, site) of .nc loads
        self.vec_checked = None                # (len(dead), ids): raw vector items checked
        self.param_src = None                  # the kernel's first line while params are made
        self.resources: dict = {}
        self.block_used = False                # warp/warpgroup ids or cta tiles depend on it
        # in trace order: ("let", var, value, bounds) and
        # ("range", var, lo, hi, step, start Expr, stop Expr, step Expr or None)
        self.facts: list = []

    @property
    def body(self) -> list:
        return self.bodies[-1]

    def append(self, s: Stmt, src: str | None = None):
        """Add a statement to the innermost body, located at `src` (default: the user's line)."""
        s.src = s.src or src or user_site(3).src
        self.bodies[-1].append(s)
        self.last_closed_if = None
        return s

    def unique(self, name: str) -> str:
        names = self.names
        n = names.get(name, 0)
        names[name] = n + 1
        return f"{name}_{n}" if n else name

    def check_live(self, *exprs):
        """Reject a value used after the body that bound it, at the user's line."""
        dead = self.dead_loop_vars
        if dead:   # empty until a body has ended: nothing can be dead before
            for e in exprs:
                check_live_expr(e, dead)

    def close_body(self, body: list, kind: str, src: str):
        """A body has ended: what it bound (lets, allocations, views) is dead from here on.
        Its registers were written only by the threads that ran it (or by none, for a loop
        that ran no iteration), so a later use would read garbage; nested bodies marked
        theirs when they closed, so the top level of `body` is all there is to scan."""
        dead = self.dead_loop_vars
        for s in body:
            t = type(s)
            if t is Let:
                dead[s.var.uid] = (kind, src, "bound")
            elif t is Alloc:
                dead[s.buffer.uid] = (kind, src, "allocated")
            elif t is DeclBuffer:
                dead[s.buffer.uid] = (kind, src, "declared")

    def check_buffer(self, b):
        """Reject a buffer used after the body that allocated or declared it."""
        dead = self.dead_loop_vars
        if dead and b.uid in dead:
            raise _dead_use(b, dead)


def check_live_expr(e, dead: dict):
    """Raise if `e` uses a loop variable of `dead` (ctx.dead_loop_vars: uid -> loop site).
    Depth first, left to right: the first dead use in the source is the one reported.
    The BinOp spine is walked by the loop, right operand next, and leaf operands are
    checked in place: index arithmetic (`(i + k) * 4`) then costs one call, not one per
    node.  Callers test a bare Var or Const themselves, sparing the call."""
    t = type(e)
    while t is BinOp:
        a = e.a
        e = e.b
        t = type(a)
        if t is Var:
            if a.uid in dead:
                raise _dead_use(a, dead)
        elif t is not Const:
            check_live_expr(a, dead)
        t = type(e)
    if t is Var:
        if e.uid in dead:
            raise _dead_use(e, dead)
    elif t is Const or t is SpecialReg:
        return
    elif t is Load or t is BufferPtr:
        if e.buffer.uid in dead:
            raise _dead_use(e.buffer, dead)
        if e.indices is not None:
            for i in e.indices:
                if type(i) is not Var or i.uid in dead:
                    check_live_expr(i, dead)
    elif t is Cast or t is Not:
        check_live_expr(e.a, dead)
    elif t is Select:
        check_live_expr(e.cond, dead)
        check_live_expr(e.t, dead)
        check_live_expr(e.f, dead)


_BODY_EFFECT = {"pg.if_": "threads that skipped the body never wrote it",
                "pg.else_": "threads that skipped the body never wrote it",
                "pg.while_": "it is unset when the loop runs no iteration",
                "pg.serial": "it is unset when the loop runs no iteration",
                "pg.unroll": "each iteration binds its own"}


def _dead_use(v, dead: dict) -> TraceError:
    where = dead[v.uid]
    if type(where) is str:
        return fail(f"loop variable '{v.name}' is used after its loop ended "
                    f"(the loop is at {where}); bind the value inside the loop")
    kind, src, how = where
    if how == "bound":
        what, fix = f"'{v.name}'", f"bind it before the {kind} (pg.local_scalar, assigned inside)"
    else:
        what, fix = f"buffer '{v.name}'", f"{how[:-1]} it before the {kind}"
    return fail(f"{what} was {how} inside the {kind} body at {src} and is used after that body "
                f"ended ({_BODY_EFFECT[kind]}); {fix} or use it only inside the body")


class _Local(threading.local):
    ctx = None      # the TraceContext being traced on this thread, if any


trace_state = _Local()


def current() -> TraceContext:
    ctx = trace_state.ctx
    if ctx is None:
        raise outside_kernel()
    return ctx


def outside_kernel() -> TraceError:
    """The error of a builder call made while no kernel is traced.  The hottest API calls
    read `trace_state.ctx` themselves and raise this (one call less than current())."""
    return TraceError(f"{user_src()}: this call is only valid inside a @pg.kernel function "
                      f"while it is being traced")


def push(ctx: TraceContext):
    if trace_state.ctx is not None:
        raise TraceError("a @pg.kernel is already being traced on this thread "
                         "(kernels cannot be defined inside kernels)")
    trace_state.ctx = ctx


def pop():
    trace_state.ctx = None
