"""Tensor memory <-> registers: the accumulator layout D and the tcgen05.ld/st fragments.

Why: TMEM is not addressable by threads.  An accumulator element (m, n) lives at a (lane,
column) cell chosen by the MMA datapath, and reaches a thread's register only through a
tcgen05.ld whose shape fixes which thread and register get which cell.  An epilogue that
guesses either map stores garbage without any error, so both maps are data here, used by the
primitives and checked by a numpy model of mma + ld (tests/test_tcgen05_layout.py).

Layout D (cta_group::1, M = 128, 32-bit accumulator): lane = m, column = n, one column per
element; a warp w can only reach lanes 32*(w % 4) .. 32*(w % 4) + 31.  TMEM addresses are
`lane << 16 | column`.  With cta_group::2 each CTA of the pair holds its M / 2 rows: Layout A
(M = 256) is D's organization over the CTA's 128 rows; Layout B (M = 128, dense A) puts the
CTA's (64, N) half with columns 0..N/2-1 in lanes 0..63 and columns N/2..N-1 in lanes 64..127
(row m in lane m and m + 64), N/2 columns wide (PTX ISA "Data path layout organization").

Fragments (per warp, relative to the instruction's address; t = lane of the thread, j = its
register; `.xN` repeats the x1 pattern N times along columns):
  32x32b : x1 = 32 lanes x 1 column;  (t, j) -> (t, j)
  16x256b: x1 = 16 lanes x 8 columns (4 registers);
           (t, j) -> (t // 4 + 8 * (j % 4 // 2),  8 * (j // 4) + 2 * (t % 4) + j % 2)
(PTX ISA "tcgen05 Matrix fragments"; the 16x256b map is CUTLASS's SM100_TMEM_LOAD_16dp256b1x
DstLayout decoded to 32-bit cells.)
"""
from __future__ import annotations

from ..target import TMEM_COLS

from functools import lru_cache
from typing import Callable, NamedTuple

from ..errors import LayoutError
from ..layout import Axis, S, TCol, TileLayout, TLane, index_grid, per_element

LANES = 128


def layout_D(M: int = 128, N: int = 256) -> TileLayout:
    """Accumulator layout D: (M, N) 32-bit elements, row m -> lane m, column n -> column n."""
    if M != 128:
        raise LayoutError(f"layout D models M = 128 (one row per lane); M={M} uses the PTX "
                          f"layouts E/F, not modelled here")
    if not (isinstance(N, int) and 0 < N <= TMEM_COLS):
        raise LayoutError(f"layout D: N={N!r} must be in 1..{TMEM_COLS} columns")
    return TileLayout(S[(M, N):(1 @ TLane, 1 @ TCol)])


