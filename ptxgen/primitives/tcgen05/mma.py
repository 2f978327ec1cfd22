"""`gemm_async` (tcgen05.mma, D in TMEM += A @ B^T) and `mma_commit` (tcgen05.commit).

Why a primitive: one tcgen05.mma needs two 64-bit descriptors whose bits ptxas never sees, a
32-bit instruction descriptor, a TMEM address and a K loop whose start address must advance
inside a swizzled atom.  All of it is derived here from the operands' layouts at trace time
(so every mistake is reported at the user's line, with the rule), and emitted at build time
once the target is known.  One thread issues: the scope's thread 0 (`pg.tile.thread.*` when
the caller has already elected one), never a whole warp.

    pg.tile.warp.gemm_async(acc, As[s], Bs[s], accumulate=k > 0)   # acc: TMEMPool (128, N)
    pg.tile.warp.mma_commit(empty[s])     # mbarrier arrives when those MMAs are done
"""
from __future__ import annotations

from ...builder.context import current
from ...builder.tile import _active_check
from ...dtypes import dtype as _dtype
from ...errors import PtxgenError
from ...ir import BOOL, Const, Instr, Let, TileCall, Var, as_expr
from ..registry import register
from . import common as C
from .desc import desc_stmts, smem_operand
from .. import mma_desc as md

_U32 = _dtype("uint32")


