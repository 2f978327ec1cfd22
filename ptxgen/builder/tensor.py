"""Tensors in the builder: parameters, views, element access (allocations: allocate.py).

A `TensorHandle` wraps an ir.Buffer and turns Python indexing into Load/Store
statements; every view (view/permute/local/decl_buffer) is metadata only.
"""
from __future__ import annotations

import math

from ..dtypes import DType, dtype as _dtype
from ..target import cache_modifiers
from ..errors import LOCATED, PtxgenError
from ..layout import S, TileLayout, row_major_strides
from ..analysis.offsets import min_offset
from ..analysis.simplify import Analyzer
from ..ir import (Buffer, BufferPtr, BufferRegion, Const, DeclBuffer, Expr, Load, SCOPES, Store,
                  Var, as_expr, not_a_value)
from .tensor_meta import TensorMeta, check_one_layout, strided_layout
from .nc_hazard import note_nc_load
from .context import (Site, trace_state, assigned_name, check_live_expr,
                      current, fail, outside_kernel, user_site)


class Tensor:
    """Annotation for a tensor parameter: pg.Tensor(shape, dtype, layout=..., ...)."""

    def __init__(self, shape, dtype, layout=None, elem_offset=0, byte_offset=None, align=16,
                 scope="global", strides=None):
        try:   # made in an annotation, outside any trace: errors say the line themselves
            self.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
            self.dtype = _dtype(dtype)
            check_one_layout(layout, strides, "pg.Tensor")
            self.layout = layout if strides is None else strided_layout(self.shape, strides,
                                                                        "pg.Tensor")
            self.elem_offset = elem_offset
            self.byte_offset = byte_offset
            self.align = align
            self.scope = scope
            _check_align(align)
            if scope != "global":
                raise PtxgenError(f"tensor parameters live in global memory; got scope={scope!r}")
            for s in self.shape:
                if isinstance(s, bool) or not (isinstance(s, int) and s > 0) and \
                        not isinstance(s, Var):
                    raise PtxgenError(f"tensor shape entries must be positive ints or "
                                      f"pg.var(...) symbols, got {s!r}")
        except PtxgenError as e:
            msg = str(e.args[0]) if e.args else ""
            if LOCATED.match(msg):
                raise
            raise type(e)(f"{user_site().src}: {msg}") from None

    def __repr__(self):
        return f"pg.Tensor({self.shape}, {self.dtype})"


def _check_align(align):
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
        _check_align(align)    # raises; the test is repeated here to save a call per buffer
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


