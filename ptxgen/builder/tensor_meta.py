"""The seeds' spellings of a tensor's metadata and raw pointers (seed 000 / 002 "Buffer API"):

    B.strides, B.elem_offset, B.byte_offset          # read-only metadata
    B.access_ptr("r", offset=k)                      # element k of B's storage, for intrinsics
    pg.ptr_byte_offset(B.data, 16, ty=B.data.ty)     # a typed pointer 16 bytes further
    pg.address_of(slot)                              # the address of a tensor's first element
    strides=(s0, s1) on pg.Tensor / alloc_buffer / decl_buffer: TileLayout(S[shape:strides])

All of it is metadata or pointers: nothing here emits an instruction.  A pointer made here
is a view of the same storage, so the emitter addresses it exactly like `ptr_to`.
"""
from __future__ import annotations

import math

from ..dtypes import dtype as _dtype
from ..ir import Buffer, BufferPtr, Const, Expr, Load, as_expr
from ..layout import S, TileLayout
from .context import fail

_U8 = _dtype("uint8")
_MASKS = {"r": 1, "w": 2, "rw": 3, 1: 1, 2: 2, 3: 3}


def strided_layout(shape, strides, name):
    """The layout of `strides=` (elements per step of each dimension), or None."""
    if strides is None:
        return None
    strides = tuple(strides) if isinstance(strides, (tuple, list)) else (strides,)
    if len(strides) != len(shape):
        raise fail(f"'{name}': strides {strides} must give one stride per dimension of "
                   f"{tuple(shape)}")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in strides + tuple(shape)):
        raise fail(f"'{name}': strides= needs int strides and a constant shape (got strides "
                   f"{strides}, shape {tuple(shape)}); give a layout= for anything else")
    return TileLayout(S[tuple(shape):strides])


def check_one_layout(layout, strides, name):
    if layout is not None and strides is not None:
        raise fail(f"'{name}': give layout= or strides=, not both (strides=s is "
                   f"layout=TileLayout(S[shape:s]))")


def _dim_strides(b):
    """Per-dimension element strides of a buffer, or raise naming why it has none."""
    if b.layout is None:
        out, acc = [], 1
        for ext in reversed(b.shape):
            out.insert(0, acc)
            acc = acc * ext
        return tuple(out)
    lay = b.layout
    if not isinstance(lay, TileLayout) or set(lay.axes()) - {"m"}:
        raise fail(f"'{b.name}': its layout {lay!r} is not one memory stride per dimension "
                   f"(swizzled or thread-axis layouts have no strides); use .layout")
    try:
        sub = lay.slice(b.shape, tuple((0, e) for e in b.shape))
    except Exception as e:
        raise fail(f"'{b.name}': strides of layout {lay!r}: {e}") from None
    leaves = [(ext, dict(st).get("m", 0)) for ext, st in sub.leaves()]
    out = []
    for ext in b.shape:
        mine, n = [], 1
        while n < ext and leaves:
            e, st = leaves.pop(0)
            n *= e
            if e > 1:
                mine.append((e, st))
        while leaves and leaves[0][0] == 1:
            leaves.pop(0)
        if n != ext or not _one_run(mine):
            raise fail(f"'{b.name}': dimension {len(out)} of layout {lay!r} is not one stride "
                       f"(it nests {mine}); use .layout")
        out.append(mine[-1][1] if mine else 0)
    return tuple(out)


def _one_run(leaves):
    """Leaves of one dimension (outer first) that walk memory with a single stride."""
    for (eo, so), (ei, si) in zip(leaves, leaves[1:]):
        if so != si * ei:
            return False
    return True


class TensorMeta:
    """Mixin of TensorHandle (needs `.buffer`)."""

    __slots__ = ()

    @property
    def strides(self) -> tuple:
        """Element strides of each dimension (row-major, or the layout's when it has them)."""
        return _dim_strides(self.buffer)

    @property
    def elem_offset(self):
        """Elements from the storage pointer (`data`) to element 0 (int or expression)."""
        return self.buffer.elem_offset

    @property
    def byte_offset(self):
        """`elem_offset` in bytes."""
        b = self.buffer
        eo = b.elem_offset
        if isinstance(eo, int):
            if eo * b.dtype.bits % 8:
                raise fail(f"'{b.name}': elem_offset {eo} of {b.dtype} is not a whole byte")
            return eo * b.dtype.bits // 8
        if b.dtype.bits % 8:
            raise fail(f"'{b.name}': a symbolic elem_offset of {b.dtype} has no byte count")
        return eo * (b.dtype.bits // 8)

    def access_ptr(self, access_mask, ptr_type="handle", content_lanes=1, offset=0,
                   extent=None):
        """A pointer to element `offset` of this tensor's storage (elements from element 0, in
        storage order), to pass a region to an intrinsic; `access_mask` ("r", "w", "rw" or
        1/2/3) and `extent` (elements from there, checked against the storage) say what the
        intrinsic touches."""
        b = self.buffer
        if access_mask not in _MASKS:
            raise fail(f"'{b.name}'.access_ptr: access_mask must be 'r', 'w', 'rw' (or 1, 2, 3), "
                       f"got {access_mask!r}")
        if ptr_type != "handle" or not (isinstance(content_lanes, int) and content_lanes >= 1):
            raise fail(f"'{b.name}'.access_ptr: ptr_type must be 'handle' and content_lanes a "
                       f"positive int")
        span = b.span_elems()
        if isinstance(offset, int) and span is not None:
            end = offset + (extent if isinstance(extent, int) else 0) * content_lanes
            if offset < 0 or end > span:
                raise fail(f"'{b.name}'.access_ptr: elements [{offset}, {end}) are outside its "
                           f"{span} elements of storage")
        flat = Buffer(b.name, (span if span is not None else 1 << 40,), b.dtype, b.scope, None,
                      b.elem_offset, b.align, b.storage_ptr())
        return BufferPtr(flat, (offset if isinstance(offset, Expr) else Const(offset),))


def address_of(x) -> BufferPtr:
    """The address of a tensor's first element (or of `t[i]`), as an intrinsic operand."""
    if isinstance(x, Load):
        return BufferPtr(x.buffer, x.indices)
    if isinstance(x, BufferPtr):
        return x
    b = getattr(x, "buffer", None)        # a tensor (or a scalar: its one element)
    if isinstance(b, Buffer):
        return BufferPtr(b, tuple(Const(0) for _ in b.shape))
    raise fail(f"address_of takes a tensor or an element t[i], got {x!r}")


def ptr_byte_offset(ptr, byte_offset, ty=None) -> BufferPtr:
    """The pointer `byte_offset` bytes past `ptr` (a tensor's .data or .ptr_to([...])), typed
    as pointing to `ty` (a dtype; default: what `ptr` points to)."""
    if not isinstance(ptr, BufferPtr):
        raise fail(f"ptr_byte_offset takes a pointer (B.data or B.ptr_to([...])), got {ptr!r}")
    src = ptr.buffer
    dt = src.dtype if ty is None else _dtype(ty)
    off = byte_offset if isinstance(byte_offset, int) else as_expr(byte_offset)
    if isinstance(off, int):
        align = math.gcd(src.root.align, off) if off else src.root.align
    else:
        align = 1
    name = f"{src.name}_ptr"
    raw = Buffer(name, (1 << 40,), _U8, src.scope, None, 0, align, ptr)
    at = BufferPtr(raw, (off if isinstance(off, Expr) else Const(off),))
    if dt == _U8:
        return at
    return BufferPtr(Buffer(name, (1 << 40,), dt, src.scope, None, 0, max(align, 1), at), None)