def layout_B(N: int) -> TileLayout:
    """Layout B: this CTA's (64, N) 32-bit half of an M = 128 cta_group::2 accumulator; the
    column halves fold onto the two 64-lane halves, so it takes N / 2 columns."""
    if not (isinstance(N, int) and N > 0 and N % 2 == 0 and N // 2 <= TMEM_COLS):
        raise LayoutError(f"layout B: N={N!r} must be even, its N/2 columns in 1..{TMEM_COLS}")
    return TileLayout(S[(64, (2, N // 2)):(1 @ TLane, (64 @ TLane, 1 @ TCol))])


# (M, cta_group) of a dense tcgen05.mma -> (PTX ISA layout id, rows this CTA holds); the ones
# ptxgen models.  M=64 (E/F), M=32 (G) and sparse A with cta_group::2 (C) are not.
ACCUMULATOR_LAYOUTS = {(128, 1): ("D", 128), (256, 2): ("A", 128), (128, 2): ("B", 64)}


def accumulator_layout(M: int, cta_group: int, N: int) -> tuple:
    """(layout id, this CTA's rows, TileLayout) of the 32-bit accumulator of an M x N
    tcgen05.mma with `cta_group`; LayoutError for a datapath layout not modelled."""
    key = (M, cta_group)
    if key not in ACCUMULATOR_LAYOUTS:
        have = ", ".join(f"M={m} with cta_group={g} (layout {ACCUMULATOR_LAYOUTS[m, g][0]})"
                         for m, g in ACCUMULATOR_LAYOUTS)
        raise LayoutError(f"M={M} with cta_group={cta_group} accumulates in another TMEM "
                          f"datapath layout (PTX ISA 'Data path layout organization'), which "
                          f"ptxgen does not model; it models {have}")
    name, rows = ACCUMULATOR_LAYOUTS[key]
    return name, rows, layout_B(N) if name == "B" else layout_D(128, N)


def default_layout(shape, dt) -> tuple:
    """(columns, layout) of a (128, N) TMEM tile of dtype `dt` in layout D, one row per lane:
    a 32-bit element takes one column, narrower ones pack 32 / bits to a column in row order
    (as tcgen05.ld .pack::16b and an A operand in TMEM keep them)."""
    shape = tuple(shape)
    if len(shape) != 2 or shape[0] != LANES or not all(isinstance(s, int) and s > 0
                                                       for s in shape):
        raise LayoutError(f"the default layout D is (128, N): one row per TMEM lane; got "
                          f"{shape}. Pass layout= (TLane/TCol axes) for other datapath layouts")
    if dt.bits not in (4, 8, 16, 32):
        raise LayoutError(f"{dt} does not fit TMEM's 32-bit cells; use a 32-, 16-, 8- or "
                          f"4-bit type")
    per = 32 // dt.bits
    n = shape[1]
    if n % per:
        raise LayoutError(f"{n} {dt} elements per row do not fill whole 32-bit columns ({per} "
                          f"per column); use a multiple of {per}")
    if per == 1:
        return n, TileLayout(S[(LANES, n):(1 @ TLane, 1 @ TCol)])
    return n // per, TileLayout(S[(LANES, (n // per, per)):(1 @ TLane, (1 @ TCol, 1))])


def cell(layout, shape, m, n) -> tuple:
    """(lane, column) of element (m, n) of a TMEM tile with `layout`."""
    o = layout.apply(m, n, shape=shape)
    if o.get("m", 0):
        raise LayoutError(f"element ({m}, {n}) shares a 32-bit cell (slot {o['m']}); only "
                          f"32-bit-per-cell tiles are modelled")
    return o.get("TLane", 0), o.get("TCol", 0)


# ---- tcgen05.ld / tcgen05.st shapes ---------------------------------------------------------
class Shape(NamedTuple):
    name: str
    lanes: int           # lanes one x1 instruction covers (per warp)
    cols: int            # 32-bit columns one x1 covers
    regs: int            # registers per thread for x1
    max_x: int           # largest .xN
    fn: Callable         # (t, j) -> (lane, col) for x1

    def at(self, t: int, j: int) -> tuple:
        """(lane, col) of register j of thread t for any .xN (x1 pattern repeated along cols)."""
        lane, col = self.fn(t, j % self.regs)
        return lane, col + self.cols * (j // self.regs)

    def xs(self):
        x = 1
        while x <= self.max_x:
            yield x
            x *= 2


SHAPES = {
    "32x32b": Shape("32x32b", 32, 1, 1, 128, lambda t, j: (t, 0)),
    "16x256b": Shape("16x256b", 16, 8, 4, 32,
                     lambda t, j: (t // 4 + 8 * (j // 2), 2 * (t % 4) + j % 2)),
}


class WarpInstr(NamedTuple):
    """One tcgen05.ld/st of a warp: lane/column offsets from the region origin, .xN, and for
    each of its registers the region element (row, col) per lane (`cells[t][j]`)."""
    lane0: int
    col0: int
    x: int
    cells: tuple


def pick_x(shape: Shape, ncols: int, max_regs: int = 128) -> int:
    """The widest .xN that tiles `ncols` columns within `max_regs` registers per thread."""
    best = None
    for x in shape.xs():
        if ncols % (shape.cols * x) == 0 and x * shape.regs <= max_regs:
            best = x
    if best is None:
        raise LayoutError(f"{ncols} columns cannot be tiled by .{shape.name} (x1 covers "
                          f"{shape.cols} column(s))")
    return best


@lru_cache(maxsize=256)
def warp_instrs(shape: Shape, rows: int, ncols: int, max_regs: int = 128) -> tuple:
    """The instructions one warp issues to cover `rows` (16 or 32) lanes x `ncols` columns.
    A pure function of its arguments with an immutable result, so cached: every tmem
    load/store checks each shape against it, with up to 32 x 128 cells per instruction."""
    if rows % shape.lanes or rows > 32:
        raise LayoutError(f".{shape.name} covers {shape.lanes} lanes; a warp's {rows} rows "
                          f"are not a multiple of it (or exceed its 32-lane quarter)")
    x = pick_x(shape, ncols, max_regs)
    out = []
    for lane0 in range(0, rows, shape.lanes):
        for col0 in range(0, ncols, shape.cols * x):
            cells = tuple(tuple((lane0 + lane, col0 + col)
                                for lane, col in (shape.at(t, j) for j in range(shape.regs * x)))
                          for t in range(32))
            out.append(WarpInstr(lane0, col0, x, cells))
    return tuple(out)


def register_layout(shape_name: str, rows: int, ncols: int, axis="tid", max_regs=128):
    """The register-side layout of an (rows, ncols) 32-bit tile read with .`shape_name`:
    thread axis `axis` (tid / tid_in_wg / laneid) and register ("m") per element.  Built from
    `warp_instrs`, so loading with this layout needs no data movement between threads."""
    import numpy as np
    shape = SHAPES[shape_name]
    if rows not in (16, 32, 64, 96, 128):
        raise LayoutError(f"rows={rows} must be 16, 32 (one warp) or 64/96/128 (32 per warp)")
    per_warp = min(rows, 32)
    ins = warp_instrs(shape, per_warp, ncols, max_regs)
    table = np.zeros((rows, ncols, 2), dtype=np.int64)      # (thread, register)
    for w in range(rows // per_warp):
        reg = 0
        for i in ins:
            cells = np.asarray(i.cells, dtype=np.int64)     # [thread][register] -> (row, col)
            n = cells.shape[1]
            at = (w * per_warp + cells[..., 0], cells[..., 1])
            table[at + (0,)] = 32 * w + np.arange(32)[:, None]
            table[at + (1,)] = reg + np.arange(n)[None, :]
            reg += n
    return _fit_layout(table, Axis.get(axis))


def datapath_register_layout(tmem_layout, rows: int, cols: int, shape_name: str = "32x32b",
                             axis="tid", max_regs=128):
    """The register layout that reads a (rows, cols) TMEM tile laid out by `tmem_layout` (any
    datapath layout: D, A, B) with .`shape_name`: each element goes to the thread and register
    the fragment delivers its (lane, column) cell to, over the tile's physical lanes x columns
    (Layout B's (64, N) tile is a (128, N/2) image)."""
    import numpy as np
    r, c = index_grid(rows, cols)
    o = tmem_layout.apply(r, c, shape=(rows, cols))
    lane, col = (per_element(o.get(a, 0), r) for a in ("TLane", "TCol"))
    if np.any(per_element(o.get("m", 0), r)):
        raise LayoutError("only 32-bit-per-cell TMEM tiles are modelled")
    lanes, ncols = int(lane.max()) + 1, int(col.max()) + 1
    phys = register_layout(shape_name, lanes, ncols, axis, max_regs)
    p = phys.apply(lane, col, shape=(lanes, ncols))
    table = np.stack([per_element(p.get(Axis.get(axis).name, 0), r),
                      per_element(p["m"], r)], axis=1).reshape(rows, cols, 2)
    return _fit_layout(table, Axis.get(axis))


def _fit_layout(table, axis) -> TileLayout:
    """A TileLayout reproducing `table[(r, c)] = (thread, reg)` exactly: factor each dim into
    power-of-two digits and read each digit's strides off the table (checked afterwards)."""
    import numpy as np
    rows, ncols = table.shape[:2]

    def digits(n):
        out, d = [], 1
        while d < n:
            out.append(d)
            d *= 2
        if d != n:
            raise LayoutError(f"extent {n} is not a power of two")
        return out

    modes = []
    for dim, n in ((0, rows), (1, ncols)):
        leaves = []                                   # (extent, (thread, reg)), major first
        for d in reversed(digits(n)):
            idx = [0, 0]
            idx[dim] = d
            t, r = (int(v) for v in table[idx[0], idx[1]] - table[0, 0])
            if leaves and leaves[-1][1] == (2 * t, 2 * r):          # merge a linear run
                e, _ = leaves.pop()
                leaves.append((2 * e, (t, r)))
            else:
                leaves.append((2, (t, r)))
        leaves = leaves or [(1, (0, 0))]
        st = [((t @ axis) + r if t and r else (t @ axis if t else r)) for _, (t, r) in leaves]
        modes.append((leaves[0][0], st[0]) if len(leaves) == 1 else
                     (tuple(e for e, _ in leaves), tuple(st)))
    shape = tuple(m[0] for m in modes)
    stride = tuple(m[1] for m in modes)
    lay = TileLayout(S[shape:stride])
    # checked on every element at once (layouts evaluate numpy index arrays elementwise)
    r, c = index_grid(rows, ncols)
    o = lay.apply(r, c, shape=(rows, ncols))
    got = np.stack([per_element(o.get(axis.name, 0), r), per_element(o["m"], r)], axis=1)
    if not np.array_equal(got, table.reshape(rows * ncols, 2)):
        raise LayoutError("the fragment is not a linear layout (internal)")
    return lay


# ---- numpy models ---------------------------------------------------------------------------
def mma_model(tmem, A, B, d_layout, d_origin=(0, 0), accumulate=False, count=None):
    """tcgen05.mma D (+)= A @ B.T into `tmem` (lanes x columns float32 array) through
    `d_layout`; `count` (same shape, int) records how often each cell is written."""
    import numpy as np
    M, N = A.shape[0], B.shape[0]
    D = A.astype(np.float32) @ B.astype(np.float32).T
    for m in range(M):
        for n in range(N):
            lane, col = cell(d_layout, (M, N), m, n)
            lane, col = lane + d_origin[0], col + d_origin[1]
            tmem[lane, col] = D[m, n] + (tmem[lane, col] if accumulate else 0)
            if count is not None:
                count[lane, col] += 1
    return tmem


def ld_model(tmem, shape_name, rows, ncols, nthreads, origin=(0, 0), max_regs=128):
    """What tcgen05.ld.`shape_name` leaves in registers: regs[thread][k] for a (rows, ncols)
    region at `origin`; warp w reads lanes 32*(w % 4) + ... (its TMEM quarter)."""
    shape = SHAPES[shape_name]
    per_warp = min(rows, 32)
    ins = warp_instrs(shape, per_warp, ncols, max_regs)
    regs = {}
    for tid in range(nthreads):
        w, t = divmod(tid, 32)
        quarter = 32 * (w % 4) if rows > 32 else 0
        vals = []
        for i in ins:
            for lane, col in i.cells[t]:
                vals.append(tmem[origin[0] + quarter + lane, origin[1] + col])
        regs[tid] = vals
    return regs


def gather_model(regs, reg_layout, rows, ncols, axis="tid", uses=None):
    """The (rows, ncols) tile an epilogue reads through `reg_layout`: element (m, n) comes from
    regs[thread][register] with (thread, register) given by the layout."""
    import numpy as np
    out = np.full((rows, ncols), np.nan, dtype=np.float32)
    for m in range(rows):
        for n in range(ncols):
            o = reg_layout.apply(m, n, shape=(rows, ncols))
            t, k = o.get(axis, 0), o["m"]
            out[m, n] = regs[t][k]
            if uses is not None:
                uses[(t, k)] = uses.get((t, k), 0) + 1
    return out
