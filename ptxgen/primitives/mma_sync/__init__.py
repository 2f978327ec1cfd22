"""Warp-level tensor-core MMA (mma.sync, sm_80+) as lowering rules.  Importing this package
declares the tile op

    gemm (pg.tile.warp.gemm(C, A, B)): C += A @ B from register fragments

and registers its variants, one per instruction shape (gemm.py).  The fragment
arrangements and their layout constructors are in fragments.py; the trace-time front end
is builder/mma_sync.py.
"""
from __future__ import annotations

from ...target import check_opcode
from ..registry import tile_op
from .fragments import SHAPES, mma_sync_layout, operand
from .gemm import (GemmCall, SyncPlan, accumulator_dtype, check_shapes, fragment_offsets,
                   plan_sync)


def _require(target):
    """mma.sync itself: sm_80 (an ArchError naming the target)."""
    check_opcode("mma.sync", target)


tile_op("gemm", call=GemmCall, requires=_require, explain_arch="sm_80")

__all__ = ["SHAPES", "mma_sync_layout", "operand", "plan_sync", "check_shapes",
           "accumulator_dtype", "fragment_offsets", "SyncPlan", "GemmCall"]
