"""Front end of `pg.tile.warp.gemm(C, A, B, accumulate=True)`: mma.sync from register fragments.

    a = pg.alloc_local((16, 16), "float16", layout=pg.mma_sync_layout("A", "m16n8k16"))
    b = pg.alloc_local((16, 8), "float16", layout=pg.mma_sync_layout("B", "m16n8k16"))
    c = pg.alloc_local((16, 8), "float32", layout=pg.mma_sync_layout("C", "m16n8k16"))
    pg.tile.warp.copy(a, As[0:16, 0:16])      # ldmatrix: the same arrangement
    pg.tile.warp.gemm(c, a, b)                # C += A @ B

What tracing knows is checked here, at the user's line: the operands are 2-D register
regions of consistent extents, the call is warp-scoped, and when the dtypes name an
instruction shape, every element sits in the lane and register that shape reads (the
lowering rules' own check, primitives/mma_sync).  Dtype and target support are the
variants' `(ok, reason)` verdicts, so `pg.tile.explain("gemm", ...)` lists them.
"""
from __future__ import annotations

from ..errors import LayoutError, PtxgenError, TraceError
from ..primitives.mma_sync import (SHAPES, accumulator_dtype, check_shapes, fragment_offsets,
                                   plan_sync)
from . import tile_ops
from .mma import accumulate_flag
from .tile import located, record_call, region_of

_EXAMPLE = "frag[0:16, 0:16]"


def gemm(scope, C, A, B, accumulate=True, dispatch=None):
    """C (M, N) += A (M, K) @ B (K, N) with mma.sync (C = A @ B when `accumulate` is False)."""
    c = region_of(C, "gemm C", _EXAMPLE)
    a = region_of(A, "gemm A", _EXAMPLE)
    b = region_of(B, "gemm B", _EXAMPLE)
    try:
        if scope != "warp":
            raise TraceError(f"pg.tile.{scope}.gemm: mma.sync is one warp's instruction on its "
                              f"own fragments; call pg.tile.warp.gemm (each warp multiplies "
                              f"its own A, B and C)")
        why = check_shapes(c, a, b)
        if why:
            raise TraceError(why)
        ta, tb = a.buffer.dtype.name, b.buffer.dtype.name
        for shape in SHAPES:        # the shape these dtypes name, if any: its rules now
            if accumulator_dtype(ta, tb, shape)[0] is None:
                continue
            ok, why = plan_sync(c, a, b, shape, fragments=False)
            if not ok:
                raise TraceError(why)
            for which, r in (("A", a), ("B", b), ("C", c)):
                why = fragment_offsets(r, which, shape, which)[1]
                if why:
                    raise LayoutError(why)
        acc = accumulate_flag(accumulate)
    except PtxgenError as e:
        raise located(e) from None
    record_call("gemm", scope, (c, a, b, acc), {}, None, dispatch)


tile_ops.register("gemm", gemm)
