"""Which thread handles which elements of an elementwise op, and how each operand moves.

Every region operand is a copy `Side` (copy/common.py); all sides are refined to one list
of leaves, so one logical element index addresses each of them.  Two partitions:

* `reg`: some operand is registers.  Its layout's thread axes say which thread holds which
  element (copy's reg path: `thread_map`, `check_reg_side`); every thread handles exactly
  the elements it holds, unrolled (registers need constant numbers).  Each memory operand
  is moved in the widest aligned runs its own offsets allow (`mem_aligned`), so a float32
  source and a bfloat16 destination each get their own vectors.  A memory operand shorter
  than the register tile along its last dimension ("ragged", e.g. a row of 1000 elements
  in a 1024-element tile) is guarded per vector: its length must be a multiple of the
  vector, so each vector is wholly in or out.
* `mem`: every operand is global/shared.  As copy's vec_auto: the driving side's leaves
  (first global operand, the destination preferred) sorted by stride, cut into
  [outer, threads, vec]; one serial loop over `outer`.  When the vectors do not divide
  among the threads, vector i = round * T + tid is guarded by i < n / V.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...ir import BinOp, BOOL, BufferRegion, Const, Expr, Let, Var
from ..copy.common import (Leaf, Side, analyze_side, base_alignment_ok, digits_offset, divisible,
                           element_address, is_int, refine, split_leaves)
from ..copy.reg import check_reg_side, mem_aligned, thread_map, tmap_stride
from ..copy.vec_auto import coalesce, stride_key
from .rows import broadcast_side, coordinate_side

WIDTHS = (128, 64, 32, 16, 8)
INT32 = _dtype("int32")


@dataclass
class Opnd:
    """A region operand: its arg position (0: dst), side, and ragged extension."""
    pos: int
    side: Side
    reg: bool
    ragged: tuple | None = None        # (region dim, true extent) when shorter than the tile

    @property
    def dtype(self):
        return self.side.buf.dtype

    @property
    def ebits(self) -> int:
        """Bits of one element in memory (bool moves as a byte)."""
        return max(8, self.dtype.bits) if self.dtype is BOOL else self.dtype.bits


@dataclass
class Access:
    """One memory operand's moves: vectors of V elements [(element ids, offset, guard)]."""
    V: int
    vectors: list


@dataclass
class ElemPlan:
    kind: str                 # "reg" | "mem"
    nelem: int                # elements each thread handles per round
    prologue: list            # Let statements (thread id, thread offsets)
    regs: dict                # register operand pos -> [register m offset per element]
    mem: dict                 # memory operand pos -> Access
    rounds: int = 1           # mem: serial rounds
    loop_var: Var | None = None
    linear: tuple | None = None   # mem: (i, its value, n / V or None: no guard) by digits of i
    coords: dict | None = None    # reg: coordinate Var uid -> its value per element

    def vector_bits(self, opnds) -> str:
        ws = sorted({a.V * next(o.ebits for o in opnds if o.pos == p)
                     for p, a in self.mem.items()}, reverse=True)
        return "/".join(f"{w}" for w in ws) + "-bit" if ws else "register"


def operands(call) -> list:
    """The region operands of a tile-math call as sides (ragged ones extended)."""
    out = []
    for pos, a in enumerate(call.args):
        if not isinstance(a, BufferRegion):
            continue
        rag = call.record.ragged.get(pos)
        region = a
        if rag is not None:
            dim, full = rag
            region = BufferRegion(a.buffer, tuple((s, full if d == dim else e)
                                                  for d, (s, e) in enumerate(a.region)))
        side = analyze_side(region)
        if pos in call.record.broadcast:
            side = broadcast_side(side, *call.record.broadcast[pos])
        out.append(Opnd(pos, side, side.space == "local",
                        None if rag is None else (rag[0], a.region[rag[0]][1])))
    return out


def _logical_side(opnds):
    """A side whose stride gives an element's coordinate along the ragged operands' last
    dimension (0 on every other dimension), so guards are digits like any offset."""
    o = next(o for o in opnds if o.ragged)
    dim = o.ragged[0]
    ext = [e for _, e in o.side.region.region]
    leaves = [Leaf(e, 1 if d == dim else 0) for d, e in enumerate(ext)]
    return Side(o.side.region, o.side.buf, "logical", leaves, 0)


def _add(a, b):
    if is_int(a) and a == 0:
        return b
    if is_int(b) and b == 0:
        return a
    return a + b


