"""`gemm_async` into a register accumulator: wgmma.mma_async (sm_90a), and `gemm_wait`.

Why a primitive: one wgmma names N/2 accumulator registers in the fragment order of the
hardware, two 64-bit descriptors whose bits ptxas never sees (or four A registers packed in
that order), a K loop whose descriptor start address advances inside the swizzle atom, and
the fence / commit protocol around it.  All of it is derived at trace time from the
operands' layouts (every mistake is reported at the user's line) and emitted once the
target is known.  All 128 threads of the warpgroup issue it.

    acc = pg.tile.warpgroup.mma_accumulator((64, 256), "float32")
    pg.tile.warpgroup.gemm_async(acc, As, Bs, accumulate=k > 0)   # fence, K/16 wgmma, commit
    pg.tile.warpgroup.gemm_wait(0)                                 # wgmma.wait_group 0

D = A @ B^T: A is (M, K) (M = 64 per atom; 128 stacks two), B is (N, K); a (K, N) buffer is
passed as its `.permute(1, 0)` view (MN-major, 16-bit types only).  An f16 accumulator is
packed into f16x2 registers around the MMAs, so its gemm_async also waits for its own group.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...errors import ArchError, LayoutError, PtxgenError
from ...ir import Alloc, Buffer, BufferRegion, Const, Instr, VecOperand
from ...target import arch_specific, check_opcode, has_opcode
from ...target.table import gate_for
from ...target.forms import opcode
from .. import instr_desc as idesc
from .. import mma_desc as md
from ..copy.common import reg_elems
from ..copy.reg import pack, unpack
from ..gemm import enable_d
from ..registry import predicate, register
from ..tcgen05.common import reg_ref
from ..tcgen05.desc import desc_stmts, smem_operand
from . import fragment as F

_U32 = _dtype("uint32")
_ACC_FIX = "allocate it with pg.tile.warpgroup.mma_accumulator((M, N), dtype)"
_A_FIX = "allocate it with pg.tile.warpgroup.mma_a_fragment((M, K), dtype)"


def _ab_name(dt) -> str:
    """wgmma reads float32 operands as tf32."""
    return "tf32" if dt.name == "float32" else dt.name


@dataclass(frozen=True)
class WgmmaRecord:
    """What gemm_async derives from its operands for a register accumulator."""
    a_atoms: tuple        # SmemOperand per 64-row atom of A, or () for A in registers
    a_regs: tuple         # A in registers: regmap (fragment element -> register), else ()
    b: object             # SmemOperand of B
    d_regs: tuple         # accumulator regmap
    shape: str            # "m64n128k16"
    types: str            # "f32.bf16.bf16"
    tnsp: tuple           # (imm-trans-a, imm-trans-b) operands; () for tf32 / fp8
    m_atoms: int
    n_steps: int
    N: int
    d_dtype: object
    a_dtype: object
    explain_arch = "sm_90a"

    @property
    def a_in_regs(self) -> bool:
        return not self.a_atoms

    def require(self, target):
        """The op's arch gate for a register accumulator: wgmma, and the fix where it is not."""
        try:
            check_opcode("wgmma.mma_async", target)
        except ArchError as e:
            same_gpu = arch_specific(target)
            alt = ("on sm_100a accumulate in tensor memory (TMEMPool(...).alloc((128, N), "
                   "'float32')) for tcgen05.mma" if has_opcode("tcgen05.mma", same_gpu) else
                   "sm_90 without the 'a' suffix has no wgmma"
                   if has_opcode("wgmma.mma_async", same_gpu) else
                   "on other targets use mma.sync (pg.tile.warp.gemm)")
            raise ArchError(f"{e} (gemm_async into a register accumulator is wgmma, which "
                            f"exists only on sm_90a: build for sm_90a; {alt})") from None


def _sub_rows(region, r, n):
    """Rows r..r+n of a (.., rows, K) region."""
    reg = list(region.region)
    s, _ = reg[-2]
    reg[-2] = (s + r, n)
    return BufferRegion(region.buffer, tuple(reg))


def _layout_fix(region) -> str:
    """The canonical K-major layout a descriptor takes for this tile (every wgmma dtype reads
    K-major), widest swizzle first: what the LayoutError of a mismatching tile suggests."""
    buf = region.buffer
    R, K = buf.shape[-2], buf.shape[-1]
    for sw in ("128B", "64B", "32B", "none"):
        try:
            md.canonical_plan("K", sw, buf.dtype.bits, R, K)
        except PtxgenError:
            continue
        return (f"fix: lay '{buf.name}' out as canonical_layout({R}, {K}, '{buf.dtype}', "
                f"major='K', swizzle='{sw}') (ptxgen.primitives.tcgen05), e.g. with "
                f"pool.alloc_tcgen05_mma_AB for 128B")
    return f"fix: give '{buf.name}' rows and K that whole 8-row x 16-byte core matrices tile"


