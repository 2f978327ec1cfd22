"""Is a branch condition uniform across each group of n consecutive threads?

A tile primitive in a `warp` scope needs all 32 lanes of a warp active.  Conditions
that depend only on uniform values (parameters, CTA ids, constants) pass; those that
depend on thread ids are evaluated for every thread of the block (numpy, vectorized)
and must be constant within each group.  Memory is refused, except an element of shared memory
at an index the same within the group (a flag one thread wrote before a barrier): every thread
of the group reads that one element, so they read one value unless a write races with the
reads, which would be the program's own data race.  The
one analysis of warp uniformity: alloc's checked .sync.aligned helpers ask it too.
`active_run` says which threads of each group such conditions leave active, for the
variants that can run on part of a scope.
"""
from __future__ import annotations

from ..ir import Cast, Const, Load, Not, Select, SpecialReg, Var, subexpressions

np = None   # numpy, imported by the first thread-dependent condition: not by `import ptxgen`

# the same in every thread of a CTA: its grid position, the launch shape, its cluster's
_UNIFORM_REGS = ("ctaid", "nctaid", "ntid", "nwarpid", "cluster", "ncluster")
_SHARED = ("shared", "shared.dyn")


def _shared_element(e) -> bool:
    return e.indices is not None and e.buffer.root.scope in _SHARED


def _classify(binds, e, memo) -> str:
    """binds: Var uid -> its ("let", ...) or ("range", ...) fact of ctx.facts (the trace
    records bindings only as facts; this rare check indexes them once per condition)."""
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
        fact = binds.get(e.uid)
        if fact is None:
            r = "uniform"      # parameters and symbols are the same for every thread
        elif fact[0] == "let":
            r = _classify(binds, fact[2], memo)
        else:                  # a loop: its start, stop and step Expr
            parts = [_classify(binds, x, memo) for x in fact[5:] if x is not None]
            r = "varying" if any(p in ("thread", "varying") for p in parts) else "uniform"
        memo[e.uid] = r
        return r
    if t is Load:
        if not _shared_element(e):
            return "varying"
        parts = {_classify(binds, i, memo) for i in e.indices}
        # one element for the whole block; per thread: maybe one per group (_group_uniform)
        return "uniform" if parts <= {"const", "uniform"} else \
            "varying" if "varying" in parts else "thread"
    kids = subexpressions(e)
    if not kids:       # a leaf of another kind (an address, ...)
        return "varying"
    parts = {_classify(binds, k, memo) for k in kids}
    for level in ("varying", "thread", "uniform"):
        if level in parts:
            return level
    return "const"


def _eval(binds, e, env):
    t = type(e)
    if t is Const:
        return e.value
    if t is SpecialReg:
        return env[e.name]
    if t is Load:        # a shared element at a thread-dependent index: not evaluated here
        raise KeyError(e.buffer.uid)
    if t is Var:
        fact = binds[e.uid]       # KeyError, as for a loop var: a runtime value
        if fact[0] != "let":
            raise KeyError(e.uid)
        return _eval(binds, fact[2], env)
    if t is Cast:
        return _eval(binds, e.a, env)
    if t is Not:
        return ~np.asarray(_eval(binds, e.a, env), dtype=bool)
    if t is Select:
        return np.where(_eval(binds, e.cond, env), _eval(binds, e.t, env), _eval(binds, e.f, env))
    a, b = _eval(binds, e.a, env), _eval(binds, e.b, env)
    return {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
        "floordiv": lambda: a // b, "floormod": lambda: a % b, "and": lambda: a & b,
        "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b, "shr": lambda: a >> b,
        "min": lambda: np.minimum(a, b), "max": lambda: np.maximum(a, b),
        "lt": lambda: a < b, "le": lambda: a <= b, "gt": lambda: a > b, "ge": lambda: a >= b,
        "eq": lambda: a == b, "ne": lambda: a != b,
    }[e.op]()


def _thread_values(ctx, binds, cond):
    """The condition for every thread of the block (bool array), or None when it is not a
    function of the thread ids alone."""
    if _classify(binds, cond, {}) in ("const", "uniform", "varying"):
        return None
    try:
        return _per_thread(ctx, binds, cond).astype(bool)
    except KeyError:
        return None


def active_run(ctx, conds, n: int):
    """(first, step, count) when the threads that `conds` (thread-id conditions, ANDed) leave
    active are the same progression first, first + step, ... (count of them) in every
    group of n consecutive threads that has any active; None when they are not (or depend on
    runtime values)."""
    binds = {f[1].uid: f for f in ctx.facts}
    on = None
    for c in conds:
        if _classify(binds, c, {}) in ("const", "uniform"):
            continue      # the same for the whole block: a group runs entirely or not at all
        v = _thread_values(ctx, binds, c)
        if v is None or len(v) % n:
            return None
        on = v if on is None else on & v
    if on is None:
        return (0, 1, n)
    runs = set()
    for g in on.reshape(-1, n):
        idx = np.nonzero(g)[0]
        if len(idx) == 0:
            continue
        step = int(idx[1] - idx[0]) if len(idx) > 1 else 1
        if len(idx) > 1 and not np.array_equal(np.diff(idx), np.full(len(idx) - 1, step)):
            return None
        runs.add((int(idx[0]), step, len(idx)))
    return runs.pop() if len(runs) == 1 else None


