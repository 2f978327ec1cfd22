"""Allocations and views in the builder: alloc_buffer/alloc_shared/alloc_local, and
decl_buffer (a view over existing storage, or an allocation when it has no data=).  Each
checks its scope, shape and bounds at the user's line and returns a TensorHandle.

Seed 002 spells them with a tensor type, ty_args=[pg.Tensor(shape, dtype, scope=...)]:
alloc_tensor is alloc_buffer, decl_tensor(data, ...) is decl_buffer(..., data=data) and
decl_tmem(addr, ...) is decl_buffer(..., scope="tmem", allocated_addr=addr) (one
implementation each; the type only carries the arguments)."""
from __future__ import annotations

import math

from ..dtypes import dtype as _dtype
from ..analysis.offsets import byte_offset, min_offset
from ..ir import Alloc, Buffer, BufferPtr
from .tensor import Tensor, TensorHandle, declare_tensor, make_buffer
from .tensor_meta import check_one_layout, strided_layout
from .tmem_view import tmem_address, tmem_layout
from .context import Site, assigned_name, current, fail, user_site

_ALLOC_SCOPES = ("shared", "shared.dyn", "local", "tmem")


def alloc_buffer(shape, dtype, scope="global", layout=None, align=16, elem_offset=0,
                 byte_offset=None, name=None, strides=None):
    check_one_layout(layout, strides, name or "alloc_buffer")
    if strides is not None:
        layout = strided_layout(shape if isinstance(shape, (tuple, list)) else (shape,),
                                strides, name or "alloc_buffer")
    return alloc_at(user_site(), "buf", name, shape, dtype, scope, layout, align, elem_offset,
                    byte_offset)


def alloc_at(at: Site, default: str, name, shape, dtype, scope, layout=None, align=16,
             elem_offset=0, byte_offset=None):
    """alloc_buffer called from the user's line `at` (unnamed: named after its variable)."""
    ctx = current()
    name = ctx.unique(name or at.assigned or default)
    if scope not in _ALLOC_SCOPES:
        raise fail(f"alloc_buffer scope must be one of {', '.join(_ALLOC_SCOPES)}, got {scope!r} "
                   f"(global tensors are kernel parameters)")
    if scope == "tmem":
        raise fail("tensor memory is allocated with tcgen05.alloc: use pg.TMEMPool(...).alloc or "
                   "pg.decl_buffer(..., scope='tmem', allocated_addr=...)")
    b = make_buffer(name, shape, dtype, scope, layout, elem_offset, byte_offset, align)
    if scope == "shared.dyn":
        if ctx.arena is not None and ctx.pools:
            raise fail("only one shared.dyn allocation (the dynamic arena) is allowed per kernel, "
                       "and the SMEMPool already owns it; allocate from the pool instead "
                       "(pool.alloc(shape, dtype))")
        if ctx.arena is not None:
            raise fail(f"only one shared.dyn allocation (the dynamic arena) is allowed per kernel; "
                       f"'{ctx.arena.name}' already is it. Declare views into it with "
                       f"pg.decl_buffer(..., data={ctx.arena.name}.data, elem_offset=...) or use "
                       f"pg.SMEMPool")
        ctx.arena = b
        nbytes = b.span_elems()
        if nbytes is None:
            raise fail("the shared.dyn arena needs a constant shape")
        ctx.func.dynamic_smem_bytes = math.ceil(nbytes * b.dtype.bits / 8)
    elif b.span_elems() is None:
        raise fail(f"'{name}': {scope} allocations need a constant shape")
    ctx.append(Alloc(b), at.src)
    return TensorHandle(b)


def alloc_shared(shape, dtype, layout=None, align=16, name=None):
    return alloc_at(user_site(), "smem", name, shape, dtype, "shared", layout, align)


def alloc_local(shape, dtype, layout=None, align=16, name=None):
    return alloc_at(user_site(), "local", name, shape, dtype, "local", layout, align)


