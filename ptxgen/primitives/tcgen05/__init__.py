"""Blackwell tensor-core primitives: tcgen05.mma / commit / ld / st / cp and their
descriptors, as lowering rules.  Importing this package declares the ops

    gemm_async (tcgen05.mma, one thread)    mma_commit (tcgen05.commit)
    tmem_load / tmem_store (tcgen05.ld / st + wait)    tmem_copy (tcgen05.cp)

and registers their variants.  Their trace-time front ends (`pg.tile.<scope>.gemm_async`,
...) are in builder/tcgen05.py: they validate the operands with `plan_gemm`,
`plan_tmem_io` and `plan_tmem_copy` here and record the result on the TileCall, which the
variants read as `call.record`.  Descriptors come from `desc.smem_operand`, the TMEM maps
from `..tmem_layout`.
"""
from __future__ import annotations

from .. import gemm as _gemm  # noqa: F401  (declares gemm_async, gated per record)
from ..registry import tile_op
from . import common as _C
from .desc import SmemOperand, canonical_layout, desc_stmts, smem_operand
from .mma import MmaRecord, TmemOperand, plan_gemm
from .tmem_io import CpRecord, IoRecord, fragment_plan, plan_tmem_copy, plan_tmem_io

# op -> the tcgen05 instruction its arch error names (gemm_async: its record's gate)
_GATE = {"mma_commit": "commit", "tmem_load": "ld", "tmem_store": "st", "tmem_copy": "cp"}

for _op, _what in _GATE.items():
    tile_op(_op, requires=lambda call, what=_what: _C.require_tcgen05(call.target, what),
            explain_arch="sm_100a")

__all__ = ["SmemOperand", "canonical_layout", "smem_operand", "desc_stmts", "fragment_plan",
           "plan_gemm", "plan_tmem_io", "plan_tmem_copy", "MmaRecord", "IoRecord", "CpRecord",
           "TmemOperand"]
