"""Tile math on wgmma fragments, driven by their TileLayout: row reductions into a reduced
(replicated) tile, broadcasts of it along axis 1, element coordinates in masks, the cast of
an fp32 accumulator to the A fragment of the next gemm_async, and the copy of a reduced
tile to memory.  Every check runs the kernel in ptxsim over the whole fragment, for several
accumulator shapes, against numpy (bit-exact where the arithmetic is exact)."""
import math
import re
import warnings

import numpy as np
import pytest

import ptxgen as pg
from support.asm import assemble
from ptxgen.errors import PtxgenError
from support.ptxsim import run

SHAPES = [(64, 8), (64, 16), (64, 24), (64, 64), (64, 128), (128, 32), (64, 256)]


def _row_kernel(M, N, off):
    """Y = exp2(masked(X) - rowmax), R = rowmax, L = rowsum(Y), masked: col > row + off."""
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((M, N), "float32"), Y: pg.Tensor((M, N), "float32"),
          R: pg.Tensor((M,), "float32"), L: pg.Tensor((M,), "float32")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((M, N), "float32")
        wg.copy(acc, X)
        row, col = wg.coords(acc)
        wg.select(acc, col > row + off, -math.inf, acc)
        m = wg.reduced(acc, axis=1)
        wg.max(m, acc, axis=1)
        wg.sub(acc, acc, m)
        wg.exp2(acc, acc)
        s = wg.reduced(acc, axis=1)
        wg.sum(s, acc, axis=1)
        wg.copy(Y, acc)
        wg.copy(R, m)
        wg.copy(L, s)
    k.__name__ = f"rows_{M}x{N}"
    return pg.kernel(k, grid=(1,), block=(128,))


def _masked(x, off):
    r, c = np.indices(x.shape)
    return np.where(c > r + off, -np.inf, x)


@pytest.mark.parametrize("M,N", SHAPES)
def test_row_max_broadcast_sub_and_mask_match_numpy(M, N):
    rng = np.random.default_rng(M * 1000 + N)
    x = rng.integers(-64, 64, size=(M, N)).astype(np.float32) / 8
    y = np.full((M, N), np.nan, np.float32)
    r = np.full(M, np.nan, np.float32)
    l_ = np.full(M, np.nan, np.float32)
    off = N // 4 - 40
    run(_row_kernel(M, N, off), [x, y, r, l_])
    xm = _masked(x, off)
    warnings.simplefilter("ignore", RuntimeWarning)      # -inf - -inf in masked rows
    want_r = xm.max(axis=1)
    assert np.array_equal(r, want_r)      # -inf where a whole row is masked
    # exp2 of an integer multiple of 1/8 is approximate (ex2.approx): the sub before it is
    # exact, so compare through the same reference argument
    arg = xm - want_r[:, None]
    assert np.allclose(y, np.exp2(arg), rtol=2e-6, atol=0, equal_nan=True)
    assert np.allclose(l_, y.astype(np.float64).sum(axis=1), rtol=1e-5, equal_nan=True)
    assert np.isnan(y).any(axis=1).sum() == np.isinf(want_r).sum()


