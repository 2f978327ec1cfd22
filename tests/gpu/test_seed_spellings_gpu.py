"""The seed documents' spellings on a real GPU (sm_80+): forced vec_auto on register copies,
pg.thread_id() under pg.launch, R.local(layout=), B[pg.Ramp(...)], B.sub[...] and the
alloc_tensor / decl_tensor dynamic arena.  Outputs are poisoned before each launch, so an
element the kernel never wrote cannot pass.  (The CTA-pair layout B needs sm_100a and a
cluster launch: assembled and modelled in tests/test_alloc_tmem.py, not run here.)

Marked ``gpu``; skipped where no CUDA device is visible.
"""
import importlib.util

import numpy as np
import pytest

import ptxgen as pg
from ptxgen.layout import S, TileLayout, laneid
from ptxgen.runtime import has_gpu

_ARRAYS = any(importlib.util.find_spec(m) is not None for m in ("torch", "cupy"))
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not _ARRAYS, reason="needs torch or cupy for device arrays")]

RNG = np.random.default_rng(34)
POISON = -12345.0


def _run(k, *arrays):
    """Launch `k` on device copies of `arrays`; return them back as numpy."""
    from _xp import xp

    dev = [xp.asarray(a) for a in arrays]
    k(*dev)
    return [xp.asnumpy(d) for d in dev]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_forced_vec_auto_register_round_trip(dtype):
    lay = TileLayout(S[(32, 8):(1 @ laneid, 1)])

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 8), dtype), B: pg.Tensor((32, 8), dtype)):
        R = pg.alloc_local((32, 8), dtype, layout=lay)
        pg.tile.warp.copy(R[:, :], A[:, :], dispatch="vec_auto")
        pg.tile.warp.copy(B[:, :], R[:, :], dispatch="vec_auto")

    a = RNG.standard_normal((32, 8)).astype(dtype)
    _, b = _run(k, a, np.full((32, 8), POISON, dtype))
    assert np.array_equal(a, b)


def test_thread_id_from_the_launch_in_the_body():
    @pg.kernel
    def k(A: pg.Tensor((4, 64), "float32")):
        pg.launch(grid=(1,), block=(64, 4))
        tx = pg.thread_id()
        ty = pg.thread_id(dim="y")
        A[ty, tx] = pg.cast(ty * 64 + tx, "float32")

    (a,) = _run(k, np.full((4, 64), POISON, np.float32))
    assert np.array_equal(a, np.arange(256, dtype=np.float32).reshape(4, 64))


def test_local_with_layout_reads_the_logical_registers():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 4), "float32"), B: pg.Tensor((32, 4), "float32")):
        lane = pg.lane_id()
        R = pg.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4):(1 @ laneid, 2)]))
        flat = R.local()
        for j in pg.unroll(4):
            flat[2 * j] = A[lane, j]
        elems = R.local(layout=TileLayout(S[4:2]))
        for j in pg.unroll(4):
            B[lane, j] = elems[j] * 2.0

    a = RNG.standard_normal((32, 4)).astype(np.float32)
    _, b = _run(k, a, np.full((32, 4), POISON, np.float32))
    assert np.array_equal(b, 2 * a)


def test_ramp_and_sub():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((256,), "float32"),
          C: pg.Tensor((8, 16), "float32"), D: pg.Tensor((4, 4), "float32")):
        tx = pg.thread_id(64)
        B[pg.Ramp(tx * 4, 1, 4)] = A[pg.Ramp(tx * 4, 1, 4)]
        blk = C.sub[2:6, 1::4]
        row = C.sub[7]
        with pg.if_(tx < 16):
            D[tx // 4, tx % 4] = blk[tx // 4, tx % 4] + row[tx % 4]

    a = RNG.standard_normal(256).astype(np.float32)
    c = RNG.standard_normal((8, 16)).astype(np.float32)
    _, b, _, d = _run(k, a, np.full(256, POISON, np.float32), c,
                      np.full((4, 4), POISON, np.float32))
    assert np.array_equal(a, b)
    assert np.array_equal(d, c[2:6, 1::4] + c[7, 0:4])


def test_alloc_tensor_decl_tensor_dynamic_arena():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((64,), "float32"), B: pg.Tensor((64,), "float32"),
          C: pg.Tensor((64,), "float32")):
        tx = pg.thread_id(64)
        arena = pg.alloc_tensor(ty_args=[pg.Tensor((128,), "float32", scope="shared.dyn")])
        As = pg.decl_tensor(arena.data, ty_args=[pg.Tensor((64,), "float32",
                                                           scope="shared.dyn")])
        Bs = pg.decl_tensor(arena.data, ty_args=[pg.Tensor((64,), "float32", elem_offset=64,
                                                           scope="shared.dyn")])
        As[tx] = A[tx]
        Bs[tx] = B[tx]
        pg.cuda.cta_sync()
        C[tx] = As[63 - tx] + Bs[tx]

    a = RNG.standard_normal(64).astype(np.float32)
    b = RNG.standard_normal(64).astype(np.float32)
    _, _, c = _run(k, a, b, np.full(64, POISON, np.float32))
    assert np.array_equal(c, a[::-1] + b)