def _operand(region, role, **kw):
    try:
        return smem_operand(region, role=role, **kw)
    except LayoutError as e:
        raise LayoutError(f"gemm_async (wgmma): {e}; {_layout_fix(region)}") from None


def plan_wgmma(d, a, b, *, a_major=None, b_major=None, swizzle_a=None,
               swizzle_b=None) -> WgmmaRecord:
    """Check D (registers) = A @ B^T and derive its descriptors and register maps
    (PtxgenError / LayoutError with the rule and the fix)."""
    ta, tb, dd = a.buffer.dtype, b.buffer.dtype, d.buffer.dtype
    if len(d.shape) != 2 or len(a.shape) < 2 or len(b.shape) < 2:
        raise PtxgenError(f"gemm_async: D {d}, A {a} and B {b} must be 2-D tiles (D: (M, N), "
                          f"A: (M, K), B: (N, K))")
    N = b.shape[-2]
    try:   # dtype pairing and N first: the likeliest mistakes, the clearest rules
        idesc.wgmma_shape(N=N, dtype=_ab_name(ta), b_dtype=_ab_name(tb), d_dtype=dd)
    except PtxgenError as e:
        raise PtxgenError(f"gemm_async (wgmma): {e}") from None
    if b.buffer.root.scope not in ("shared", "shared.dyn"):
        raise PtxgenError(f"gemm_async B {b} is in {b.buffer.root.scope} memory; wgmma reads "
                          f"B from shared memory through a descriptor")
    k_instr = md.K_BITS // ta.bits
    b_op = _operand(b, "B", k_instr=k_instr, major=b_major, swizzle=swizzle_b)
    a_local = a.buffer.root.scope == "local"
    if a_local and a_major not in (None, "K"):
        raise PtxgenError("gemm_async: A from registers is K-major (rule: the register-A "
                          "wgmma has no imm-trans-a)")
    if a_local:
        M, K = a.shape[-2], a.shape[-1]
    else:
        a_op = _operand(a, "A", k_instr=k_instr, major=a_major, swizzle=swizzle_a)
        M, K = a_op.rows, a_op.k_extent
    if K != b_op.k_extent:
        raise PtxgenError(f"gemm_async: A has K = {K} but B has K = {b_op.k_extent}")
    if M % F.ATOM_M:
        raise PtxgenError(f"gemm_async: A has {M} rows; wgmma multiplies {F.ATOM_M}-row "
                          f"tiles, so M must be a multiple of {F.ATOM_M}")
    if d.shape != (M, N):
        raise PtxgenError(f"gemm_async: the accumulator {d} is {d.shape[0]}x{d.shape[1]} but "
                          f"A x B^T is {M}x{N} (A {M}x{K}, B {N}x{K}); allocate it with "
                          f"pg.tile.warpgroup.mma_accumulator(({M}, {N}), '{dd}')")
    a_maj = "K" if a_local else a_op.major
    try:
        shape, types = idesc.wgmma_shape(N=N, dtype=_ab_name(ta), b_dtype=_ab_name(tb),
                                      d_dtype=dd, a_major=a_maj, b_major=b_op.major,
                                      a_in_regs=a_local)
    except PtxgenError as e:     # an MN-major tile of a type wgmma cannot transpose
        mn = b if b_op.major == "MN" else a
        raise PtxgenError(f"gemm_async (wgmma): {e}; {_layout_fix(mn)}") from None
    try:
        d_map = F.register_map(d, F.unit(32, "D"), "the accumulator", _ACC_FIX)
        if a_local:
            if K % k_instr:
                raise LayoutError(f"the A fragment {a}: K = {K} is not a multiple of the "
                                  f"instruction K = {k_instr}")
            a_map = F.register_map(a, F.unit(ta.bits, "A"), "the A fragment", _A_FIX)
    except LayoutError as e:
        raise PtxgenError(f"gemm_async: {e}") from None
    mt = M // F.ATOM_M
    atoms = () if a_local else tuple(
        smem_operand(_sub_rows(a, F.ATOM_M * i, F.ATOM_M), k_instr=k_instr, role="A",
                     major=a_op.major, swizzle=a_op.swizzle) for i in range(mt))
    bf16 = ta.bits == 16
    tnsp = () if not bf16 else ((int(b_op.major == "MN"),) if a_local else
                                (int(a_maj == "MN"), int(b_op.major == "MN")))
    return WgmmaRecord(atoms, tuple(a_map.tolist()) if a_local else (), b_op,
                       tuple(d_map.tolist()), shape, types, tnsp, mt, b_op.n_steps, N, dd, ta)


# ---- emission ---------------------------------------------------------------------------------
def has_wgmma(call) -> tuple[bool, str]:
    t = call.target
    archs = gate_for("wgmma").archs
    if t is None or t.arch in archs:
        return True, ""
    return False, f"the target {t.arch} has no wgmma (needs {', '.join(sorted(archs))})"


