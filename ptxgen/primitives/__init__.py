"""Tile primitives: ops on regions whose instruction forms are chosen by dispatch."""
from __future__ import annotations

from .registry import dispatch, evaluate, register, variants  # noqa: F401


def lower_tile_call(stmt, target, analyzer, func):
    """Dispatch one TileCall to a variant and return the statements it lowers to.

    Called by the emitter while it walks the body, so the facts about every index
    (loop ranges, thread-id extents, let values) are the ones in force here."""
    from ..errors import PtxgenError
    from .scope import make_scope

    where = f"{stmt.src}: " if stmt.src else ""
    if stmt.op == "copy":
        from .copy import CopyCall

        dst, src = stmt.args
        call = CopyCall(dst, src, make_scope(stmt.scope, func.block), target, analyzer,
                        {k: v for k, v in stmt.options.items() if not k.startswith("_")},
                        stmt.options.get("_all_active", (True, "")), where, stmt, func.block)
        forced = call.options.pop("dispatch", None)
        variant = dispatch("copy", call, forced)
        out = variant.emit(call)
        for s in out:
            if not s.src:
                s.src = stmt.src
        return out
    from .tcgen05 import LOWER   # gemm_async, mma_commit, tmem_load/store/copy

    if stmt.op in LOWER:
        return LOWER[stmt.op](stmt, target, analyzer, func)
    raise PtxgenError(f"{where}unknown tile op {stmt.op!r}")