# ---- the register-driven partition -----------------------------------------------------------
def plan_reg(call, opnds, vectors=True):
    """(ElemPlan, '') when some operand is registers, else (None, why)."""
    regs = [o for o in opnds if o.reg]
    mems = [o for o in opnds if not o.reg]
    for o in regs:
        why = check_reg_side(o.side)
        if why:
            return None, why
    for o in mems:
        if o.side.space not in ("global", "shared"):
            return None, f"{o.side.buf.name} is in {o.side.space} memory"
    ragged = any(o.ragged for o in opnds)
    sides = [o.side for o in opnds] + ([_logical_side(opnds)] if ragged else [])
    coords = call.record.coords
    if coords and (ragged or not opnds[0].reg):
        return None, ("element coordinates index a register destination tile (not a ragged or "
                      "memory one)")
    tile_ext = [e for _, e in opnds[0].side.region.region]
    C = len(sides)                             # coordinate d's side: C + d
    sides += [coordinate_side(opnds[0].side, d, tile_ext) for d in range(len(tile_ext))
              ] if coords else []
    common = refine(sides)
    if common is None:
        return None, "the operands' layouts split the region into incompatible leaves"
    L = len(sides) - 1 if ragged else None     # index of the logical side
    ri = [opnds.index(o) for o in regs]
    tleaves, rleaves = [], []
    for k in range(len(common[0])):
        col = [common[s][k] for s in range(len(sides))]
        if col[0].extent == 1:
            continue
        axes = [col[i].axes for i in ri]
        if any(axes):
            held = next(a for a in axes if a)
            # an operand with no thread axis and no register stride here is the same value
            # in each of these threads: a broadcast row, or a replicated row statistic
            if any(a != held and (a or col[i].stride) for a, i in zip(axes, ri)):
                names = ", ".join(regs[j].side.buf.name for j in range(len(regs)))
                return None, (f"the register operands ({names}) put the same elements in "
                              f"different threads; give them one thread layout")
            if regs[0].pos == 0 and not axes[0]:
                return None, (f"the destination {regs[0].side.buf.name} holds one value where a "
                              f"source holds one per thread; reduce across threads with "
                              f"pg.tile.{call.scope.name}.sum/max/min(dst, src, axis=...)")
            if any(col[i].stride for i in ri if col[i].axes):
                return None, (f"a register-layout leaf has both a thread stride {held} and a "
                              f"register stride")
            tleaves.append((col[0].extent, held, [c.stride for c in col]))
        else:
            rleaves.append((col[0].extent, [c.stride for c in col]))
    tmap, why = thread_map([(e, a) for e, a, _ in tleaves], call.scope, replicate=not mems)
    if tmap is None:
        return None, why
    zero = [0] * len(sides)                 # replicated thread bits select no element
    threads = sorted([(tmap_stride(a, call.scope), e, st) for e, a, st in tleaves] +
                     [(ts, e, zero) for e, ts, *rep in tmap if rep], key=lambda t: t[0])
    threads = [(e, st) for _, e, st in threads]         # radix order, innermost first
    prologue = []
    tid = None
    if threads:
        tid = Var("tid", INT32)
        prologue.append(Let(tid, call.scope.tid, (0, call.scope.nthreads - 1)))
    # this thread's elements, in logical order
    elems = list(itertools.product(*[range(e) for e, _ in rleaves]))
    plan_regs = {}
    for o in regs:
        s = opnds.index(o)
        m = [o.side.base + sum(d * st[s] for d, (_, st) in zip(dg, rleaves)) for dg in elems]
        if len(set(m)) != len(m) and o.pos not in call.record.broadcast:
            return None, (f"the layout of {o.side.buf.name} puts this thread's {len(m)} elements "
                          f"in {len(set(m))} register(s)")
        plan_regs[o.pos] = m
    cvals = {}
    for uid, d, start in coords:
        part = digits_offset(tid, [(e, [st[C + d]]) for e, st in threads], 0) if threads else 0
        cvals[uid] = [_add(_add(part, start), sum(g * st[C + d] for g, (_, st) in
                                                   zip(dg, rleaves))) for dg in elems]
        cvals[uid] = [Const(v) if is_int(v) else v for v in cvals[uid]]
    accesses = {}
    for o in mems:
        s = opnds.index(o)
        widths = WIDTHS if vectors and o.dtype is not BOOL else (max(8, o.ebits),)
        acc, why = _reg_access(call, o, s, L, threads, rleaves, elems, tid, prologue, widths)
        if acc is None:
            return None, why
        accesses[o.pos] = acc
    return ElemPlan("reg", len(elems), prologue, plan_regs, accesses, coords=cvals), ""


