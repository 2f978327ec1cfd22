"""Front ends of the asynchronous copies: `pg.tile.<scope>.copy_async / async_commit /
async_wait`.

A copy_async is validated here against what tracing knows (the two memories, the mbarrier,
the kernel's cluster, the options) and its tensor map is planned from the regions
(`primitives.async_copy.plan_tensor_map`); the variant is chosen at build time.  A planned map
becomes a hidden kernel parameter (`Param(kind="tmap")`, appended after the user's), one per
(tensor, box, swizzle), which the runtime encodes at every launch from the tensor argument;
only the maps that some copy of the finished trace uses are declared (explain's scratch calls
declare none).

    pg.tile.thread.copy_async(As[s], A[m0:m0 + 64, k0:k0 + 64], mbar=full[s])   # TMA load
    pg.tile.cta.copy_async(C[m0:m0 + 64, n0:n0 + 64], Cs)                       # TMA store
    pg.tile.cta.async_commit(); pg.tile.cta.async_wait(0)
"""
from __future__ import annotations

import math

from ..dtypes import dtype as _dtype
from ..errors import PtxgenError, TraceError
from ..ir import Const, Param, TileCall, Var, walk
from ..primitives.async_copy import AsyncRecord, GroupRecord, TensorMapRef, plan_tensor_map
from ..primitives.copy import validate_copy
from . import tile_ops
from .context import current
from .ptx import bar_ptr
from .tile import located, record_call, region_of

_SHARED = ("shared", "shared.dyn")
_U64 = _dtype("uint64")