def uniform_within(ctx, cond, n: int, *, prove_split: bool = False) -> tuple[bool, str]:
    """(ok, why): is `cond` the same for all threads of each group of `n` consecutive ones?

    By default ok must be proven (a tile primitive runs only then).  With `prove_split` not ok
    must be: a condition that cannot be evaluated at trace time (memory, runtime values) passes,
    and the block's last group may have fewer threads (an error at the user's line needs proof).
    """
    binds = {f[1].uid: f for f in ctx.facts}
    kind = _classify(binds, cond, {})
    if kind in ("const", "uniform"):
        return True, ""
    if kind == "varying":
        return prove_split, "" if prove_split else \
            "the branch condition reads memory or per-thread values"
    # thread-dependent: every atom is a thread id or a constant -> evaluate for all threads
    try:
        v = _per_thread(ctx, binds, cond)
    except KeyError:
        if _group_uniform(ctx, binds, cond, n, {}):
            return True, ""
        return prove_split, "" if prove_split else \
            "the branch condition reads shared memory at an index that differs between " \
            "threads" if _reads_memory(binds, cond) else \
            "the branch condition mixes thread ids with runtime values"
    total = len(v)
    if total % n:
        if not prove_split:
            return False, f"the block of {total} threads does not split into groups of {n}"
        v = np.concatenate([v, np.repeat(v[-1:], -total % n)])   # a partial last group
    groups = v.reshape(-1, n)
    mixed = np.nonzero(groups.min(axis=1) != groups.max(axis=1))[0]
    if len(mixed):
        g = int(mixed[0])
        return False, (f"the branch condition differs between threads {g * n}..{g * n + n - 1} "
                       f"of one group")
    return True, ""


def _reads_memory(binds, e) -> bool:
    t = type(e)
    if t is Load:
        return True
    if t is Var:
        fact = binds.get(e.uid)
        return fact is not None and fact[0] == "let" and _reads_memory(binds, fact[2])
    return any(_reads_memory(binds, k) for k in subexpressions(e))


def _group_uniform(ctx, binds, e, n, memo) -> bool:
    """Runtime values combined with thread-id parts that are each the same within every
    group of n (a warpgroup's rank times 64 plus a parameter) are uniform too."""
    kind = _classify(binds, e, memo)
    if kind in ("const", "uniform"):
        return True
    if kind == "varying":
        return False
    try:
        v = _per_thread(ctx, binds, e)
    except KeyError:
        t = type(e)
        if t is Var:
            fact = binds.get(e.uid)
            return fact is not None and fact[0] == "let" and \
                _group_uniform(ctx, binds, fact[2], n, memo)
        if t is Load:     # a shared element: one per group when its index is
            return all(_group_uniform(ctx, binds, i, n, memo) for i in e.indices)
        kids = subexpressions(e)
        return bool(kids) and all(_group_uniform(ctx, binds, k, n, memo) for k in kids)
    if len(v) % n:
        return False
    g = np.asarray(v).reshape(-1, n)
    return bool(np.all(g.min(axis=1) == g.max(axis=1)))


def _per_thread(ctx, binds, cond):
    """`cond` (thread ids and constants only) evaluated for every thread of the block, in
    linear thread order; KeyError where it reads a runtime value."""
    global np
    if np is None:
        import numpy as np
    bx, by, bz = (tuple(ctx.func.block) + (1, 1, 1))[:3]
    total = bx * by * bz
    lin = np.arange(total, dtype=np.int64)
    env = {"tid.x": lin % bx, "tid.y": (lin // bx) % by, "tid.z": lin // (bx * by),
           "laneid": lin % 32}
    return np.broadcast_to(np.asarray(_eval(binds, cond, env)), (total,))


def divergence(ctx, cond, n: int) -> str:
    """How `cond` provably differs within a group of n consecutive threads ("" when it is
    uniform, or when that cannot be decided: it reads memory or runtime values).  A barrier
    under such a condition is reached by only part of the group."""
    v = _thread_values(ctx, {f[1].uid: f for f in ctx.facts}, cond)
    if v is None:
        return ""
    total = len(v)
    bx, by = (tuple(ctx.func.block) + (1, 1))[:2]
    for start in range(0, total, n):
        g = v[start:start + n]
        other = np.nonzero(g != g[0])[0]
        if len(other):
            t = start + int(other[0])
            return (f"it is {bool(g[0])} for thread {start} and {bool(v[t])} for thread {t}"
                    f"{_tid_of(t, bx, by)}")
    return ""


def _tid_of(t: int, bx: int, by: int) -> str:
    if bx * by == 1 or by == 1 and t < bx:
        return ""
    return f" (tid {t % bx}, {(t // bx) % by}, {t // (bx * by)})"


def keeps_whole_warps(ctx, conds) -> bool:
    """Whether every branch condition in `conds` is proven the same in all 32 lanes of each
    warp: there, a full-mask warp collective (a lane 0 broadcast) sees every lane."""
    return all(uniform_within(ctx, cond, 32)[0] for cond in conds)
