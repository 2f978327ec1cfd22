"""Exact value ranges of an index over the launch: is an access provably out of bounds?

The facts (bounds) over-approximate: `(tx & 3) ^ (tx >> 2)` may never reach its interval's
top, and a guard `pg.if_(tx < 64)` is not a fact at all.  So a bound that fails is only a
suspicion; this module decides it exactly, or not at all.  The index and every enclosing
condition are expanded (let values substituted) down to free variables whose every value
occurs: the thread ids of the traced block, the CTA ids of a declared grid and the variables
of enclosing loops with constant bounds.  Anything else (a load, a parameter, a loop with
runtime bounds) makes the answer unknown, and unknown is "not proven": the access is accepted.
Small domains are enumerated (numpy, vectorized); larger ones split the index into a part over
the threads and independent linear loop terms, whose extremes add up exactly.
"""
from __future__ import annotations

import numpy as np

from ..ir import (BOOL, BinOp, Cast, Const, Instr, Not, Select, SpecialReg, Var, format_expr,
                  traced_statements)
from .simplify import Analyzer

_ENUM_LIMIT = 1 << 20        # points enumerated at most
_THREAD_REGS = ("tid.x", "tid.y", "tid.z", "laneid")
_CONTROL = ("ret", "exit", "trap", "bra", "brx", "brkpt", "call")


class Unknown(Exception):
    """The expression depends on something without an exact, fully attained range."""


class Context:
    """What the emitter knows at an access: let statements by var uid, the enclosing control
    (("if", cond, taken) / ("while", cond) / ("for", For)), the kernel function."""

    def __init__(self, lets, ctl, func):
        self.lets = lets
        self.ctl = ctl
        self.func = func
        self.loops = {s.var.uid: s for kind, s, *_ in ctl if kind == "for"}
        self.memo: dict = {}

    # ---- expansion -------------------------------------------------------------------
    def expand(self, e):
        """e with let variables replaced by their values; raises Unknown."""
        t = type(e)
        if t is Const:
            if not (e.dtype.is_int or e.dtype is BOOL):
                raise Unknown
            return e
        if t is SpecialReg:
            if e.name in _THREAD_REGS:
                return e
            raise Unknown          # ctaid only through a declared pg.cta_id (below)
        if t is Var:
            hit = self.memo.get(e.uid)
            if hit is not None:
                return hit
            let = self.lets.get(e.uid)
            if let is not None:
                v = let.value
                if type(v) is SpecialReg and v.name.startswith("ctaid."):
                    out = self._cta(v, let)
                else:
                    out = self.expand(v)
            elif e.uid in self.loops:
                s = self.loops[e.uid]
                if not (type(s.start) is Const and type(s.stop) is Const and
                        isinstance(s.step, int)):
                    raise Unknown
                out = e
            else:
                raise Unknown      # a parameter, a symbol, a value from elsewhere
            self.memo[e.uid] = out
            return out
        if t is BinOp:
            if not (e.dtype.is_int or e.dtype is BOOL) or not (e.a.dtype.is_int or
                                                               e.a.dtype is BOOL):
                raise Unknown
            a, b = self.expand(e.a), self.expand(e.b)
            return e if a is e.a and b is e.b else BinOp(e.op, a, b, e.dtype)
        if t is Cast:
            if not (e.dtype.is_int and e.a.dtype.is_int):
                raise Unknown
            return Cast(self.expand(e.a), e.dtype)
        if t is Not:
            return Not(self.expand(e.a))
        if t is Select:
            return Select(self.expand(e.cond), self.expand(e.t), self.expand(e.f), e.dtype)
        raise Unknown              # loads, pointers

    def _cta(self, reg, let):
        """%ctaid.d has every value 0..gridDim.d-1 only when the body declared the extent
        (pg.cta_id(n): its let's bound is n - 1 and launches must keep it)."""
        d = "xyz".index(reg.name[-1])
        f = self.func
        if "grid" in f.attrs or let.bounds is None or let.bounds[1] != f.grid[d] - 1:
            raise Unknown
        return reg


def _free(e, out: dict):
    """Collect the free variables of an expanded expression: SpecialReg names and loop Vars."""
    stack = [e]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is SpecialReg:
            out[x.name] = x
        elif t is Var:
            out[x.uid] = x
        elif t is BinOp:
            stack += (x.a, x.b)
        elif t is Cast or t is Not:
            stack.append(x.a)
        elif t is Select:
            stack += (x.cond, x.t, x.f)


