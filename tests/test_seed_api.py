"""The seed documents' spellings (shared/seeds/000, 002, 003) that used to fail or were
missing, each written the way the seed writes it (Tx./T. become pg.), checked by results
through the PTX interpreter where it moves data and by assembly where it needs sm_100a."""
import re
import warnings

import numpy as np
import pytest

import ptxgen as pg
import ptxsim
from _asm import assemble
from ptxgen.layout import S, TileLayout

RNG = np.random.default_rng(2002)


# ---- seed 002: dtype "float4_e2m1fn" in a tile copy --------------------------------------------
@pytest.mark.parametrize("scope,block", [("warp", 32), ("cta", 128)])
def test_float4_e2m1fn_tile_copy(scope, block):
    """A (BM, BK) float4_e2m1fn tile through shared memory and back: two elements a byte,
    moved in whole-byte vectors (it used to divide by a zero byte width)."""
    BM, BK = 32, 64

    @pg.kernel(grid=(1,), block=(block,))
    def k(A: pg.Tensor((BM, BK), "float4_e2m1fn"), B: pg.Tensor((BM, BK), "float4_e2m1fn")):
        pg.thread_id(block)
        As = pg.alloc_shared((BM, BK), "float4_e2m1fn")
        getattr(pg.tile, scope).copy(As[0:BM, 0:BK], A[0:BM, 0:BK])
        pg.cta_sync()
        getattr(pg.tile, scope).copy(B[0:BM, 32:BK], As[0:BM, 32:BK])

    a = RNG.integers(0, 256, (BM, BK // 2)).astype(np.uint8)
    b = np.full((BM, BK // 2), 0xA5, np.uint8)
    ptxsim.run(k, [a, b])
    want = np.full_like(b, 0xA5)
    want[:, 16:] = a[:, 16:]
    assert np.array_equal(b, want)
    assert re.search(r"ld\.global\.(v[24]\.)?u32", k.ptx("sm_100a"))     # whole-byte words


def test_float4_odd_region_start_is_declined_with_the_reason():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 64), "float4_e2m1fn"), B: pg.Tensor((32, 64), "float4_e2m1fn")):
        pg.lane_id()
        pg.tile.warp.copy(B[0:32, 1:33], A[0:32, 1:33])

    with pytest.raises(pg.DispatchError, match=r"vec_auto: gmem_smem: .*8b: A: region start "
                       r"offset 1 is not a multiple of 2"):
        k.ptx("sm_90a")


# ---- seed 003: a copy vec_auto declines in a narrowed scope goes to the scalar fallback ----------
def test_narrowed_scope_copy_takes_the_scalar_fallback():
    """Seed 003's warp round trip of a 32x32 float32 tile, with the first copy inside a branch
    that leaves lanes 0..15 active: vec_auto's gate (_all_threads_active) declines and the
    fallback runs on the 16 active lanes, moving the whole tile."""
    shape, dtype = (32, 32), "float32"
    s_layout = TileLayout(S[shape])
    fs = (slice(0, 32), slice(0, 32))

    @pg.kernel(grid=(1,), block=(32,))
    def kernel(A: pg.Tensor(shape, dtype), B: pg.Tensor(shape, dtype)):
        pg.cta_id(1)
        lane = pg.lane_id()
        pg.thread_id(32)
        A_smem = pg.alloc_buffer(shape, dtype, scope="shared", layout=s_layout)
        with pg.if_(lane < 16):
            pg.tile.warp.copy(A_smem[fs], A[fs])
        pg.cta_sync()
        pg.tile.warp.copy(B[fs], A_smem[fs])

    with pytest.warns(UserWarning, match=r"\[float32, warp \(16 threads, only threads 0..15 of "
                      r"32 active\)\] uses the scalar fallback; declined: .*vec_auto: not all 32 "
                      r"threads of the warp scope are active here"):
        kernel.ptx("sm_90a")
    a = RNG.standard_normal(shape).astype(np.float32)
    b = np.full(shape, np.nan, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ptxsim.run(kernel, [a, b])
    assert np.array_equal(a, b)


@pytest.mark.parametrize("cond,nthreads", [(lambda t, w: t >= 40, 88), (lambda t, w: t % 4 == 1, 32),
                                           (lambda t, w: t == 5, 1)])
def test_any_progression_of_active_threads_runs_the_fallback(cond, nthreads):
    """The rule is general: any scope, any branch on thread ids that leaves the same
    arithmetic progression of threads active in every instance."""
    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((24, 40), "int8"), B: pg.Tensor((24, 40), "int8")):
        tx = pg.thread_id(128)
        with pg.if_(cond(tx, pg.warp_id())):
            pg.tile.cta.copy(B[0:24, 0:40], A[0:24, 0:40])

    a = RNG.integers(-128, 128, (24, 40)).astype(np.int8)
    b = np.zeros_like(a)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        ptxsim.run(k, [a, b])
    assert np.array_equal(a, b)
    assert any(f"cta ({nthreads} thread" in str(w.message) for w in ws)
