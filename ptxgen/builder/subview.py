"""Seed 002's tensor spellings that are forms of existing accesses: B[..., Ramp(i, 1, n)]
(a vector load/store, TensorHandle.vload/vstore) and B.sub[...] (a sub-tensor view, declared
like A.view: metadata over the same storage)."""
from __future__ import annotations

from ..errors import LayoutError
from ..layout import S, TileLayout, row_major_strides
from ..ir import Buffer, DeclBuffer, as_expr
from .buffers import check_live_buffer, make_buffer
from .context import assigned_name, current, fail, user_site


class Ramp:
    """pg.Ramp(base, stride, lanes): a vector index, B[..., Ramp(i, 1, 4)] (seed 002), the
    same access as B.vload([..., i], "<dtype>x4") / B.vstore([..., i], v).  Vector accesses
    need unit stride, so stride must be 1."""

    __slots__ = ("base", "stride", "lanes")

    def __init__(self, base, stride, lanes):
        self.base, self.stride, self.lanes = base, stride, lanes

    def __repr__(self):
        return f"pg.Ramp({self.base!r}, {self.stride!r}, {self.lanes!r})"


def ramp_not_last(b: Buffer):
    return fail(f"'{b.name}': a Ramp index must be the last one (the vector runs along the "
                f"contiguous last dimension)")


def ramp_access(b: Buffer, key) -> tuple:
    """(indices, vector dtype name) of a Ramp-indexed access; the Ramp must be the last index."""
    key = key if type(key) is tuple else (key,)
    r = key[-1]
    if any(type(k) is Ramp for k in key[:-1]):
        raise ramp_not_last(b)
    if not (isinstance(r.stride, int) and r.stride == 1):
        raise fail(f"'{b.name}': Ramp stride {r.stride!r} is not supported: vector accesses "
                   f"need unit stride (Ramp(base, 1, lanes)); load strided elements one by one")
    if isinstance(r.lanes, bool) or not isinstance(r.lanes, int) or r.lanes < 2 or \
            r.lanes & (r.lanes - 1):
        raise fail(f"'{b.name}': Ramp lanes must be a power of two >= 2, got {r.lanes!r}")
    return key[:-1] + (r.base,), f"{b.dtype}x{r.lanes}"


class SubIndexer:
    """What B.sub returns; B.sub[...] declares the view (see TensorHandle.sub)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor

    def __getitem__(self, key):
        b = self.tensor.buffer
        check_live_buffer(b)
        shape, layout, off = sub_layout(b, key if type(key) is tuple else (key,))
        ctx, at = current(), user_site()
        name = ctx.unique(assigned_name(b.name + "_sub", at))
        if b.scope == "tmem":
            nb = make_buffer(name, shape, b.dtype, "tmem", layout=layout, align=b.align,
                             data=b.storage_ptr())
            nb.tmem_addr = b.tmem_addr
        else:
            eo = b.elem_offset if isinstance(off, int) and off == 0 else b.elem_offset + off
            nb = make_buffer(name, shape, b.dtype, b.scope, layout=layout, elem_offset=eo,
                             align=b.align, data=b.storage_ptr())
        ctx.append(DeclBuffer(nb), at.src)
        return type(self.tensor)(nb)


def sub_layout(b: Buffer, key: tuple) -> tuple:
    """(shape, layout, symbolic element offset) of b.sub[key]: the dims split where a step
    picks every k-th element, then layout.slice, then the dropped dims grouped away."""
    shape = b.shape
    if len(key) > len(shape):
        raise fail(f"'{b.name}'.sub: {len(key)} indices for {len(shape)} dimension(s)")
    if not all(isinstance(d, int) for d in shape):
        raise fail(f"'{b.name}'.sub needs a constant shape")
    key = key + (slice(None),) * (len(shape) - len(key))
    lay = b.layout if b.layout is not None else TileLayout(S[tuple(shape):row_major_strides(shape)])
    if not isinstance(lay, TileLayout):
        raise fail(f"'{b.name}'.sub of a swizzled layout is not supported; take a region "
                   f"({b.name}[a:b, ...]) for tile ops instead")
    split, region, kept, off = [], [], [], 0
    for k, (item, ext) in enumerate(zip(key, shape)):
        if isinstance(item, slice):
            start = 0 if item.start is None else item.start
            if item.step in (None, 1):
                stop = ext if item.stop is None else item.stop
                if not (isinstance(start, int) and isinstance(stop, int) and
                        0 <= start < stop <= ext):
                    raise fail(f"'{b.name}'.sub: dim {k} range {start}:{stop} must be constant "
                               f"and inside [0, {ext})")
                split.append(ext)
                region.append(slice(start, stop))
                kept.append(stop - start)
                continue
            step = item.step
            if not (isinstance(step, int) and step > 0 and item.stop is None and ext % step == 0
                    and isinstance(start, int) and 0 <= start < step):
                raise fail(f"'{b.name}'.sub: dim {k} stepped slice {start}::{step} needs a "
                           f"positive int step dividing the extent {ext}, no stop, and a start "
                           f"in [0, {step})")
            split += [ext // step, step]
            region += [slice(None), start]
            kept.append(ext // step)
            continue
        if isinstance(item, int):
            if not 0 <= item < ext:
                raise fail(f"'{b.name}'.sub: index {item} is out of range for dimension {k} "
                           f"(extent {ext})")
            split.append(ext)
            region.append(item)
            continue
        item = as_expr(item)
        if not item.dtype.is_int:
            raise fail(f"'{b.name}'.sub: index {k} must be an integer, got {item.dtype}")
        st = lay.group(shape).stride[k] if len(shape) > 1 else lay.group(shape).stride[0]
        st = st.as_dict() if hasattr(st, "as_dict") else None
        if b.scope == "tmem" or st is None or set(st) - {"m"}:
            raise fail(f"'{b.name}'.sub: a symbolic index needs dim {k} to be one memory "
                       f"stride (not a thread/TMEM axis or a nested mode); index it with a "
                       f"constant")
        off = item * st.get("m", 0) if isinstance(off, int) and off == 0 else \
            off + item * st.get("m", 0)
        split.append(ext)
        region.append(0)
    try:
        grouped = lay.group(tuple(split)) if tuple(split) != tuple(shape) else lay
        out = grouped.slice(tuple(split), tuple(region)).group(tuple(kept) or (1,))
    except LayoutError as e:
        raise fail(f"'{b.name}'.sub{list(key)}: {e}") from None
    return tuple(kept) or (1,), out, off
