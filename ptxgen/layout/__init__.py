"""Layouts: pure algebra mapping logical coordinates to per-axis offsets.

`TileLayout(S[(4, 8):(1, 4)])` is shape:stride (CuTe-like, nested modes allowed, row-major
decomposition); strides may be bound to thread axes (`1 @ laneid`).  `Swizzle` and
`ComposeLayout` add the XOR swizzles of MMA/TMA shared-memory tiles; `MMA_SWIZZLES` is the
one table of their modes (atom rows, repeats, descriptor codes).  The address rule is
`addr(B[c]) = B.data + elem_offset + layout.apply(*c, shape=shape)["m"]`.
"""
from ._grid import index_grid, per_element
from ._axis import (Axis, Stride, TCol, TLane, laneid, m, tid, tid_in_wg, warpid,  # noqa: F401
                    wid_in_wg)
from ._spec import S, Spec, row_major_strides
from ._swizzle import (MMA_SWIZZLES, ComposeLayout, MmaSwizzle, Swizzle, mma_canonical_grid,
                       mma_swizzle_name, swizzle_32B, swizzle_64B, swizzle_128B)
from ._tile import TileLayout


def tile(atom, outer):
    """Blocked product: copies of `atom` laid out by `outer` (see TileLayout.tile)."""
    return atom.tile(outer)


def tile_to(atom, shape):
    """Replicate `atom` row-major over `shape` (see TileLayout.tile_to)."""
    return atom.tile_to(shape)


__all__ = ["Axis", "Stride", "S", "Spec", "TileLayout", "Swizzle", "ComposeLayout",
           "swizzle_32B", "swizzle_64B", "swizzle_128B", "tile", "tile_to", "index_grid",
           "per_element", "row_major_strides", "MMA_SWIZZLES", "MmaSwizzle", "mma_swizzle_name",
           "mma_canonical_grid",
           "m", "laneid", "warpid", "tid", "tid_in_wg", "wid_in_wg", "TLane", "TCol"]
