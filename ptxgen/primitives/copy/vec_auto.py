"""vec_auto: the widest correct vector copy, by two paths.

gmem_smem: global/shared on both sides, no register side.  The partition is
synthesized from the scope: the driving side's (global's) canonical order, i.e.
leaves sorted by stride, is cut into [outer, threads, vec]; the other side follows
the same logical leaves (regrouped, not re-sorted).  The vector is the widest of
128/64/32/16/8 bits that divides the contiguous tail, stays inside one swizzle chunk,
and keeps every other stride, both region starts, elem_offsets, view offsets and the
declared base alignments multiples of itself, as proven by the simplifier.  It emits
one serial loop over `outer` (never unrolled): one ld + one st per round.

reg: a register side; the partition is the register layout's (reg.py, the plan and emission
of the `reg` variant, which ranks above vec_auto so the automatic choice names that row).
The path is here so that forcing dispatch="vec_auto" keeps working for register copies.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...ir import Alloc, Buffer, Const, Expr, For, Let, Var
from ..registry import register
from .common import (CONTAINERS, base_alignment_ok, cache_modifiers, const_offset,
                     digits_offset, divisible, element_address, flat_pointer, is_int, ld_st_pair,
                     refine, reg_elems, split_leaves)
from .reg import emit_reg, reg_ok

MEMORY = ("global", "shared")


@dataclass
class Plan:
    V: int                 # elements per vector
    bits: int
    groups: list           # [vec, threads, outer]; items (extent, [src stride, dst stride])
    outer: int


def stride_key(st):
    return (1, 0) if isinstance(st, Expr) else (0, abs(st))


def coalesce(items):
    """Merge adjacent leaves (innermost first) that are contiguous on every side."""
    out = []
    for ext, strides in items:
        if out:
            pe, ps = out[-1]
            if all(is_int(a) and is_int(b) and b == a * pe for a, b in zip(ps, strides)):
                out[-1] = (pe * ext, ps)
                continue
        out.append((ext, strides))
    return out


def plan_memory_copy(call, widths=(128, 64, 32, 16, 8)):
    """(Plan, reason): the widest vector partition of a memory<->memory copy."""
    src, dst = call.src_side, call.dst_side
    T = call.scope.nthreads
    n = call.numel
    if n % T:
        return None, (f"region has {n} elements, not divisible by the {T} threads of the "
                      f"{call.scope.name} scope")
    common = refine([src, dst])
    if common is None:
        return None, "the two layouts split the region into incompatible leaves"
    drive = 0 if src.space == "global" or dst.space != "global" else 1
    idx = list(range(len(common[0])))
    # canonical order of the driving side: innermost = smallest stride (stable)
    idx.sort(key=lambda i: stride_key(common[drive][i].stride))
    items = coalesce([(common[0][i].extent, [common[0][i].stride, common[1][i].stride])
                      for i in idx])
    ebits = call.dtype.bits
    reasons = []
    for bits in widths:
        if bits % ebits:
            continue
        V = bits // ebits
        why = _vector_ok(call, items, V)
        if why:
            reasons.append(f"{bits}b: {why}")
            continue
        if n % (T * V):
            reasons.append(f"{bits}b: {n} elements do not split into {T} threads x {V}")
            continue
        groups = split_leaves(items, [V, V * T])
        if groups is None:
            reasons.append(f"{bits}b: leaf extents do not divide into [outer, {T}, {V}]")
            continue
        return Plan(V, bits, groups, n // (T * V)), "; ".join(reasons)
    return None, "; ".join(reasons) or f"{ebits}-bit elements have no vector form"


def _vector_ok(call, items, V) -> str:
    an = call.an
    if V > 1:
        ext, (s0, s1) = items[0]
        if not (is_int(s0) and s0 == 1 and is_int(s1) and s1 == 1):
            return "the innermost elements are not contiguous on both sides"
        if ext % V:
            return f"the contiguous tail of {ext} elements is not a multiple of {V}"
    for side in (call.src_side, call.dst_side):
        if side.swizzle is not None and V > side.chunk_elems:
            return (f"{side.buf.name}'s swizzle keeps {side.chunk_elems} element(s) together; "
                    f"a {V}-element vector would cross it")
    for k, (ext, strides) in enumerate(items):
        if k == 0 and V > 1:
            continue
        for side, st in zip((call.src_side, call.dst_side), strides):
            if not divisible(an, st, V):
                return f"{side.buf.name}: stride {st} is not a multiple of {V}"
    for side in (call.src_side, call.dst_side):
        ok, why = base_alignment_ok(an, side, V)
        if not ok:
            return why
    return ""


def emit_plan(call, plan: Plan, load_mod="", move=None):
    """Statements: tid binding, register staging, serial loop over `outer` (if > 1).
    `move(src_ptr, dst_ptr, bits)` replaces the ld + st of one vector (cp.async's copy)."""
    src, dst = call.src_side, call.dst_side
    vec, threads, outer = plan.groups
    T = call.scope.nthreads
    out = []
    tid = Const(0)
    if T > 1:
        tid = Var("tid", _dtype("int32"))
        out.append(Let(tid, call.scope.tid, (0, T - 1)))
    if move is None:
        ty, nregs, cdt = CONTAINERS[plan.bits]
        tmp = Buffer("copy_regs", (nregs,), _dtype(cdt), "local")
        out.append(Alloc(tmp))
    f = Var("f", _dtype("int32")) if plan.outer > 1 else Const(0)

    def side_off(side, k):
        off = side.base
        for x, group in ((f, outer), (tid, threads)):
            if isinstance(x, Const):
                part = const_offset(x.value, group, k)
            else:
                part = digits_offset(x, group, k)
            if not (is_int(part) and part == 0):
                off = part if is_int(off) and off == 0 else off + part
        return element_address(side, off)

    sp, dp = flat_pointer(src, side_off(src, 0)), flat_pointer(dst, side_off(dst, 1))
    if move is None:
        body = list(ld_st_pair(sp, dp, plan.bits, src.space, dst.space,
                               reg_elems(tmp, 0, nregs), load_mod))
    else:
        body = move(sp, dp, plan.bits)
    if plan.outer > 1:
        out.append(For(f, Const(0), Const(plan.outer), 1, "serial", body))
    else:
        out.extend(body)
    return out


def _is_vec_auto(call):
    s, d = call.spaces()
    if "local" in (s, d):
        ok, why = reg_ok(call)
        return ok, f"reg: {why}"
    if s not in MEMORY or d not in MEMORY:
        return False, (f"gmem_smem: moves between global and shared memory; this copy is "
                       f"{s} -> {d}; reg: needs a register side")
    ok, why = cache_modifiers(call)
    if not ok:
        return False, why
    plan, why = call.plan(plan_memory_copy)
    if plan is None:
        return False, f"gmem_smem: {why}"
    return True, f"gmem_smem: {plan.bits}-bit vectors, {call.scope.nthreads} threads x {plan.outer} round(s)"


@register("copy", "vec_auto", 10, when=[_is_vec_auto])
def emit_vec_auto(call):
    """The widest correct vector copy: the reg path for a register side, else gmem_smem."""
    if "local" in call.spaces():
        return emit_reg(call)
    return emit_plan(call, call.plan(plan_memory_copy)[0], cache_modifiers(call)[1])
