"""Blackwell tensor-core primitives: tcgen05.mma / commit / ld / st / cp, their descriptors,
and TMA loads.  Importing this package registers:

    pg.tile.<scope>.gemm_async(D_tmem, A, B, accumulate=...)    tcgen05.mma (one thread)
    pg.tile.<scope>.mma_commit(mbar)                            tcgen05.commit
    pg.tile.<scope>.tmem_load(regs, tmem) / tmem_store(tmem, regs)   tcgen05.ld / st + wait
    pg.tile.<scope>.tmem_copy(tmem, smem)                       tcgen05.cp
    pg.ptx.tma.{map_address, load, prefetch}                    cp.async.bulk.tensor

Each call is validated at trace time (TileCall with the derived descriptors in its options)
and lowered at build time through the dispatch registry (`explain` shows every variant's
reason).  Descriptors come from `desc.smem_operand`, the TMEM maps from `..tmem_layout`.
"""
from __future__ import annotations

from ... import alloc as _alloc  # noqa: F401  (pg.ptx.mbarrier.*, pg.ptx.fence.*, pools)
from ...builder import tile_ops as _tile_ops
from ...builder.ptx import ptx as _ptx
from ..registry import dispatch as _dispatch
from ..registry import evaluate as _evaluate
from . import common as _C
from . import tma as _tma
from .desc import SmemOperand, canonical_layout, desc_stmts, smem_descriptors, smem_operand
from .mma import gemm_async, mma_commit
from .tmem_io import fragment_plan, tmem_copy, tmem_load, tmem_store

_OPS = {"gemm_async": (gemm_async, "mma"), "mma_commit": (mma_commit, "commit"),
        "tmem_load": (tmem_load, "ld"), "tmem_store": (tmem_store, "st"),
        "tmem_copy": (tmem_copy, "cp")}

for _name, (_fn, _) in _OPS.items():
    _tile_ops.register(_name, _fn)
for _name, _fn in (("tma.map_address", _tma.map_address), ("tma.load", _tma.load),
                   ("tma.prefetch", _tma.prefetch)):
    _ptx.register(_name, _fn)


def _call(stmt, target, an, block):
    call = _C.Tc05Call(stmt.op, stmt.args, stmt.scope, target, an,
                       {k: v for k, v in stmt.options.items() if k != "_all_active"},
                       f"{stmt.src}: " if stmt.src else "", block)
    call.all_active = stmt.options.get("_all_active", (True, ""))
    return call


def _lower(stmt, target, analyzer, func):
    """Build-time lowering of one tcgen05 TileCall: arch check, dispatch, emit."""
    _C.require_tcgen05(target, _OPS[stmt.op][1])
    call = _call(stmt, target, analyzer, func.block)
    call.where = ""                   # the emitter prefixes the statement's file:line itself
    forced = call.options.pop("dispatch", None)
    out = _dispatch(stmt.op, call, forced).emit(call)
    for s in out:
        if not s.src:
            s.src = stmt.src
    return out


LOWER = {name: _lower for name in _OPS}


def explain(op, *args, scope="cta", arch="sm_100a", dispatch=None, **kw):
    """Inside a kernel: every variant of `op` for this call, accepted or why not (nothing is
    appended to the kernel).  `arch` picks the target the variants are judged for."""
    from ...builder.context import current
    from ...builder.tile import facts_analyzer
    from ...target import parse_target

    if op not in _OPS:
        raise ValueError(f"explain knows {', '.join(_OPS)}; got {op!r}")
    ctx = current()
    scratch: list = []
    ctx.bodies.append(scratch)
    try:
        _OPS[op][0](scope, *args, **kw)
    finally:
        ctx.bodies.pop()
    stmt = scratch[-1]
    return _evaluate(op, _call(stmt, parse_target(arch), facts_analyzer(ctx), ctx.func.block),
                     dispatch)


__all__ = ["SmemOperand", "canonical_layout", "smem_operand", "smem_descriptors", "desc_stmts",
           "explain", "fragment_plan", "LOWER"]
