"""Control flow, values and thread structure for the builder (API.md sections
"Kernels" and "Control flow and values")."""
from __future__ import annotations

import math
from contextlib import contextmanager

from ..dtypes import dtype as _dtype
from ..expr import INT32_VALUES
from ..ir import (BOOL, INT32, Barrier, Const, Expr, For, If, Instr, Let, Load, Mem, Not,
                  SpecialReg, Store, Var, VecOperand, While, as_expr, format_expr,
                  traced_statements, subexpressions)
from ..analysis.uniform import divergence
from ..errors import TraceError
from .context import (trace_state, check_live_expr, current, fail, launch_extent,
                      outside_kernel, user_site)

_DIMS = {"x": 0, "y": 1, "z": 2}


def bind_let(ctx, at, name: str, value: Expr, bounds=None, broadcast=False) -> Var:
    """Bind `value` to a fresh Var named after the user's line `at` (a Site).  The
    ("let", ...) fact is also the record of the binding (uniform.py reads values off it).
    broadcast: the caller has checked that value is warp-uniform (ir.Let)."""
    v = Var(ctx.unique(at.assigned or name), value.dtype)
    ctx.append(Let(v, value, bounds, src=at.src, broadcast=broadcast))
    ctx.facts.append(("let", v, value, bounds))
    return v


def _set_extent(which: str, dim: str, n: int, at):
    """Declare blockDim/gridDim.<dim> = n (declared at `at`); returns the context."""
    ctx = current()
    if dim not in _DIMS:
        raise fail(f"dim must be 'x', 'y' or 'z', got {dim!r}")
    if not isinstance(n, int) or n <= 0:
        raise fail(f"{which} extent must be a positive int, got {n!r}")
    k = _DIMS[dim]
    f = ctx.func
    seen = ctx.block_set if which == "block" else ctx.grid_set
    cur = list(f.block if which == "block" else f.grid)
    if k in seen and cur[k] != n:
        raise fail(f"{which}Dim.{dim} was declared as {cur[k]} at {seen[k]}; now {n}")
    cur[k] = n
    seen[k] = at.src
    if (cur[0] * cur[1] * cur[2] > 1024 or cur[2] > 64) if which == "block" else \
            n > _LIMITS["grid"][k]:
        raise fail(geometry_error(which, cur))
    if which == "block":
        f.block = tuple(cur)
    else:
        f.grid = tuple(cur)
    return ctx


_LIMITS = {"block": (1024, 1024, 64), "grid": (2**31 - 1, 65535, 65535)}


def geometry_error(which: str, dims) -> str:
    """Why `dims` (x, y, z) is not a launchable blockDim/gridDim, or "".  ptxas accepts any
    .maxntid, so without this a bad launch fails only when it is made."""
    for k, n in enumerate(dims):
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            return f"{which}Dim.{'xyz'[k]} must be a positive int, got {n!r}"
    if which == "block" and dims[0] * dims[1] * dims[2] > 1024:
        return (f"a CTA holds at most 1024 threads; blockDim {tuple(dims)} has "
                f"{dims[0] * dims[1] * dims[2]} (ptxas would accept it and the launch would fail)")
    for k, (n, top) in enumerate(zip(dims, _LIMITS[which])):
        if n > top:
            fix = ("give the threads to x and y" if which == "block" else
                   "give the large extent to x (up to 2**31 - 1)" if k else
                   "loop over the rest in each CTA")
            return f"{which}Dim.{'xyz'[k]} is at most {top}, got {n}; {fix}"
    return ""


def launch_dims(which: str, dims, where: str) -> tuple:
    """(x, y, z) of a decorator or pg.launch grid/block (an int or a sequence of 1-3), checked."""
    t = dims if type(dims) is tuple else tuple(dims) if isinstance(dims, list) else (dims,)
    n = len(t)
    if n != 3:
        if not 1 <= n <= 3:
            raise TraceError(f"{where}: {which} must have 1 to 3 dimensions, got {dims!r}")
        t = (t + (1, 1))[:3]
    why = geometry_error(which, t)
    if why:
        raise TraceError(f"{where}: {why}")
    if type(dims) is tuple:    # what the decorator is usually given: validated once
        (GOOD_BLOCKS if which == "block" else GOOD_GRIDS)[dims] = t
    return t