def _eval(e, env, memo):
    """Vectorized value of an expanded expression (int64; numpy floor semantics match
    ptxgen's floor division).  Raises Unknown past int64 or a zero divisor."""
    k = id(e)
    hit = memo.get(k)
    if hit is not None:
        return hit[1]
    t = type(e)
    if t is Const:
        v = np.int64(int(e.value))
    elif t is SpecialReg:
        v = env[e.name]
    elif t is Var:
        v = env[e.uid]
    elif t is Cast:
        v = _wrap(_eval(e.a, env, memo), e.dtype)
    elif t is Not:
        v = ~np.asarray(_eval(e.a, env, memo), dtype=bool)
    elif t is Select:
        v = np.where(_eval(e.cond, env, memo), _eval(e.t, env, memo), _eval(e.f, env, memo))
    else:
        a, b = _eval(e.a, env, memo), _eval(e.b, env, memo)
        op = e.op
        if op in ("floordiv", "floormod") and np.any(np.asarray(b) == 0):
            raise Unknown
        if op in ("shl", "shr") and (np.any(np.asarray(b) < 0) or np.any(np.asarray(b) > 62)):
            raise Unknown
        v = _OPS[op](a, b)
        if e.dtype is BOOL or op in _CMPS:
            v = np.asarray(v, dtype=bool)
        else:
            v = _wrap(v, e.dtype, exact=True)
    memo[k] = (e, v)
    return v


def _wrap(v, dt, exact=False):
    """v in dt's range; with exact, a value outside it (the hardware would wrap, the facts and
    the simplifier would not) makes the answer unknown."""
    v = np.asarray(v, dtype=np.int64)
    if dt is BOOL:
        return v != 0
    bits = dt.bits
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.kind == "int" else (0, (1 << bits) - 1)
    if v.size and (v.min() < lo or v.max() > hi):
        if exact or bits >= 64:
            raise Unknown
        v = v & ((1 << bits) - 1)
        if dt.kind == "int":
            v = np.where(v > hi, v - (1 << bits), v)
    return v


_CMPS = frozenset(("lt", "le", "gt", "ge", "eq", "ne"))
_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
        "floormod": np.mod, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
        "shl": np.left_shift, "shr": np.right_shift, "min": np.minimum, "max": np.maximum,
        "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def control_flow_escapes(func) -> bool:
    """Raw PTX that can leave the straight path (ret, trap, branches): reachability is then
    not what the statements say."""
    return any(type(s) is Instr and s.opcode.startswith(_CONTROL)
               for s in traced_statements(func.body))


def out_of_bounds(ctx: Context, idx, ext, lanes: int = 1):
    """A witness (value, {variable: value}) that some thread executing the access indexes
    outside 0..ext-1 (lanes: the vector's elements from idx on), or None when that cannot be
    proven.  `ext` is an int, or an expression (only a negative index is then provable).
    The caller rules out raw control flow first (control_flow_escapes)."""
    try:
        return _out_of_bounds(ctx, idx, ext, lanes)
    except (Unknown, KeyError, OverflowError, MemoryError):
        return None


