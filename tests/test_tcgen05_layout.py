"""TMEM <-> register mapping: a numpy model of tcgen05.mma into layout D, tcgen05.ld with the
hardware fragment, and the epilogue's register layout: every (m, n) is written exactly once,
to the right place, and read back from the right register."""
import numpy as np
import pytest

from ptxgen.errors import LayoutError
from ptxgen.primitives import tmem_layout as TL


def test_layout_D_is_lane_row_column_n():
    lay = TL.layout_D(128, 256)
    assert all(TL.cell(lay, (128, 256), m, n) == (m, n) for m in (0, 1, 31, 32, 127)
               for n in (0, 1, 255))
    with pytest.raises(LayoutError, match=r"M=64 uses the PTX layouts E/F"):
        TL.layout_D(64, 64)


@pytest.mark.parametrize("name", list(TL.SHAPES))
@pytest.mark.parametrize("x", [1, 2, 4])
def test_fragment_is_a_bijection_per_warp(name, x):
    sh = TL.SHAPES[name]
    cells = [sh.at(t, j) for t in range(32) for j in range(sh.regs * x)]
    assert len(set(cells)) == len(cells) == sh.lanes * sh.cols * x
    assert {c[0] for c in cells} == set(range(sh.lanes))
    assert {c[1] for c in cells} == set(range(sh.cols * x))


def test_16x256b_matches_the_decoded_cutlass_dst_layout():
    """DstLayout ((4,8),(64,2)):((64,256),(1,2048)) over bits b + 256*dp -> 32-bit cells."""
    sh = TL.SHAPES["16x256b"]
    for t in range(32):
        for j in range(4):
            v0, v1 = 32 * (j % 2), j // 2
            bit = 64 * (t % 4) + 256 * (t // 4) + v0 + 2048 * v1
            assert sh.at(t, j) == (bit // 256, (bit % 256) // 32)


@pytest.mark.parametrize("name,cols", [("32x32b", 32), ("32x32b", 256), ("16x256b", 32),
                                       ("16x256b", 256)])
@pytest.mark.parametrize("accumulate", [False, True])
def test_mma_then_ld_then_epilogue_writes_every_element_once(name, cols, accumulate):
    rng = np.random.default_rng(7)
    M, N, K = 128, cols, 32
    A = rng.integers(-4, 5, (M, K)).astype(np.float32)
    B = rng.integers(-4, 5, (N, K)).astype(np.float32)
    tmem = np.full((TL.LANES, TL.TMEM_COLS), np.nan, dtype=np.float32)
    origin = (0, 64) if cols <= 256 else (0, 0)
    if accumulate:
        tmem[:, origin[1]:origin[1] + N] = 1.0
    count = np.zeros(tmem.shape, dtype=np.int64)
    TL.mma_model(tmem, A, B, TL.layout_D(M, N), origin, accumulate, count)
    want = A @ B.T + (1.0 if accumulate else 0.0)
    # the MMA wrote each (m, n) exactly once, into the cell layout D names, nothing else
    assert count.sum() == M * N and count.max() == 1
    assert np.array_equal(tmem[:M, origin[1]:origin[1] + N], want)
    regs = TL.ld_model(tmem, name, M, N, 128, origin)
    uses = {}
    out = TL.gather_model(regs, TL.register_layout(name, M, N), M, N, uses=uses)
    assert np.array_equal(out, want)
    # the epilogue reads every register of every thread exactly once
    assert len(uses) == 128 * len(regs[0]) == M * N and set(uses.values()) == {1}


def test_a_wrong_register_layout_puts_elements_in_the_wrong_place():
    """The model is sensitive: the 16x256b registers read through the 32x32b layout differ."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((128, 16)).astype(np.float32)
    B = rng.standard_normal((32, 16)).astype(np.float32)
    tmem = np.zeros((TL.LANES, TL.TMEM_COLS), dtype=np.float32)
    TL.mma_model(tmem, A, B, TL.layout_D(128, 32))
    regs = TL.ld_model(tmem, "16x256b", 128, 32, 128)
    out = TL.gather_model(regs, TL.register_layout("32x32b", 128, 32), 128, 32)
    assert not np.array_equal(out, A @ B.T)


@pytest.mark.parametrize("name,rows,cols,axis,text", [
    ("32x32b", 128, 32, "tid", "S[(128, 32):(1 @ tid, 1)]"),
    ("16x256b", 32, 8, "laneid", "S[((4, 8), (4, 2)):((2, 4 @ laneid), (1 @ laneid, 1))]"),
    ("16x256b", 128, 32, "tid", "S[((4, 2, 2, 8), (4, 4, 2)):((32 @ tid, 16, 2, 4 @ tid), "
                                "(4, 1 @ tid, 1))]"),
])
def test_register_layouts_read_like_the_isa(name, rows, cols, axis, text):
    assert repr(TL.register_layout(name, rows, cols, axis=axis)) == f"TileLayout({text})"


def test_pick_x_and_limits():
    assert TL.pick_x(TL.SHAPES["32x32b"], 256) == 128
    assert TL.pick_x(TL.SHAPES["32x32b"], 256, max_regs=32) == 32
    assert TL.pick_x(TL.SHAPES["16x256b"], 256) == 32
    with pytest.raises(LayoutError, match=r"cannot be tiled by .16x256b"):
        TL.pick_x(TL.SHAPES["16x256b"], 12)
