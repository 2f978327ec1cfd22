"""bulk: one contiguous run of bytes between global and shared memory by the TMA engine,
without a tensor map (cp.async.bulk, sm_90+).

Why a variant of its own: a region that is one contiguous run on both sides (whole rows of
a row-major tile, a 1-D slice) needs no descriptor and no launch-time encoding.  The run must
be a multiple of 16 bytes with both addresses 16-byte aligned, as the simplifier proves them.
One elected thread issues; a load arrives on `mbar` expecting the bytes, a store joins a bulk
group after the scope's fence and barrier (as tma_store).
"""
from __future__ import annotations

from ...ir import Const, Instr, Mem
from ...target import BULK_MAX_BYTES, TMA_ALIGN
from ...target.forms import opcode
from ..copy.common import base_alignment_ok, element_address, flat_pointer, refine
from ..copy.vec_auto import coalesce
from ..registry import register
from ..tcgen05.common import guarded
from .common import (arrive_expect_tx, cache_policy, needs_sm90, smem_aligned, smem_pointer,
                     store_prelude)


def _contiguous(call) -> str:
    common = refine([call.src_side, call.dst_side])
    if common is None:
        return "the two layouts split the region into incompatible leaves"
    items = coalesce([(a.extent, [a.stride, b.stride]) for a, b in
                      reversed(list(zip(*common))) if a.extent > 1])
    if len(items) > 1 or (items and items[0][1] != [1, 1]):
        return ("a bulk copy moves one contiguous run: the region is not contiguous on both "
                "sides (the tma variant copies strided boxes)")
    return ""


def _bulk_ok(call):
    ok, why = needs_sm90(call, "bulk copies (cp.async.bulk)")
    if not ok:
        return ok, why
    rec = call.record
    if rec.multicast is not None:
        return False, "multicast loads go through a tensor map (the tma variant)"
    if rec.reduce is not None:
        return False, "reduce-add stores go through a tensor map (the tma_store variant)"
    if call.scope.name == "cluster":
        return False, "bulk copies are per CTA: issue them from a cta (or smaller) scope"
    if call.load and rec.mbar is None:
        return False, ("a bulk load completes on an mbarrier: pass mbar=bar[s] (or use cp_async, "
                       "completed by async_commit / async_wait)")
    why = _contiguous(call)
    if why:
        return False, why
    n = call.numel * call.dtype.bits // 8
    if n % TMA_ALIGN or n > BULK_MAX_BYTES:
        return False, (f"a bulk copy moves a multiple of {TMA_ALIGN} bytes up to "
                       f"{BULK_MAX_BYTES}; this is {n}")
    ok, why = smem_aligned(call, call.smem_side, TMA_ALIGN, "bulk copy")
    if not ok:
        return ok, why
    g = call.gmem_side
    ok, why = base_alignment_ok(call.an, g, max(1, TMA_ALIGN // (call.dtype.bits // 8)))
    if not ok:
        return False, f"a bulk copy's global address must be {TMA_ALIGN}-byte aligned: {why}"
    (ok, why), _ = cache_policy(call)
    if not ok:
        return ok, why
    return True, f"{n} contiguous bytes"


@register("copy_async", "bulk", 30, when=[_bulk_ok])
def emit_bulk(call):
    """One contiguous run by cp.async.bulk (sm_90+)."""
    rec = call.record
    n = call.numel * call.dtype.bits // 8
    g = call.gmem_side
    gptr = Mem(flat_pointer(g, element_address(g, g.base)))
    sptr = Mem(smem_pointer(call.smem_side))
    _, (pre, policy) = cache_policy(call)
    tail = (policy,) if policy is not None else ()
    hint = policy is not None
    if call.load:
        op = opcode("bulk_copy", "shared::cluster", "global", "mbarrier::complete_tx::bytes", hint)
        copy = Instr(op, (sptr, gptr, Const(n), Mem(rec.mbar)) + tail, form="bulk_copy")
        return guarded(call.scope, pre + [arrive_expect_tx(rec.mbar, n), copy])
    op = opcode("bulk_copy", "global", "shared::cta", "bulk_group", hint)
    store = Instr(op, (gptr, sptr, Const(n)) + tail, form="bulk_copy",
                  attrs={"reads_shared": call.smem_side.buf})
    return [*store_prelude(call.scope), *guarded(call.scope, pre + [store])]
