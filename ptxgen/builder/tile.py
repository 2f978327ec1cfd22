"""`pg.tile.<scope>.<op>(...)`: tile primitives in the builder.

The call is validated here (dtypes, extents, bounds, active threads) and recorded
as an ir.TileCall; the variant is chosen when the kernel is emitted for a target.
`pg.tile.explain` runs the same dispatch now and returns its table.
"""
from __future__ import annotations

import math
from functools import partial

from ..errors import TraceAttributeError
from ..ir import BufferRegion, TileCall
from ..analysis.simplify import Analyzer
from .context import current, fail, user_src
from .tensor import TensorHandle, note_nc_load

_SCOPES = ("thread", "warp", "warpgroup", "cta")


def _region(x, what):
    if isinstance(x, TensorHandle):
        return x.region()
    if isinstance(x, BufferRegion):
        return x
    raise fail(f"copy {what} must be a tensor or a region such as A[0:32, 0:32], got {x!r}")


def _squeeze(shape):
    return tuple(e for e in shape if e != 1)


def _validate_copy(dst, src):
    if dst.dtype != src.dtype:
        raise fail(f"copy dtype mismatch: dst {dst} is {dst.dtype}, src {src} is {src.dtype}; "
                   f"copy moves bits, so both sides need one dtype (view one side with "
                   f".view(..., dtype=...) to reinterpret)")
    ds, ss = dst.shape, src.shape
    if ds != ss and _squeeze(ds) != _squeeze(ss):
        raise fail(f"copy extent mismatch: dst {dst} has extents {ds}, src {src} has {ss}")
    for r in (dst, src):
        if r.buffer.scope == "tmem":
            raise fail(f"{r} is in tensor memory; use tcgen05 ld/st/cp primitives")


def _active_check(ctx, scope: str):
    """Are all threads of every scope instance active here?  (ok, reason)"""
    if not ctx.active_mask:
        return True, ""
    from ..analysis.uniform import uniform_within

    n = {"thread": 1, "warp": 32, "warpgroup": 128}.get(scope, math.prod(ctx.func.block))
    for cond in ctx.active_mask:
        ok, why = uniform_within(ctx, cond, n)
        if not ok:
            return False, (f"not all {n} threads of the {scope} scope are active here "
                           f"({why}); move the call out of the branch or use a smaller scope")
    return True, ""


def copy(scope: str, dst, src, dispatch=None, **options):
    ctx = current()
    d, s = _region(dst, "dst"), _region(src, "src")
    _validate_copy(d, s)
    if ctx.dead_loop_vars:     # else nothing can be dead (check_live would do nothing)
        for r in (d, s):
            ctx.check_buffer(r.buffer)
            ctx.check_live(*[x for x, _ in r.region if not isinstance(x, int)])
    opts = dict(options)
    if dispatch is not None:
        opts["dispatch"] = dispatch
    hint = opts.get("cache_hint")
    if hint and s.buffer.root.scope == "global" and \
            "nc" in ([hint] if isinstance(hint, str) else list(hint)):   # else the hint fails
        note_nc_load(ctx, s.buffer, user_src())
    opts["_all_active"] = _active_check(ctx, scope)
    if ctx.block_set and (scope == "warp" or scope == "warpgroup"):   # (the build checks the
        bx, by, bz = ctx.func.block                                     # final block again)
        if bx * by * bz % 32 if scope == "warp" else bx % 128 or by * bz != 1:
            from ..primitives.scope import make_scope

            make_scope(scope, ctx.func.block)       # raises: a partial warp or warpgroup
    ctx.block_used = True          # scopes are cut from the traced block
    ctx.append(TileCall("copy", (d, s), scope, opts))


class _Scope:
    def __init__(self, name):
        self.name = name

    def copy(self, dst, src, dispatch=None, **options):
        """dst <- src: the widest correct instruction form for this scope (see explain)."""
        return copy(self.name, dst, src, dispatch, **options)

    def __getattr__(self, op):
        from . import tile_ops

        fn = tile_ops.get(op)
        if fn is None:
            if op.startswith("__"):
                raise AttributeError(op)
            raise TraceAttributeError(f"{user_src()}: pg.tile.{self.name} has no primitive "
                                      f"{op!r}; the primitives are copy, "
                                      f"{', '.join(sorted(tile_ops._OPS))}")
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
    """Every variant of `op` for this call: accepted, or why not; the chosen one marked."""
    from ..target import parse_target
    from ..primitives.copy import CopyCall
    from ..primitives.registry import evaluate
    from ..primitives.scope import make_scope

    if op != "copy":   # the tcgen05 ops (gemm_async, tmem_load, ...) explain themselves
        from ..primitives import tcgen05

        if op in tcgen05._OPS:
            return tcgen05.explain(op, *args, scope=scope, dispatch=dispatch, **options,
                                   **({"arch": arch} if arch else {}))
        raise fail(f"explain knows the ops: copy, {', '.join(tcgen05._OPS)} (got {op!r})")
    if len(args) != 2:
        raise fail("explain('copy', dst, src, scope=...) takes the two regions of the copy")
    dst, src = args
    ctx = current()
    d, s = _region(dst, "dst"), _region(src, "src")
    _validate_copy(d, s)
    call = CopyCall(d, s, make_scope(scope, ctx.func.block), parse_target(arch or "sm_90a"),
                    facts_analyzer(ctx), dict(options), _active_check(ctx, scope),
                    f"{user_src()}: ", None, ctx.func.block)
    return evaluate("copy", call, dispatch)


class Tile:
    thread = _Scope("thread")
    warp = _Scope("warp")
    warpgroup = _Scope("warpgroup")
    cta = _Scope("cta")
    explain = staticmethod(explain)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise TraceAttributeError(f"{user_src()}: pg.tile has no scope {name!r}; the scopes are "
                                  f"{', '.join(_SCOPES)}")


tile = Tile()
