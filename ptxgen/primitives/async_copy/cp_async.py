"""cp_async: global -> shared by per-thread cp.async of 4, 8 or 16 bytes (sm_80+).

The partition and every alignment proof are vec_auto's (`plan_memory_copy` with the widths
cp.async has: 128, 64 and 32 bits): the widest vector that divides the contiguous tail, stays
inside a swizzle chunk and keeps both region starts, elem_offsets, view offsets and the
declared base alignments multiples of itself.  Each vector is one `cp.async.ca/cg` (cg, which
bypasses L1, for 16 bytes unless cache_hint="ca"; "L2::128B" adds the L2 prefetch hint).

Completion: `async_commit()` then `async_wait(n)` (the commit-group protocol), or in thread
scope `mbar=`: one `cp.async.mbarrier.arrive.noinc` once this thread's copies have landed (one
arrival, so a barrier initialised with N completes when N such copies are done).  A wider
scope would arrive once per thread, so it takes the groups instead.
"""
from __future__ import annotations

from ...ir import Const, Instr, Mem
from ...target import has_opcode
from ...target.forms import opcode
from ..copy.vec_auto import emit_plan, plan_memory_copy
from ..registry import register

WIDTHS = (128, 64, 32)
HINTS = ("ca", "cg", "L2::128B")


def _cache(call, bits):
    """(ok, (cache operator, L2 prefetch?) or the reason)."""
    hints = call.record.cache_hint
    bad = [h for h in hints if h not in HINTS]
    if bad:
        return False, f"cp.async cache hints are {', '.join(HINTS)}; got {', '.join(bad)}"
    cache = "ca" if "ca" in hints else "cg" if "cg" in hints or bits == 128 else "ca"
    if "ca" in hints and "cg" in hints:
        return False, "cache_hint: 'ca' and 'cg' exclude each other"
    if cache == "cg" and bits != 128:
        return False, f"cp.async.cg moves 16 bytes only; the widest vector here is {bits // 8} B"
    return True, (cache, "L2::128B" in hints)


def _cp_async_ok(call):
    if not has_opcode("cp.async", call.target):
        return False, f"cp.async needs sm_80 or newer; the target is {call.target.arch}"
    rec = call.record
    if not call.load:
        return False, "cp.async copies global -> shared only (stores: tma_store or bulk)"
    if rec.multicast is not None:
        return False, "cp.async does not multicast (the tma variant does)"
    if call.scope.name == "cluster":
        return False, "cp.async runs per CTA: use a cta (or smaller) scope"
    if rec.mbar is not None and call.scope.name != "thread":
        return False, (f"cp.async completes per thread: mbar= would arrive once per thread of "
                       f"the {call.scope.name}; complete it with async_commit() / "
                       f"async_wait(), or issue from pg.tile.thread")
    plan, why = call.plan(plan_memory_copy, WIDTHS)
    if plan is None:
        return False, f"cp.async: {why or 'no 4/8/16-byte vector fits'}"
    ok, cache = _cache(call, plan.bits)
    if not ok:
        return ok, cache
    return True, (f"{plan.bits // 8}-byte cp.async.{cache[0]}, {call.scope.nthreads} thread(s) "
                  f"x {plan.outer} round(s)")


@register("copy_async", "cp_async", 20, when=[_cp_async_ok])
def emit_cp_async(call):
    """Per-thread cp.async of 4/8/16 bytes with vec_auto's partition (sm_80+)."""
    plan, _ = call.plan(plan_memory_copy, WIDTHS)
    _, (cache, l2) = _cache(call, plan.bits)
    op = opcode("cp_async", cache, l2)

    def move(src, dst, bits):
        return [Instr(op, (Mem(dst), Mem(src), Const(bits // 8)), form="cp_async")]

    out = emit_plan(call, plan, move=move)
    if call.record.mbar is not None:
        out.append(Instr(opcode("cp_async_mbarrier_arrive", True), (Mem(call.record.mbar),),
                         form="cp_async_mbarrier_arrive"))
    return out
