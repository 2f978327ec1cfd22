"""`pg.tile.<scope>.<op>(...)`: the trace-time front ends of the tile primitives.

A front end validates a call against what tracing knows (operands, dtypes, extents, the
active threads, live variables, the kernel's pools) and records it as an `ir.TileCall`
with its *record* (what the op derived from the operands); the variant is chosen at build
time by the tile-lowering pass (passes/tiles.py).  `copy` is the front end here; the
others are in builder/ (async_copy, mma, mma_sync, tcgen05, tile_math), each attached to
its op's declaration through `tile_ops.register`.  `pg.tile.explain` runs a
front end on a scratch body and dispatch's table on its call: nothing is appended.
"""
from __future__ import annotations

import math
from functools import partial

from ..analysis.simplify import Analyzer
from ..analysis.uniform import active_run, uniform_within
from ..errors import PtxgenError, TraceAttributeError
from ..ir import BufferRegion, TileCall
from ..primitives.copy import validate_copy
from ..primitives.registry import evaluate, make_call, tile_ops as _declared_ops
from ..target import parse_target
from . import tile_ops
from .context import current, fail, user_src
from .nc_hazard import note_nc_load
from .tensor import TensorHandle

_SCOPES = ("thread", "warp", "warpgroup", "cta", "cluster")


def region_of(x, what: str, example: str = "A[0:32, 0:32]") -> BufferRegion:
    """A tile operand as a region (a whole tensor is its full region)."""
    if isinstance(x, TensorHandle):
        return x.region()
    if isinstance(x, BufferRegion):
        return x
    raise fail(f"{what} must be a tensor or a region such as {example}, got {x!r}")


def located(e: Exception) -> Exception:
    """`e` again (same type), prefixed once with the user's file:line."""
    src, msg = user_src(), str(e)
    msg = msg[len(src) + 2:] if msg.startswith(src + ": ") else msg
    return type(e)(f"{src}: {msg}")


def active_check(ctx, scope: str):
    """Are all threads of every scope instance active here?  (ok, reason), and when not,
    (False, reason, (first, step, count)): the threads that are, for variants that run on
    part of a scope (None when the branches do not say at build time)."""
    if not ctx.active_mask:
        return True, ""
    n = {"thread": 1, "warp": 32, "warpgroup": 128}.get(scope, math.prod(ctx.func.block))
    for cond in ctx.active_mask:
        ok, why = uniform_within(ctx, cond, n)
        if not ok:
            return False, (f"not all {n} threads of the {scope} scope are active here "
                           f"({why}); move the call out of the branch or use a smaller "
                           f"scope"), active_run(ctx, ctx.active_mask, n)
    return True, ""


def record_call(op: str, scope: str, args: tuple, options: dict, record=None,
                dispatch=None) -> TileCall:
    """Append the validated TileCall of a front end (every op goes through here)."""
    ctx = current()
    if ctx.dead_loop_vars:     # else nothing can be dead (check_live would do nothing)
        for a in args:
            if isinstance(a, BufferRegion):
                ctx.check_buffer(a.buffer)
                ctx.check_live(*[x for x, _ in a.region if not isinstance(x, int)])
    opts = dict(options)
    if dispatch is not None:
        opts["dispatch"] = dispatch
    hint = opts.get("cache_hint")
    if hint and "nc" in ([hint] if isinstance(hint, str) else list(hint)):
        for a in args[1:]:         # dst first: the sources read through the read-only path
            if isinstance(a, BufferRegion) and a.buffer.root.scope == "global":
                note_nc_load(ctx, a.buffer, user_src())
    if ctx.block_set and (scope == "warp" or scope == "warpgroup"):   # (the build checks the
        bx, by, bz = ctx.func.block                                     # final block again)
        if bx * by * bz % 32 if scope == "warp" else bx % 128 or by * bz != 1:
            from ..primitives.scope import make_scope

            make_scope(scope, ctx.func.block)       # raises: a partial warp or warpgroup
    ctx.block_used = True          # scopes are cut from the traced block
    stmt = TileCall(op, args, scope, opts, record, active_check(ctx, scope))
    ctx.append(stmt)
    return stmt


def copy(scope: str, dst, src, dispatch=None, **options):
    d, s = region_of(dst, "copy dst"), region_of(src, "copy src")
    try:
        validate_copy(d, s)
    except PtxgenError as e:
        raise located(e) from None
    record_call("copy", scope, (d, s), options, dispatch=dispatch)


tile_ops.register("copy", copy)


class _Scope:
    def __init__(self, name):
        self.name = name

    def copy(self, dst, src, dispatch=None, **options):
        """dst <- src: the widest correct instruction form for this scope (see explain)."""
        return copy(self.name, dst, src, dispatch, **options)

    def __getattr__(self, op):
        fn = tile_ops.get(op)
        if fn is None:
            if op.startswith("__"):
                raise AttributeError(op)
            raise TraceAttributeError(f"{user_src()}: pg.tile.{self.name} has no primitive "
                                      f"{op!r}; the primitives are copy, "
                                      f"{', '.join(sorted(tile_ops.names()))}")
        return partial(fn, self.name)   # C-level: a wrong argument fails at the user's line


def facts_analyzer(ctx) -> Analyzer:
    """An Analyzer holding the facts in force at this point of the trace."""
    an = Analyzer()
    dead = ctx.dead_loop_vars
    for kind, var, *rest in ctx.facts:
        if kind == "let":
            an.bind_let(var, rest[0], rest[1])
        elif var.uid not in dead:     # a loop still open
            lo, hi, step, start = rest[:4]
            an.bind_range(var, lo, hi, step, start)
    return an


def explain(op, *args, scope="cta", arch=None, dispatch=None, **options):
    """Every variant of `op` for this call: accepted, or why not; the chosen one marked.
    `arch` is the target the variants are judged for (default: the record's, else the op's)."""
    spec = _declared_ops().get(op)
    fn = spec and spec.front
    if fn is None:
        raise fail(f"explain knows the ops: {', '.join(_declared_ops())} (got {op!r})")
    ctx = current()
    scratch: list = []
    ctx.bodies.append(scratch)
    try:
        fn(scope, *args, **options)
    except TypeError as e:
        raise fail(f"explain({op!r}, ...): {e}") from None
    finally:
        ctx.bodies.pop()
    stmt = scratch[-1]
    arch = arch or getattr(stmt.record, "explain_arch", None) or spec.explain_arch
    call = make_call(stmt, parse_target(arch), facts_analyzer(ctx),
                     ctx.func.block, where=f"{user_src()}: ", gate=False)
    return evaluate(stmt.op, call, dispatch)   # the op it recorded (max with axis=: reduce_max)


class Tile:
    thread = _Scope("thread")
    warp = _Scope("warp")
    warpgroup = _Scope("warpgroup")
    cta = _Scope("cta")
    cluster = _Scope("cluster")     # copy_async / async_commit / async_wait in a cluster kernel
    explain = staticmethod(explain)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise TraceAttributeError(f"{user_src()}: pg.tile has no scope {name!r}; the scopes are "
                                  f"{', '.join(_SCOPES)}")


tile = Tile()
