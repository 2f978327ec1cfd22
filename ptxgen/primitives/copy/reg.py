"""reg: registers <-> global/shared, partitioned by the register layout (vec_auto's reg path).

One side is a `local` buffer whose layout names, per element, the thread that holds it
(thread-axis strides such as `1 @ laneid`) and its register ("m" offset).  So nothing is
synthesized: the thread-axis leaves must be a one-to-one map onto the scope's threads and
the remaining leaves are this thread's registers.  Every register element is listed with
its constant memory offset; vectors are runs of V consecutive memory elements starting at a
multiple of V (the registers of a vector need not be consecutive: each is moved on its
own).  Memory is accessed in u8/u16/u32 containers of a temp buffer and the bits are moved
to the element registers with mov/bfe/bfi, never converted.  Registers need constant
indices, so the emitted statements are fully unrolled.

The helpers here (thread maps, register references, pack/unpack) are shared with the
vec_Nb and ldstmatrix variants.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ...dtypes import dtype as _dtype
from ...ir import (BOOL, Alloc, BinOp, Buffer, BufferPtr, Const, Expr, If, Instr, Let, Load, Var,
                   VecOperand)
from .common import (CONTAINERS, Leaf, Side, alignment_ok, digits_offset, element_address,
                     flat_pointer, ld_st_pair, refine, reg_elems)
from ..registry import register
from .common import cache_modifiers
from ...target.forms import opcode

WIDTHS = (128, 64, 32, 16, 8)

# thread id within the scope = sum(axis value * weight); range = how far one axis may reach
LANE_WEIGHTS = {"thread": {}, "warp": {"laneid": 1},
                "warpgroup": {"tid_in_wg": 1, "laneid": 1, "wid_in_wg": 32},
                "cta": {"tid": 1, "laneid": 1, "warpid": 32}}


def _axis_range(axis, T):
    return {"laneid": 32, "wid_in_wg": 4, "warpid": max(1, T // 32)}.get(axis, T)


def add_terms(a, b):
    """a + b, leaving out a constant 0 (no add instruction for it)."""
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    return a + b


# ---- the register side ----------------------------------------------------------------------
def split_sides(call):
    """(register side, memory side, register side is the source) or (None, reason)."""
    s, d = call.src_side, call.dst_side
    if s.space == "local" and d.space == "local":
        return None, "both sides are registers; copy registers with element assignments"
    if "local" not in (s.space, d.space):
        return None, f"neither side is registers ({s.space} -> {d.space})"
    reg, mem = (s, d) if s.space == "local" else (d, s)
    if mem.space not in ("global", "shared"):
        return None, f"{mem.buf.name} is in {mem.space} memory"
    return (reg, mem, reg is s), ""


def check_reg_side(reg: Side) -> str:
    """Why a register region cannot be addressed with constant register numbers ('' if it can)."""
    buf, root = reg.buf, reg.buf.root
    if reg.swizzle is not None:
        return f"register buffer {buf.name} has a swizzled layout"
    if buf.dtype != root.dtype:
        return f"register buffer {buf.name} views {root.name} as another dtype"
    if not isinstance(reg.base, int) or not isinstance(buf.elem_offset, int):
        return f"the register region {reg.region} must start at a constant register"
    if buf.layout is not None:
        off = buf.layout.apply(*reg.region.starts, shape=buf.shape)
        moved = {a: v for a, v in off.items() if a != "m" and v}
        if moved:
            return (f"the register region {reg.region} starts at a thread offset {moved}; a region "
                    f"must span every thread of the layout")
    return ""


def reg_ref(reg: Side, m: int):
    """The register holding element `m` ("m" offset within the region's buffer)."""
    buf = reg.buf
    flat = Buffer(buf.name, (1 << 20,), buf.dtype, "local", None, 0, buf.align,
                  buf.data if buf.data is not None else BufferPtr(buf, None))
    return Load(flat, (Const(buf.elem_offset + m),), buf.dtype)


def thread_map(items, scope, replicate=False):
    """Thread-axis leaves [(extent, {axis: stride})] -> ([(extent, thread stride)] in radix
    order, innermost first) when they map one-to-one onto the scope's threads; else (None, why).

    With `replicate`, the leaves may instead cover only some thread-id bits: every thread
    that differs from a covered one only in the other bits holds the same elements (a row
    statistic that the four lanes of a wgmma quad share).  The missing bits are returned
    as leaves (extent, thread stride, None): digits of the thread id that select no element."""
    import numpy as np
    T = scope.nthreads
    weights = LANE_WEIGHTS[scope.name]
    reach: dict = {}
    out = []
    for ext, axes in items:
        s = 0
        for a, v in axes.items():
            if a not in weights:
                want = scope.axis or "no thread axis"
                return None, (f"the register layout uses the {a} axis, which does not number the "
                              f"threads of the {scope.name} scope (use {want})")
            if v < 0:
                return None, f"the register layout has a negative {a} stride"
            reach[a] = reach.get(a, 0) + (ext - 1) * v
            s += v * weights[a]
        out.append((ext, s))
    for a, r in reach.items():
        if r >= _axis_range(a, T):
            return None, (f"the register layout's {a} reaches {r}, outside "
                          f"0..{_axis_range(a, T) - 1}")
    vals = np.zeros(1, dtype=np.int64)
    for ext, s in out:
        vals = (vals[:, None] + np.arange(ext, dtype=np.int64) * s).ravel()
    if replicate and len(vals) < T:
        return _replicated(out, vals, T, scope)
    if len(vals) != T:
        return None, (f"the register layout spreads the region over {len(vals)} thread(s) but "
                      f"the {scope.name} scope has {T}")
    if not np.array_equal(np.sort(vals), np.arange(T)):
        return None, (f"the register layout's thread axes do not map the region one-to-one onto "
                      f"threads 0..{T - 1} of the {scope.name} scope")
    out.sort(key=lambda x: x[1])
    return out, ""


def _replicated(out, vals, T, scope):
    """thread_map's result for leaves covering a subset of the thread-id bits: the covered
    leaves plus one replication leaf per run of uncovered bits (powers of two only)."""
    def pow2(x):
        return x > 0 and x & (x - 1) == 0
    used = 0
    for ext, s in out:
        bits = (ext - 1) * s
        if not (pow2(ext) and pow2(s)) or used & bits:
            return None, (f"the register layout covers {len(vals)} of the {T} threads of the "
                          f"{scope.name} scope with thread extents or strides that are not "
                          f"disjoint powers of 2; a replicated tile needs them")
        used |= bits
    if not pow2(T) or used >= T:
        return None, f"the register layout does not fit the {T} threads of the {scope.name} scope"
    reps, bit = [], 1
    while bit < T:
        if used & bit:
            bit <<= 1
            continue
        run = bit
        while run < T and not used & run:
            run <<= 1
        reps.append((run // bit, bit, None))
        bit = run
    full = sorted(list(out) + reps, key=lambda x: x[1])
    return full, ""


def merge_radix(group):
    """Merge radix digits [(extent, [stride])] (innermost first) that form one linear run,
    so the address is `t * 16` rather than a sum of one term per bit."""
    out = []
    for ext, (st,) in group:
        if out:
            pe, (ps,) = out[-1]
            if isinstance(ps, int) and isinstance(st, int) and st == ps * pe:
                out[-1] = (pe * ext, [ps])
                continue
        out.append((ext, [st]))
    return out


def common_leaves(reg: Side, mem: Side):
    """[(extent, reg m stride, {thread axes}, mem stride)] in logical order, or (None, why)."""
    common = refine([reg, mem])
    if common is None:
        return None, "the two layouts split the region into incompatible leaves"
    return [(r.extent, r.stride, r.axes, m.stride) for r, m in zip(*common) if r.extent > 1], ""


def mem_aligned(an, mem: Side, V: int, strides) -> str:
    """'' when memory vectors of V elements at offsets base + sum(digit * strides) are
    V-aligned (strides, region start, elem_offset, view chain, base alignment, swizzle)."""
    if V == 1:
        return ""
    if mem.swizzle is not None and V > mem.chunk_elems:
        return (f"{mem.buf.name}'s swizzle keeps {mem.chunk_elems} element(s) together; a "
                f"{V}-element vector would cross it")
    ok, why = alignment_ok(an, replace(mem, leaves=[Leaf(2, s) for s in strides]), V)
    return why


# ---- bit moves between containers and element registers ------------------------------------
def unpack(conts, regs, dt):
    """Instrs moving the bits of 32-bit (or narrower) containers into element registers."""
    out, b = [], dt.bits
    sx = "s32" if dt.kind == "int" else "u32"
    if b == 64:
        return [Instr(opcode("mov", "b64"), (r, VecOperand((conts[2 * j], conts[2 * j + 1]))),
                      form="mov", outs=1) for j, r in enumerate(regs)]
    if b == 32:
        return [Instr(opcode("mov", "b32"), (r, conts[j]), form="mov", outs=1)
                for j, r in enumerate(regs)]
    if b == 16 and dt.name in ("float16", "bfloat16"):     # b16 registers
        if len(regs) == 1:
            return [Instr(opcode("cvt", "u16", "u32"), (regs[0], conts[0]), form="cvt", outs=1)]
        return [Instr(opcode("mov", "b32"), (VecOperand((regs[2 * i], regs[2 * i + 1])), c),
                      form="mov", outs=1) for i, c in enumerate(conts)]
    per = 32 // b
    bfe = opcode("ternary", "bfe", sx)
    for j, r in enumerate(regs):
        out.append(Instr(bfe, (r, conts[j // per], str(b * (j % per)), str(b)), form="ternary",
                         outs=1))
    return out


def pack(conts, regs, dt):
    """Instrs gathering element registers into 32-bit (or narrower) containers."""
    b = dt.bits
    if b == 64:
        return [Instr(opcode("mov", "b64"), (VecOperand((conts[2 * j], conts[2 * j + 1])), r),
                      form="mov", outs=1) for j, r in enumerate(regs)]
    if b == 32:
        return [Instr(opcode("mov", "b32"), (conts[j], r), form="mov", outs=1)
                for j, r in enumerate(regs)]
    if b == 16 and dt.name in ("float16", "bfloat16"):
        if len(regs) == 1:
            return [Instr(opcode("cvt", "u32", "u16"), (conts[0], regs[0]), form="cvt", outs=1)]
        return [Instr(opcode("mov", "b32"), (c, VecOperand((regs[2 * i], regs[2 * i + 1]))),
                      form="mov", outs=1) for i, c in enumerate(conts)]
    per = 32 // b
    out = []
    mov, bfi = opcode("mov", "b32"), opcode("bfi", "b32")
    for i, c in enumerate(conts):
        part = regs[i * per:(i + 1) * per]
        out.append(Instr(mov, (c, part[0]), form="mov", outs=1))
        for t, r in enumerate(part[1:], 1):
            out.append(Instr(bfi, (c, r, c, str(b * t), str(b)), form="bfi", outs=1))
    return out


# ---- the plan ---------------------------------------------------------------------------------
@dataclass
class RegPlan:
    reg: Side
    mem: Side
    reg_is_src: bool
    bits: int
    V: int
    threads: list     # [(extent, [mem stride])] radix order of the scope's thread id
    sym: list         # [(extent, mem stride Expr)]: register leaves with symbolic strides
    vectors: list     # [(reg m offsets (V), sym digits, first constant mem offset)]
    replicas: int = 0  # thread-id bits of a replicated source: only their 0 stores

    def model(self, tid: int):
        """[(reg m, pre-swizzle mem offset)] moved by thread `tid` (ints only; for tests)."""
        toff = digits_offset(tid, self.threads, 0) if self.threads else 0
        out = []
        for regs, sd, m0 in self.vectors:
            so = sum(d * st for d, (_, st) in zip(sd, self.sym))
            out += [(r, self.mem.base + toff + so + m0 + k) for k, r in enumerate(regs)]
        return out


def plan_reg(call, widths=WIDTHS, one_vector=False):
    """(RegPlan, '') for the widest vectors that work, or (None, why)."""
    sides, why = split_sides(call)
    if sides is None:
        return None, why
    reg, mem, reg_is_src = sides
    why = check_reg_side(reg)
    if why:
        return None, why
    ebits = call.dtype.bits
    if ebits not in (8, 16, 32, 64):
        return None, f"{call.dtype} elements have no register container"
    leaves, why = common_leaves(reg, mem)
    if leaves is None:
        return None, why
    tleaves, rleaves = [], []
    for ext, rm, axes, ms in leaves:
        if axes:
            if rm:
                return None, (f"a register-layout leaf has both a thread stride {axes} and a "
                              f"register stride {rm}")
            tleaves.append((ext, axes, ms))
        else:
            rleaves.append((ext, rm, ms))
    tmap, why = thread_map([(e, a) for e, a, _ in tleaves], call.scope, replicate=reg_is_src)
    if tmap is None:
        return None, why
    # radix order of thread leaves, with their memory strides; a replicated tile's other
    # thread bits move nothing, and only the threads where they are 0 store
    reps = [(e, ts) for e, ts, *r in tmap if r]
    order = sorted([(tmap_stride(a, call.scope), e, ms) for e, a, ms in tleaves] +
                   [(ts, e, 0) for e, ts in reps], key=lambda x: x[0])
    threads = merge_radix([(e, [ms]) for _, e, ms in order])
    sym = [(e, ms) for e, _, ms in rleaves if isinstance(ms, Expr)]
    ints = [(e, rm, ms) for e, rm, ms in rleaves if not isinstance(ms, Expr)]
    symr = [rm for e, rm, ms in rleaves if isinstance(ms, Expr)]
    entries = []
    for sd in itertools.product(*[range(e) for e, _ in sym]):
        rs = reg.base + sum(d * r for d, r in zip(sd, symr))
        for dig in itertools.product(*[range(e) for e, _, _ in ints]):
            r = rs + sum(d * rm for d, (_, rm, _) in zip(dig, ints))
            entries.append((r, sd, sum(d * ms for d, (_, _, ms) in zip(dig, ints))))
    nreg = len({r for r, _, _ in entries})
    if nreg != len(entries):
        return None, (f"the register layout puts this thread's {len(entries)} elements in "
                      f"{nreg} register(s)")
    reasons = []
    for bits in widths:
        if bits % ebits:
            continue
        V = bits // ebits
        if one_vector and len(entries) != V:
            reasons.append(f"{bits}b: each thread moves {len(entries)} element(s), not one "
                           f"{V}-element vector")
            continue
        vecs = _group(entries, V)
        if vecs is None:
            reasons.append(f"{bits}b: this thread's memory elements do not form aligned "
                           f"runs of {V}")
            continue
        why = mem_aligned(call.an, mem, V, [st for _, (st,) in threads] + [st for _, st in sym])
        if why:
            reasons.append(f"{bits}b: {why}")
            continue
        return RegPlan(reg, mem, reg_is_src, bits, V, threads, sym, vecs,
                       sum((e - 1) * ts for e, ts in reps)), ""
    if len(widths) == 1 and reasons:
        return None, reasons[0].split(": ", 1)[1]
    return None, "; ".join(reasons) or f"no vector width fits {ebits}-bit elements"


def tmap_stride(axes, scope):
    w = LANE_WEIGHTS[scope.name]
    return sum(v * w[a] for a, v in axes.items())


def _group(entries, V):
    """Vectors [(regs, sym digits, m0)] covering `entries` in V-aligned memory runs, or None."""
    if V == 1:
        return sorted((((r,), sd, m) for r, sd, m in entries), key=lambda v: (v[1], v[2]))
    runs: dict = {}
    for r, sd, m in entries:
        slot = runs.setdefault((sd, m // V), {})
        if m % V in slot:
            return None
        slot[m % V] = r
    if any(len(s) != V for s in runs.values()):
        return None
    return sorted(((tuple(s[k] for k in range(V)), sd, q * V) for (sd, q), s in runs.items()),
                  key=lambda v: (v[1], v[2]))


# ---- emission ---------------------------------------------------------------------------------
def emit_reg_plan(call, plan: RegPlan, hint=""):
    """tid binding, one temp container buffer, then per vector: ld + unpack or pack + st."""
    mem, reg = plan.mem, plan.reg
    out = []
    toff = 0
    if plan.threads:
        T = call.scope.nthreads
        tid = Var("tid", _dtype("int32"))
        out.append(Let(tid, call.scope.tid, (0, T - 1)))
        part = digits_offset(tid, plan.threads, 0)
        if not (isinstance(part, int) and part == 0):
            toff = Var("toff", _dtype("int32"))
            out.append(Let(toff, part))
    ty, n, cdt = CONTAINERS[plan.bits]
    tmp = Buffer("copy_regs", (n,), _dtype(cdt), "local")
    out.append(Alloc(tmp))
    conts = reg_elems(tmp, 0, n)
    dt = call.dtype
    moves = []
    for regs, sd, m0 in plan.vectors:
        off = add_terms(mem.base, toff)
        for d, (_, st) in zip(sd, plan.sym):
            if d:
                off = add_terms(off, st * d)
        off = add_terms(off, m0)
        ptr = flat_pointer(mem, element_address(mem, off))
        ld, st = ld_st_pair(ptr, ptr, plan.bits, mem.space, mem.space, conts, hint)
        rr = [reg_ref(reg, r) for r in regs]
        if plan.reg_is_src:
            moves += pack(conts, rr, dt) + [st]
        else:
            moves += [ld] + unpack(conts, rr, dt)
    if plan.replicas:
        moves = [If(BinOp("eq", BinOp("and", tid, Const(plan.replicas), tid.dtype), Const(0),
                          BOOL), moves)]
    return out + moves


def reg_ok(call):
    """(ok, reason) of the reg path; vec_auto's forced reg path asks the same."""
    ok, hint = cache_modifiers(call)
    if not ok:
        return False, hint
    plan, why = call.plan(plan_reg)
    if plan is None:
        return False, why
    per = len(plan.vectors)
    return True, (f"{plan.bits}-bit vectors, {call.scope.nthreads} thread(s) x {per} "
                  f"vector(s)")


# Above vec_auto (10), so the automatic choice of a register copy names this row; vec_auto's
# reg path (taken when forced with dispatch="vec_auto") is this same plan and emission.
@register("copy", "reg", 11, when=[reg_ok])
def emit_reg(call):
    """Registers <-> memory, vectors as wide as the register layout and alignment allow."""
    return emit_reg_plan(call, call.plan(plan_reg)[0], cache_modifiers(call)[1])
