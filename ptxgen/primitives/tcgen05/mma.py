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

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...errors import ArchError, PtxgenError
from ...ir import Instr, Let, Mem, Var
from ...target.forms import opcode
from ..gemm import enable_d
from ..registry import predicate, register
from . import common as C
from .desc import desc_stmts, smem_operand
from .. import instr_desc

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


@dataclass(frozen=True)
class MmaRecord:
    """What gemm_async derives from its operands at trace time."""
    a: object          # SmemOperand, or TmemOperand for A in tensor memory
    b: object          # SmemOperand
    idesc: int         # the 32-bit instruction descriptor
    kind: str          # tcgen05 .kind
    fence: bool        # fence::after_thread_sync before the MMAs
    N: int
    explain_arch = "sm_100a"

    def require(self, target):
        """The op's arch gate for a TMEM accumulator: tcgen05, and the fix where it is not."""
        try:
            C.require_tcgen05(target, "mma")
        except ArchError as e:
            raise ArchError(f"{e} (gemm_async into a TMEM accumulator is tcgen05.mma: build for "
                            f"sm_100a; on sm_90a accumulate in registers, "
                            f"pg.tile.warpgroup.mma_accumulator, for wgmma)") from None


def plan_gemm(d, a, b, *, a_major=None, b_major=None, swizzle_a=None, swizzle_b=None,
              d_dtype=None, cta_group=1, fence=True) -> MmaRecord:
    """Check D (TMEM) = A @ B^T and derive its descriptors (PtxgenError with the rule)."""
    ta, tb = _dt_of(a), _dt_of(b)
    kind = instr_desc.mma_kind(ta)
    if kind is None:
        raise PtxgenError(f"gemm_async A is {ta}, not a tcgen05 operand type (float16, "
                          f"bfloat16, float32 as tf32, float8_e4m3fn, float8_e5m2)")
    k_instr = instr_desc.mma_k(kind)
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
        idesc = instr_desc.encode_instr_desc(
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
    return MmaRecord(a_op, b_op, idesc, kind, fence, N)


# ---- variants ---------------------------------------------------------------------------------
def _a_in(space):
    def pred(call):
        have = call.args[1].buffer.root.scope
        if (space == "tmem") != (have == "tmem"):
            return False, f"A is in {have} memory; this variant reads A from {space} memory"
        return True, f"A from {space} memory, B from shared memory, D in TMEM"
    return predicate(f"a_in_{space}", pred)


def _emit_mma(call, a_in_tmem):
    d, a, b, acc = call.args
    rec = call.record
    a_op, b_op, kind, idesc = rec.a, rec.b, rec.kind, rec.idesc
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
    st, first, rest = enable_d(call, acc)
    body += st
    if rec.fence:
        body.append(C.fence("after"))
    mma = opcode("tcgen05_mma", kind)
    for i in range(len(b_ops)):
        body.append(Instr(mma, (C.AddrOperand(d_addr), a_ops[i], b_ops[i], f"{idesc:#010x}",
                                first if i == 0 else rest), form="tcgen05_mma"))
    return C.guarded(call.scope, body)


@register("gemm_async", "tcgen05_ss", 20, when=[C.has_tcgen05, _a_in("shared")],
          record=MmaRecord)
def _ss(call):
    """tcgen05.mma, A and B from shared-memory descriptors."""
    return _emit_mma(call, False)


@register("gemm_async", "tcgen05_ts", 10, when=[C.has_tcgen05, _a_in("tmem")],
          record=MmaRecord)
def _ts(call):
    """tcgen05.mma, A from tensor memory, B from a shared-memory descriptor."""
    return _emit_mma(call, True)


# ---- tcgen05.commit ---------------------------------------------------------------------------
@register("mma_commit", "tcgen05_commit", 10, when=[C.has_tcgen05])
def _commit(call):
    """tcgen05.commit.cta_group::1.mbarrier::arrive::one onto a shared mbarrier."""
    (ptr,) = call.args
    return C.guarded(call.scope, [Instr(opcode("tcgen05_commit"), (Mem(ptr),),
                                        form="tcgen05_commit")])

