"""Buffer construction for the builder: make_buffer (every parameter, allocation and view
goes through it, checking scope, shape, layout size, offsets and alignment at the user's
line) and the liveness check of a handle's buffer."""
from __future__ import annotations

import math

from ..dtypes import DType, dtype as _dtype
from ..errors import PtxgenError
from ..layout import TileLayout
from ..analysis.offsets import min_offset
from ..ir import Buffer, Expr, SCOPES, as_expr
from .context import trace_state, fail


def check_align(align):
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise PtxgenError(f"align must be a power of two in bytes, got {align!r}")


def _resolve_offset(dt: DType, elem_offset, byte_offset, name):
    if byte_offset is None:
        return elem_offset
    if not (isinstance(elem_offset, int) and elem_offset == 0):
        raise fail(f"'{name}': give elem_offset or byte_offset, not both")
    bits = dt.bits
    if isinstance(byte_offset, int):
        if (byte_offset * 8) % bits:
            raise fail(f"'{name}': byte_offset={byte_offset} is not a whole number of {dt} elements")
        return byte_offset * 8 // bits
    return as_expr(byte_offset) * 8 // bits


def _check_layout(layout, shape, name):
    if layout is None:
        return None
    if isinstance(layout, str):
        if layout == "default":
            return None
        raise fail(f"'{name}': unknown layout {layout!r}")
    if not hasattr(layout, "apply"):
        layout = TileLayout(layout)
    size = layout.size()
    n = math.prod(shape) if all(isinstance(s, int) for s in shape) else None
    if n is not None and size != n:
        raise fail(f"'{name}': layout {layout!r} has {size} elements but the shape "
                   f"{tuple(shape)} has {n}")
    return layout


def make_buffer(name, shape, dt, scope, layout=None, elem_offset=0, byte_offset=None, align=16,
                data=None, param=False) -> Buffer:
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not isinstance(dt, DType):      # parameters and views pass a DType already
        dt = _dtype(dt)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        check_align(align)    # raises; the test is repeated here to save a call per buffer
    if scope not in SCOPES:
        raise fail(f"unknown scope {scope!r}; scopes are {', '.join(SCOPES)}")
    for s in shape:
        if isinstance(s, bool) or not (isinstance(s, int) and s > 0 or isinstance(s, Expr)):
            raise fail(f"'{name}': shape entries must be positive ints, got {s!r}")
    if layout is not None:
        layout = _check_layout(layout, shape, name)
    if byte_offset is not None:
        elem_offset = _resolve_offset(dt, elem_offset, byte_offset, name)
    if data is None and (layout is not None or type(elem_offset) is int and elem_offset < 0):
        _check_start(name, layout, elem_offset)
    return Buffer(name, shape, dt, scope, layout, elem_offset, align, data, param)


def _check_start(name, layout, elem_offset):
    """A buffer that owns its storage (a parameter, an allocation) addresses it from element 0:
    elem_offset plus the layout's smallest offset must not be negative (an address before
    the base); views are checked against their storage in decl_buffer."""
    lo = 0 if layout is None else min_offset(layout)
    if lo is None or type(elem_offset) is not int:
        return
    if elem_offset + lo < 0:
        what = (f"elem_offset {elem_offset} is" if layout is None or lo == 0 else
                f"its layout reaches offset {lo}" + (f" (with elem_offset {elem_offset}: "
                                                     f"{elem_offset + lo})" if elem_offset else ""))
        raise fail(f"'{name}': {what} before the start of its storage (an address below the "
                   f"base); make elem_offset at least {-lo}"
                   + (" or use non-negative strides" if lo < 0 else ""))


def check_live_buffer(b: Buffer):
    """Reject a handle whose buffer was allocated in a body that has ended (outside a trace
    the metadata is still readable)."""
    ctx = trace_state.ctx
    if ctx is not None and ctx.dead_loop_vars and b.uid in ctx.dead_loop_vars:
        ctx.check_buffer(b)