GOOD_BLOCKS: dict = {}     # decorator block/grid tuples already checked -> their (x, y, z)
GOOD_GRIDS: dict = {}


def thread_id(n: int | None = None, dim: str = "x") -> Var:
    """Declare blockDim.<dim> = n and return %tid.<dim> (bounded to [0, n)); without n, n is
    the launch's blockDim.<dim> (pg.launch in the body or the decorator)."""
    at = user_site()
    if n is None:
        n = launch_extent(current(), "block", dim)
    ctx = _set_extent("block", dim, n, at)
    return bind_let(ctx, at, f"t{dim}", SpecialReg(f"tid.{dim}"), (0, n - 1))


def cta_id(n: int | None = None, dim: str = "x") -> Var:
    """Declare gridDim.<dim> = n and return %ctaid.<dim>.  Without n the grid is left to the
    launch (a callable grid, or grid= at the call) and only the hardware bound is known."""
    at = user_site()
    if n is not None:
        ctx = _set_extent("grid", dim, n, at)
        top = n - 1
    elif dim not in _DIMS:
        raise fail(f"dim must be 'x', 'y' or 'z', got {dim!r}")
    else:
        ctx = current()
        top = 2**31 - 2 if dim == "x" else 65534
    return bind_let(ctx, at, f"b{dim}", SpecialReg(f"ctaid.{dim}"), (0, top))


def lane_id() -> Var:
    return bind_let(current(), user_site(), "lane", SpecialReg("laneid"), (0, 31))


def _block_x(ctx):
    """blockDim.x as traced; the caller's facts depend on it, so launches must keep it."""
    ctx.block_used = True
    return ctx.func.block[0]


