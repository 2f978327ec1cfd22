"""Front ends of the tcgen05 tile ops: `pg.tile.<scope>.mma_commit / tmem_load / tmem_store /
tmem_copy`, the TMEM half of `gemm_async` (its front end is builder/mma.py), and
`smem_descriptors`.

Each checks its operands with the lowering rules' own planners (primitives/tcgen05: the
descriptors and fragment plans come from the operands alone, so every mistake is reported
at the user's line) and adds what only tracing knows: whether a TMEM tile is live inside
its pool's columns, the kernel's one cta_group.  The result is the TileCall's record.

    pg.tile.warp.gemm_async(acc, As[s], Bs[s], accumulate=k > 0)   # acc: TMEMPool (128, N)
    pg.tile.warp.mma_commit(empty[s])     # the mbarrier arrives when those MMAs are done
"""
from __future__ import annotations

from ..errors import LayoutError, PtxgenError
from ..ir import BinOp, BufferRegion, Cast, Const
from ..primitives.tcgen05 import desc_stmts, plan_gemm, plan_tmem_copy, plan_tmem_io, smem_operand
from . import tile_ops
from .context import current
from .ptx import bar_ptr
from .resources import check_tmem_live, state
from .tensor import TensorHandle
from .tile import located, record_call, region_of

_EXAMPLE = "T[0:128, 0:64]"


def _first_col(addr, base):
    """Constant column offset of a TMEM address expression `base (+ c)`, else None."""
    if addr is base:
        return 0
    if isinstance(addr, BinOp) and addr.op == "add" and addr.a is base:
        c = addr.b.a if isinstance(addr.b, Cast) else addr.b
        return c.value if isinstance(c, Const) else None
    return None


def _check_allocation(d, ncols):
    """Live between commit and dealloc, and inside the columns its TMEMPool allocated (a tile
    declared by hand over `tmem.base + c` can claim more than the pool reserved)."""
    check_tmem_live(d.buffer)
    for pool in state().tmem_pools:
        first = _first_col(d.buffer.tmem_addr, pool._base)
        if first is None:
            continue
        col0 = d.buffer.layout.apply(*(s if isinstance(s, int) else 0 for s in d.starts),
                                     shape=d.buffer.shape).get("TCol", 0)
        end = first + col0 + ncols
        if end > pool.total_cols:
            raise PtxgenError(f"TMEM tile '{d.buffer.name}' reaches column {end} but its TMEMPool "
                              f"allocated {pool.total_cols} columns (rule: a TMEM tile must fit "
                              f"its allocation; raise total_cols or shrink the tile)")


def tmem_gemm_record(d, a, b, *, a_major=None, b_major=None, swizzle_a=None, swizzle_b=None,
                     d_dtype=None, cta_group=1, fence=True):
    """The record of gemm_async into a TMEM accumulator (tcgen05.mma, issued by one thread),
    with what only tracing knows: the tile is live in its pool, the kernel's one cta_group.
    The front end, shared with wgmma, is builder/mma.py."""
    rec = plan_gemm(d, a, b, a_major=a_major, b_major=b_major, swizzle_a=swizzle_a,
                    swizzle_b=swizzle_b, d_dtype=d_dtype, cta_group=cta_group, fence=fence)
    _check_allocation(d, rec.N)
    state().use_cta_group(cta_group, "gemm_async")
    return rec


def mma_commit(scope, bar, dispatch=None):
    """The mbarrier `bar` arrives once every tcgen05 op this thread issued so far is done.
    Issue it from the same scope as the gemm_async calls it tracks (same elected thread)."""
    try:
        ptr = bar_ptr(bar, "mma_commit")
    except PtxgenError as e:
        raise located(e) from None
    record_call("mma_commit", scope, (ptr,), {}, None, dispatch)


def _tmem_io(scope, op, regs, tmem, fence, dispatch, max_regs):
    r = region_of(regs, f"{op} registers", _EXAMPLE)
    t = region_of(tmem, f"{op} TMEM", _EXAMPLE)
    try:
        rec = plan_tmem_io(op, r, t, scope, current().func.block, fence, dispatch, max_regs)
        check_tmem_live(t.buffer)
    except (PtxgenError, LayoutError) as e:
        raise located(e) from None
    record_call(op, scope, (r, t), {}, rec, dispatch)


def tmem_load(scope, regs, tmem, fence=True, dispatch=None, max_regs=128):
    """regs <- TMEM region (tcgen05.ld + tcgen05.wait::ld); shape and .xN from regs' layout."""
    _tmem_io(scope, "tmem_load", regs, tmem, fence, dispatch, max_regs)


def tmem_store(scope, tmem, regs, fence=True, dispatch=None, max_regs=128):
    """TMEM region <- regs (tcgen05.st + tcgen05.wait::st); shape and .xN from regs' layout."""
    _tmem_io(scope, "tmem_store", regs, tmem, fence, dispatch, max_regs)


def tmem_copy(scope, tmem, src, fence=True, dispatch=None):
    """TMEM region (128 rows) <- shared-memory tile through a descriptor (tcgen05.cp), issued
    by one thread; track completion with mma_commit like an MMA."""
    t = region_of(tmem, "tmem_copy dst", _EXAMPLE)
    s = region_of(src, "tmem_copy src", _EXAMPLE)
    try:
        rec = plan_tmem_copy(t, s, fence)
        check_tmem_live(t.buffer)
    except (PtxgenError, LayoutError) as e:
        raise located(e) from None
    record_call("tmem_copy", scope, (t, s), {}, rec, dispatch)


for _name, _fn in (("mma_commit", mma_commit),
                   ("tmem_load", tmem_load), ("tmem_store", tmem_store),
                   ("tmem_copy", tmem_copy)):
    tile_ops.register(_name, _fn)


def smem_descriptors(region, *, arch, k_instr=None, role="A", major=None, swizzle=None,
                     name=None):
    """Append the descriptor Lets of an MMA shared-memory operand to the kernel and return
    (SmemOperand, [descriptor Expr per K step]).  `k_instr` defaults to 256 bits of K."""
    reg = region.region() if isinstance(region, TensorHandle) else region
    bits = reg.buffer.dtype.bits if isinstance(reg, BufferRegion) else 16
    op = smem_operand(reg, k_instr=k_instr or 256 // bits, role=role, major=major,
                      swizzle=swizzle)
    ctx = current()
    stmts, descs = desc_stmts(op, arch, ctx.unique(name or f"{role.lower()}_desc"))
    for s in stmts:
        ctx.append(s)
    return op, descs
