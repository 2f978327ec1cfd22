"""TMEMPool's operand helpers, as seed 002 spells them: the tile an MMA operand needs, laid out
as that instruction reads it, so the caller never writes a TLane/TCol layout for them.

    acc = tmem.alloc_tcgen05_mma_D((128, 256), "float32", M=128)   # layout D: lane = row
    a = tmem.alloc_tcgen05_mma_A((128, 64), "float16")             # A in TMEM (.ts MMAs)
    sf = tmem.alloc_sf((128, 4), "uint8")                          # scale factors
    tmem.move_base_to(0)                                           # reuse columns from 0

The accumulator's datapath layout follows (M, cta_group) as the PTX ISA tables it: layout D
(M = 128, cta_group::1, what ptxgen's tcgen05 MMAs use), and the per-CTA halves of a CTA pair,
layout A (M = 256: (128, N)) and layout B (M = 128: (64, N) in N/2 columns, the column halves
on lanes 0..63 and 64..127).  Asking for another one is an error that says so rather than a
wrong layout.

    acc = tmem.alloc_tcgen05_mma_D((64, 256), "float32", M=128, cta_group=2)   # layout B
"""
from __future__ import annotations

from ..builder.context import assigned_name
from ..builder.resources import resource_error
from ..builder.tensor import TensorHandle
from ..dtypes import dtype as _dtype
from ..errors import LayoutError
from ..primitives.tmem_layout import ACCUMULATOR_LAYOUTS, accumulator_layout


class TMEMOperands:
    """Mixin of TMEMPool (needs alloc, cta_group, total_cols, tiles, status, _cols)."""

    def alloc_tcgen05_mma_D(self, shape, dtype="float32", M=128, cta_group=None, name=None):
        """The accumulator D of an M-row tcgen05.mma: this CTA's (M / cta_group, N) 32-bit
        elements in the datapath layout of (M, cta_group) (D, A or B)."""
        what = "alloc_tcgen05_mma_D"
        cg = self.cta_group if cta_group is None else cta_group
        if cg != self.cta_group:
            raise resource_error(f"{what}: cta_group={cg} but this TMEMPool is "
                                 f"cta_group={self.cta_group}; a kernel uses one granularity")
        dt = _dtype(dtype)
        if dt.bits != 32:
            raise resource_error(f"{what}: accumulators are 32-bit (float32 or int32); got {dt}")
        shape = tuple(shape)
        rows = ACCUMULATOR_LAYOUTS.get((M, cg), (None, M // max(cg, 1)))[1]
        if len(shape) != 2 or shape[0] != rows or not isinstance(shape[1], int):
            per = " per CTA of the pair" if cg == 2 else ""
            raise resource_error(f"{what}: an M={M} cta_group={cg} accumulator is ({rows}, N)"
                                 f"{per}; got {shape}")
        try:
            _, _, layout = accumulator_layout(M, cg, shape[1])
        except LayoutError as e:
            raise resource_error(f"{what}: {e}") from None
        return self.alloc(shape, dt, layout=layout, name=name or _name(what))

    def alloc_tcgen05_mma_C(self, shape, dtype="float32", M=128, cta_group=None, name=None):
        """The accumulator input C: tcgen05.mma accumulates in place, so C is D's tile."""
        return self.alloc_tcgen05_mma_D(shape, dtype, M, cta_group, name or _name("mma_C"))

    def alloc_tcgen05_mma_A(self, shape, dtype="float16", name=None):
        """An A operand read from TMEM (gemm_async's .ts variant): (128, K), row m in lane m,
        32 / bits elements per 32-bit column in K order."""
        dt = _dtype(dtype)
        if dt.bits not in (8, 16, 32):
            raise resource_error(f"alloc_tcgen05_mma_A: an A operand is 8-, 16- or 32-bit; "
                                 f"got {dt}")
        return self.alloc(tuple(shape), dt, name=name or _name("mma_A"))

    def alloc_sf(self, shape, dtype="uint8", name=None):
        """Scale-factor storage for block-scaled MMAs: (128, n) 8-bit factors, row r in lane r,
        four to a 32-bit column (gemm_async does not issue block-scaled kinds yet)."""
        dt = _dtype(dtype)
        if dt.bits != 8:
            raise resource_error(f"alloc_sf: scale factors are 8-bit (ue8m0 / ue4m3 bits, "
                                 f"e.g. uint8); got {dt}")
        return self.alloc(tuple(shape), dt, name=name or _name("sf"))

    def move_base_to(self, col):
        """Rewind (or advance) the column cursor: later tiles reuse columns from `col` on
        (an int, or a tile of this pool: its first column)."""
        if self.status != "open":
            raise resource_error("tmem.move_base_to after tmem.commit(): the columns are fixed; "
                                 "move every allocation before commit()")
        if isinstance(col, TensorHandle):
            first = next((c for n, c, _ in self.tiles if n == col.buffer.name), None)
            if first is None:
                raise resource_error(f"tmem.move_base_to: '{col.buffer.name}' was not "
                                     f"allocated from this TMEMPool")
            col = first
        if isinstance(col, bool) or not isinstance(col, int) or not 0 <= col <= self.total_cols:
            raise resource_error(f"tmem.move_base_to({col!r}): the column must be an int in "
                                 f"[0, {self.total_cols}] (or a tile of this pool)")
        self._cols = col


def _name(default):
    return assigned_name(default)
