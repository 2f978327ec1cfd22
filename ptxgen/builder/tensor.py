"""Tensors in the builder: parameters, views, element access (allocations: allocate.py).

A `TensorHandle` wraps an ir.Buffer and turns Python indexing into Load/Store
statements; every view (view/permute/local/sub/decl_buffer) is metadata only.  Buffers are
made in buffers.py; B[..., Ramp(i, 1, n)] and B.sub[...] (seed 002) in subview.py.
"""
from __future__ import annotations

import math

from ..dtypes import dtype as _dtype
from ..target import cache_modifiers
from ..errors import LOCATED, PtxgenError
from ..layout import S, TileLayout, row_major_strides
from ..analysis.simplify import Analyzer
from ..ir import (Buffer, BufferPtr, BufferRegion, Const, DeclBuffer, Expr, Load, SCOPES, Store,
                  Var, as_expr, not_a_value)
from .tensor_meta import TensorMeta, check_one_layout, strided_layout
from .buffers import check_align, check_live_buffer, make_buffer  # noqa: F401  (re-exported)
from .subview import Ramp, SubIndexer, ramp_access, ramp_not_last
from .nc_hazard import note_nc_load
from .context import (Site, trace_state, assigned_name, check_live_expr,
                      current, fail, outside_kernel, user_site)


class Tensor:
    """A tensor type: the annotation of a tensor parameter (global memory), or the type
    argument of pg.alloc_tensor / pg.decl_tensor / pg.decl_tmem (ty_args=[pg.Tensor(...)],
    seed 002), any scope: pg.Tensor(shape, dtype, layout=..., scope=..., ...)."""

    def __init__(self, shape, dtype, layout=None, elem_offset=0, byte_offset=None, align=None,
                 scope="global", strides=None):
        try:   # made in an annotation, outside any trace: errors say the line themselves
            self.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
            self.dtype = _dtype(dtype)
            check_one_layout(layout, strides, "pg.Tensor")
            self.layout = layout if strides is None else strided_layout(self.shape, strides,
                                                                        "pg.Tensor")
            self.elem_offset = elem_offset
            self.byte_offset = byte_offset
            self.given_align = align          # None: a view keeps its storage's alignment
            self.align = 16 if align is None else align
            self.scope = scope
            check_align(self.align)
            if scope not in SCOPES:
                raise PtxgenError(f"unknown scope {scope!r}; scopes are {', '.join(SCOPES)}")
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
                if type(k) is Ramp:
                    raise ramp_not_last(b)
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
        if type(key if type(key) is not tuple else key[-1] if key else None) is Ramp:
            return self.vload(*ramp_access(self.buffer, key))
        idx, has_slice = self._indices(key)
        if has_slice:
            region = tuple([i if isinstance(i, tuple) else (i, 1) for i in idx])
            return BufferRegion(self.buffer, region)
        b = self.buffer
        if b.scope == "tmem":
            raise no_direct_tmem(b, "loaded")
        return Load(b, tuple(idx), b.dtype)

    def __setitem__(self, key, value):
        if type(key if type(key) is not tuple else key[-1] if key else None) is Ramp:
            idx, vdt = ramp_access(self.buffer, key)
            if not (isinstance(value, Expr) and value.dtype is _dtype(vdt)):
                raise fail(f"'{self.buffer.name}'[Ramp(..., {vdt.split('x')[-1]})] stores a "
                           f"{vdt} vector; got {value!r} (load one with a Ramp index)")
            return self.vstore(idx, value)
        idx, _ = self._indices(key, False)
        if self.buffer.scope == "tmem":
            raise no_direct_tmem(self.buffer, "stored")
        store(self.buffer, tuple(idx), value, user_site())

    def region(self):
        """The whole tensor as a region."""
        ctx = trace_state.ctx
        if ctx is not None and ctx.dead_loop_vars and self.buffer.uid in ctx.dead_loop_vars:
            ctx.check_buffer(self.buffer)
        return BufferRegion(self.buffer, tuple((0, e) for e in self.shape))

    def ptr_to(self, indices):
        idx, _ = self._indices(tuple(indices), False)
        if self.buffer.scope == "tmem":
            raise no_direct_tmem(self.buffer, "pointed into (ptr_to)")
        return BufferPtr(self.buffer, tuple(idx))

    # ---- vector access ----------------------------------------------------------------
    def _vec_check(self, indices, vdt):
        b = self.buffer
        if vdt.scalar is not b.dtype.scalar:    # dtypes are interned
            raise fail(f"'{b.name}' holds {b.dtype}; a {vdt} access must use {b.dtype}x<N>")
        if vdt.lanes == 1:
            raise fail(f"vload/vstore need a vector dtype such as {b.dtype}x4, got {vdt}")
        idx, _ = self._indices(tuple(indices), False)
        if b.scope == "tmem":
            raise no_direct_tmem(b, "loaded or stored (vload/vstore)")
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
    @property
    def sub(self) -> "SubIndexer":
        """B.sub[...]: a sub-tensor view (seed 002): `a:b` narrows a dim, `s::k` keeps every
        k-th element from s, an index drops the dim, `:` (or a missing trailing entry) keeps
        it.  Unlike B[a:b] (a region, for tile ops) it is a tensor, indexed from 0."""
        check_live_buffer(self.buffer)
        return SubIndexer(self)

    def view(self, *shape, layout=None, dtype=None):
        b = self.buffer
        check_live_buffer(b)
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
        check_live_buffer(b)
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
        """This thread's registers of a thread-axis local layout (physical order).  Without a
        shape: the raw span (gaps included); with layout= (the layout interprets the shape),
        the logical number of elements a thread holds, as TIRx infers it (seed 002)."""
        b = self.buffer
        check_live_buffer(b)
        if b.scope != "local":
            raise fail(f"local() is for local buffers; '{b.name}' is {b.scope}")
        span = b.layout.span("m") if b.layout is not None else b.numel()
        if not shape:
            shape = (span if layout is None else _thread_elems(b),)
        if layout is None and math.prod(shape) != span:
            raise fail(f"local{shape} of '{b.name}' has {math.prod(shape)} elements but this "
                       f"thread holds {span}")
        ctx, at = current(), user_site()
        nb = make_buffer(ctx.unique(assigned_name(b.name + "_local", at)), shape, b.dtype,
                         "local", layout=layout, elem_offset=b.elem_offset, align=b.align,
                         data=b.storage_ptr())
        return declare_tensor(ctx, nb, at)


not_a_value(TensorHandle, lambda t: f"'{t.buffer.name}' is a tensor")


def no_direct_tmem(b: Buffer, what: str) -> PtxgenError:
    """Tensor memory has no ld/st/address form a thread can use: say so at the user's line,
    not later as a buffer without storage."""
    return fail(f"'{b.name}' is in tensor memory (TMEM), which cannot be {what} directly by a "
                f"thread: TMEM is reached only through tcgen05.ld/st/cp, i.e. "
                f"pg.tile.<scope>.tmem_load(regs, {b.name}[...]), tmem_store({b.name}[...], regs) "
                f"and tmem_copy({b.name}[...], smem) (their dispatch picks the tcgen05 shape), "
                f"or raw pg.ptx['tcgen05.ld...'] instructions given its TMEM address")


def _thread_elems(b: Buffer) -> int:
    """Elements one thread holds: the extents of the layout's leaves without a thread axis."""
    if b.layout is None:
        return b.numel()
    return math.prod(e for e, st in b.layout.leaves() if all(a == "m" for a in st))


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

