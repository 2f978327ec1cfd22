"""tma / tma_store: a tile between a global tensor and shared memory through a tensor map.

The tensor map (box, swizzle, element size, the tensor's extents and strides) is a kernel
parameter the runtime encodes at launch; the PTX carries only its address and the region
start as coordinates (innermost first).  One elected thread issues.

Load:  mbarrier.arrive.expect_tx [mbar], bytes; cp.async.bulk.tensor.Nd.shared::cluster.global
       .mbarrier::complete_tx::bytes [dst], [map, {c...}], [mbar].  The bytes are the whole
       box's, zero-filled parts outside the tensor included.  Multicast (a constant CTA mask):
       the box lands in every CTA of the mask at the same offset, completing each one's
       `mbar`.  In thread/warp/warpgroup/cta scope every CTA of the mask is taken to issue one
       such copy (its own slice), so each arrives expecting bytes x popcount(mask); in cluster
       scope CTA rank 0 issues the one copy and every CTA of the mask arrives expecting it.
Store: every thread of the scope fences its shared writes into the async proxy, the scope
       synchronizes, the elected thread issues cp.async.bulk.tensor (or cp.reduce...add) in a
       bulk group; `async_commit` / `async_wait` complete it.  Parts outside the tensor clip.
       In thread scope the caller has ordered the writers (fence, barrier) itself; the build
       says where a fence is missing (passes/proxy.py).
"""
from __future__ import annotations

from ...ir import Const, If, Instr, Mem, SpecialReg
from ...target.forms import opcode
from ..registry import register
from ..scope import make_scope
from ..tcgen05.common import TensorCoordOperand, guarded
from .common import (arrive_expect_tx, cache_policy, needs_sm90, smem_aligned, smem_pointer,
                     store_prelude)
from .tmap import REDUCE_ADD, inner_start_ok


def _common(call, load: bool) -> tuple[bool, str]:
    ok, why = needs_sm90(call, "TMA (cp.async.bulk.tensor)")
    if not ok:
        return ok, why
    if call.load != load:
        return False, ("tma loads global -> shared; this copy is a store (tma_store)" if load
                       else "tma_store stores shared -> global; this copy is a load (tma)")
    rec = call.record
    if rec.tmap is None:
        return False, rec.tmap_why or "no tensor map was planned for this copy"
    (ok, why), _ = cache_policy(call)
    if not ok:
        return ok, why
    plan = rec.tmap.plan
    ok, why = smem_aligned(call, call.smem_side, plan.smem_align,
                           "TMA destination" if load else "TMA source", plan.spec.swizzle)
    if not ok:
        return ok, why
    return inner_start_ok(call.an, plan, call.dtype.bits // 8)


def _summary(call) -> str:
    plan = call.record.tmap.plan
    sw = plan.spec.swizzle
    return (f"{plan.spec.rank}-D box {plan.box_text()} = {plan.nbytes} B"
            f"{', swizzle ' + sw if sw != 'none' else ''}")


def _load_ok(call):
    ok, why = _common(call, True)
    if not ok:
        return ok, why
    rec = call.record
    if rec.mbar is None:
        return False, ("a TMA load completes on an mbarrier: pass mbar=bar[s] (initialised with "
                       "the number of copies that land per phase)")
    extra = f", multicast to CTAs {rec.multicast:#b}" if rec.multicast is not None else ""
    return True, _summary(call) + extra


def _store_ok(call):
    ok, why = _common(call, False)
    if not ok:
        return ok, why
    rec = call.record
    if call.scope.name == "cluster":
        return False, "a TMA store writes one CTA's tile: issue it from a cta (or smaller) scope"
    if rec.reduce is not None and call.dtype.name not in REDUCE_ADD:
        return False, (f"TMA reduce-add takes {', '.join(REDUCE_ADD)}; the tile is "
                       f"{call.dtype}")
    return True, _summary(call) + (" (reduce-add)" if rec.reduce else "")


def _operands(call):
    ref = call.record.tmap
    return TensorCoordOperand(ref.var, ref.plan.coords), ref.plan


@register("copy_async", "tma", 40, when=[_load_ok])
def emit_tma_load(call):
    """TMA load of one box into shared memory, completing an mbarrier (sm_90+)."""
    rec = call.record
    tensor, plan = _operands(call)
    _, (pre, policy) = cache_policy(call)
    mask = rec.multicast
    dst = Mem(smem_pointer(call.smem_side))
    ops = [dst, tensor, Mem(rec.mbar)]
    if mask is not None:
        ops.append(Const(mask))
    if policy is not None:
        ops.append(policy)
    copy = Instr(opcode("tma_load", plan.spec.rank, mask is not None, policy is not None),
                 tuple(ops), form="tma_load")
    if call.scope.name == "cluster":
        # every CTA of the mask expects the box; rank 0 issues the one multicast copy
        rank = SpecialReg("cluster_ctarank")
        cta0 = make_scope("cta", call.block).tid == 0
        mine = ((Const(mask) >> rank) & 1) == 1
        return [If(cta0 & mine, [arrive_expect_tx(rec.mbar, plan.nbytes)]),
                *guarded(call.scope, pre + [copy])]
    n = plan.nbytes * (bin(mask).count("1") if mask is not None else 1)
    return guarded(call.scope, pre + [arrive_expect_tx(rec.mbar, n), copy])


@register("copy_async", "tma_store", 40, when=[_store_ok])
def emit_tma_store(call):
    """TMA store (or reduce-add) of a shared tile into a global tensor, in a bulk group."""
    rec = call.record
    tensor, plan = _operands(call)
    _, (pre, policy) = cache_policy(call)
    ops = [tensor, Mem(smem_pointer(call.smem_side))]
    if policy is not None:
        ops.append(policy)
    store = Instr(opcode("tma_store", plan.spec.rank, rec.reduce or "", policy is not None),
                  tuple(ops), form="tma_store", attrs={"reads_shared": call.smem_side.buf})
    return [*store_prelude(call.scope), *guarded(call.scope, pre + [store])]
