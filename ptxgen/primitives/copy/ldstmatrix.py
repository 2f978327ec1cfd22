"""ldstmatrix: shared <-> registers with ldmatrix / stmatrix .m8n8.x1/.x2/.x4[.trans].b16.

The register layout must already be the matrix fragment the instruction produces, so the
match is read off the layout, bit by bit (every extent a power of two):
  * lanes: the five thread bits of stride 1..16 (lane l);
  * non-trans: lane l holds row l//4, columns 2*(l%4) and +1 of an 8x8 matrix in one 32-bit
    register: the memory-contiguous bits (strides 1, 2, 4) are (a register bit: the pair,
    lane bit 1, lane bit 2) and lane bits 4, 8, 16 pick the row;
  * .trans: lane l holds rows 2*(l%4) and +1 of column l//4: the contiguous bits are lane bits
    4, 8, 16; the row is (pair, lane bit 1, lane bit 2);
  * the remaining register bits number the matrices: 4 of them go to one .x4 (2 to .x2, 1 to
    .x1) and the rest repeat the instruction.
Lane l supplies the address of row l%8 of the instruction's matrix l//8; rows are 8
contiguous 16-bit elements, so every other shared stride, the region start and the base
must be 16-byte aligned and a swizzle chunk must hold a whole row.

8-bit elements move as byte pairs in those 16-bit halves (non-trans only: .trans moves whole
halves, so it cannot transpose bytes): the register bit of memory stride 1 is the byte
inside a half and every other stride counts in halves of 2 elements.  That is the mma.sync
m16n8k32 A fragment of a (16, 32) row-major tile, and the B fragment of a (K, N) view of an
(N, K) K-contiguous one.

Scopes: warp (laneid), and warpgroup / cta, where each warp runs the same sequence on its
own part: the layout's thread bits of stride >= 32 (tid_in_wg, wid_in_wg, warpid, tid)
only move the shared addresses.  The thread scope, global operands, non-16-bit dtypes and
stmatrix before sm_90 are declined with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...ir import Alloc, Buffer, Instr, Let, Mem, SpecialReg, Var, VecOperand
from ...layout import S, TileLayout, laneid, tid, tid_in_wg
from ...target import has_opcode
from ...target.forms import opcode
from ..registry import predicate, register
from . import reg as _reg
from .common import digits_offset, element_address, flat_pointer, reg_elems

_AXES = {"laneid": laneid, "tid_in_wg": tid_in_wg, "tid": tid}


def ldmatrix_layout(rows, cols, trans=False, warps=1, axis=None) -> TileLayout:
    """Register layout of a (rows, cols) 16-bit tile as ldmatrix leaves it (and stmatrix takes it).

    8x8 blocks are numbered column-major (block (rb, cb) is matrix cb*(rows/8) + rb, registers
    2j and 2j+1), which is the mma.m16n8k16 A fragment for a 16x16 tile and, with trans=True
    over a (K, N) row-major tile, the B fragment.  With warps > 1 the rows split into `warps`
    consecutive bands, one per warp, on `axis` (default tid_in_wg for 4 warps, else tid)."""
    if rows % (8 * warps) or cols % 8:
        raise ValueError(f"ldmatrix_layout: rows {rows} must be a multiple of 8*warps and cols "
                         f"{cols} of 8")
    ax = _AXES[axis] if isinstance(axis, str) else axis
    if ax is None:
        ax = laneid if warps == 1 else tid_in_wg if warps == 4 else tid
    rb, cb = rows // (8 * warps), cols // 8
    if not trans:
        rshape, rstride = (rb, 8), (2, 4 @ ax)
        cshape, cstride = (cb, 4, 2), (2 * rb, 1 @ ax, 1)
    else:
        rshape, rstride = (rb, 4, 2), (2, 1 @ ax, 1)
        cshape, cstride = (cb, 8), (2 * rb, 4 @ ax)
    if warps > 1:
        rshape, rstride = (warps,) + rshape, (32 @ ax,) + rstride
    return TileLayout(S[(rshape, cshape):(rstride, cstride)])


@dataclass
class LdsmPlan:
    reg: object
    mem: object
    reg_is_src: bool
    trans: bool
    x: int             # matrices per instruction
    addr_group: list   # [(2, [mem stride])] over the thread id: row bits, matrix bits, warps
    imat: list         # [(reg stride, mem stride)] matrix bits inside one instruction
    loop: list         # [(reg stride, mem stride)] matrix bits over instructions
    pair: int          # register stride of the high half of a 32-bit register
    byte: int | None = None   # 8-bit elements: register stride of the odd byte of a half

    @property
    def count(self):
        return 1 << len(self.loop)

    @property
    def form(self):
        return "stmatrix" if self.reg_is_src else "ldmatrix"

    def opcode(self):
        return opcode(self.form, self.x, self.trans)

    def instr(self, k):
        """(constant mem offset, [(reg lo, reg hi)] per matrix) of instruction k."""
        moff = 0
        for i, (_, ms) in enumerate(self.loop):
            if (k >> i) & 1:
                moff = _reg.add_terms(moff, ms)
        roff = self.reg.base + sum(((k >> i) & 1) * rs for i, (rs, _) in enumerate(self.loop))
        regs = []
        for j in range(self.x):
            lo = roff + sum(((j >> i) & 1) * rs for i, (rs, _) in enumerate(self.imat))
            halves = (lo, lo + self.pair)
            if self.byte is not None:      # bytes in register order: b0 b1 | b2 b3
                halves = (lo, lo + self.byte, lo + self.pair, lo + self.pair + self.byte)
            regs.append(halves)
        return moff, regs

    def row_offset(self, t, k):
        """Pre-swizzle shared offset thread t supplies to instruction k (ints; for tests)."""
        return self.mem.base + digits_offset(t, self.addr_group, 0) + self.instr(k)[0]


def _bits(leaves):
    """Split leaves into extent-2 bits: ('t', thread stride, mem) or ('r', reg stride, mem)."""
    out = []
    for ext, rm, axes, ms in leaves:
        if ext & (ext - 1):
            return None, f"a layout leaf has extent {ext}, not a power of two"
        if axes and rm:
            return None, f"a register-layout leaf has both thread {axes} and register strides"
        for i in range(ext.bit_length() - 1):
            f = 1 << i
            if axes:
                out.append(("t", {a: v * f for a, v in axes.items()}, ms * f))
            else:
                out.append(("r", rm * f, ms * f))
    return out, ""


def _is(x, v):
    return isinstance(x, int) and x == v


NOT_FRAGMENT = ("the register layout is not an ldmatrix fragment: lane l must hold columns "
                "2*(l%4) and 2*(l%4)+1 of row l//4 of an 8x8 matrix whose rows are 8 contiguous "
                "shared elements (or, for .trans, rows 2*(l%4) and +1 of column l//4)")


NOT_FRAGMENT8 = ("the register layout is not an 8-bit ldmatrix fragment: lane l must hold "
                 "elements 4*(l%4) .. 4*(l%4)+3 of row l//4 of an 8-row matrix whose rows are 16 "
                 "contiguous shared bytes (mma_sync_layout('A', 'm16n8k32') is one)")


def plan_ldsm(call):
    """(LdsmPlan, '') or (None, why)."""
    s, d = call.spaces()
    if "local" not in (s, d):
        return None, (f"needs a register side (ldmatrix: shared -> registers, stmatrix: "
                      f"registers -> shared); this copy is {s} -> {d}")
    sides, why = _reg.split_sides(call)
    if sides is None:
        return None, why
    reg, mem, reg_is_src = sides
    if mem.space != "shared":
        return None, (f"ldmatrix/stmatrix move between shared memory and registers; "
                      f"{mem.buf.name} is in {mem.space} memory")
    u = {16: 1, 8: 2}.get(call.dtype.bits)          # elements in one 16-bit half
    if u is None:
        return None, (f"ldmatrix/stmatrix move 16-bit elements (.b16) or 8-bit pairs; the dtype "
                      f"is {call.dtype}")
    scope = call.scope
    if scope.name == "thread" or scope.nthreads % 32:
        return None, (f"ldmatrix/stmatrix are warp-collective (.sync.aligned); the {scope} "
                      f"scope is not whole warps")
    if reg_is_src and not has_opcode("stmatrix", call.target):
        return None, f"stmatrix needs sm_90 or newer; the target is {call.target.arch}"
    if call.options.get("cache_hint"):
        return None, "cache hints do not apply to ldmatrix/stmatrix (shared memory)"
    why = _reg.check_reg_side(reg)
    if why:
        return None, why
    leaves, why = _reg.common_leaves(reg, mem)
    if leaves is None:
        return None, why
    bits, why = _bits(leaves)
    if bits is None:
        return None, why
    byte = None
    if u == 2:
        odd = [i for i, b in enumerate(bits) if b[0] == "r" and _is(b[2], 1)]
        if not odd:
            return None, NOT_FRAGMENT8
        byte = bits.pop(odd[0])[1]
    tbits = [b for b in bits if b[0] == "t"]
    tmap, why = _reg.thread_map([(2, b[1]) for b in tbits], scope)
    if tmap is None:
        return None, why
    lanes, warps = {}, []
    for _, axes, ms in tbits:
        st = _reg.tmap_stride(axes, scope)
        if st < 32:
            lanes[st] = ms
        else:
            warps.append((st, ms))
    warps.sort(key=lambda w: w[0])
    regs = sorted(((rs, ms) for kind, rs, ms in bits if kind == "r"), key=lambda b: abs(b[0]))
    contig = [i for i, (_, ms) in enumerate(regs) if _is(ms, u)]
    if contig and _is(lanes[1], 2 * u) and _is(lanes[2], 4 * u):
        trans = False
        pair = regs.pop(contig[0])
        rows = [lanes[4], lanes[8], lanes[16]]
    elif u == 1 and _is(lanes[4], 1) and _is(lanes[8], 2) and _is(lanes[16], 4) and regs:
        trans = True
        pair = regs.pop(0)
        rows = [pair[1], lanes[1], lanes[2]]
    else:
        return None, NOT_FRAGMENT if u == 1 else NOT_FRAGMENT8
    span = {0}
    for rs, _ in regs + [pair] + ([(byte, 1)] if byte is not None else []):
        span |= {v + rs for v in span}
    if len(span) != 1 << (len(regs) + 1 + (byte is not None)):
        return None, "the register layout puts several elements in one register"
    n = len(regs)
    x = 4 if n >= 2 else 2 if n == 1 else 1
    ni = x.bit_length() - 1
    imat, loop = regs[:ni], regs[ni:]
    why = _reg.mem_aligned(call.an, mem, 8 * u, rows + [ms for _, ms in regs] +
                           [ms for _, ms in warps])
    if why:
        return None, f"shared rows must be 16-byte aligned: {why}"
    group = [(2, [ms]) for ms in rows]
    group += [(2, [imat[i][1] if i < ni else 0]) for i in range(2)]
    group += [(2, [ms]) for _, ms in warps]
    return LdsmPlan(reg, mem, reg_is_src, trans, x, _reg.merge_radix(group), imat, loop,
                    pair[0], byte), ""


def _check(call):
    plan, why = call.plan(plan_ldsm)
    if plan is None:
        return False, why
    return True, f"{plan.count} x {plan.opcode()}"


@register("copy", "ldstmatrix", 15, when=[predicate("ldsm_plan", _check)])
def emit_ldstmatrix(call):
    """Warp-collective ldmatrix / stmatrix between shared memory and register fragments."""
    plan = call.plan(plan_ldsm)[0]
    mem, reg, dt = plan.mem, plan.reg, call.dtype
    scope = call.scope
    t = Var("tid", _dtype("int32"))
    out = [Let(t, SpecialReg("laneid") if scope.name == "warp" else scope.tid,
               (0, scope.nthreads - 1))]
    row = Var("row", _dtype("int32"))
    out.append(Let(row, _reg.add_terms(mem.base, digits_offset(t, plan.addr_group, 0))))
    tmp = Buffer("ldsm_regs", (plan.x,), _dtype("uint32"), "local")
    out.append(Alloc(tmp))
    conts = reg_elems(tmp, 0, plan.x)
    vec = VecOperand(tuple(conts))      # braces even for .x1: ptxas wants a vector of 1
    for k in range(plan.count):
        moff, pairs = plan.instr(k)
        ptr = flat_pointer(mem, element_address(mem, _reg.add_terms(row, moff)))
        moves = []
        for c, elems in zip(conts, pairs):
            rr = [_reg.reg_ref(reg, e) for e in elems]
            moves += _reg.pack([c], rr, dt) if plan.reg_is_src else _reg.unpack([c], rr, dt)
        if plan.reg_is_src:
            out += moves + [Instr(plan.opcode(), (Mem(ptr), vec), form=plan.form)]
        else:
            out += [Instr(plan.opcode(), (vec, Mem(ptr)), form=plan.form, outs=1)] + moves
    return out
