"""IR -> IR passes between tracing and emission.

`prepare(func, target)` is the pipeline every build runs: `lower` (expand `pg.unroll`
loops, decide which local buffers live in registers), then `lower_tiles` (dispatch every
tile op under the facts in force at it).  What comes out holds no TileCall and no
unrolled loop: the emitter's input.
"""
from __future__ import annotations

from ..ir import PrimFunc
from .lower import lower
from . import syncdebug
from .protocol import check_cluster_arch, check_protocol
from .tiles import lower_tiles


def prepare(func: PrimFunc, target) -> PrimFunc:
    body, attrs = func.body, func.attrs
    if syncdebug.MODE["sync"]:   # bounded waits (sync debug mode): the sites name what timed out
        body, sites = syncdebug.instrument(body)
        attrs = dict(attrs, sync_sites=sites)
    body, registers, has_tiles, has_sync = lower(body)
    unrolled = PrimFunc(func.name, func.params, body, func.grid, func.block,
                        func.dynamic_smem_bytes, func.dynamic_smem_reserve, attrs,
                        frozenset(registers))
    if has_sync:
        check_protocol(unrolled, target)
    else:   # what check_protocol does for a kernel with nothing it follows, without its scan
        check_cluster_arch(unrolled, target)
    return lower_tiles(unrolled, target) if has_tiles else unrolled
