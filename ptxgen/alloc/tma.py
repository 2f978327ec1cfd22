"""TMA loads (`cp.async.bulk.tensor`) with the tensor map held in global memory.

Why this shape: the CUtensorMap (128 bytes, built on the host with cuTensorMapEncodeTiled) is
passed as a 64-byte-aligned `pg.Tensor((128,), "uint8", align=64)` parameter, so no by-value
`.param .b8 [128]` plumbing is needed (ptx-reference section 6: "A tensor map stored in global
memory also works").  Kernel parameters are converted to the global window on entry, so the
address is converted back to a generic one (`cvta.global.u64`) as the instruction expects.
The map must not be written on the device (that would need fence.proxy.tensormap).

    tmap = pg.ptx.tma.map_address(A_map)                      # once
    pg.ptx.tma.load(As[s], tmap, (k0, m0), full[s])           # one thread; box from the map
"""
from __future__ import annotations

from ..builder.context import current, fail
from ..builder.ptx import bar_ptr
from ..builder.scalar import local_scalar
from ..builder.tensor import TensorHandle
from ..dtypes import dtype as _dtype
from ..ir import BufferPtr, BufferRegion, Const, Instr, Let, Mem, Var, as_expr
from ..primitives.tcgen05.common import AddrOperand, TensorCoordOperand
from ..target.forms import opcode

_U64 = _dtype("uint64")


def map_address(tmap):
    """The generic address of a tensor-map parameter (a uint64 scalar)."""
    if not isinstance(tmap, TensorHandle) or tmap.buffer.root.scope != "global":
        raise fail(f"tma.map_address: the tensor map must be a global tensor parameter such as "
                   f"pg.Tensor((128,), 'uint8', align=64), got {tmap!r}")
    b = tmap.buffer
    if b.nbytes() is not None and b.nbytes() < 128 or b.align < 64:
        raise fail(f"tma.map_address: '{b.name}' must hold a 128-byte CUtensorMap aligned to 64 "
                   f"bytes (pg.Tensor((128,), 'uint8', align=64)); it has {b.nbytes()} bytes, "
                   f"align {b.align}")
    ctx = current()
    g = Var(ctx.unique("tmap_global"), _U64)
    ctx.append(Let(g, BufferPtr(b, None)))
    out = local_scalar("uint64", name="tmap")
    ctx.append(Instr(opcode("cvta", "global"), (out.__ptxgen_expr__(), g), form="cvta", outs=1))
    return out


def load(dst, tmap, coords, bar, guard=None):
    """cp.async.bulk.tensor.Nd global -> shared::cluster, completing `bar`'s tx bytes.

    `coords` are element indices, innermost (contiguous) dimension first; the box size and the
    swizzle come from the tensor map, so `dst` must be laid out as that box (e.g. a 128B
    swizzled tile from pool.alloc_tcgen05_mma_AB for a 64 x rows bf16 box with SWIZZLE_128B)."""
    if isinstance(dst, TensorHandle):
        dst = dst.region()
    if not isinstance(dst, BufferRegion) or dst.buffer.root.scope not in ("shared",
                                                                           "shared.dyn"):
        raise fail(f"tma.load: the destination must be a shared-memory tile, got {dst!r}")
    coords = tuple(coords)
    if not 1 <= len(coords) <= 5:
        raise fail(f"tma.load: 1 to 5 coordinates, got {len(coords)}")
    cs = []
    for c in coords:
        e = as_expr(c)
        if not e.dtype.is_int or e.dtype.bits != 32:
            raise fail(f"tma.load: coordinates are 32-bit integers, got {e.dtype}")
        cs.append(e)
    ptr = bar_ptr(bar, "tma.load")
    dptr = BufferPtr(dst.buffer, tuple(s if not isinstance(s, int) else Const(s)
                                       for s in dst.starts))
    m = tmap.__ptxgen_expr__() if hasattr(tmap, "__ptxgen_expr__") else as_expr(tmap)
    op = opcode("cp_async_bulk_tensor", len(cs), "shared::cluster", "global",
                "mbarrier::complete_tx::bytes")
    g = as_expr(guard) if guard is not None else None
    current().append(Instr(op, (Mem(dptr), TensorCoordOperand(m, tuple(cs)), Mem(ptr)),
                           form="cp_async_bulk_tensor", guard=g))


def prefetch(tmap):
    """prefetch.tensormap: warm the descriptor cache (optional)."""
    m = tmap.__ptxgen_expr__() if hasattr(tmap, "__ptxgen_expr__") else as_expr(tmap)
    current().append(Instr(opcode("prefetch_tensormap"), (AddrOperand(m),),
                           form="prefetch_tensormap"))