def warp_id() -> Var:
    """tid.x / 32 (stable, unlike %warpid)."""
    ctx = current()
    bx = _block_x(ctx)
    return bind_let(ctx, user_site(), "warp", SpecialReg("tid.x") // 32, (0, max(bx // 32 - 1, 0)))


def warpgroup_id() -> Var:
    ctx = current()
    bx = _block_x(ctx)
    return bind_let(ctx, user_site(), "wg", SpecialReg("tid.x") // 128,
                    (0, max(bx // 128 - 1, 0)))


def grid_dim(dim: str = "x"):
    return SpecialReg(f"nctaid.{dim}")


def block_dim(dim: str = "x"):
    return SpecialReg(f"ntid.{dim}")


def launch(grid=None, block=None, dynamic_smem_bytes=None):
    """Set the launch inside the body (overrides the decorator's)."""
    ctx = current()
    f = ctx.func
    src = user_site().src
    if grid is not None:
        f.grid = launch_dims("grid", grid, src)
        ctx.grid_set = dict.fromkeys(range(3), src)
    if block is not None:
        f.block = launch_dims("block", block, src)
        ctx.block_set = dict.fromkeys(range(3), src)
    if dynamic_smem_bytes is not None:
        if isinstance(dynamic_smem_bytes, bool) or not isinstance(dynamic_smem_bytes, int) \
                or dynamic_smem_bytes < 0:
            raise TraceError(f"{src}: dynamic_smem_bytes must be a non-negative int, got "
                             f"{dynamic_smem_bytes!r}")
        f.dynamic_smem_reserve = dynamic_smem_bytes


def let(value, dtype=None) -> Var:
    """Immutable binding; facts about its value (bounds, divisibility) reach every use."""
    ctx = trace_state.ctx
    if ctx is None:
        raise outside_kernel()
    if dtype is None:
        if not isinstance(value, Expr):
            value = as_expr(value)
    else:
        dt = _dtype(dtype)
        value = as_expr(value, dt)
        if value.dtype != dt:
            raise fail(f"pg.let value is {value.dtype}, declared {dtype}; use pg.cast")
    dead = ctx.dead_loop_vars
    if dead and type(value) is not Const and (type(value) is not Var or value.uid in dead):
        check_live_expr(value, dead)     # a Const or a live Var: no call
    return bind_let(ctx, user_site(), "v", value)


def _loop(kind, args):
    """The generator behind pg.serial/pg.unroll: checks the bounds, opens the body, yields
    the loop variable once and closes the For when the user's `for` is done.  A loop is
    live while its var's uid is not in ctx.dead_loop_vars (its range fact says the rest)."""
    ctx = trace_state.ctx
    if ctx is None:
        raise outside_kernel()
    n = len(args)
    if n == 3:
        lo, hi, step = args
    elif n == 1:
        lo, hi, step = 0, args[0], 1
    elif n == 2:
        (lo, hi), step = args, 1
    else:
        raise fail(f"pg.{kind} takes (stop), (start, stop) or (start, stop, step)")
    int_step = isinstance(step, int)
    if int_step:
        if step <= 0:
            raise fail(f"pg.{kind} step must be positive, got {step!r}")
    elif kind == "unroll" or not isinstance(step, Expr) or not step.dtype.is_int:
        raise fail(f"pg.{kind} step must be a positive int (pg.serial also takes an integer "
                   f"expression), got {step!r}")
    else:
        v = _constant_value(ctx, step)
        if v is not None and v <= 0:   # a constant in disguise (pg.let(0)): the loop never ends
            raise fail(f"pg.{kind} step must be positive, got {format_expr(step)} = {v} (the "
                       f"loop would never end)")
    if not isinstance(hi, Expr):   # as_expr's int32 case in line: `pg.unroll(4)`
        hi = Const(hi, INT32) if type(hi) is int and hi in INT32_VALUES else as_expr(hi)
    dt = hi.dtype
    if not isinstance(lo, Expr):
        lo = Const(lo, INT32) if type(lo) is int and dt is INT32 and lo in INT32_VALUES \
            else as_expr(lo, dt)
    if lo.dtype is not dt:
        raise fail(f"pg.{kind} bounds differ in dtype: {lo.dtype} vs {dt}")
    if not dt.is_int:
        raise fail(f"pg.{kind} bounds must be integers, got {dt}")
    lo_b = lo.value if type(lo) is Const else None        # the range fact's bounds
    hi_b = hi.value - 1 if type(hi) is Const else None
    if kind == "unroll" and (lo_b is None or hi_b is None):
        raise fail("pg.unroll needs constant bounds (it copies the body at trace time); "
                   "use pg.serial for a runtime trip count")
    dead = ctx.dead_loop_vars
    if dead:     # a Const or a live Var bound: no call
        if lo_b is None and (type(lo) is not Var or lo.uid in dead):
            check_live_expr(lo, dead)
        if hi_b is None and (type(hi) is not Var or hi.uid in dead):
            check_live_expr(hi, dead)
    at = user_site()     # the generator runs on the user's `for` line
    src = at.src
    var = Var(ctx.unique(at.loop_var or "i"), dt)
    body: list = []
    bodies = ctx.bodies
    bodies.append(body)
    ctx.facts.append(("range", var, lo_b, hi_b, step if int_step else 1, lo, hi,
                      None if int_step else step))
    try:
        yield var
    finally:
        bodies.pop()
        if body:
            ctx.close_body(body, "pg." + kind, src)
        dead[var.uid] = src
        ctx.append(For(var, lo, hi, step, kind, body, src=src))


def _constant_value(ctx, e):
    """The value of `e` when it is a constant or a let of one (followed through lets)."""
    for _ in range(64):
        if type(e) is Const:
            return e.value
        if type(e) is not Var:
            return None
        fact = next((f for f in reversed(ctx.facts) if f[0] == "let" and f[1] is e), None)
        if fact is None:
            return None
        e = fact[2]
    return None


def serial(*args):
    """A real PTX loop (never unrolled silently)."""
    return _loop("serial", args)


def unroll(*args):
    """Fully unrolled by the generator: the body is copied per iteration."""
    return _loop("unroll", args)


def _cond(ctx, c, what):
    if isinstance(c, bool):
        return Const(c, BOOL)
    c = as_expr(c)
    if c.dtype != BOOL:
        raise fail(f"pg.{what} condition must be a comparison (bool), got {c.dtype}")
    ctx.check_live(c)
    return c


@contextmanager
def if_(cond):
    ctx = current()
    c = _cond(ctx, cond, "if_")
    src = user_site().src
    body: list = []
    ctx.bodies.append(body)
    ctx.active_mask.append(c)
    try:
        yield
    finally:
        ctx.active_mask.pop()
        ctx.bodies.pop()
        ctx.close_body(body, "pg.if_", src)
        stmt = If(c, body, None, src=src)
        ctx.append(stmt)
        ctx.last_closed_if = stmt


@contextmanager
def else_():
    ctx = current()
    stmt = ctx.last_closed_if
    if stmt is None or not ctx.body or ctx.body[-1] is not stmt or stmt.else_ is not None:
        raise fail("pg.else_() must come directly after a `with pg.if_(...)` block")
    body: list = []
    ctx.bodies.append(body)
    ctx.active_mask.append(Not(stmt.cond))
    src = user_site().src
    try:
        yield
    finally:
        ctx.active_mask.pop()
        ctx.bodies.pop()
        ctx.close_body(body, "pg.else_", src)
        stmt.else_ = body
        ctx.last_closed_if = None


@contextmanager
def while_(cond):
    ctx = current()
    c = _cond(ctx, cond, "while_")
    src = user_site().src
    body: list = []
    ctx.bodies.append(body)
    ctx.while_conds.append(c)
    done = False
    try:
        yield
        done = True
    finally:
        ctx.while_conds.pop()
        ctx.bodies.pop()
        ctx.close_body(body, "pg.while_", src)
        ctx.append(While(c, body, src=src))
    if done:    # when the trace ends: the checks that ran inside the body speak first
        ctx.finalizers.append(lambda: _check_exits(c, body, src))


def _check_exits(cond, body, src):
    why = _never_exits(cond, body)
    if why:
        raise TraceError(f"{src}: this pg.while_ never exits once entered: {why}; update a "
                         f"value of the condition in the body (e.g. `i += 1`), or loop with "
                         f"pg.serial")


_EXITS = ("ret", "exit", "trap", "bra", "brx")


def _never_exits(cond, body) -> str:
    """Why a while_ loop provably never ends, or "": a constant-true condition, or one that
    reads only immutable values and local registers that nothing in the body writes (memory
    other threads may write, and raw branches out, leave it undecided)."""
    if type(cond) is Const:
        if not cond.value:
            return ""
    else:
        regs, stack = set(), [cond]
        while stack:
            e = stack.pop()
            t = type(e)
            if t is Load:
                if e.buffer.root.scope != "local":
                    return ""
                regs.add(e.buffer.root.uid)
            elif t is SpecialReg:
                if not e.name.startswith(("tid", "ctaid", "ntid", "nctaid", "laneid", "cluster")):
                    return ""      # clocks and other changing registers
                continue
            elif t is Const or t is Var:
                continue           # a leaf: nothing below it
            stack += subexpressions(e)
    for s in traced_statements(body):
        t = type(s)
        if t is Instr:
            if s.opcode.split(".")[0] in _EXITS:
                return ""
            if type(cond) is not Const:
                ops = list(s.operands)
                while ops:
                    o = ops.pop()
                    if type(o) is VecOperand:
                        ops.extend(o.items)
                    elif type(o) is Mem:
                        ops.append(o.ptr)
                    elif hasattr(o, "buffer") and o.buffer.root.uid in regs:
                        return ""
        elif t is Store and type(cond) is not Const and s.buffer.root.uid in regs:
            return ""
        elif t is not Store and hasattr(s, "args"):     # a tile op writes its first region
            a = s.args[0] if s.args else None
            if type(cond) is not Const and hasattr(a, "buffer") and a.buffer.root.uid in regs:
                return ""
    if type(cond) is Const:
        return "its condition is the constant True"
    return f"its condition `{format_expr(cond)}` reads no value the body changes"


def _converged(ctx, what: str, group: str, at):
    """A barrier must be reached by every thread it waits for: reject one under an enclosing
    if_/else_/while_ condition that provably differs within its group of threads (checked when
    the trace ends, against the final block; conditions on memory or runtime values pass)."""
    conds = ctx.active_mask + ctx.while_conds
    if not conds:
        return
    conds = list(conds)

    def check():
        n = math.prod(ctx.func.block) if group == "CTA" else 32
        for c in conds:
            why = divergence(ctx, c, n)
            if why:
                raise TraceError(
                    f"{at.src}: {what} is under the condition `{format_expr(c)}`, which differs "
                    f"between threads of one {group} ({why}): the threads that skip it never "
                    f"arrive, so the barrier hangs or releases early; move the barrier out of "
                    f"the branch or make the condition uniform across each {group}")
    ctx.finalizers.append(check)


def cta_sync():
    """bar.sync 0: every thread of the CTA waits; shared-memory writes become visible."""
    ctx = current()
    if ctx.active_mask or ctx.while_conds:
        _converged(ctx, "pg.cta_sync()", "CTA", user_site())
    ctx.append(Barrier("cta"))


def warp_sync():
    """bar.warp.sync: the lanes of this warp wait for each other (shared writes visible)."""
    ctx = current()
    if ctx.active_mask or ctx.while_conds:
        _converged(ctx, "pg.warp_sync()", "warp", user_site())
    ctx.append(Barrier("warp"))


def named_barrier(barrier_id, nthreads: int, *, arrive: bool = False):
    """bar.sync id, nthreads: a barrier among `nthreads` threads (a multiple of 32), e.g. one
    warpgroup; id 0 is the CTA barrier of pg.cta_sync().  `arrive=True` is bar.arrive:
    these threads count towards the barrier without waiting for it (one warpgroup lets
    another go, as in a ping-pong schedule; `pg.named_barrier_arrive`)."""
    if not isinstance(nthreads, int) or nthreads <= 0 or nthreads % 32:
        raise fail(f"named_barrier needs a thread count that is a positive multiple of 32, "
                   f"got {nthreads!r}")
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise fail(f"barrier ids are 0..15, got {barrier_id}")
    bid = barrier_id if isinstance(barrier_id, int) else as_expr(barrier_id)
    if not isinstance(bid, int) and not bid.dtype.is_int:
        raise fail(f"barrier ids are integers 0..15, got {bid.dtype}")
    ctx = current()
    if ctx.active_mask or ctx.while_conds:   # whole warps arrive (warp-specialized branches)
        _converged(ctx, f"pg.named_barrier({barrier_id}, {nthreads})", "warp", user_site())
    ctx.append(Barrier("arrive" if arrive else "cta", bid, nthreads))


def named_barrier_arrive(barrier_id, nthreads: int):
    """bar.arrive id, nthreads: count towards named barrier `barrier_id` (whose waiters
    use pg.named_barrier(barrier_id, nthreads)) without waiting."""
    named_barrier(barrier_id, nthreads, arrive=True)


def var(name: str, dtype="int32") -> Var:
    """A symbolic shape extent: an implicit scalar kernel parameter bound from tensor shapes."""
    dt = _dtype(dtype)
    if not dt.is_int or dt.bits < 32:
        raise fail(f"pg.var dtype must be int32/int64 (or unsigned), got {dt}")
    return Var(name, dt)


__all__ = ["thread_id", "cta_id", "lane_id", "warp_id", "warpgroup_id", "launch", "let",
           "serial", "unroll", "if_", "else_", "while_", "cta_sync", "var", "INT32"]
