"""fallback: one element per instruction, correct for any valid memory region.

Thread t of the scope moves elements t, t+T, t+2T, ... of the region's logical
row-major order; a guard handles a region whose size does not divide by T.  It
warns, naming every variant that declined and why, because it is slow.  Inside a branch
that leaves only part of the scope active it runs on those threads (T of them, renumbered),
so a copy the vector variants decline there is still done.
"""
from __future__ import annotations

import math
import warnings

from ...dtypes import dtype as _dtype, mem_type, uint_of
from ...ir import Alloc, Buffer, BinOp, Const, For, If, Instr, Let, Load, Mem, Var, BOOL
from ...target.forms import opcode
from ..registry import evaluate, register
from .common import digits_offset, element_address, flat_pointer, refine
from .common import cache_modifiers


def _is_fallback(call):
    s, d = call.spaces()
    if s not in ("global", "shared") or d not in ("global", "shared"):
        return False, (f"moves memory only ({s} -> {d}); register copies use the reg row "
                       f"(vec_auto's reg path)")
    if uint_of(call.dtype.bits) is None:
        return False, f"{call.dtype} elements are not byte addressable; view the region as uint8"
    ok, why = cache_modifiers(call)
    if not ok:
        return False, why
    if refine([call.src_side, call.dst_side]) is None:
        return False, "the two layouts split the region into incompatible leaves"
    return True, "scalar element copy"


@register("copy", "fallback", 0, when=[_is_fallback], handles_partial=True)
def emit_fallback(call):
    """Scalar element copy, correct for any valid region."""
    table = evaluate("copy", call)
    declined = [f"{r.name}: {r.reason}" for r in table if r.name != "fallback" and not r.ok
                and not r.reason.startswith("only when forced")]
    warnings.warn(f"{call.where}{call.describe()} uses the scalar fallback; declined: "
                  + "; ".join(declined), stacklevel=2)
    src, dst = call.src_side, call.dst_side
    common = refine([src, dst])
    items = [(common[0][i].extent, [common[0][i].stride, common[1][i].stride])
             for i in reversed(range(len(common[0])))]   # innermost first, logical order
    scope = call.active_scope
    T = scope.nthreads
    n = call.numel
    rounds = math.ceil(n / T)
    cdt = uint_of(call.dtype.bits)      # elements move as raw bits
    ty = mem_type(cdt)
    tmp = Buffer("copy_reg", (1,), cdt, "local")
    out = [Alloc(tmp)]
    tid = Const(0)
    if T > 1:
        tid = Var("tid", _dtype("int32"))
        out.insert(0, Let(tid, scope.tid, (0, T - 1)))
    k = Var("k", _dtype("int32"))
    i = Var("i", _dtype("int32"))
    body = [Let(i, k * T + tid if T > 1 else k, (0, rounds * T - 1))]
    reg = Load(tmp, (Const(0),), tmp.dtype)
    so = element_address(src, src.base + digits_offset(i, items, 0) if not (isinstance(src.base, int) and src.base == 0) else digits_offset(i, items, 0))
    do = element_address(dst, dst.base + digits_offset(i, items, 1) if not (isinstance(dst.base, int) and dst.base == 0) else digits_offset(i, items, 1))
    move = [Instr(opcode("ld", src.space, ty, 1, cache_modifiers(call)[1]),
                  (reg, Mem(flat_pointer(src, so))), form="ld", outs=1),
            Instr(opcode("st", dst.space, ty), (Mem(flat_pointer(dst, do)), reg), form="st")]
    if n % T:
        body.append(If(BinOp("lt", i, Const(n), BOOL), move))
    else:
        body.extend(move)
    out.append(For(k, Const(0), Const(rounds), 1, "serial", body))
    return out