def _reg_access(call, o, s, L, threads, rleaves, elems, tid, prologue, widths):
    """The widest vectors of memory operand `o` (side index s) in the register partition."""
    side = o.side
    toff = 0
    if threads:
        part = digits_offset(tid, [(e, [st[s]]) for e, st in threads], 0)
        if not (is_int(part) and part == 0):
            toff = Var(f"toff{o.pos}", INT32)
            prologue.append(Let(toff, part))
    lpart = 0
    if o.ragged and threads:
        lpart = digits_offset(tid, [(e, [st[L]]) for e, st in threads], 0)
    entries = []
    for k, dg in enumerate(elems):
        sym, cst = [], 0
        for d, (_, st) in zip(dg, rleaves):
            if isinstance(st[s], Expr):
                sym.append(d)
            else:
                cst += d * st[s]
        lc = sum(d * st[L] for d, (_, st) in zip(dg, rleaves)) if o.ragged else 0
        entries.append((k, tuple(sym), cst, lc))
    symst = [st[s] for _, st in rleaves if isinstance(st[s], Expr)]
    reasons = []
    for bits in widths:
        if bits % o.ebits:
            continue
        V = bits // o.ebits
        groups = _runs(entries, V)
        if groups is None:
            reasons.append(f"{bits}b: this thread's elements of {side.buf.name} do not form "
                           f"aligned runs of {V}")
            continue
        why = mem_aligned(call.an, side, V, [st[s] for _, st in threads] + symst)
        if why:
            reasons.append(f"{bits}b: {why}")
            continue
        if o.ragged:
            why = _ragged_ok(o, V, groups, threads, L, [e[3] for e in entries])
            if why:
                reasons.append(f"{bits}b: {why}")
                continue
        vectors = []
        for ids, sd, c0 in groups:
            off = _add(_add(side.base, toff), c0)
            for d, st in zip(sd, symst):
                if d:
                    off = _add(off, st * d)
            guard = None
            if o.ragged:
                lc0 = entries[ids[0]][3]
                guard = BinOp("lt", _add(lpart, lc0) if not is_int(lpart) else
                              Const(lpart + lc0), Const(o.ragged[1]), BOOL)
            vectors.append((ids, element_address(side, off), guard))
        return Access(V, vectors), ""
    byte = next((r for r in reasons if r.startswith("8b: ")), "")
    if o.ebits < 8 and "aligned runs" in byte:
        return None, (f"{side.buf.name} holds {o.dtype}, two elements a byte, and a thread must "
                      f"hold both elements of each byte it moves; give the register layout pairs "
                      f"of consecutive elements per thread (an even count along the contiguous "
                      f"dimension, from an even element)")
    return None, "; ".join(reasons) or f"{o.dtype} elements cannot be moved"


