"""Tile math on register fragments whose elements are spread over threads (a wgmma
accumulator, an mma.sync C fragment, any register tile with thread axes).

Three facts, each derived from the tile's TileLayout and nothing else:

* the *reduced tile* of a register tile over some axes: the kept dimensions' leaves, thread
  axes and all; the reduced dimensions' thread bits are not in its layout, so the threads
  that differ only there hold the same value (a row max of a wgmma accumulator lives in the
  four lanes of the quad that share the row; copy/reg.thread_map(replicate=True));
* a *broadcast* source: a register tile with extent-1 (or missing trailing) dimensions
  repeats along them; as a copy side it has stride 0 and no thread axis there;
* element *coordinates*: `pg.tile.<scope>.coords(tile)` gives one int32 variable per
  dimension; an elementwise op substitutes each element's (thread part + constant) index
  into any scalar expression built from them (masks: `select(s, col > row, -inf, s)`).
"""
from __future__ import annotations

from ...errors import PtxgenError
from ...ir import BinOp, Cast, Load, Not, Select, Var, subexpressions
from ...layout import Axis, S, TileLayout
from ..copy.common import Leaf, Side, analyze_side


def dim_leaves(side: Side, extents) -> list:
    """The side's leaves (extent > 1) grouped by the region dimension they index."""
    it = iter([lf for lf in side.leaves if lf.extent > 1])
    out = []
    for e in extents:
        got, mine = 1, []
        while got < e:
            lf = next(it)
            mine.append(lf)
            got *= lf.extent
        if got != e:
            raise PtxgenError(f"the layout of {side.buf.name} does not split along its dimensions")
        out.append(mine)
    return out


def reduced_layout(src, axes) -> tuple:
    """(shape, TileLayout) of the register tile holding `src` reduced over `axes`: its kept
    dimensions' leaves with their thread axes, registers renumbered densely."""
    side = analyze_side(src)
    if side.space != "local":
        raise PtxgenError(f"{src} is in {side.space} memory; a reduced tile is laid out from a "
                          f"register tile")
    ext = [e for _, e in src.region]
    groups = [g for d, g in enumerate(dim_leaves(side, ext)) if d not in axes]
    shape = tuple(e for d, e in enumerate(ext) if d not in axes) or (1,)
    regs = [lf for g in groups for lf in g if not lf.axes]
    stride, nxt = {}, 1
    for lf in reversed(regs):            # registers in logical order, innermost first
        stride[id(lf)] = nxt
        nxt *= lf.extent
    modes = []
    for g in groups:
        ms = []
        for lf in g:
            if not lf.axes:
                ms.append((lf.extent, stride[id(lf)]))
                continue
            if len(lf.axes) != 1:
                raise PtxgenError(f"a leaf of {src.buffer.name}'s layout moves along several "
                                  f"thread axes ({lf.axes}); lay the tile out with one axis a leaf")
            (ax, v), = lf.axes.items()
            ms.append((lf.extent, v @ Axis.get(ax)))
        ms = ms or [(1, 0)]
        modes.append(ms[0] if len(ms) == 1 else (tuple(e for e, _ in ms),
                                                tuple(s for _, s in ms)))
    if not modes:
        modes = [(1, 0)]
    return shape, TileLayout(S[tuple(e for e, _ in modes):tuple(s for _, s in modes)])


def broadcast_side(side: Side, own, extents) -> Side:
    """`side` repeated along the dims where its region has extent 1 and the tile more.
    `own` is the region's extents aligned to the tile's rank (missing trailing dims: 1)."""
    groups = dim_leaves(side, [e for e in own if e > 1])
    it = iter(groups)
    leaves = []
    for e, full in zip(own, extents):
        if e == full:
            leaves += next(it) if e > 1 else []
        else:
            leaves.append(Leaf(full, 0, {}))
    return Side(side.region, side.buf, side.space, leaves, side.base, side.swizzle)


def coordinate_side(side: Side, dim: int, extents) -> Side:
    """A side whose "stride" is the element's index along region dimension `dim`."""
    return Side(side.region, side.buf, "logical",
                [Leaf(e, 1 if d == dim else 0) for d, e in enumerate(extents)], 0)


def with_coords(e, m: dict):
    """Expression `e` with the coordinate Vars (uid -> expression) replaced."""
    t = type(e)
    if t is Var:
        return m.get(e.uid, e)
    if t is BinOp:
        return BinOp(e.op, with_coords(e.a, m), with_coords(e.b, m), e.dtype)
    if t is Select:
        return Select(with_coords(e.cond, m), with_coords(e.t, m), with_coords(e.f, m), e.dtype)
    if t is Not:
        return Not(with_coords(e.a, m), e.dtype)
    if t is Cast:
        return Cast(with_coords(e.a, m), e.dtype)
    if t is Load:
        return Load(e.buffer, tuple(with_coords(i, m) for i in e.indices), e.dtype, e.cache)
    return e


def coord_vars(e, known: dict, out: dict):
    """Collect into `out` the coordinate Vars of `e` ({uid: (region, dim)} in `known`)."""
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is Var and x.uid in known:
            out[x.uid] = known[x.uid]
        stack += subexpressions(x)
    return out
