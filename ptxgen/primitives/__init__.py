"""Tile primitives: lowering rules only.  Each op's variants are small registered units
(registry.py) judged on a Call (call.py); `lower_tile` turns a traced TileCall into the
statements of the variant dispatch picks.  Nothing here reads builder or pool state: what a
rule needs from tracing arrives in the TileCall's record."""
from __future__ import annotations

from . import async_copy, copy, mma_sync, tcgen05, tilemath  # noqa: F401  (declare their ops and register their variants)
from .call import Call
from .registry import (TileOp, dispatch, evaluate, lower_tile, make_call, register,  # noqa: F401
                       predicate, tile_op, tile_ops, variants)
