"""vec_16b .. vec_256b: one fixed-width vector per thread, only when forced.

Each is for the caller who knows the region is exactly one aligned vector and wants that
instruction and nothing else (e.g. a 16-byte fragment with a cache hint).  Thread scope
only: every thread moves its own region.  Sides are global/shared, or one side registers
(a `local` region without thread axes).  Bits move in u16/u32/v2.u32/v4.u32/v8.u32
containers (never .v8.b16, which crashes ptxas).  Alignment is proven exactly as for
vec_auto: region start, elem_offset, view chain and declared base alignment are multiples
of the vector, and the vector stays inside a swizzle chunk.  256-bit accesses exist only
in the global state space on sm_100+ with PTX 8.8, so vec_256b declines anything else.
"""
from __future__ import annotations

from ...dtypes import dtype as _dtype
from ...ir import Alloc, Buffer
from ...target import WIDE_VECTOR_BITS, wide_vector_refusal
from ..registry import predicate, register
from . import reg as _reg
from .common import CONTAINERS, element_address, flat_pointer, ld_st_pair, refine, reg_elems
from .vec_auto import coalesce, cache_modifiers

PRIORITY = {16: 20, 32: 25, 64: 30, 128: 35, 256: 40}


def _fixed_plan(call, bits):
    """((kind, plan, cache modifiers), reason) for forcing one `bits`-wide vector, else
    (None, reason).  kind "reg": one side is registers; "mem": both are memory."""
    name = f"vec_{bits}b"
    if call.scope.name != "thread":
        return None, (f"{name} runs in thread scope only (each thread moves its own vector); "
                       f"the scope is {call.scope}")
    ebits = call.dtype.bits
    n = call.numel
    if ebits not in (8, 16, 32, 64) or n * ebits != bits:
        return None, (f"the region holds {n} x {ebits}-bit element(s) = {n * ebits} bits, not "
                       f"one {bits}-bit vector")
    s, d = call.spaces()
    if bits == WIDE_VECTOR_BITS:
        why = wide_vector_refusal(call.target)
        if why:
            return None, why
        for side in (call.src_side, call.dst_side):
            why = side.space != "local" and wide_vector_refusal(space=side.space)  # local: regs
            if why:
                return None, f"{why}; {side.buf.name} is in {side.space} memory"
    ok, hint = cache_modifiers(call)
    if not ok:
        return None, hint
    if "local" in (s, d):
        plan, why = _reg.plan_reg(call, widths=(bits,), one_vector=True)
        if plan is None:
            return None, why
        return ("reg", plan, hint), f"{bits}-bit vector {'to registers' if d == 'local' else 'from registers'}"
    for side in (call.src_side, call.dst_side):
        if side.space not in ("global", "shared"):
            return None, f"{side.buf.name} is in {side.space} memory"
    common = refine([call.src_side, call.dst_side])
    if common is None:
        return None, "the two layouts split the region into incompatible leaves"
    items = coalesce([(a.extent, [a.stride, b.stride]) for a, b in
                      reversed(list(zip(*common))) if a.extent > 1])
    if len(items) > 1 or (items and items[0][1] != [1, 1]):
        return None, "the region is not contiguous in memory on both sides"
    V = n
    for side in (call.src_side, call.dst_side):
        why = _reg.mem_aligned(call.an, side, V, [])
        if why:
            return None, why
    return ("mem", None, hint), f"one {bits}-bit vector"


def _check(call, bits):
    plan, why = call.plan(_fixed_plan, bits)
    return plan is not None, why


def _emit(call, bits):
    kind, plan, hint = call.plan(_fixed_plan, bits)[0]
    if kind == "reg":
        return _reg.emit_reg_plan(call, plan, hint)
    src, dst = call.src_side, call.dst_side
    _, nregs, cdt = CONTAINERS[bits]
    tmp = Buffer("copy_regs", (nregs,), _dtype(cdt), "local")
    ld, st = ld_st_pair(flat_pointer(src, element_address(src, src.base)),
                        flat_pointer(dst, element_address(dst, dst.base)),
                        bits, src.space, dst.space, reg_elems(tmp, 0, nregs), hint)
    return [Alloc(tmp), ld, st]


def _make(bits):
    def pred(call):
        return _check(call, bits)

    def emit(call):
        return _emit(call, bits)

    emit.__doc__ = f"Exactly one {bits}-bit vector per thread (forced only)."
    register("copy", f"vec_{bits}b", PRIORITY[bits], forced_only=True,
             when=[predicate(f"one_{bits}b_vector", pred)])(emit)
    return emit


for _bits in (256, 128, 64, 32, 16):
    _make(_bits)

__all__ = ["PRIORITY"]