class TmemOperand:
    """A from tensor memory: (M, K) 16-/8-bit elements packed 32/bits per column, lane = row."""

    def __init__(self, region, k_instr, dt):
        self.region, self.k_instr, self.dtype = region, k_instr, dt
        rows, k = region.shape[-2], region.shape[-1]
        self.rows, self.k_extent, self.major = rows, k, "K"
        per = 32 // dt.bits
        for r, c in ((1, 0), (0, 1), (0, per), (rows - 1, k - 1)):
            lane, col, slot = C.tmem_cell(region, r, c)
            if (lane, col, slot) != (r, c // per, c % per):
                raise PtxgenError(f"A in TMEM {region}: element ({r}, {c}) is at lane {lane}, "
                                  f"column {col}, slot {slot}; the A operand needs lane = row and "
                                  f"{per} element(s) per 32-bit column in K order (rule: tcgen05 "
                                  f"A-in-TMEM layout)")
        if k % k_instr:
            raise PtxgenError(f"A in TMEM {region}: K-step misalignment: K extent {k} is not a "
                              f"multiple of the instruction K = {k_instr}")
        self.col_step = k_instr // per
        self.n_steps = k // k_instr


def _dt_of(x):
    return x.buffer.dtype


def _check_d(d, M, N):
    buf = d.buffer
    if buf.scope != "tmem":
        raise PtxgenError(f"the accumulator D {d} is in {buf.root.scope} memory; tcgen05.mma "
                          f"accumulates into tensor memory (rule: D is a TMEM tile, e.g. "
                          f"TMEMPool(...).alloc((128, N), 'float32'))")
    if buf.dtype.bits != 32:
        raise PtxgenError(f"the accumulator D {d} is {buf.dtype}; allocate it 32 bits per element "
                          f"(float32; pass d_dtype='float16' for an f16 accumulator)")
    if len(d.shape) != 2 or d.shape != (M, N):
        big = len(d.shape) == 2 and (d.shape[0] < M or d.shape[1] < N)
        what = "larger than" if big else "a different shape from"
        raise PtxgenError(f"the MMA writes an {M}x{N} tile, {what} the TMEM region {d} "
                          f"{d.shape} (rule: the accumulator region must be exactly M x N; a "
                          f"TMEM tile larger than its allocation would overwrite other columns)")
    for r, c in ((0, 0), (1, 0), (0, 1), (M - 1, N - 1)):
        if C.tmem_cell(d, r, c) != (r, c, 0):
            raise PtxgenError(f"the accumulator {d} does not have layout D (row m -> lane m, "
                              f"column n -> column n): element ({r}, {c}) is at "
                              f"{C.tmem_cell(d, r, c)}")
    _check_allocation(d, N)


def _first_col(addr, base):
    """Constant column offset of a TMEM address expression `base (+ c)`, else None."""
    from ...ir import BinOp, Cast

    if addr is base:
        return 0
    if isinstance(addr, BinOp) and addr.op == "add" and addr.a is base:
        c = addr.b.a if isinstance(addr.b, Cast) else addr.b
        return c.value if isinstance(c, Const) else None
    return None


def _check_allocation(d, ncols):
    """Live between commit and dealloc, and inside the columns its TMEMPool allocated (a tile
    declared by hand over `tmem.base + c` can claim more than the pool reserved)."""
    from ...alloc import check_tmem_live
    from ...alloc._state import state

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


def gemm_async(scope, D, A, B, accumulate=True, *, a_major=None, b_major=None, swizzle_a=None,
               swizzle_b=None, d_dtype=None, cta_group=1, fence=True, dispatch=None):
    """D (TMEM) = A @ B^T (+ D if `accumulate`): tcgen05.mma issued by one thread."""
    ctx = current()
    try:
        d = C.region_of(D, "gemm_async D")
        a = C.region_of(A, "gemm_async A")
        b = C.region_of(B, "gemm_async B")
        ta, tb = _dt_of(a), _dt_of(b)
        kind = md.mma_kind(ta)
        if kind is None:
            raise PtxgenError(f"gemm_async A is {ta}, not a tcgen05 operand type (float16, "
                              f"bfloat16, float32 as tf32, float8_e4m3fn, float8_e5m2)")
        k_instr = md.mma_k(kind)
        if b.buffer.root.scope not in ("shared", "shared.dyn"):
            raise PtxgenError(f"gemm_async B {b} is in {b.buffer.root.scope} memory; B is read "
                              f"from shared memory through a descriptor")
        a_tmem = a.buffer.scope == "tmem"
        a_op = TmemOperand(a, k_instr, ta) if a_tmem else \
            smem_operand(a, k_instr=k_instr, role="A", major=a_major, swizzle=swizzle_a)
        b_op = smem_operand(b, k_instr=k_instr, role="B", major=b_major, swizzle=swizzle_b)
        if a_op.k_extent != b_op.k_extent:
            raise PtxgenError(f"gemm_async: A has K = {a_op.k_extent} but B has K = "
                              f"{b_op.k_extent}")
        M, N = a_op.rows, b_op.rows
        dd = d_dtype or d.buffer.dtype
        try:
            idesc = md.encode_instr_desc(
                kind=kind, a_dtype=ta, b_dtype=tb, d_dtype=dd, M=M, N=N, a_major=a_op.major,
                b_major=b_op.major, cta_group=cta_group, a_from_tmem=a_tmem,
                a_swizzle=None if a_tmem else a_op.swizzle, b_swizzle=b_op.swizzle)
        except PtxgenError as e:
            hint = " (M=256 needs cta_group::2, a CTA pair)" if M == 256 and cta_group == 1 \
                else ""
            raise PtxgenError(f"{e}{hint}") from None
        if cta_group != 1:
            raise PtxgenError("gemm_async emits cta_group::1 only (CTA-pair MMAs need cluster "
                              "launch support)")
        if M != 128:
            raise PtxgenError(f"gemm_async: M={M} is a legal instruction shape but its TMEM "
                              f"layout (PTX layout E/F) is not modelled; use M = 128")
        _check_d(d, M, N)
        from ...alloc._state import state
        state().use_cta_group(cta_group, "gemm_async")
        acc = _accumulate(accumulate)
    except PtxgenError as e:
        raise C.located(e) from None
    opts = {"_a": a_op, "_b": b_op, "_idesc": idesc, "_kind": kind, "_fence": fence,
            "_all_active": _active_check(ctx, scope)}     # the scope's thread 0 must be there
    if dispatch is not None:
        opts["dispatch"] = dispatch
    ctx.append(TileCall("gemm_async", (d, a, b, acc), scope, opts))


def _accumulate(acc):
    if isinstance(acc, bool):
        return Const(acc, BOOL)
    e = as_expr(acc)
    if e.dtype != BOOL:
        raise PtxgenError(f"accumulate must be a bool or a comparison, got {e.dtype}")
    return e


def _predicates(call, acc):
    """(statements, first step's enable-input-d, later steps') as predicate registers -- the
    form CUTLASS uses (`setp` then `p`); a literal 0/1 assembles but is not relied on."""
    from ...ir import Alloc, Buffer, Load

    e = call.an.simplify(acc) if call.an is not None else acc
    pb = Buffer("enable_d", (2,), BOOL, "local")
    t, f = Load(pb, (Const(0),), BOOL), Load(pb, (Const(1),), BOOL)
    st = [Alloc(pb), Instr("setp.eq.b32", (t, "0", "0"), outs=1)]
    if isinstance(e, Const) and not e.value:
        st.append(Instr("setp.ne.b32", (f, "0", "0"), outs=1))
        return st, f, t
    return st, (t if isinstance(e, Const) else e), t


# ---- variants ---------------------------------------------------------------------------------
def _a_in(space):
    def pred(call):
        have = call.args[1].buffer.root.scope
        if (space == "tmem") != (have == "tmem"):
            return False, f"A is in {have} memory; this variant reads A from {space} memory"
        return True, f"A from {space} memory, B from shared memory, D in TMEM"
    return pred


def _emit_mma(call, a_in_tmem):
    d, a, b, acc = call.args
    a_op, b_op = call.opt("_a"), call.opt("_b")
    kind, idesc = call.opt("_kind"), call.opt("_idesc")
    arch = call.target.arch
    body = []
    d_addr = Var("d_tmem", _U32)
    body.append(Let(d_addr, C.tmem_addr(d)))
    if a_in_tmem:
        a_addr = Var("a_tmem", _U32)
        body.append(Let(a_addr, C.tmem_addr(a)))
        a_ops = [C.AddrOperand(a_addr, i * a_op.col_step) for i in range(a_op.n_steps)]
    else:
        st, a_ops = desc_stmts(a_op, arch, "a_desc")
        body += st
    st, b_ops = desc_stmts(b_op, arch, "b_desc")
    body += st
    st, first, rest = _predicates(call, acc)
    body += st
    if call.opt("_fence", True):
        body.append(C.fence("after"))
    opcode = f"tcgen05.mma.cta_group::1.kind::{kind}"
    for i in range(len(b_ops)):
        body.append(Instr(opcode, (C.AddrOperand(d_addr), a_ops[i], b_ops[i], f"{idesc:#010x}",
                                   first if i == 0 else rest)))
    return C.guarded(call.scope, body)


@register("gemm_async", "tcgen05_ss", 20, when=[C.has_tcgen05, _a_in("shared")])
def _ss(call):
    """tcgen05.mma, A and B from shared-memory descriptors."""
    return _emit_mma(call, False)


@register("gemm_async", "tcgen05_ts", 10, when=[C.has_tcgen05, _a_in("tmem")])
def _ts(call):
    """tcgen05.mma, A from tensor memory, B from a shared-memory descriptor."""
    return _emit_mma(call, True)


# ---- tcgen05.commit ---------------------------------------------------------------------------
def mma_commit(scope, bar, dispatch=None):
    """The mbarrier `bar` arrives once every tcgen05 op this thread issued so far is done.
    Issue it from the same scope as the gemm_async calls it tracks (same elected thread)."""
    from ...alloc.mbarrier import bar_ptr

    ctx = current()
    try:
        ptr = bar_ptr(bar, "mma_commit")
    except PtxgenError as e:
        raise C.located(e) from None
    opts = {"_all_active": _active_check(ctx, scope)}
    if dispatch is not None:
        opts["dispatch"] = dispatch
    ctx.append(TileCall("mma_commit", (ptr,), scope, opts))


@register("mma_commit", "tcgen05_commit", 10, when=[C.has_tcgen05])
def _commit(call):
    """tcgen05.commit.cta_group::1.mbarrier::arrive::one onto a shared mbarrier."""
    from ...ir import Mem

    (ptr,) = call.args
    return C.guarded(call.scope, [Instr(
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64", (Mem(ptr),))])

