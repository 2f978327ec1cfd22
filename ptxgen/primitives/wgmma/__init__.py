"""Hopper tensor-core primitives: wgmma.mma_async (gemm_async into registers), gemm_wait,
and the register fragment layouts, as lowering rules.  Importing this package registers the
wgmma variants of `gemm_async` (declared in ..gemm, shared with tcgen05) and declares

    gemm_wait (wgmma.wait_group N)

Their front ends (`pg.tile.warpgroup.gemm_async / gemm_wait / mma_accumulator /
mma_a_fragment`) are in builder/mma.py.
"""
from __future__ import annotations

from .. import gemm as _gemm  # noqa: F401  (declares gemm_async)
from ..registry import tile_op
from .fragment import a_fragment_layout, accumulator_layout, fragment_layout
from .mma import WaitRecord, WgmmaRecord, plan_wgmma, require_wait

tile_op("gemm_wait", requires=require_wait)

__all__ = ["WgmmaRecord", "WaitRecord", "plan_wgmma", "accumulator_layout",
           "a_fragment_layout", "fragment_layout"]