class _AsyncState:
    """Per kernel: the tensor-map variables by (tensor, box, swizzle); the parameters are
    declared when tracing ends, for the maps the body's copies use."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.vars: dict = {}
        ctx.finalizers.append(self.finalize)

    def ref(self, buf, plan) -> TensorMapRef:
        key = (buf.uid, plan.spec)
        v = self.vars.get(key)
        if v is None:
            v = self.vars[key] = Var(self.ctx.unique(f"{buf.name}_tmap"), _U64)
        return TensorMapRef(v, plan)

    def finalize(self):
        seen: dict = {}

        def visit(s):
            if isinstance(s, TileCall) and s.op == "copy_async" and s.record.tmap is not None:
                ref = s.record.tmap
                seen.setdefault(ref.var.uid, ref)
        walk(self.ctx.func.body, visit)
        params = self.ctx.func.params
        for ref in seen.values():
            g = ref.plan.spec.tensor
            buf = next(p.buffer for p in params if p.kind == "tensor" and p.name == g)
            params.append(Param(ref.var.name, "tmap", ref.var, buf, ref.spec))


def _state(ctx) -> _AsyncState:
    st = ctx.__dict__.get("_async_state")
    if st is None:
        st = ctx.__dict__["_async_state"] = _AsyncState(ctx)
    return st


def _cluster(ctx):
    c = ctx.func.attrs.get("cluster")
    return None if c is None or math.prod(c) == 1 else tuple(c)


def _hints(cache_hint) -> tuple:
    if cache_hint is None:
        return ()
    hints = (cache_hint,) if isinstance(cache_hint, str) else tuple(cache_hint)
    if not all(isinstance(h, str) for h in hints):
        raise TraceError(f"cache_hint must be a string or a list of strings, got {cache_hint!r}")
    return hints


def _record(ctx, scope, d, s, mbar, multicast, cache_hint, reduce, dispatch) -> AsyncRecord:
    ds, ss = d.buffer.root.scope, s.buffer.root.scope
    if ss == "global" and ds in _SHARED:
        direction, g, sh = "load", s, d
    elif ss in _SHARED and ds == "global":
        direction, g, sh = "store", d, s
    else:
        raise TraceError(f"copy_async moves a tile between global and shared memory; {d} is in "
                         f"{ds} memory and {s} in {ss} (use pg.tile.<scope>.copy for other "
                         f"pairs)")
    cluster = _cluster(ctx)
    ptr = None
    if mbar is not None:
        if direction == "store":
            raise TraceError("mbar= is for copies into shared memory; a store to global memory "
                             "completes through bulk groups: call pg.tile.<scope>.async_commit() "
                             "and then async_wait(0) (drop mbar=)")
        ptr = bar_ptr(mbar, "copy_async mbar")
        if ptr.indices:
            ctx.check_live(*ptr.indices)
    if scope == "cluster":
        if cluster is None:
            raise TraceError("pg.tile.cluster needs a thread-block cluster: declare the kernel "
                             "with @pg.kernel(..., cluster=(2, 1, 1))")
        if multicast is None:
            raise TraceError("a cluster-scope copy_async is one multicast load into the CTAs of "
                             "a mask: pass multicast= (e.g. 0b11 for both CTAs of a pair)")
    if multicast is not None:
        if cluster is None:
            raise TraceError("multicast= needs a thread-block cluster: declare the kernel with "
                             "@pg.kernel(..., cluster=(2, 1, 1)) (the mask names CTAs of the "
                             "cluster by rank)")
        n = math.prod(cluster)
        if isinstance(multicast, bool) or not isinstance(multicast, int) or \
                not 0 < multicast < 1 << n:
            raise TraceError(f"multicast={multicast!r} must be a constant CTA mask: an int with "
                             f"bits 0..{n - 1} for the {n} CTAs of the cluster")
        if direction == "store":
            raise TraceError("multicast= is for loads: a store writes one CTA's tile")
        if ptr is None:
            raise TraceError("a multicast load completes on each destination CTA's mbarrier: "
                             "pass mbar= (the same barrier word in every CTA)")
    if reduce is not None:
        if reduce != "add":
            raise TraceError(f"reduce={reduce!r}: TMA stores reduce with 'add' only")
        if direction != "store":
            raise TraceError("reduce='add' is a store into global memory (TMA reduce-add)")
    tmap, why = None, ""
    if dispatch in (None, "tma", "tma_store"):
        plan, why = plan_tensor_map(g, sh)
        if plan is not None:
            tmap = _state(ctx).ref(g.buffer, plan)
        elif dispatch is not None:
            raise TraceError(f"dispatch={dispatch!r}: {why}")
    return AsyncRecord(direction, ptr, multicast, cluster, reduce, _hints(cache_hint), tmap,
                       why)


def copy_async(scope, dst, src, mbar=None, dispatch=None, multicast=None, cache_hint=None,
               reduce=None):
    """dst <- src asynchronously (TMA, bulk or cp.async; see pg.tile.explain("copy_async"))."""
    ctx = current()
    d, s = region_of(dst, "copy_async dst"), region_of(src, "copy_async src")
    try:
        validate_copy(d, s)
        rec = _record(ctx, scope, d, s, mbar, multicast, cache_hint, reduce, dispatch)
    except PtxgenError as e:
        raise located(e) from None
    opts = {k: v for k, v in (("multicast", multicast), ("cache_hint", cache_hint),
                               ("reduce", reduce)) if v is not None}
    args = (d, s) if rec.mbar is None else (d, s, rec.mbar)
    record_call("copy_async", scope, args, opts, rec, dispatch)


def _kind(kind):
    if kind not in (None, "cp_async", "bulk"):
        raise located(TraceError(f"kind={kind!r}: 'cp_async' (cp.async groups), 'bulk' (bulk and "
                                 f"TMA store groups) or None (both)"))
    return kind


def async_commit(scope, kind=None, dispatch=None):
    """Close this scope's asynchronous copies issued so far into a group (`kind`: only
    cp.async or only bulk groups; default both)."""
    ctx = current()
    opts = {"kind": kind} if kind else {}
    record_call("async_commit", scope, (), opts,
                GroupRecord(cluster=_cluster(ctx), kind=_kind(kind)), dispatch)


def async_wait(scope, pending=0, read=False, sync=True, kind=None, dispatch=None):
    """Wait until at most `pending` of this scope's groups are in flight (read=True: bulk
    stores only until their shared source may be reused), then synchronize the scope."""
    ctx = current()
    if isinstance(pending, bool) or not isinstance(pending, int) or not 0 <= pending <= 63:
        raise located(TraceError(f"async_wait(pending={pending!r}): a constant group count in "
                                 f"0..63"))
    opts = {k: v for k, v in (("read", read), ("sync", sync), ("kind", kind))
            if v != {"read": False, "sync": True, "kind": None}[k]}
    record_call("async_wait", scope, (Const(pending),), opts,
                GroupRecord(pending, bool(read), bool(sync), _cluster(ctx), _kind(kind)),
                dispatch)


for _name, _fn in (("copy_async", copy_async), ("async_commit", async_commit),
                   ("async_wait", async_wait)):
    tile_ops.register(_name, _fn)
