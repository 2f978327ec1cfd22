"""Algebra on flat leaf lists [(extent, Stride)], outermost first.

Every layout is "row-major linear index over its leaves -> offsets"; reshaping, grouping and
slicing are all questions about how a logical shape factors into those leaves.  Working on
the coalesced list makes the answers (and the emitted index arithmetic) as small as possible.
"""
from __future__ import annotations

from ._axis import ZERO


def coalesce(leaves) -> list:
    """Drop extent-1 leaves; merge an outer leaf into the next inner one when
    outer stride == inner stride * inner extent on every axis (one linear run)."""
    out = []
    for e, s in leaves:
        if e == 1:
            continue
        if out and out[-1][1] == s.scaled(e):
            out[-1] = (out[-1][0] * e, s)
        else:
            out.append((e, s))
    return out


def group(leaves, shape) -> list | None:
    """Split `leaves` (no extent-1 leaves) into consecutive groups whose extents multiply to
    each dim of `shape`, splitting a leaf e into (e/f, f) where needed.  None if impossible."""
    leaves = list(leaves)
    i, groups = 0, []
    for d in shape:
        g, r = [], d
        while r > 1:
            if i >= len(leaves):
                return None
            e, s = leaves[i]
            if e <= r:
                if r % e:
                    return None
                g.append((e, s))
                r //= e
                i += 1
            else:
                if e % r:
                    return None
                g.append((r, s.scaled(e // r)))
                leaves[i] = (e // r, s)
                r = 1
        groups.append(g)
    return groups if i == len(leaves) else None


def digit_ops(g) -> tuple:
    """(div, mod, stride items) per leaf of a group: leaf t's digit is (c // div) % mod.
    The outermost digit needs no `% mod` (mod 0) and the innermost no `// 1`; stride-0
    leaves are skipped, so a one-leaf group uses the coordinate as is."""
    ops, p = [], 1
    for t in range(len(g) - 1, -1, -1):
        e, s = g[t]
        if s.items:
            ops.append((p, e if t > 0 else 0, s.items))
        p *= e
    ops.reverse()
    return tuple(ops)


def slice_group(g, a: int, x: int):
    """Sub-range [a, a+x) of a group's row-major index space as (leaves, offset Stride), or
    (None, reason).  Expressible when the range is a box in the mixed radix: outer digits
    fixed, one digit ranging over a window, inner digits full."""
    n = 1
    for e, _ in g:
        n *= e
    if x == n:
        return list(g), ZERO
    suffix = [1] * len(g)
    for t in range(len(g) - 2, -1, -1):
        suffix[t] = suffix[t + 1] * g[t + 1][0]
    j = len(g) - 1
    while x > suffix[j] * g[j][0]:
        j -= 1
    p, (e, s) = suffix[j], g[j]
    if x % p or a % p:
        return None, (f"start {a} and extent {x} must both be multiples of {p} (the inner "
                      f"leaves' extent {[le for le, _ in g[j + 1:]]}); align the region to {p}")
    w, u = x // p, (a // p) % e
    if u + w > e:
        return None, (f"it wraps across the boundary of the extent-{e} leaf (index {u}..{u + w - 1}"
                      f" of {e}), so no single stride describes it; split the region at the wrap")
    off = ZERO
    for t in range(j):
        dig = (a // suffix[t]) % g[t][0]
        if dig:
            off = off.plus(g[t][1].scaled(dig))
    if u:
        off = off.plus(s.scaled(u))
    return [(w, s)] + list(g[j + 1:]), off


def max_offset(leaves, offset, axis: str) -> int:
    """Largest offset on `axis` over the domain (negative strides contribute 0)."""
    hi = offset.get(axis)
    for e, s in leaves:
        k = s.get(axis)
        if k > 0:
            hi += (e - 1) * k
    return hi
