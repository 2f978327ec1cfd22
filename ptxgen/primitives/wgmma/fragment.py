"""The wgmma register fragments as layouts: which warpgroup thread and register hold (row, col).

Why: wgmma reads A and writes D in registers spread over the 128 threads of a warpgroup in a
fixed pattern.  An epilogue that indexes them by hand stores garbage silently when it guesses
wrong, so the pattern is data here: a TileLayout with a `tid_in_wg` thread axis, which
`pg.tile.*.copy` already knows how to move (registers <-> shared / global), and a check that
any register buffer handed to gemm_async has exactly that layout.

The one fact (PTX ISA 9.7.15.5.1.1 "Register Fragments"; CUTLASS CLayout_64xN, ALayout_64x8 /
64x16 / 64x32, whose D pattern the H200 confirmed in tests/gpu/test_wgmma_gpu.py): per 64-row
atom, thread t = 32 w + 4 g + q (warp w, lane 4 g + q) holds, as element i of its fragment,
with E elements per unit (E = 32 / bits of an A element; E = 2 for D, f32 or f16):

    e = i % E,  h = (i // E) % 2,  c = i // (2 E)
    row = 16 w + g + 8 h,          col = 4 E c + E q + e

A (64 x 256 bits of K per instruction) has 4 E elements per thread and step: four 32-bit
registers; D (64 x N) has N / 2.  An M of 64 * mt stacks mt atoms (registers atom-major).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:          # numpy loads with the first function that needs it
    import numpy as np

from ...dtypes import dtype as _dtype
from ...errors import LayoutError
from ...layout import S, TileLayout, index_grid, per_element, tid_in_wg
from ..copy.reg import LANE_WEIGHTS

ATOM_M = 64           # rows of one wgmma (M is 64 only)
THREADS = 128         # one warpgroup
_THREAD_AXES = LANE_WEIGHTS["warpgroup"]     # axis -> weight in the warpgroup thread id


def unit(bits: int, role: str) -> int:
    """E: elements per 32-bit unit of the pattern (2 for D, whatever its type)."""
    return 2 if role == "D" else 32 // bits


def cell(t, i, E: int, ncols: int):
    """(row, col) of fragment element i of warpgroup thread t, for an (64 * mt, ncols) tile
    (i runs atom-major: i // (ncols / 2) is the atom).  Works elementwise on numpy arrays."""
    per = ncols // 2
    atom, i = i // per, i % per
    w, lane = t // 32, t % 32
    g, q = lane // 4, lane % 4
    e, h, c = i % E, (i // E) % 2, i // (2 * E)
    return ATOM_M * atom + 16 * w + g + 8 * h, 4 * E * c + E * q + e


def owner(row, col, E: int, ncols: int):
    """(thread, fragment element) holding (row, col): the inverse of `cell`."""
    atom, r = row // ATOM_M, row % ATOM_M
    w, h, g = r // 16, (r % 16) // 8, r % 8
    c, q, e = col // (4 * E), (col % (4 * E)) // E, col % E
    return 32 * w + 4 * g + q, atom * (ncols // 2) + 2 * E * c + E * h + e


def fragment_layout(rows: int, cols: int, E: int) -> TileLayout:
    """The (rows, cols) layout of `cell`: thread axis tid_in_wg, register "m" per element."""
    if rows % ATOM_M or rows <= 0:
        raise LayoutError(f"a wgmma fragment has {ATOM_M} rows per warpgroup MMA; {rows} rows "
                          f"is not a positive multiple of {ATOM_M}")
    if cols % (4 * E) or cols <= 0:
        raise LayoutError(f"a wgmma fragment's columns come in groups of {4 * E}; {cols} is "
                          f"not a positive multiple")
    mt, nc = rows // ATOM_M, cols // (4 * E)
    rmodes = [(mt, cols // 2), (4, 32 @ tid_in_wg), (2, E), (8, 4 @ tid_in_wg)]
    cmodes = [(nc, 2 * E), (4, 1 @ tid_in_wg), (E, 1)]

    def mode(ms):
        ms = [m for m in ms if m[0] > 1]
        if len(ms) == 1:
            return ms[0]
        return tuple(e for e, _ in ms), tuple(s for _, s in ms)

    (re_, rs), (ce, cs) = mode(rmodes), mode(cmodes)
    return TileLayout(S[(re_, ce):(rs, cs)])


def accumulator_layout(M: int, N: int) -> TileLayout:
    """Layout of a wgmma accumulator D (M, N), f32 or f16: N / 2 registers per thread and
    64-row atom, the same pattern for both types (an f16 pair shares one f16x2 register)."""
    return fragment_layout(M, N, 2)


def a_fragment_layout(M: int, K: int, dtype) -> TileLayout:
    """Layout of an A operand held in registers (M, K) for the register-A form of wgmma: per
    K step (256 bits) four 32-bit registers' worth of elements per thread, steps along "m"."""
    bits = _dtype(dtype).bits
    if bits not in (8, 16, 32):
        raise LayoutError(f"wgmma A in registers is 8-, 16- or 32-bit, not {dtype}")
    return fragment_layout(M, K, unit(bits, "A"))


def register_map(region, E: int, what: str, fix: str) -> np.ndarray:
    """regmap[i] = the register ("m" offset in the region's buffer) of fragment element i:
    checks every element of a (64 * mt, ncols) register region sits in the thread `cell`
    puts it in, and that each element index names one register in every thread.
    LayoutError naming the first misplaced element and `fix` otherwise."""
    import numpy as np
    buf = region.buffer
    rows, ncols = region.shape[-2], region.shape[-1]
    if buf.layout is None:
        raise LayoutError(f"{what} {region} has no thread-axis layout; {fix}")
    if not all(isinstance(s, int) for s in region.starts):
        raise LayoutError(f"{what} {region} needs constant starts (registers are numbered at "
                          f"build time)")
    lead, (r0, c0) = region.starts[:-2], region.starts[-2:]
    i, j = index_grid(rows, ncols)
    at = tuple(np.full_like(i, s) for s in lead) + (r0 + i, c0 + j)
    o = buf.layout.apply(*at, shape=buf.shape)
    thread = sum(per_element(o.get(a, 0), i) * w for a, w in _THREAD_AXES.items())
    m = per_element(o["m"], i)
    want_t, pos = owner(i, j, E, ncols)
    bad = np.flatnonzero(thread != want_t)
    if bad.size:
        k = int(bad[0])
        raise LayoutError(f"{what} {region}: element ({int(i[k])}, {int(j[k])}) is held by "
                          f"thread {int(thread[k])}, but wgmma puts it in thread "
                          f"{int(want_t[k])} of the warpgroup (rule: PTX ISA wgmma register "
                          f"fragments); {fix}")
    regmap = np.full(rows * ncols // THREADS, -1, dtype=np.int64)
    regmap[pos] = m
    bad = np.flatnonzero(regmap[pos] != m)
    if bad.size:
        k = int(bad[0])
        raise LayoutError(f"{what} {region}: fragment element {int(pos[k])} is in different "
                          f"registers in different threads (element ({int(i[k])}, "
                          f"{int(j[k])}) is register {int(m[k])}); {fix}")
    if len(set(regmap.tolist())) != regmap.size:
        raise LayoutError(f"{what} {region}: its layout puts several elements of a thread in "
                          f"one register; {fix}")
    return regmap
