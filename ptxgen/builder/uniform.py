"""Is a branch condition uniform across each group of n consecutive threads?

A tile primitive in a `warp` scope needs all 32 lanes of a warp active.  Conditions
that depend only on uniform values (parameters, CTA ids, constants) pass; those that
depend on thread ids are evaluated for every thread of the block (numpy, vectorized)
and must be constant within each group; anything that reads memory is refused.
"""
from __future__ import annotations


import numpy as np

from ..ir import BinOp, Cast, Const, Load, Not, Select, SpecialReg, Var

_UNIFORM_REGS = ("ctaid", "nctaid", "ntid", "nwarpid")


def _classify(ctx, e, memo) -> str:
    t = type(e)
    if t is Const:
        return "const"
    if t is SpecialReg:
        if e.name.startswith(_UNIFORM_REGS):
            return "uniform"
        return "thread" if e.name.startswith(("tid", "laneid")) else "varying"
    if t is Var:
        if e.uid in memo:
            return memo[e.uid]
        value = ctx.let_values.get(e.uid)
        if value is not None:
            r = _classify(ctx, value, memo)
        elif e.uid in ctx.loop_exprs:
            parts = [_classify(ctx, x, memo) for x in ctx.loop_exprs[e.uid] if x is not None]
            r = "varying" if any(p in ("thread", "varying") for p in parts) else "uniform"
        else:
            r = "uniform"      # parameters and symbols are the same for every thread
        memo[e.uid] = r
        return r
    if t is Load:
        return "varying"
    kids = {BinOp: lambda: (e.a, e.b), Cast: lambda: (e.a,), Not: lambda: (e.a,),
            Select: lambda: (e.cond, e.t, e.f)}.get(t)
    if kids is None:
        return "varying"
    parts = {_classify(ctx, k, memo) for k in kids()}
    for level in ("varying", "thread", "uniform"):
        if level in parts:
            return level
    return "const"


def _eval(ctx, e, env):
    t = type(e)
    if t is Const:
        return e.value
    if t is SpecialReg:
        return env[e.name]
    if t is Var:
        return _eval(ctx, ctx.let_values[e.uid], env)
    if t is Cast:
        return _eval(ctx, e.a, env)
    if t is Not:
        return ~np.asarray(_eval(ctx, e.a, env), dtype=bool)
    if t is Select:
        return np.where(_eval(ctx, e.cond, env), _eval(ctx, e.t, env), _eval(ctx, e.f, env))
    a, b = _eval(ctx, e.a, env), _eval(ctx, e.b, env)
    return {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
        "floordiv": lambda: a // b, "floormod": lambda: a % b, "and": lambda: a & b,
        "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b, "shr": lambda: a >> b,
        "min": lambda: np.minimum(a, b), "max": lambda: np.maximum(a, b),
        "lt": lambda: a < b, "le": lambda: a <= b, "gt": lambda: a > b, "ge": lambda: a >= b,
        "eq": lambda: a == b, "ne": lambda: a != b,
    }[e.op]()


def uniform_within(ctx, cond, n: int) -> tuple[bool, str]:
    kind = _classify(ctx, cond, {})
    if kind in ("const", "uniform"):
        return True, ""
    if kind == "varying":
        return False, "the branch condition reads memory or per-thread values"
    # thread-dependent: every atom is a thread id or a constant -> evaluate for all threads
    bx, by, bz = (tuple(ctx.func.block) + (1, 1, 1))[:3]
    total = bx * by * bz
    lin = np.arange(total, dtype=np.int64)
    env = {"tid.x": lin % bx, "tid.y": (lin // bx) % by, "tid.z": lin // (bx * by),
           "laneid": lin % 32}
    try:
        v = np.broadcast_to(np.asarray(_eval(ctx, cond, env)), (total,))
    except KeyError:
        return False, "the branch condition mixes thread ids with runtime values"
    groups = v.reshape(-1, n) if total % n == 0 else None
    if groups is None:
        return False, f"the block of {total} threads does not split into groups of {n}"
    mixed = np.nonzero(groups.min(axis=1) != groups.max(axis=1))[0]
    if len(mixed):
        g = int(mixed[0])
        return False, (f"the branch condition differs between threads {g * n}..{g * n + n - 1} "
                       f"of one group")
    return True, ""