def _a_in(space):
    def pred(call):
        regs = call.record.a_in_regs
        if regs != (space == "registers"):
            return False, (f"A is in {'registers' if regs else 'shared memory'}; this variant "
                           f"reads A from {space}")
        return True, f"{call.record.shape}.{call.record.types}, A from {space}, B from shared"
    return predicate("a_in_" + space.replace(" ", "_"), pred)


def _regs(buf, regmap, lo, n):
    return [reg_ref(buf, regmap[lo + j]) for j in range(n)]


def _containers(name, n):
    tmp = Buffer(name, (n,), _U32, "local")
    return Alloc(tmp), reg_elems(tmp, 0, n)


def _atom_descs(call, rec, body):
    """[atom][step] A descriptor Exprs: one base register, per atom the step offsets."""
    st, _ = desc_stmts(rec.a_atoms[0], call.target.arch, "a_desc")
    body += st
    base = st[-1].var
    return [[base + Const(off >> 4, base.dtype) if off else base for off in op.step_offsets]
            for op in rec.a_atoms]


def emit_wgmma(call):
    d, a, b, acc = call.args
    rec = call.record
    body = []
    st, b_descs = desc_stmts(rec.b, call.target.arch, "b_desc")
    body += st
    per_d = rec.N // 2
    packed = rec.d_dtype.bits == 16
    if packed:   # f16 D: pairs packed into f16x2 registers for the MMAs
        alloc, dregs = _containers("wgmma_d", rec.m_atoms * per_d // 2)
        body.append(alloc)
        for k, c in enumerate(dregs):
            body += pack([c], _regs(d.buffer, rec.d_regs, 2 * k, 2), rec.d_dtype)
        d_ops = [dregs[i * per_d // 2:(i + 1) * per_d // 2] for i in range(rec.m_atoms)]
    else:
        d_ops = [_regs(d.buffer, rec.d_regs, i * per_d, per_d) for i in range(rec.m_atoms)]
    if rec.a_in_regs:   # 4 registers per atom and K step, elements packed in fragment order
        E = F.unit(rec.a_dtype.bits, "A")
        alloc, aregs = _containers("wgmma_a", len(rec.a_regs) // E)
        body.append(alloc)
        for k, c in enumerate(aregs):
            body += pack([c], _regs(a.buffer, rec.a_regs, E * k, E), rec.a_dtype)
        per_a = 4 * rec.n_steps
        a_ops = [[VecOperand(tuple(aregs[i * per_a + 4 * s:i * per_a + 4 * s + 4]))
                  for s in range(rec.n_steps)] for i in range(rec.m_atoms)]
    else:
        a_ops = _atom_descs(call, rec, body)
    st, first, rest = enable_d(call, acc)
    body += st
    body.append(Instr(opcode("wgmma_fence"), (), form="wgmma_fence"))
    mma = opcode("wgmma_mma", rec.shape, rec.types)
    tail = ("1", "1") + tuple(str(t) for t in rec.tnsp)
    for s in range(rec.n_steps):
        for i in range(rec.m_atoms):
            body.append(Instr(mma, (VecOperand(tuple(d_ops[i])), a_ops[i][s], b_descs[s],
                                    first if s == 0 else rest) + tail, form="wgmma_mma",
                              outs=1))
    body.append(Instr(opcode("wgmma_commit"), (), form="wgmma_commit"))
    if packed:
        body.append(wait_instr(0))
        for k, c in enumerate(dregs):
            body += unpack([c], _regs(d.buffer, rec.d_regs, 2 * k, 2), rec.d_dtype)
    return body


def wait_instr(pending: int) -> Instr:
    return Instr(opcode("wgmma_wait"), (str(pending),), form="wgmma_wait")


@register("gemm_async", "wgmma_ss", 30, when=[has_wgmma, _a_in("shared memory")],
          record=WgmmaRecord)
def _ss(call):
    """wgmma.mma_async, A and B from shared-memory descriptors, D in registers."""
    return emit_wgmma(call)


@register("gemm_async", "wgmma_rs", 25, when=[has_wgmma, _a_in("registers")],
          record=WgmmaRecord)
def _rs(call):
    """wgmma.mma_async, A from registers (the A fragment), B from a descriptor."""
    return emit_wgmma(call)


# ---- gemm_wait ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class WaitRecord:
    pending: int


def require_wait(call):
    try:
        check_opcode("wgmma.wait_group", call.target)
    except ArchError as e:
        raise ArchError(f"{e} (gemm_wait waits for wgmma groups, which exist only on sm_90a; "
                        f"a tcgen05 gemm_async completes through pg.tile.*.mma_commit(bar) and "
                        f"an mbarrier wait)") from None


@register("gemm_wait", "wgmma_wait", 10, when=[has_wgmma])
def _wait(call):
    """wgmma.wait_group N: at most N committed gemm_async groups still in flight."""
    return [wait_instr(call.record.pending)]

