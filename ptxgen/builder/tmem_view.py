"""`pg.decl_buffer(shape, dtype, scope="tmem", allocated_addr=..., layout=...)`: a tensor-memory
view, as seed 000 writes it.

`allocated_addr` is either the TMEM address value itself (an expression: `slot[0] + col`,
`tmem.base`) or, as a plain int, a column offset into this kernel's TMEM allocation: the
last `pg.ptx.tcgen05.alloc`'s slot, read here (so the view captures the address when it is
declared, after the barrier that publishes it), or the committed TMEMPool's base.  Without
`layout=` a (128, N) tile gets layout D (one row per lane, narrow elements packed in
32-bit columns), the TMEMPool default; other shapes must say their datapath layout.
"""
from __future__ import annotations

from ..dtypes import dtype as _dtype
from ..errors import LayoutError
from ..ir import BufferPtr, Cast, Const, Let, Load, Var, as_expr
from ..target import TMEM_COLS
from .context import fail
from .resources import state

_U32 = _dtype("uint32")


def tmem_layout(name, shape, dt, layout):
    """The layout a TMEM view is declared with (layout D by default)."""
    if layout is not None:
        return layout
    from ..primitives.tmem_layout import default_layout   # heavy (numpy): first TMEM view only

    try:
        return default_layout(shape, dt)[1]
    except LayoutError as e:
        raise fail(f"tmem view '{name}': {e}") from None


def tmem_address(ctx, name, allocated_addr):
    """The uint32 TMEM address of a view's first column (see the module docstring)."""
    if isinstance(allocated_addr, bool):
        raise fail(f"tmem view '{name}': allocated_addr must be a column offset (int) or a TMEM "
                   f"address value, got {allocated_addr!r}")
    if isinstance(allocated_addr, int):
        col = allocated_addr
        if not 0 <= col < TMEM_COLS:
            raise fail(f"tmem view '{name}': allocated_addr={col} is outside TMEM's columns "
                       f"0..{TMEM_COLS - 1}")
        base = state(ctx).tmem_base
        if base is None:
            raise fail(f"tmem view '{name}': allocated_addr={col} is a column offset into this "
                       f"kernel's TMEM allocation, but nothing is allocated before it: issue "
                       f"pg.ptx.tcgen05.alloc(slot, n_cols) and pg.cta_sync() (or commit a "
                       f"TMEMPool) first, or pass the address value (slot[0] + column)")
        if isinstance(base, BufferPtr):        # the by-hand slot: read it now
            b = base.buffer
            idx = base.indices if base.indices is not None else tuple(Const(0) for _ in b.shape)
            v = Var(ctx.unique(f"{name}_tmem_base"), _U32)
            value = Load(b, tuple(idx), b.dtype)
            ctx.append(Let(v, value if b.dtype == _U32 else Cast(value, _U32)))
            base = v
        return base if col == 0 else base + Const(col, _U32)
    e = as_expr(allocated_addr, _U32)
    if not e.dtype.is_int or e.dtype.bits != 32:
        raise fail(f"tmem view '{name}': the TMEM address must be a 32-bit integer, got "
                   f"{e.dtype}")
    return e if e.dtype == _U32 else Cast(e, _U32)