def _out_of_bounds(ctx, idx, ext, lanes):
    e = ctx.expand(idx)
    conds = []
    for kind, s, *rest in ctx.ctl:
        if kind == "if":
            c = ctx.expand(s.cond)
            conds.append(c if rest[0] else Not(c))
        elif kind == "while":
            conds.append(ctx.expand(s.cond))
        else:   # a loop must run for its body to: constant bounds, at least one iteration
            if not (type(s.start) is Const and type(s.stop) is Const and isinstance(s.step, int)):
                return None
            if not range(s.start.value, s.stop.value, s.step):
                return None
    free: dict = {}
    _free(e, free)
    for c in conds:
        _free(c, free)
    f = ctx.func
    bx, by, bz = (tuple(f.block) + (1, 1, 1))[:3]
    axes = []       # (names, values per point along the axis)
    thread = [k for k in free if k in _THREAD_REGS]
    if thread:
        lin = np.arange(bx * by * bz, dtype=np.int64)
        axes.append(({"tid.x": lin % bx, "tid.y": (lin // bx) % by, "tid.z": lin // (bx * by),
                      "laneid": lin % 32}, len(lin)))
    for k, v in free.items():
        if k in _THREAD_REGS:
            continue
        if type(v) is SpecialReg:           # a declared ctaid
            n = f.grid["xyz".index(v.name[-1])]
            axes.append(({k: np.arange(n, dtype=np.int64)}, n))
        else:
            s = ctx.loops[k]
            r = np.arange(s.start.value, s.stop.value, s.step, dtype=np.int64)
            axes.append(({k: r}, len(r)))
    size = 1
    for _, n in axes:
        size *= n
    if size > _ENUM_LIMIT:
        return _split(ctx, e, conds, axes, ext, lanes)
    env = {}
    shape = [n for _, n in axes]
    for i, (vals, n) in enumerate(axes):
        view = [1] * len(axes)
        view[i] = n
        for name, arr in vals.items():
            env[name] = arr.reshape(view)
    memo: dict = {}
    with np.errstate(all="ignore"):
        v = np.broadcast_to(_eval(e, env, memo), shape)
        mask = np.ones(shape, dtype=bool)
        for c in conds:
            mask &= np.broadcast_to(_eval(c, env, memo), shape)
    bad = v < 0
    if isinstance(ext, int):
        bad = bad | (v + (lanes - 1) >= ext)
    bad &= mask
    if not bad.any():
        return None
    at = np.unravel_index(int(np.argmax(bad.reshape(-1))), shape)
    return int(v[at]), _point(axes, at, free, (bx, by, bz))


def _point(axes, at, free, block) -> dict:
    """The witness's variables by name: the thread (its tid, or lane if only that occurs),
    then loop variables and CTA ids."""
    out = {}
    for (vals, _), i in zip(axes, at):
        if "tid.x" in vals:
            lane_only = "laneid" in free and not any(k in free for k in _THREAD_REGS[:3])
            names = ("laneid",) if lane_only else tuple(
                n for n, ext in zip(_THREAD_REGS[:3], block) if ext > 1 or n == "tid.x")
            for n in names:
                out["%" + n] = int(vals[n][i])
        else:
            for name, arr in vals.items():
                x = free[name]
                out["%" + x.name if type(x) is SpecialReg else x.name] = int(arr[i])
    return out


def _split(ctx, e, conds, axes, ext, lanes):
    """A domain too large to enumerate: index = g(threads) + sum(c * v) over independent
    loop/CTA variables v that occur only as linear terms, and conditions over the threads
    only.  Its extremes are exact: every combination of the parts occurs."""
    aff = Analyzer().affine(e)
    lin, rest = [], []
    ranges = {}
    for vals, n in axes:
        for name, arr in vals.items():
            ranges[name] = arr
    for atom, c in aff.terms.values():
        if not c:
            continue
        key = atom.uid if type(atom) is Var else atom.name if type(atom) is SpecialReg and \
            atom.name.startswith("ctaid") else None
        if key is not None:
            lin.append((c, ranges[key]))
        else:
            rest.append((atom, c))
    free: dict = {}
    for atom, _ in rest:
        _free(atom, free)
    for c in conds:
        _free(c, free)
    if any(k not in _THREAD_REGS for k in free):
        return None
    f = ctx.func
    bx, by, bz = (tuple(f.block) + (1, 1, 1))[:3]
    t = np.arange(bx * by * bz, dtype=np.int64)
    env = {"tid.x": t % bx, "tid.y": (t // bx) % by, "tid.z": t // (bx * by), "laneid": t % 32}
    memo: dict = {}
    with np.errstate(all="ignore"):
        g = np.full(len(t), aff.const, dtype=np.int64)
        for atom, c in rest:
            g = g + c * np.broadcast_to(_eval(atom, env, memo), g.shape)
        mask = np.ones(len(t), dtype=bool)
        for c in conds:
            mask &= np.broadcast_to(_eval(c, env, memo), mask.shape)
    if not mask.any():
        return None
    g = g[mask]
    lo = int(g.min()) + sum(int(min(c * r.min(), c * r.max())) for c, r in lin)
    hi = int(g.max()) + sum(int(max(c * r.min(), c * r.max())) for c, r in lin)
    if lo < -(1 << 62) or hi > (1 << 62):
        return None
    if lo < 0:
        return lo, {}
    if isinstance(ext, int) and hi + lanes - 1 >= ext:
        return hi, {}
    return None


def describe(buf, dim: int, idx, ext, witness, lanes: int = 1) -> str:
    """The error message for a provably out-of-bounds access."""
    value, point = witness
    where = ", ".join(f"{k} = {v}" for k, v in point.items())
    what = f"{value}..{value + lanes - 1}" if lanes > 1 else f"{value}"
    span = f"0..{ext - 1}" if isinstance(ext, int) else f"0..{format_expr(ext)}-1"
    return (f"index {format_expr(idx)} of '{buf.name}' (dimension {dim}, extent "
            f"{ext if isinstance(ext, int) else format_expr(ext)}) is out of bounds: it reaches "
            f"{what}{' for ' + where if where else ''}, outside {span}; guard the access "
            f"(pg.if_) or fix the index")
