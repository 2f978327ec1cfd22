"""Pieces the async variants share: who issues, scope barriers, arrivals, fences, policies.

One elected thread issues a TMA or bulk copy: the scope's thread 0 (the caller itself in
thread scope; in cluster scope thread 0 of the cluster's CTA rank 0).  A store out of shared
memory that threads of the scope wrote must first order those writes before the async proxy
reads them, so every thread fences (`fence.proxy.async.shared::cta`), the scope synchronizes,
and only then does the elected thread issue; that is what the store variants emit.
"""
from __future__ import annotations

from ...dtypes import dtype as _dtype
from ...ir import Alloc, Barrier, Buffer, Const, Instr, Load, Mem, SpecialReg
from ...target import has_opcode
from ...target.forms import opcode
from ..copy.common import base_alignment_ok, element_address, flat_pointer

EVICT = {"evict_first": "evict_first", "evict_last": "evict_last",
         "evict_normal": "evict_normal"}
_U64 = _dtype("uint64")


def needs_sm90(call, what: str) -> tuple[bool, str]:
    if has_opcode("cp.async.bulk", call.target):
        return True, ""
    return False, (f"{what} needs sm_90 or newer; the target is {call.target.arch} (the "
                   f"cp_async variant copies global -> shared from sm_80)")


def scope_sync(scope) -> list:
    """A barrier over one instance of `scope` (nothing for thread).  A warpgroup uses named
    barrier 1 + its index with 128 threads, the convention of ptxgen's warpgroup copies."""
    name = scope.name
    if name == "thread":
        return []
    if name == "warp":
        return [Barrier("warp")]
    if name == "warpgroup":
        return [Barrier("cta", SpecialReg("tid.x") // 128 + 1, 128)]
    if name == "cta":
        return [Barrier("cta")]
    return cluster_sync()


def cluster_sync() -> list:
    """barrier.cluster.arrive + wait: every thread of every CTA of the cluster (release /
    acquire: shared-memory writes before it are visible to the cluster after it)."""
    return [Instr(opcode("barrier_cluster", "arrive"), (), form="barrier_cluster"),
            Instr(opcode("barrier_cluster", "wait"), (), form="barrier_cluster")]


def store_prelude(scope) -> list:
    """Before a store out of shared memory that the scope's threads wrote: every thread
    fences its writes into the async proxy, then the scope synchronizes.  In thread scope the
    caller has elected the issuer and ordered the writers itself (passes/proxy.py checks it)."""
    if scope.name == "thread":
        return []
    return [proxy_fence(), *scope_sync(scope)]


def proxy_fence() -> Instr:
    return Instr(opcode("fence_proxy_async", "shared::cta"), (), form="fence_proxy_async")


def arrive_expect_tx(mbar, nbytes: int) -> Instr:
    """One arrival on `mbar` expecting `nbytes` transaction bytes (its token discarded)."""
    return Instr(opcode("mbarrier_arrive_expect_tx"), ("_", Mem(mbar), Const(nbytes)),
                 form="mbarrier_arrive_expect_tx")


def cache_policy(call):
    """(ok, reason or ""), and (statements, policy register or None): an L2 eviction policy
    from cache_hint= ('evict_first' / 'evict_last' / 'evict_normal') for the .L2::cache_hint
    forms of TMA and bulk copies."""
    hints = call.record.cache_hint
    if not hints:
        return (True, ""), ([], None)
    bad = [h for h in hints if h not in EVICT]
    if bad or len(hints) > 1:
        return (False, f"TMA and bulk copies take one L2 eviction hint: {', '.join(EVICT)} (got "
                       f"{', '.join(hints)})"), ([], None)
    reg = Buffer("l2_policy", (1,), _U64, "local")
    pol = Load(reg, (Const(0),), _U64)
    stmts = [Alloc(reg), Instr(opcode("createpolicy", EVICT[hints[0]]), (pol, "1.0"),
                               form="createpolicy", outs=1)]
    return (True, ""), (stmts, pol)


def smem_aligned(call, side, align: int, what: str, mode: str = "none") -> tuple[bool, str]:
    """The shared tile's start, view chain and declared alignment are multiples of `align`
    bytes, as the simplifier proves them under the call's facts."""
    eb = side.buf.dtype.bits // 8
    ok, why = base_alignment_ok(call.an, side, max(1, align // eb))
    if ok:
        return True, ""
    rep = f" (the {mode} swizzle repeats every {align} B)" if mode not in ("none", None) else ""
    return False, (f"misaligned shared {what}: {why}; {what} needs the tile at a {align}-byte "
                   f"boundary{rep}: allocate it with align={align} (pool.alloc(..., "
                   f"align={align})) and start regions on multiples of {align} bytes")


def smem_pointer(side):
    """The shared address of a side's first element (pre-swizzle start; for swizzled tiles the
    start is on the pattern's repeat, where the swizzle is the identity)."""
    return flat_pointer(side, element_address(side, side.base))
