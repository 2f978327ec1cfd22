"""Element and byte offsets of buf[indices] from the buffer's metadata only:
    byte(B[c]) = byte(B.data) + (B.elem_offset + B.layout(c)["m"]) * sizeof(B.dtype)
Shared by the builder's checks, the primitives' alignment proofs and the emitter."""
from __future__ import annotations

from ..errors import PtxgenError
from ..layout import row_major_strides


def element_offset(buf, indices):
    """Element offset of buf[indices] relative to buf.data (IR expression or int)."""
    if buf.layout is not None:
        m = buf.layout.apply(*indices, shape=buf.shape)["m"]
    else:
        m = 0
        for idx, stride in zip(reversed(indices), reversed(row_major_strides(buf.shape))):
            m = idx * stride + m if not (isinstance(idx, int) and idx == 0) else m
    eo = buf.elem_offset
    if not (isinstance(eo, int) and eo == 0):
        m = m + eo
    return m


def root_element_offset(buf, indices):
    """Elements from the root storage to buf[indices] (None indices: buf.data), for views that
    keep the root's dtype: where an element is a register of its own (sub-byte register tiles)."""
    parent = buf.data
    base = 0 if parent is None else root_element_offset(parent.buffer, parent.indices)
    if indices is None:
        return base
    m = element_offset(buf, indices)
    return m if isinstance(base, int) and base == 0 else m + base


def byte_offset(buf, indices):
    """Bytes from the root storage to buf[indices] (None indices: buf.data)."""
    parent = buf.data
    base = 0 if parent is None else byte_offset(parent.buffer, parent.indices)
    if indices is None:
        return base
    m = element_offset(buf, indices)
    bits = buf.dtype.storage_bits
    if bits < 8:
        raise PtxgenError(f"{buf.dtype} elements are not byte addressable; view '{buf.name}' as "
                          f"uint8 to move packed pairs")
    scaled = m * (bits // 8) if not isinstance(m, int) else m * (bits // 8)
    return scaled if isinstance(base, int) and base == 0 else scaled + base


_MIN_OFFSET: dict = {}   # id(layout) -> (layout, its min_offset): layouts are immutable


def min_offset(layout) -> int | None:
    """The smallest "m" offset a layout takes over its domain (its constant offset plus every
    negative stride at its far end); None when a stride is not a constant.  A swizzle only
    permutes within aligned blocks, so a composed layout's is its inner layout's.  Cached per
    layout object (a module-level layout serves every trace)."""
    hit = _MIN_OFFSET.get(id(layout))
    if hit is not None and hit[0] is layout:
        return hit[1]
    lo = _min_offset(layout)
    if len(_MIN_OFFSET) > 4096:
        _MIN_OFFSET.clear()
    _MIN_OFFSET[id(layout)] = (layout, lo)
    return lo


def _min_offset(layout):
    inner = getattr(layout, "layout", layout)
    if not hasattr(inner, "leaves"):
        return None
    lo = inner.offset.get("m", 0)
    for ext, strides in inner.leaves():
        k = strides.get("m", 0)
        if not isinstance(k, int):
            return None
        if k < 0:
            lo += (ext - 1) * k
    return lo if isinstance(lo, int) else None