class TensorHandle(TensorMeta):
    """What the user indexes: A[i, j], A[0:32, 0:32], A.data, A.ptr_to, A.vload, ...
    (strides / elem_offset / byte_offset / access_ptr: tensor_meta.py)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer):
        self.buffer = buffer

    # ---- metadata ------------------------------------------------------------------
    @property
    def shape(self):
        return self.buffer.shape

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def scope(self):
        return self.buffer.scope

    @property
    def layout(self):
        return self.buffer.layout

    @property
    def name(self):
        return self.buffer.name

    @property
    def data(self) -> BufferPtr:
        b = self.buffer
        ctx = trace_state.ctx
        if ctx is not None and ctx.dead_loop_vars and b.uid in ctx.dead_loop_vars:
            ctx.check_buffer(b)    # raises: allocated in a body that has ended
        return BufferPtr(b, None)

    def __repr__(self):
        return f"<tensor {self.buffer.name} {self.shape} {self.dtype} {self.scope}>"

    def __iter__(self):
        raise fail(f"tensor '{self.buffer.name}' cannot be iterated in Python; loop with "
                   f"pg.serial/pg.unroll and index it")

    def __len__(self):
        raise fail(f"len() of tensor '{self.buffer.name}': use its shape "
                   f"({self.buffer.name}.shape[0])")

    # ---- indexing -------------------------------------------------------------------
    def _indices(self, key, allow_slices=True):
        """(checked index Exprs, any slice?); every element access runs it, hence no helpers
        (an index's dimension is len(out), counted only for an error message)."""
        if not isinstance(key, tuple):
            key = (key,)
        b = self.buffer
        shape = b.shape
        if len(key) != len(shape):
            raise fail(f"shape mismatch: '{b.name}' has {b.ndim} dimension(s) "
                       f"{tuple(b.shape)} but was indexed with {len(key)}")
        ctx = trace_state.ctx
        if ctx is None:
            raise outside_kernel()
        dead = ctx.dead_loop_vars      # empty until a body ends: then the check has work
        if dead and b.uid in dead:
            ctx.check_buffer(b)
        out = []
        has_slice = False
        for k, ext in zip(key, shape):
            if not isinstance(k, Expr):    # the common case: an index expression or a loop var
                if isinstance(k, slice):
                    if not allow_slices:
                        raise fail(f"'{b.name}': a region (slice) cannot be used here")
                    has_slice = True
                    out.append(self._slice(k, ext, len(out)))
                    continue
                if isinstance(k, TensorHandle) or isinstance(k, float):
                    raise fail(f"'{b.name}': index {len(out)} must be an integer expression, "
                               f"got {k!r}")
                k = as_expr(k)
            if not k.dtype.is_int:
                raise fail(f"'{b.name}': index {len(out)} must be an integer, got {k.dtype}")
            t = type(k)
            if t is Const:
                if isinstance(ext, int) and not 0 <= k.value < ext:
                    raise fail(f"index {k.value} is out of range for dimension {len(out)} of "
                               f"'{b.name}' (extent {ext})")
            elif dead and (t is not Var or k.uid in dead):     # a live Var: no call
                check_live_expr(k, dead)
            out.append(k)
        return out, has_slice

    def _slice(self, k: slice, ext, d):
        b = self.buffer
        if k.step not in (None, 1):
            raise fail(f"'{b.name}': region slices must have step 1")
        start = 0 if k.start is None else k.start
        stop = ext if k.stop is None else k.stop
        if isinstance(start, Expr) or isinstance(stop, Expr):
            extent = Analyzer().simplify(as_expr(stop) - as_expr(start))
            if not isinstance(extent, Const):
                raise fail(f"'{b.name}': region extent along dim {d} must be a constant "
                           f"(write A[i0:i0+32] with a constant 32)")
            extent = extent.value
        else:
            extent = stop - start
            if start < 0 or (isinstance(ext, int) and stop > ext) or extent <= 0:
                raise fail(f"region {start}:{stop} is out of bounds for dimension {d} of "
                           f"'{b.name}' (extent {ext})")
        return (start if isinstance(start, int) else as_expr(start), extent)

    def __getitem__(self, key):
        idx, has_slice = self._indices(key)
        if has_slice:
            region = tuple([i if isinstance(i, tuple) else (i, 1) for i in idx])
            return BufferRegion(self.buffer, region)
        b = self.buffer
        return Load(b, tuple(idx), b.dtype)

    def __setitem__(self, key, value):
        idx, _ = self._indices(key, False)
        store(self.buffer, tuple(idx), value, user_site())

    def region(self):
        """The whole tensor as a region."""
        ctx = trace_state.ctx
        if ctx is not None and ctx.dead_loop_vars and self.buffer.uid in ctx.dead_loop_vars:
            ctx.check_buffer(self.buffer)
        return BufferRegion(self.buffer, tuple((0, e) for e in self.shape))

    def ptr_to(self, indices):
        idx, _ = self._indices(tuple(indices), False)
        return BufferPtr(self.buffer, tuple(idx))

    # ---- vector access ----------------------------------------------------------------
    def _vec_check(self, indices, vdt):
        b = self.buffer
        if vdt.scalar is not b.dtype.scalar:    # dtypes are interned
            raise fail(f"'{b.name}' holds {b.dtype}; a {vdt} access must use {b.dtype}x<N>")
        if vdt.lanes == 1:
            raise fail(f"vload/vstore need a vector dtype such as {b.dtype}x4, got {vdt}")
        idx, _ = self._indices(tuple(indices), False)
        last = idx[-1]
        ext = b.shape[-1]
        if isinstance(last, Const) and isinstance(ext, int) and last.value + vdt.lanes > ext:
            raise fail(f"{vdt} access at index {last.value} of '{b.name}' runs past the last "
                       f"dimension (extent {ext})")
        if b.layout is not None and not _last_dim_contiguous(b):
            raise fail(f"'{b.name}': vector access needs unit stride on the last dimension "
                       f"of its layout")
        return tuple(idx)

    def vload(self, indices, dtype, cache_hint=None):
        """A vector load; `cache_hint` ("nc", "L1::no_allocate", "L2::256B", or a list)
        selects cache modifiers of a global load."""
        vdt = _dtype(dtype)
        idx = self._vec_check(indices, vdt)
        cache = "" if cache_hint is None else self._cache("load", cache_hint)
        if cache.startswith(".nc"):
            note_nc_load(trace_state.ctx, self.buffer, user_site().src)
        return Load(self.buffer, idx, vdt, cache)

    def vstore(self, indices, value, cache_hint=None):
        """A vector store; `cache_hint` ("cs", "L1::no_allocate", ...) for global stores."""
        if not isinstance(value, Expr):
            value = as_expr(value)
        idx = self._vec_check(indices, value.dtype)     # checks that a trace is running
        at = user_site()
        s = Store(self.buffer, idx, value,
                  "" if cache_hint is None else self._cache("store", cache_hint), src=at.src)
        trace_state.ctx.append(s)

    def _cache(self, kind, hint) -> str:
        if hint is None:      # no hint, no modifiers
            return ""
        ok, mods = cache_modifiers(kind, hint, self.buffer.root.scope)
        if not ok:
            raise fail(f"'{self.buffer.name}': {mods}")
        return mods

    # ---- views (metadata only) --------------------------------------------------------
    def view(self, *shape, layout=None, dtype=None):
        b = self.buffer
        _live(b)
        dt = _dtype(dtype) if dtype is not None else b.dtype
        n_new = math.prod(shape)
        n_old = b.numel()
        if layout is None and n_old is not None and n_new * dt.bits != n_old * b.dtype.bits:
            raise fail(f"view of '{b.name}' as {shape} has {n_new} elements but the storage has "
                       f"{n_old}; a view must cover the same storage")
        if dt != b.dtype and (b.layout is not None or layout is not None):
            raise fail("a view that changes dtype needs row-major layouts on both sides")
        lay = layout if layout is not None else b.layout
        eo = b.elem_offset
        if dt != b.dtype:
            eo = eo * b.dtype.bits // dt.bits if isinstance(eo, int) else eo * b.dtype.bits // dt.bits
        ctx, at = current(), user_site()
        nb = make_buffer(ctx.unique(assigned_name(b.name + "_view", at)), shape, dt, b.scope,
                         layout=lay, elem_offset=eo, align=b.align, data=b.storage_ptr())
        return declare_tensor(ctx, nb, at)

    def permute(self, *dims):
        b = self.buffer
        _live(b)
        if sorted(dims) != list(range(b.ndim)):
            raise fail(f"permute of '{b.name}' needs a permutation of 0..{b.ndim - 1}, got {dims}")
        if not all(isinstance(s, int) for s in b.shape):
            raise fail("permute needs a constant shape")
        lay = b.layout
        if lay is None:
            lay = TileLayout(S[tuple(b.shape):row_major_strides(b.shape)])
        new = lay.permute_dims(*dims)
        shape = tuple(b.shape[d] for d in dims)
        ctx, at = current(), user_site()
        nb = make_buffer(ctx.unique(assigned_name(b.name + "_t", at)), shape, b.dtype, b.scope,
                         layout=new, elem_offset=b.elem_offset, align=b.align,
                         data=b.storage_ptr())
        return declare_tensor(ctx, nb, at)

    def local(self, *shape, layout=None):
        """This thread's registers of a thread-axis local layout (physical order)."""
        b = self.buffer
        _live(b)
        if b.scope != "local":
            raise fail(f"local() is for local buffers; '{b.name}' is {b.scope}")
        span = b.layout.span("m") if b.layout is not None else b.numel()
        if not shape:
            shape = (span,)
        if layout is None and math.prod(shape) != span:
            raise fail(f"local{shape} of '{b.name}' has {math.prod(shape)} elements but this "
                       f"thread holds {span}")
        ctx, at = current(), user_site()
        nb = make_buffer(ctx.unique(assigned_name(b.name + "_local", at)), shape, b.dtype,
                         "local", layout=layout, elem_offset=b.elem_offset, align=b.align,
                         data=b.storage_ptr())
        return declare_tensor(ctx, nb, at)


not_a_value(TensorHandle, lambda t: f"'{t.buffer.name}' is a tensor")


def _live(b: Buffer):
    """Reject a handle whose buffer was allocated in a body that has ended (outside a trace
    the metadata is still readable)."""
    ctx = trace_state.ctx
    if ctx is not None and ctx.dead_loop_vars and b.uid in ctx.dead_loop_vars:
        ctx.check_buffer(b)


def _last_dim_contiguous(b):
    lay = b.layout
    try:
        z = lay.apply(*([0] * b.ndim), shape=b.shape)
        one = lay.apply(*([0] * (b.ndim - 1) + [1]), shape=b.shape)
        return one["m"] - z["m"] == 1
    except Exception:
        return False


def declare_tensor(ctx, b: Buffer, at: Site) -> TensorHandle:
    ctx.append(DeclBuffer(b), at.src)
    return TensorHandle(b)


def store(buf: Buffer, idx: tuple, value, at: Site | None = None):
    """Append buf[idx] = value, checked (`at`: the user's line, if the caller has it)."""
    ctx = trace_state.ctx
    if ctx is None:
        raise outside_kernel()
    dt = buf.dtype
    v = value
    if not isinstance(v, Expr):
        if isinstance(value, float) and dt.is_int:
            raise fail(f"storing float {value!r} into {dt} buffer '{buf.name}' needs an explicit "
                       f"pg.cast(value, '{dt}')")
        if isinstance(value, TensorHandle):
            raise fail(f"cannot store a tensor into an element of '{buf.name}'; use pg.tile.*.copy")
        if dt.kind == "storage":
            raise fail(f"'{buf.name}' is {dt}, a storage-only type: store values loaded from "
                       f"another {dt} buffer")
        v = as_expr(value, dt)
    if v.dtype is not dt:
        if v.dtype.is_float and dt.is_int:
            raise fail(f"storing a {v.dtype} value into {dt} buffer '{buf.name}' needs an explicit "
                       f"pg.cast(value, '{dt}')")
        raise fail(f"storing a {v.dtype} value into {dt} buffer '{buf.name}'; use "
                   f"pg.cast(value, '{dt}')")
    dead = ctx.dead_loop_vars
    if dead:
        if buf.uid in dead:
            ctx.check_buffer(buf)
        check_live_expr(v, dead)
    ctx.append(Store(buf, idx, v, src=(at or user_site()).src))

