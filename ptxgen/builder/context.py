"""The tracing context: where statements go while a kernel function runs once.

Errors raised while tracing carry the user's file and line, found by walking the
stack to the first frame outside the ptxgen package.
"""
from __future__ import annotations

import linecache
import os
import re
import sys
import threading

from ..errors import TraceError
from ..ir import (BinOp, BufferPtr, Cast, Load, Not, PrimFunc, Select, Stmt, Var)

# Frames carry the path the module was imported by (maybe with "..", e.g. from a sys.path
# entry like "benchmarks/.."); match that spelling as well as the normalized one.
_PKG_DIRS = tuple({os.path.dirname(os.path.dirname(__file__)) + os.sep,
                   os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep})
_local = threading.local()
_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]")
_FOR = re.compile(r"^\s*for\s+([A-Za-z_]\w*)\s+in\b")


_IS_PKG: dict = {}      # co_filename -> frame belongs to ptxgen (or contextlib)
_BASENAME: dict = {}
_NAMES: dict = {}       # (code, line, pattern) -> the name bound on that line, or None


def _user_frame():
    """The innermost frame outside ptxgen.  Runs for every traced statement, so the
    per-file test is cached."""
    f = sys._getframe(1)
    is_pkg = _IS_PKG
    while f is not None:
        fn = f.f_code.co_filename
        pkg = is_pkg.get(fn)
        if pkg is None:
            pkg = is_pkg[fn] = fn.startswith(_PKG_DIRS) or fn.endswith("contextlib.py")
        if not pkg:
            return f
        f = f.f_back
    return None


def user_src() -> str:
    f = _user_frame()
    if f is None:
        return "<unknown>"
    fn = f.f_code.co_filename
    base = _BASENAME.get(fn)
    if base is None:
        base = _BASENAME[fn] = os.path.basename(fn)
    return f"{base}:{f.f_lineno}"


def _bound_name(pattern, default: str) -> str:
    f = _user_frame()
    if f is None:
        return default
    key = (f.f_code, f.f_lineno, pattern)
    name = _NAMES.get(key, False)
    if name is False:
        m = pattern.match(linecache.getline(f.f_code.co_filename, f.f_lineno))
        name = _NAMES[key] = m.group(1) if m else None
    return default if name is None else name


def assigned_name(default: str) -> str:
    """The variable name on the left of the user's `name = pg.something(...)` line."""
    return _bound_name(_ASSIGN, default)


def loop_var_name(default: str = "i") -> str:
    """The target of the user's `for name in pg.serial(...)` line."""
    return _bound_name(_FOR, default)


def fail(msg: str) -> TraceError:
    """A TraceError located at the user's line (raise the returned object)."""
    return TraceError(f"{user_src()}: {msg}")


class TraceContext:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.bodies = [func.body]
        self.live_loop_vars: set[int] = set()
        self.dead_loop_vars: dict[int, str] = {}
        self.arena = None
        self.block_set: dict[int, str] = {}    # dim index -> where it was set
        self.grid_set: dict[int, str] = {}
        self.last_closed_if = None
        self.names: dict[str, int] = {}
        self.pools: list = []
        self.finalizers: list = []             # callables run when tracing ends
        self.active_mask: list = []            # conditions of enclosing if_ blocks
        self.resources: dict = {}
        self.block_used = False                # warp/warpgroup ids or cta tiles depend on it
        self.facts: list = []                  # ("let", var, value, bounds) / ("range", var, lo, hi, step, start)
        self.let_values: dict = {}             # var uid -> value
        self.loop_exprs: dict = {}             # loop var uid -> (start, stop, step)

    @property
    def body(self) -> list:
        return self.bodies[-1]

    def append(self, s: Stmt):
        s.src = s.src or user_src()
        self.body.append(s)
        self.last_closed_if = None
        return s

    def unique(self, name: str) -> str:
        n = self.names.get(name, 0)
        self.names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def check_live(self, *exprs):
        """Reject a loop variable used after its loop, at the user's line."""
        if not self.dead_loop_vars:   # no loop has ended yet: nothing can be dead
            return
        for e in exprs:
            self._check(e)

    def _check(self, e):
        t = type(e)
        if t is Var:
            where = self.dead_loop_vars.get(e.uid)
            if where is not None:
                raise fail(f"loop variable '{e.name}' is used after its loop ended "
                           f"(the loop is at {where}); bind the value inside the loop")
        elif t is BinOp:
            self._check(e.a)
            self._check(e.b)
        elif t is Load or t is BufferPtr and e.indices is not None:
            for i in e.indices:
                self._check(i)
        elif t in (Cast, Not):
            self._check(e.a)
        elif t is Select:
            self._check(e.cond)
            self._check(e.t)
            self._check(e.f)


def current() -> TraceContext:
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        raise TraceError(f"{user_src()}: this call is only valid inside a @pg.kernel function "
                         f"while it is being traced")
    return ctx


def push(ctx: TraceContext):
    if getattr(_local, "ctx", None) is not None:
        raise TraceError("a @pg.kernel is already being traced on this thread "
                         "(kernels cannot be defined inside kernels)")
    _local.ctx = ctx


def pop():
    _local.ctx = None
