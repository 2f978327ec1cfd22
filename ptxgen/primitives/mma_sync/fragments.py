"""mma.sync register fragments: which lane and which register of it holds each element.

Why data: mma.sync reads its operands from the registers of 32 lanes in one fixed
arrangement per instruction shape and operand (PTX ISA, "Matrix Fragments for mma.m16n8k16 /
mma.m16n8k32").  A fragment in any other arrangement multiplies the wrong numbers without
any error, so the arrangement is stated once here, as the TileLayout of one instruction's
tile (thread axis `laneid`, register axis "m" = the fragment element index a0, a1, ...), and
both the constructors users declare fragments with and the gemm's check read it.

With g = lane // 4 and t = lane % 4 (PTX's groupID / threadID_in_group):
  m16n8k16, 16-bit A (16 x 16): a_i at row g + 8*(i//2 % 2), col 2t + i%2 + 8*(i//4)
            16-bit B (16 x 8):  b_i at row 2t + i%2 + 8*(i//2), col g
  m16n8k32,  8-bit A (16 x 32): a_i at row g + 8*(i//4 % 2), col 4t + i%4 + 16*(i//8)
             8-bit B (32 x 8):  b_i at row 4t + i%4 + 16*(i//4), col g
  both, C/D (16 x 8, 32-bit):  c_i at row g + 8*(i//2),       col 2t + i%2
A tile of several instructions stacks these tiles; `mma_sync_layout` numbers them
instruction-major (tile row-major, then the instruction's own elements), so each
instruction's fragment is contiguous in `frag.local()`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...dtypes import dtype as _dt
from ...errors import LayoutError
from ...layout import S, TileLayout, index_grid, laneid, per_element


@dataclass(frozen=True)
class Operand:
    """One instruction's tile of one operand: its extent and its layout as (shape, stride)
    per dimension, outermost leaf first; strides are register offsets or `k @ laneid`."""
    rows: int
    cols: int
    row_leaves: tuple
    col_leaves: tuple
    regs: int            # fragment elements per lane

    def layout(self, tiles=(1, 1)) -> TileLayout:
        """The layout of a tiles[0] x tiles[1] grid of this tile, instruction-major."""
        (rs, rst), (cs, cst) = self.row_leaves, self.col_leaves
        tr, tc = tiles
        return TileLayout(S[((tr,) + rs, (tc,) + cs):((self.regs * tc,) + rst,
                                                       (self.regs,) + cst)])


_C = Operand(16, 8, ((2, 8), (2, 4 @ laneid)), ((4, 2), (1 @ laneid, 1)), 4)

# instruction shape -> (element bits of A and B, {operand: Operand})
SHAPES = {
    "m16n8k16": (16, {
        "A": Operand(16, 16, ((2, 8), (2, 4 @ laneid)), ((2, 4, 2), (4, 1 @ laneid, 1)), 8),
        "B": Operand(16, 8, ((2, 4, 2), (2, 1 @ laneid, 1)), ((8,), (4 @ laneid,)), 4),
        "C": _C}),
    "m16n8k32": (8, {
        "A": Operand(16, 32, ((2, 8), (4, 4 @ laneid)), ((2, 4, 4), (8, 1 @ laneid, 1)), 16),
        "B": Operand(32, 8, ((2, 4, 4), (4, 1 @ laneid, 1)), ((8,), (4 @ laneid,)), 8),
        "C": _C}),
}
SHAPE_OF_BITS = {bits: name for name, (bits, _) in SHAPES.items()}


def operand(shape: str, which: str) -> Operand:
    if shape not in SHAPES:
        raise LayoutError(f"unknown mma.sync shape {shape!r}; shapes are {', '.join(SHAPES)}")
    which = {"D": "C"}.get(which.upper(), which.upper())
    ops = SHAPES[shape][1]
    if which not in ops:
        raise LayoutError(f"mma.sync operands are A, B and C (D: the same layout as C); got "
                          f"{which!r}")
    return ops[which]


def mma_sync_layout(which: str, shape: str = "m16n8k16", dtype=None, tile=None) -> TileLayout:
    """The register layout of an mma.sync fragment: operand "A" (M x K), "B" (K x N) or "C"/"D"
    (M x N) of instruction `shape`, for a `tile` (rows, cols) that is a whole number of
    instruction tiles (default: one).  `dtype` (optional) is checked against the shape."""
    op = operand(shape, which)
    if dtype is not None:
        _check_dtype(which, shape, dtype)
    rows, cols = tile if tile is not None else (op.rows, op.cols)
    if rows % op.rows or cols % op.cols or rows <= 0 or cols <= 0:
        raise LayoutError(f"mma_sync_layout({which!r}, {shape!r}): the tile {rows} x {cols} is "
                          f"not a whole number of {op.rows} x {op.cols} instruction tiles")
    return op.layout((rows // op.rows, cols // op.cols))


def _check_dtype(which, shape, dtype):
    bits = getattr(dtype, "bits", None)
    name = getattr(dtype, "name", dtype)
    if bits is None:
        bits = _dt(dtype).bits
    want = 32 if which.upper() in ("C", "D") else SHAPES[shape][0]
    if bits != want:
        fit = SHAPE_OF_BITS.get(bits)
        hint = f"; {bits}-bit A/B use {fit!r}" if fit and which.upper() in ("A", "B") else ""
        raise LayoutError(f"mma_sync_layout({which!r}, {shape!r}): {shape} {which} elements are "
                          f"{want}-bit, {name} is {bits}-bit{hint}")


@lru_cache(maxsize=None)
def inverse(shape: str, which: str):
    """(lane, element) -> (row, col) inside one instruction tile, as two int arrays [32, regs]."""
    import numpy as np
    op = operand(shape, which)
    r, c = index_grid(op.rows, op.cols)
    o = op.layout().apply(r, c, shape=(op.rows, op.cols))
    lane, i = per_element(o["laneid"], r), per_element(o["m"], r)
    rows = np.full((32, op.regs), -1, dtype=np.int64)
    cols = rows.copy()
    rows[lane, i], cols[lane, i] = r, c
    assert (rows >= 0).all(), "a fragment table leaves a register empty"
    rows.setflags(write=False)
    cols.setflags(write=False)
    return rows, cols
