"""Front ends of the tensor-core MMA ops shared by Hopper and Blackwell.

`pg.tile.<scope>.gemm_async(D, A, B, accumulate=...)` is one op for both GPUs: where D lives
picks the instruction family, and with it the planner and the record.

    D a register accumulator (mma_accumulator)  -> wgmma.mma_async, sm_90a, warpgroup scope
    D a TMEM tile (TMEMPool.alloc)              -> tcgen05.mma, sm_100a, one issuing thread

The record's arch gate then rejects the other GPU with the fix (primitives/gemm.py).  Also
here: `mma_accumulator` / `mma_a_fragment` (register buffers whose layout is the wgmma
fragment, so epilogues move them with `pg.tile.*.copy`) and `gemm_wait`.
"""
from __future__ import annotations

from ..dtypes import dtype as _dtype
from ..errors import LayoutError, PtxgenError
from ..ir import BOOL, Const, as_expr
from ..primitives.wgmma import (WaitRecord, a_fragment_layout, accumulator_layout,
                                plan_wgmma)
from . import tile_ops
from .context import fail, user_site
from .tcgen05 import tmem_gemm_record
from .allocate import alloc_at
from .tile import located, record_call, region_of

_EXAMPLE = "T[0:64, 0:64]"
_WG = "warpgroup"


def accumulate_flag(acc):
    """An MMA's accumulate= as a bool expression (a Python bool or a traced comparison)."""
    if isinstance(acc, bool):
        return Const(acc, BOOL)
    e = as_expr(acc)
    if e.dtype != BOOL:
        raise PtxgenError(f"accumulate must be a bool or a comparison, got {e.dtype}")
    return e


def _wgmma_record(scope, d, a, b, d_dtype, cta_group, fence, **majors):
    if scope != _WG:
        raise PtxgenError(f"gemm_async into registers is wgmma, which all 128 threads of a "
                          f"warpgroup issue together: use pg.tile.warpgroup.gemm_async (not "
                          f"the {scope} scope)")
    for name, value, default in (("d_dtype", d_dtype, None), ("cta_group", cta_group, 1),
                                 ("fence", fence, True)):
        if value != default:
            raise PtxgenError(f"gemm_async {name}={value!r} applies to a TMEM accumulator "
                              f"(tcgen05); a register accumulator's type is its dtype and "
                              f"wgmma.fence / commit are always part of the call")
    return plan_wgmma(d, a, b, **majors)


def gemm_async(scope, D, A, B, accumulate=True, *, a_major=None, b_major=None, swizzle_a=None,
               swizzle_b=None, d_dtype=None, cta_group=1, fence=True, dispatch=None):
    """D = A @ B^T (+ D if `accumulate`), asynchronous: wgmma for a register D, tcgen05.mma
    for a TMEM D.  A (M, K) from shared memory or (wgmma) registers, B (N, K) shared."""
    d = region_of(D, "gemm_async D", _EXAMPLE)
    a = region_of(A, "gemm_async A", _EXAMPLE)
    b = region_of(B, "gemm_async B", _EXAMPLE)
    majors = dict(a_major=a_major, b_major=b_major, swizzle_a=swizzle_a, swizzle_b=swizzle_b)
    try:
        where = d.buffer.root.scope
        if where == "local":
            rec = _wgmma_record(scope, d, a, b, d_dtype, cta_group, fence, **majors)
        elif where == "tmem":
            rec = tmem_gemm_record(d, a, b, d_dtype=d_dtype, cta_group=cta_group, fence=fence,
                                   **majors)
        else:
            raise PtxgenError(f"the accumulator D {d} is in {where} memory; tcgen05.mma "
                              f"accumulates into tensor memory (sm_100a: TMEMPool(...).alloc) "
                              f"and wgmma into registers (sm_90a: "
                              f"pg.tile.warpgroup.mma_accumulator)")
        acc = accumulate_flag(accumulate)
    except PtxgenError as e:
        raise located(e) from None
    record_call("gemm_async", scope, (d, a, b, acc), {}, rec, dispatch)


def gemm_wait(scope, pending=0, dispatch=None):
    """Wait until at most `pending` committed gemm_async groups of this warpgroup are still
    in flight (wgmma.wait_group); after gemm_wait(0) the accumulators may be read."""
    if scope != _WG:
        raise fail(f"gemm_wait is wgmma.wait_group, a warpgroup collective: use "
                   f"pg.tile.warpgroup.gemm_wait (not the {scope} scope)")
    if not isinstance(pending, int) or isinstance(pending, bool) or pending < 0:
        raise fail(f"gemm_wait(pending) takes a non-negative int (groups left in flight), got "
                   f"{pending!r}")
    record_call("gemm_wait", scope, (), {}, WaitRecord(pending), dispatch)


def _fragment(scope, what, shape, dtype, layout_of):
    if scope != _WG:
        raise fail(f"{what} allocates a warpgroup fragment: use pg.tile.warpgroup.{what}")
    if not (isinstance(shape, tuple) and len(shape) == 2 and all(isinstance(x, int)
                                                                  for x in shape)):
        raise fail(f"{what} shape must be a (rows, cols) tuple of ints, got {shape!r}")
    try:
        layout = layout_of(*shape, _dtype(dtype))
    except (LayoutError, PtxgenError) as e:
        raise fail(f"{what}({shape}, '{dtype}'): {e}") from None
    return alloc_at(user_site(), "acc" if what == "mma_accumulator" else "a_frag", None, shape,
                    dtype, "local", layout)


def _acc_layout(M, N, dt):
    if dt.name not in ("float32", "float16"):
        raise PtxgenError("a wgmma accumulator is float32 or float16")
    return accumulator_layout(M, N)


def mma_accumulator(scope, shape, dtype="float32"):
    """Registers for a wgmma accumulator D of `shape` (64 * m, N): each element in the thread
    and register the hardware writes it to (layout: primitives/wgmma/fragment.py)."""
    return _fragment(scope, "mma_accumulator", shape, dtype, _acc_layout)


def mma_a_fragment(scope, shape, dtype="bfloat16"):
    """Registers for an A operand (64 * m, K) of the register-A wgmma, in its fragment
    layout; fill it with pg.tile.warpgroup.copy (ldmatrix where it applies)."""
    return _fragment(scope, "mma_a_fragment", shape, dtype,
                     lambda M, K, dt: a_fragment_layout(M, K, dt))


for _name, _fn in (("gemm_async", gemm_async), ("gemm_wait", gemm_wait),
                   ("mma_accumulator", mma_accumulator), ("mma_a_fragment", mma_a_fragment)):
    tile_ops.register(_name, _fn)