def decl_buffer(shape, dtype, data=None, elem_offset=0, layout=None, scope=None, byte_offset=None,
                align=None, allocated_addr=None, name=None, strides=None):
    """A view over existing storage (data=ptr); with data=None it allocates like alloc_buffer."""
    ctx = current()
    at = user_site()
    name = name or assigned_name("view", at)
    check_one_layout(layout, strides, name)
    if strides is not None:
        layout = strided_layout(shape if isinstance(shape, (tuple, list)) else (shape,),
                                strides, name)
    if data is None:
        if scope == "tmem":
            if allocated_addr is None:
                raise fail("a tmem view needs allocated_addr= (the TMEM address of its first column)")
            name = ctx.unique(name)
            dt = _dtype(dtype)
            addr = tmem_address(ctx, name, allocated_addr)
            b = make_buffer(name, shape, dt, "tmem", tmem_layout(name, shape, dt, layout), 0,
                            None, 16)
            b.tmem_addr = addr
            return declare_tensor(ctx, b, at)
        return alloc_at(at, "view", name, shape, dtype, scope or "local", layout, align or 16,
                        elem_offset, byte_offset)
    if isinstance(data, TensorHandle):
        data = data.data
    if not isinstance(data, BufferPtr):
        raise fail(f"decl_buffer data= must be a tensor's .data or .ptr_to([...]), got {data!r}")
    parent = data.buffer
    root = parent.root
    if scope is None:
        scope = root.scope
    if scope != root.scope and not (scope, root.scope) in (("shared", "shared.dyn"),):
        raise fail(f"view '{name}' declares scope {scope!r} over {root.scope!r} storage "
                   f"'{root.name}'")
    b = make_buffer(ctx.unique(name), shape, dtype, root.scope, layout, elem_offset, byte_offset,
                    align or root.align, data=data)
    _check_view_bounds(b, root)
    return declare_tensor(ctx, b, at)


def _check_view_bounds(b: Buffer, root: Buffer):
    """A view that reaches past its storage is an error (constant extents only)."""
    total = root.nbytes() if root.layout is None else (
        math.ceil(root.layout.cosize() * root.dtype.bits / 8) if root.numel() else None)
    span = b.span_elems()
    lo = 0 if b.layout is None else min_offset(b.layout)
    nb = b.dtype.storage_bits // 8
    if span is None or lo is None or not nb or not isinstance(b.elem_offset, int):
        return
    base = byte_offset(b, None)           # the data pointer, from the root's start
    if not isinstance(base, int):
        return
    start = base + (b.elem_offset + lo) * nb
    end = base + (b.elem_offset + span) * nb
    if start < 0 or total is not None and end > total:
        raise fail(f"view '{b.name}' covers bytes [{start}, {end}) but its storage "
                   f"'{root.name}' " + ("starts at byte 0 (an address below the base)"
                                        if start < 0 else f"has {total} bytes"))


# ---- seed 002's spellings: a tensor type instead of keyword arguments -------------------------
def _ty(what: str, ty_args) -> Tensor:
    if not (isinstance(ty_args, (list, tuple)) and len(ty_args) == 1 and
            isinstance(ty_args[0], Tensor)):
        raise fail(f"{what} takes ty_args=[pg.Tensor(shape, dtype, scope=...)] (one tensor "
                   f"type), got {ty_args!r}")
    return ty_args[0]


def alloc_tensor(ty_args=None, name=None):
    """New storage of the type `ty_args[0]`: pg.alloc_buffer with its fields."""
    t = _ty("alloc_tensor", ty_args)
    return alloc_at(user_site(), "buf", name, t.shape, t.dtype, t.scope, t.layout, t.align,
                  t.elem_offset, t.byte_offset)


def decl_tensor(data, ty_args=None, name=None):
    """A view of the type `ty_args[0]` over `data` (a tensor's .data or .ptr_to([...])):
    pg.decl_buffer(..., data=data).  A type left at scope "global" takes the storage's."""
    t = _ty("decl_tensor", ty_args)
    return decl_buffer(t.shape, t.dtype, data=data, elem_offset=t.elem_offset, layout=t.layout,
                       scope=None if t.scope == "global" else t.scope,
                       byte_offset=t.byte_offset, align=t.given_align, name=name)


def decl_tmem(addr, ty_args=None, name=None):
    """A tensor-memory view at TMEM address `addr` (or a column offset into this kernel's
    allocation) of the type `ty_args[0]`: pg.decl_buffer(..., scope="tmem",
    allocated_addr=addr)."""
    t = _ty("decl_tmem", ty_args)
    if t.scope not in ("tmem", "global"):
        raise fail(f"decl_tmem declares tensor memory; the type says scope={t.scope!r} (write "
                   f"scope='tmem')")
    return decl_buffer(t.shape, t.dtype, layout=t.layout, scope="tmem", allocated_addr=addr,
                       name=name)
