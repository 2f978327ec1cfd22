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


# ---- CTA-pair accumulators: the PTX ISA's data path layout tables -----------------------------
# PTX ISA "Data Path Layout Organization": (M, cta_group, A sparsity, .ws) -> layout id.
ISA_DATAPATH = [
    (32, 1, "either", True, "G"), (64, 1, "either", True, "E"), (64, 1, "either", False, "F"),
    (128, 1, "either", None, "D"), (128, 2, "dense", None, "B"), (128, 2, "sparse", None, "C"),
    (256, 2, "either", None, "A"),
]


def isa_layout_B(N):
    """The ISA's Figure "Layout organization for M = 128 + .cta_group::2 + Dense A matrix" as a
    table, this CTA's (64, N) half: TMEM lanes 0..63 hold rows 0..63 of columns 0..N/2-1, lanes
    64..127 rows 0..63 of columns N/2..N-1 (the "2x2" datapath organization); {(m, n): (lane,
    column)}.  (The figure is an image in the ISA; TIRx's tmem_datapath_layout("B"), Triton's
    two-CTA M=64 TMEM layout and Modular's SM100 epilogues read it the same way.)"""
    half = N // 2
    return {(m, n): (m + 64 * (n // half), n % half) for m in range(64) for n in range(N)}


def isa_layout_B_warp_access(N):
    """The ISA's "Addresses to use in tcgen05.ld / tcgen05.st" figure for layout B: warp w
    (w % 4) reaches lanes 32w..32w+31, i.e. rows 32*(w % 2).. of column half w // 2."""
    half = N // 2
    return {w: {(32 * (w % 2) + t, half * (w // 2) + c) for t in range(32) for c in range(half)}
            for w in range(4)}


@pytest.mark.parametrize("M,cg,sparsity,ws,letter", ISA_DATAPATH)
def test_accumulator_layouts_follow_the_isa_datapath_table(M, cg, sparsity, ws, letter):
    if sparsity == "sparse" or ws:      # sparse (C) and .ws (E, G) MMAs: ptxgen issues neither
        assert letter in "CEG"
        return
    if letter in "DAB":
        name, rows, lay = TL.accumulator_layout(M, cg, 64)
        assert (name, rows) == (letter, M // cg)
    else:
        with pytest.raises(LayoutError, match=rf"M={M} with cta_group={cg} accumulates in another "
                           rf"TMEM datapath layout .* it models M=128 with cta_group=1 \(layout "
                           rf"D\), M=256 with cta_group=2 \(layout A\), M=128 with cta_group=2 "
                           rf"\(layout B\)"):
            TL.accumulator_layout(M, cg, 64)


@pytest.mark.parametrize("N", [32, 64, 256, 512])
def test_layout_B_is_the_isa_figure(N):
    name, rows, lay = TL.accumulator_layout(128, 2, N)
    assert (name, rows) == ("B", 64)
    want = isa_layout_B(N)
    got = {(m, n): TL.cell(lay, (64, N), m, n) for m in range(64) for n in range(N)}
    assert got == want
    assert lay.span("TCol") == N // 2 and lay.span("TLane") == 128
    assert len(set(got.values())) == 64 * N            # one cell per element


def test_layout_A_is_layout_D_over_the_ctas_128_rows():
    name, rows, lay = TL.accumulator_layout(256, 2, 128)
    assert (name, rows) == ("A", 128)
    assert all(TL.cell(lay, (128, 128), m, n) == (m, n) for m in range(0, 128, 7)
               for n in range(0, 128, 5))


@pytest.mark.parametrize("N", [0, 7, 1026])
def test_layout_B_bad_widths(N):
    with pytest.raises(LayoutError, match=rf"layout B: N={N} must be even, its N/2 columns in "
                       r"1\.\.512"):
        TL.layout_B(N)


@pytest.mark.parametrize("shape_name", ["32x32b", "16x256b"])
@pytest.mark.parametrize("N", [32, 128])
def test_cta_pair_mma_then_ld_reads_each_ctas_rows(shape_name, N):
    """An M=128 cta_group::2 MMA: CTA c holds rows 64c..64c+63 of the pair's D in layout B; a
    warpgroup's tcgen05.ld over the (128, N/2) image, gathered through the datapath register
    layout, gives back exactly those rows, each element once, and each warp reads what the
    ISA's address figure gives it."""
    rng = np.random.default_rng(3)
    A = rng.integers(-4, 5, (128, 32)).astype(np.float32)
    B = rng.integers(-4, 5, (N, 32)).astype(np.float32)
    D = A @ B.T
    _, rows, lay = TL.accumulator_layout(128, 2, N)
    reg_lay = TL.datapath_register_layout(lay, rows, N, shape_name, "tid")
    access = isa_layout_B_warp_access(N)
    for c in range(2):
        tmem = np.full((TL.LANES, TL.TMEM_COLS), np.nan, dtype=np.float32)
        count = np.zeros(tmem.shape, dtype=np.int64)
        TL.mma_model(tmem, A[64 * c:64 * c + 64], B, lay, count=count)
        assert count.sum() == 64 * N and count.max() == 1
        assert not np.isnan(tmem[:, :N // 2]).any() and np.isnan(tmem[:, N // 2:]).all()
        regs = TL.ld_model(tmem, shape_name, 128, N // 2, 128)
        uses = {}
        out = TL.gather_model(regs, reg_lay, rows, N, uses=uses)
        assert np.array_equal(out, D[64 * c:64 * c + 64])
        assert len(uses) == 64 * N and set(uses.values()) == {1}
        for m in range(0, 64, 5):
            for n in range(0, N, 3):
                t = reg_lay.apply(m, n, shape=(64, N))["tid"]
                assert (m, n) in access[t // 32]


def test_datapath_register_layout_of_layout_D_is_register_layout():
    lay = TL.layout_D(128, 64)
    for name in TL.SHAPES:
        assert repr(TL.datapath_register_layout(lay, 128, 64, name)) == \
            repr(TL.register_layout(name, 128, 64))