def test_reduced_tile_is_the_rows_of_the_fragment():
    wg = pg.tile.warpgroup
    seen = {}

    def k(X: pg.Tensor((64, 32), "float32")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((64, 32), "float32")
        seen["m"] = wg.reduced(acc, axis=1)
        seen["c"] = wg.reduced(acc, axis=0)
    pg.kernel(k, grid=(1,), block=(128,))
    m, c = seen["m"].buffer, seen["c"].buffer
    assert m.shape == (64,) and c.shape == (32,)
    # row = 16 w + 8 h + g: w and g are thread bits, h a register; lane bits q are free
    assert [m.layout.apply(r, shape=(64,))["m"] for r in (0, 8, 16)] == [0, 1, 0]
    assert m.layout.apply(17, shape=(64,))["tid_in_wg"] == 32 + 4


@pytest.mark.parametrize("N", [16, 64, 128])
def test_cast_accumulator_to_a_fragment_is_registers_only(N):
    """fp32 accumulator -> bf16 A fragment in registers: the C and A layouts line up, so
    the cast is cvt.rn.bf16x2.f32 pairs and no shared memory; then RS wgmma reads it."""
    from ptxgen.primitives.tcgen05 import canonical_layout
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((64, N), "float32"), Y: pg.Tensor((64, 64), "float32")):
        pg.thread_id(128)
        pool = pg.SMEMPool()
        sw = "128B" if N % 64 == 0 else "32B"
        Vt = pool.alloc((64, N), "bfloat16", align=1024,
                        layout=canonical_layout(64, N, "bfloat16", swizzle=sw))
        pool.commit()
        acc = wg.mma_accumulator((64, N), "float32")
        wg.copy(acc, X)
        p = wg.mma_a_fragment((64, N), "bfloat16")
        wg.cast(p, acc)
        o = wg.mma_accumulator((64, 64), "float32")
        wg.gemm_async(o, p, Vt, accumulate=False)
        wg.gemm_wait(0)
        wg.copy(Y, o)
    ptx = pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_90a")
    cast = ptx[ptx.index("// pg.tile.warpgroup.cast"):ptx.index("wgmma.fence")]
    assert len(re.findall(r"^\s+cvt\.rn\.bf16x2\.f32 ", cast, re.M)) == N // 4
    assert "st.shared" not in cast and "ld.shared" not in cast
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log


def test_cast_to_a_fragment_matches_numpy_bits():
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((64, 32), "float32"), Y: pg.Tensor((64, 32), "bfloat16")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((64, 32), "float32")
        wg.copy(acc, X)
        p = wg.mma_a_fragment((64, 32), "bfloat16")
        wg.cast(p, acc)
        wg.copy(Y, p)
    x = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32)
    y = np.zeros((64, 32), np.uint16)
    run(pg.kernel(k, grid=(1,), block=(128,)), [x, y])
    u = x.view(np.uint32).astype(np.uint64)
    want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(y, want)