def _runs(entries, V):
    """[(element ids in memory order, sym digits, first const offset)] covering `entries`
    in V-aligned runs of consecutive constant offsets, or None."""
    if V == 1:
        return [((k,), sym, c) for k, sym, c, _ in entries]
    runs: dict = {}
    for k, sym, c, _ in entries:
        slot = runs.setdefault((sym, c // V), {})
        if c % V in slot:
            return None
        slot[c % V] = k
    if any(len(r) != V for r in runs.values()):
        return None
    return [(tuple(r[j] for j in range(V)), sym, q * V) for (sym, q), r in runs.items()]


def _ragged_ok(o, V, groups, threads, L, lcs) -> str:
    """'' when each V-vector of ragged operand `o` is wholly inside or outside its extent:
    its coordinates along the ragged dimension are c0..c0+V-1 with c0 a multiple of V."""
    n = o.ragged[1]
    if V == 1:
        return ""
    if n % V:
        return f"{o.side.buf.name} has {n} elements along its last dimension, not a multiple of {V}"
    if any(not is_int(st[L]) or st[L] % V for _, st in threads):
        return "the threads' coordinates along the ragged dimension are not multiples of the vector"
    for ids, _, _ in groups:
        c0 = lcs[ids[0]]
        if c0 % V or any(lcs[k] != c0 + j for j, k in enumerate(ids)):
            return "a vector would run across the ragged dimension"
    return ""


# ---- the memory-only partition -----------------------------------------------------------------
def plan_mem(call, opnds, max_bits=128):
    """(ElemPlan, '') for global/shared operands only: vectors of up to `max_bits` on
    every operand, [outer, threads, vec], or (None, why)."""
    T = call.scope.nthreads
    sides = [o.side for o in opnds]
    for o in opnds:
        if o.side.space not in ("global", "shared"):
            return None, f"{o.side.buf.name} is in {o.side.space} memory"
    common = refine(sides)
    if common is None:
        return None, "the operands' layouts split the region into incompatible leaves"
    drive = next((i for i, o in enumerate(opnds) if o.side.space == "global"), 0)
    if opnds[0].side.space == "global":
        drive = 0
    idx = sorted(range(len(common[0])), key=lambda i: stride_key(common[drive][i].stride))
    items = coalesce([(common[0][i].extent, [c[i].stride for c in common]) for i in idx])
    n = math.prod(e for e, _ in items)
    vmin = max(1, max(8 // o.ebits for o in opnds))   # float4_e2m1fn: whole bytes of two
    vmax = max(vmin, min(max_bits // o.ebits for o in opnds))
    if any(o.dtype is BOOL for o in opnds):
        vmax = vmin              # bool elements are bytes of a 1-bit dtype: moved one by one
                                 # (two with float4_e2m1fn's bytes of two)
    reasons = []
    for V in (16, 8, 4, 2, 1):
        if V > vmax or V < vmin:
            continue
        why = _mem_vector_ok(call, opnds, items, V)
        if why:
            reasons.append(f"{V} elements: {why}")
            continue
        plan = _mem_partition(call, opnds, items, n, V, T)
        if plan is not None:
            return plan, "; ".join(reasons)
        reasons.append(f"{V} elements: the leaf extents do not cut into vectors of {V}")
    if vmin > 1:
        reasons.append("float4_e2m1fn moves in whole bytes of two elements: the regions must "
                       "start at an even element and hold consecutive pairs")
    return None, "; ".join(reasons)


def _mem_vector_ok(call, opnds, items, V) -> str:
    if V == 1:
        return ""
    ext, strides = items[0]
    if not all(is_int(s) and s == 1 for s in strides):
        return "the innermost elements are not contiguous in every operand"
    if ext % V:
        return f"the contiguous run of {ext} elements is not a multiple of {V}"
    for o in opnds:
        sw = o.side.swizzle
        if sw is not None and V > sw.chunk_elems:
            return (f"{o.side.buf.name}'s swizzle keeps {sw.chunk_elems} element(s) together; a "
                    f"{V}-element vector would cross it")
    for k, (e, strides) in enumerate(items[1:], 1):
        for o, st in zip(opnds, strides):
            if not divisible(call.an, st, V):
                return f"{o.side.buf.name}: stride {st} is not a multiple of {V}"
    for o in opnds:
        ok, why = base_alignment_ok(call.an, o.side, V, o.ebits)
        if not ok:
            return why
    return ""


def _mem_partition(call, opnds, items, n, V, T):
    """[outer, threads, vec] when the vectors divide among the threads; else vector
    i = round * T + tid over [rest, vec], guarded by i < n / V."""
    nvec = n // V
    prologue = []
    tid = None
    if T > 1:
        tid = Var("tid", INT32)
        prologue.append(Let(tid, call.scope.tid, (0, T - 1)))
    f = Var("f", INT32)
    linear = None
    groups = split_leaves(items, [V, V * T]) if nvec % T == 0 else None
    if groups is not None:
        _, threads, outer = groups
        rounds = nvec // T
        parts = [(f, outer)] + ([(tid, threads)] if tid is not None else [])
    else:      # the threads' cut falls inside a leaf: vector i = round * T + tid, digits of i
        groups = split_leaves(items, [V])
        if groups is None:
            return None
        rounds = -(-nvec // T)
        i = Var("i", INT32)
        value = (f * T + tid if tid is not None else f) if rounds > 1 else \
            (tid if tid is not None else Const(0))
        linear = (i, value, nvec if nvec % T else None)
        parts = [(i, groups[1])]
    mem = {}
    for s, o in enumerate(opnds):
        off = o.side.base
        for x, group in parts:
            if group:
                off = _add(off, digits_offset(x, group, s))
        mem[o.pos] = Access(V, [(tuple(range(V)), element_address(o.side, off), None)])
    return ElemPlan("mem", V, prologue, {}, mem, rounds, f, linear)


def describe_plan(plan, opnds, T) -> str:
    if plan.kind == "reg":
        return (f"{plan.vector_bits(opnds)} accesses, {T} thread(s) x {plan.nelem} "
                f"element(s)")
    g = " (guarded)" if plan.linear is not None and plan.linear[2] else ""
    return (f"{plan.vector_bits(opnds)} accesses, {T} thread(s) x {plan.rounds} round(s) of "
            f"{plan.nelem}{g}")


