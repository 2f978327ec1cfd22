"""Swizzle inference and canonical K-major layouts for tcgen05/wgmma shared-memory operands.

Why: a descriptor's swizzle bits live in a register, so ptxas cannot check them; a tile stored
with the wrong swizzle computes garbage.  The pool therefore derives the layout from the tile
itself and refuses modes that cannot describe it.

Rule (K-major, the last dim is K and is contiguous):
  * row bytes = shape[-1] * element bits / 8.
  * "auto" picks the widest atom row A in 128/64/32 bytes with row bytes >= A and
    row bytes % A == 0; failing all three, "none" (the 16-byte interleave) if row bytes % 16 == 0.
  * An atom is 8 rows x A bytes (1024/512/256 B; the interleave's core matrix is 8 x 16 B), so
    shape[-2] must be a multiple of 8.  Atoms tile K first, then rows
    (atom_order="k"; "mn" stacks 8-row groups first, the TMA-box order CUTLASS uses).  Both are
    canonical for K-major swizzled operands: a K-major MMA step reads 32 B of K, inside one atom
    row, so only SBO (the 8-row group stride) reaches the descriptor.
  * Dims before the last two stack whole tiles (pipeline stages).
  * The byte pattern is CuTe's Swizzle<B,4,3>: o ^ ((o >> 3) & (((1<<B)-1) << 4)) with B = 3/2/1
    for 128B/64B/32B; in elements it is `Swizzle.mma(mode, bits)`.  Tiles start on the pattern's
    repeat boundary: 1024/512/256 B (16 B for none).
"""
from __future__ import annotations

from ..dtypes import dtype as _dtype
from ..errors import LayoutError
from ..layout import MMA_SWIZZLES, ComposeLayout, Swizzle, mma_canonical_grid, mma_swizzle_name

# the modes a layout models (not tcgen05's 128B_base32B), widest atom row first
MODES = tuple(sorted((n for n, m in MMA_SWIZZLES.items() if m.cute_b is not None),
                     key=lambda n: -MMA_SWIZZLES[n].row_bytes))
ELEM_BITS = (4, 8, 16, 32)


def normalize_mode(swizzle) -> str:
    if isinstance(swizzle, str) and swizzle.lower() == "auto":
        return "auto"
    mode = mma_swizzle_name(swizzle)
    if mode is None:
        raise LayoutError(f"swizzle={swizzle!r} is not an MMA swizzle; use 'auto', '128B', "
                          f"'64B', '32B' or 'none'")
    return mode


def fitting_modes(row_bytes) -> list:
    """Modes whose atom row divides a row of `row_bytes`, widest first."""
    return [m for m in MODES if row_bytes >= MMA_SWIZZLES[m].row_bytes and
            row_bytes % MMA_SWIZZLES[m].row_bytes == 0]


def infer_mode(shape, dtype) -> str:
    """The widest MMA swizzle whose atom row fits the tile's contiguous row."""
    shape, bits = _check(shape, dtype)
    fits = fitting_modes(row_bytes(shape, bits))
    if not fits:
        raise LayoutError(
            f"a {shape} {_dtype(dtype)} tile has {_fmt_bytes(row_bytes(shape, bits))}-byte rows; "
            f"MMA operand rows must be a multiple of 16 bytes (pad shape[-1] to a multiple of "
            f"{128 // bits})")
    return fits[0]


def row_bytes(shape, bits) -> float:
    return shape[-1] * bits / 8


def _fmt_bytes(b) -> str:
    return str(int(b)) if b == int(b) else f"{b:g}"


def _check(shape, dtype):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    bits = _dtype(dtype).bits
    if bits not in ELEM_BITS:
        raise LayoutError(f"{_dtype(dtype)} ({bits}-bit) is not an MMA operand type; MMA "
                          f"shared-memory operands are 4-, 8-, 16- or 32-bit")
    if len(shape) < 2 or not all(isinstance(s, int) and s > 0 for s in shape):
        raise LayoutError(f"an MMA operand tile needs a constant shape (..., rows, K) with K "
                          f"contiguous, got {shape}")
    if shape[-2] % 8:
        raise LayoutError(f"an MMA operand tile {shape} needs rows (shape[-2]) in multiples of "
                          f"8 (one swizzle atom is 8 rows); pad rows to {-(-shape[-2] // 8) * 8}")
    return shape, bits


def check_mode(shape, dtype, mode: str) -> str:
    """Validate an explicit mode; the error names the widest one that fits."""
    shape, bits = _check(shape, dtype)
    rb = row_bytes(shape, bits)
    fits = fitting_modes(rb)
    if mode in fits:
        return mode
    a = MMA_SWIZZLES[mode].row_bytes
    if fits:
        hint = f"use swizzle='{fits[0]}' (what 'auto' picks)"
    else:
        hint = f"pad shape[-1] to a multiple of {128 // bits} elements (16 bytes)"
    why = f"are not a multiple of the {mode} swizzle atom row ({a} bytes)" if rb >= a else \
        f"cannot use a {mode} swizzle atom ({a}-byte atom rows)"
    if mode == "none":
        why = "are not a multiple of 16 bytes, the core-matrix row of swizzle='none'"
    raise LayoutError(f"{_fmt_bytes(rb)}B rows {why} (tile {shape} {_dtype(dtype)}); {hint}")


def mma_layout(shape, dtype, mode: str, atom_order: str = "k") -> ComposeLayout:
    """ComposeLayout(Swizzle.mma(mode), K-major atom grid) for a (..., rows, K) tile."""
    shape, bits = _check(shape, dtype)
    mode = check_mode(shape, dtype, mode)
    if atom_order not in ("k", "mn"):
        raise LayoutError(f"atom_order={atom_order!r} must be 'k' (atoms along K first) or 'mn'")
    inner = mma_canonical_grid(shape[-2], shape[-1], bits, mode, "K", atom_order, shape[:-2])
    return ComposeLayout(Swizzle.mma(mode, bits), inner)