def test_scale_folded_into_one_fma_with_a_broadcast_row():
    """exp2(s * scale - m * scale): fma(s, s, scale, neg_m) with the (rows,) tile."""
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((64, 64), "float32"), Y: pg.Tensor((64, 64), "float32")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((64, 64), "float32")
        wg.copy(acc, X)
        m = wg.reduced(acc, axis=1)
        wg.max(m, acc, axis=1)
        wg.mul(m, m, -0.5)
        wg.fma(acc, acc, 0.5, m)
        wg.copy(Y, acc)
    kern = pg.kernel(k, grid=(1,), block=(128,))
    ptx = kern.ptx("sm_90a")
    body = ptx[ptx.index("// pg.tile.warpgroup.fma"):]
    assert len(re.findall(r"^\s+fma\.rn\.f32 ", body, re.M)) == 32
    x = (np.random.default_rng(5).integers(-99, 99, (64, 64)) / 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    run(kern, [x, y])
    assert np.array_equal(y, x * 0.5 - x.max(axis=1, keepdims=True) * 0.5)


def test_destination_cannot_be_the_replicated_tile_of_a_full_source():
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((64, 64), "float32")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((64, 64), "float32")
        m = wg.reduced(acc, axis=1)
        wg.add(m, acc, 1.0)
    with pytest.raises(PtxgenError, match="shape mismatch"):
        pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_90a")


def test_coordinates_of_another_shape_are_refused():
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((64, 64), "float32")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((64, 64), "float32")
        other = wg.mma_accumulator((64, 32), "float32")
        row, col = wg.coords(other)
        wg.select(acc, col > row, 0.0, acc)
    with pytest.raises(PtxgenError, match=r"the coordinates of other\[0:64, 0:32\] \(\(64, 32\)\) "
                                          r"index a tile of that shape, but dst acc"):
        pg.kernel(k, grid=(1,), block=(128,))


def test_ftz_selects_the_flushing_approximation():
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((64, 16), "float32"), Y: pg.Tensor((64, 16), "float32")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((64, 16), "float32")
        wg.copy(acc, X)
        wg.exp2(acc, acc, ftz=True)
        wg.copy(Y, acc)
    kern = pg.kernel(k, grid=(1,), block=(128,))
    ptx = kern.ptx("sm_90a")
    assert len(re.findall(r"^\s+ex2\.approx\.ftz\.f32 ", ptx, re.M)) == 8
    assert not re.findall(r"^\s+ex2\.approx\.f32 ", ptx, re.M)
    x = np.array([[-130.0, -1.5, 0.0, 3.0] * 4] * 64, np.float32)
    y = np.full_like(x, np.nan)
    run(kern, [x, y])
    assert y[0, 0] == 0.0 and np.allclose(y[:, 1:4], np.exp2(x[:, 1:4]), rtol=2e-6)
    with pytest.raises(PtxgenError, match="exp2: ftz= takes True or False, got 1"):
        def bad(X: pg.Tensor((64, 16), "float32")):
            pg.thread_id(128)
            acc = wg.mma_accumulator((64, 16), "float32")
            wg.exp2(acc, acc, ftz=1)
        pg.kernel(bad, grid=(1,), block=(128,))


def test_ftz_keeps_a_result_that_rounds_up_to_a_normal_binade():
    """ex2.approx.ftz of -1.75e-8 is 1.0 (0.99999998 rounds up), not a flushed 0."""
    wg = pg.tile.warpgroup

    def k(X: pg.Tensor((64, 8), "float32"), Y: pg.Tensor((64, 8), "float32")):
        pg.thread_id(128)
        acc = wg.mma_accumulator((64, 8), "float32")
        wg.copy(acc, X)
        wg.exp2(acc, acc, ftz=True)
        wg.copy(Y, acc)
    x = np.full((64, 8), -1.753574e-08, np.float32)
    y = np.zeros_like(x)
    run(pg.kernel(k, grid=(1,), block=(128,)), [x, y])
    assert np.all(y == 1.0)


def test_explain_says_why_the_register_a_form_is_chosen():
    from ptxgen.primitives.tcgen05 import canonical_layout
    wg = pg.tile.warpgroup
    out = {}

    def k(X: pg.Tensor((64, 64), "float32")):
        pg.thread_id(128)
        pool = pg.SMEMPool()
        Vt = pool.alloc((64, 64), "bfloat16", align=1024,
                        layout=canonical_layout(64, 64, "bfloat16"))
        pool.commit()
        o = wg.mma_accumulator((64, 64), "float32")
        p = wg.mma_a_fragment((64, 64), "bfloat16")
        out["e"] = str(pg.tile.explain("gemm_async", o, p, Vt, scope="warpgroup"))
    pg.kernel(k, grid=(1,), block=(128,))
    assert "wgmma_ss     30  no  A is in registers; this variant reads A from shared memory" \
        in out["e"]
    assert "-> wgmma_rs     25  ok  m64n64k16.f32.bf16.bf16, A from registers, B from shared" \
        in out["e"]


def test_warp_reduction_into_a_tile_replicated_over_the_lanes_of_a_row():
    """Row i of an (8, 24) warp tile lives in lanes 4i..4i+3; its sum goes to a (8,) tile laid
    out (8,):(4 @ laneid), which those four lanes share, and copies out once per row."""
    from ptxgen.layout import S, TileLayout, laneid

    def k(A: pg.Tensor((8, 24), "float32"), Out: pg.Tensor((8,), "float32")):
        pg.lane_id()
        r = pg.alloc_local((8, 24), "float32",
                           layout=TileLayout(S[(8, (4, 6)):(4 @ laneid, (1 @ laneid, 1))]))
        pg.tile.warp.copy(r, A[0:8, 0:24])
        d = pg.alloc_local((8,), "float32", layout=TileLayout(S[(8,):(4 @ laneid,)]))
        pg.tile.warp.sum(d, r, axis=1)
        pg.tile.warp.copy(Out[0:8], d)
    a = np.arange(8 * 24, dtype=np.float32).reshape(8, 24)
    out = np.full(8, np.nan, np.float32)
    run(pg.kernel(k, grid=(1,), block=(32,)), [a, out])
    assert np.array_equal(out, a.sum(axis=1))
