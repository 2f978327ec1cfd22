"""Addresses before the base or past the end.  Negative elem_offsets and
layouts reaching below 0 on storage a buffer owns, views outside their storage, and loads,
stores and tile regions whose index some thread provably takes out of bounds.  The index
proof is exact (analysis/ranges.py): guarded accesses the guard keeps in bounds, and indices
that cannot be decided, are accepted."""
import numpy as np
import pytest
from support import ptxsim

import ptxgen as pg
from ptxgen.layout import S, TileLayout
from support.located import build, fails, kernel


def _oob(idx, buf, dim, ext, reach, where):
    return (f"index {idx} of '{buf}' (dimension {dim}, extent {ext}) is out of bounds: it "
            f"reaches {reach} for {where}, outside 0..{ext - 1}; guard the access (pg.if_) or "
            f"fix the index")


# ---- layouts and offsets ------------------------------------------------------------------
def test_negative_elem_offset_of_a_parameter():
    def k(A: pg.Tensor((4, 8), "float32", elem_offset=-1)):   # at: param
        A[0, 0] = 1.0

    fails(lambda: kernel(k), "param", "'A': elem_offset -1 is before the start of its storage "
          "(an address below the base); make elem_offset at least 0", pg.TraceError)


@pytest.mark.parametrize("lay,eo,msg", [
    (S[(4, 8):(-8, 1)], 0, "its layout reaches offset -24"),
    (S[(4, 8):(-8, 1)], 20, "its layout reaches offset -24 (with elem_offset 20: -4)"),
    (S[(4, 8):(1, -4)], 0, "its layout reaches offset -28"),
])
def test_layouts_reaching_below_the_base(lay, eo, msg):
    def k(A: pg.Tensor((32,), "float32")):
        s = pg.alloc_buffer((4, 8), "float32", scope="shared", layout=TileLayout(lay),  # at: a
                            elem_offset=eo)

    lo = int(msg.split("offset ")[1].split(" ")[0].rstrip(")"))
    fails(lambda: kernel(k), "a", f"'s': {msg} before the start of its storage (an address "
          f"below the base); make elem_offset at least {-lo} or use non-negative strides",
          pg.TraceError)


def test_negative_strides_with_a_compensating_offset_run():
    def k(A: pg.Tensor((4, 8), "float32"),
          B: pg.Tensor((4, 8), "float32", layout=TileLayout(S[(4, 8):(-8, 1)]), elem_offset=24)):
        i = pg.thread_id(4, "x")
        j = pg.thread_id(8, "y")
        B[i, j] = A[i, j]

    kk = kernel(k, block=(4, 8))
    a, b = np.arange(32, dtype=np.float32).reshape(4, 8), np.zeros((4, 8), np.float32)
    ptxsim.run(kk, [a, b])
    assert (b == a[::-1]).all()          # row i lands at 24 - 8 i: the rows reversed


@pytest.mark.parametrize("off,lay,want", [
    (-4, None, "covers bytes [-16, 0) but its storage 'A' starts at byte 0 (an address below "
               "the base)"),
    (0, S[(4, 4):(-4, 1)], "covers bytes [-48, 16) but its storage 'A' starts at byte 0 (an "
                           "address below the base)"),
    (8, S[(4, 4):(8, 1)], "covers bytes [32, 144) but its storage 'A' has 128 bytes"),
])
def test_views_outside_their_storage(off, lay, want):
    def k(A: pg.Tensor((4, 8), "float32")):
        v = pg.decl_buffer((4, 4) if lay else (4,), "float32", data=A.data,  # at: view
                           elem_offset=off, layout=TileLayout(lay) if lay else None)

    fails(lambda: kernel(k), "view", f"view 'v' {want}", pg.TraceError)


# ---- indices ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "int8", "float64"])
def test_thread_index_past_the_end(dt):
    def k(A: pg.Tensor((32,), dt)):
        tx = pg.thread_id(32)
        A[tx + 1] = A[tx]                                      # at: st

    fails(build(k), "st", _oob("tx + 1", "A", 0, 32, 32, "%tid.x = 31"), pg.TraceError)


def test_negative_index_into_a_symbolic_extent():
    N = pg.var("N")

    def k(A: pg.Tensor((N,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = A[tx - 1]                                      # at: ld

    with pytest.raises(pg.TraceError) as ei:
        build(k)()
    assert str(ei.value).endswith("is out of bounds: it reaches -1 for %tid.x = 0, outside "
                                  "0..N-1; guard the access (pg.if_) or fix the index")


def test_loop_and_cta_ranges():
    def k(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(32)
        for i in pg.serial(5):
            A[i * 32 + tx] = 1.0                               # at: loop

    fails(build(k), "loop", _oob("i * 32 + tx", "A", 0, 128, 128, "%tid.x = 0, i = 4"),
          pg.TraceError)

    def k2(A: pg.Tensor((2, 64), "float32")):
        tx = pg.thread_id(32)
        bx = pg.cta_id(3)
        A[bx, tx] = 1.0                                        # at: cta

    fails(build(k2, grid=None), "cta", _oob("bx", "A", 0, 2, 2, "%ctaid.x = 2"),
          pg.TraceError)


def test_vector_past_the_end_and_shared_and_local():
    def k(A: pg.Tensor((130,), "float32")):
        tx = pg.thread_id(32)
        A.vstore([tx * 4], A.vload([tx * 4 + 4], "float32x4"))  # at: vec

    fails(build(k), "vec", _oob("tx * 4 + 4", "A", 0, 130, "128..131", "%tid.x = 31"),
          pg.TraceError)

    def k2(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        s = pg.alloc_shared((4, 8), "float32")
        s[tx // 8, tx % 8 + 1] = 1.0                           # at: sm

    fails(build(k2), "sm", _oob("tx % 8 + 1", "s", 1, 8, 8, "%tid.x = 7"), pg.TraceError)


def test_unrolled_and_lane_indices():
    def k(A: pg.Tensor((32,), "int32")):
        lane = pg.lane_id()
        for j in pg.unroll(2):
            A[lane + j] = j                                    # at: unroll

    fails(build(k), "unroll", _oob("lane + 1", "A", 0, 32, 32, "%laneid = 31"), pg.TraceError)


def test_tile_region_out_of_bounds():
    def k(A: pg.Tensor((64, 32), "float32")):
        sm = pg.alloc_shared((32, 32), "float32")
        for i in pg.serial(4):
            pg.tile.warp.copy(sm, A[i * 16:i * 16 + 32, 0:32])  # at: region

    fails(build(k), "region", "region A[i * 16:i * 16+32, 0:32] is out of bounds along dimension "
          "0 of 'A' (extent 64): it covers 48..79 for i = 3; guard the copy (pg.if_) or fix the "
          "region's start", pg.TraceError)


# ---- what must stay accepted ---------------------------------------------------------------
def test_guarded_accesses_run():
    def k(A: pg.Tensor((32,), "int32"), B: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        with pg.if_(tx < 31):
            B[tx + 1] = A[tx]
        with pg.else_():
            B[0] = A[tx] * 2
        with pg.if_((tx & 3) == 0):
            with pg.if_(tx // 4 < 4):
                B[tx // 4 * 8 + 7 - tx // 4] = B[tx // 4] + 0

    kk = kernel(k)
    a, b = np.arange(32, dtype=np.int32), np.zeros(32, np.int32)
    ptxsim.run(kk, [a, b])
    assert b[0] == 62 and (b[1:31] == a[:30]).all()


@pytest.mark.parametrize("case", ["param", "memory", "xor", "runtime_loop", "zero_trip",
                                  "callable_grid"])
def test_undecidable_or_in_bounds_is_accepted(case):
    def k(A: pg.Tensor((64,), "float32"), I: pg.Tensor((32,), "int32"), n: pg.int32):
        tx = pg.thread_id(32)
        if case == "param":
            A[tx + n] = 1.0
        elif case == "memory":
            A[I[tx]] = 1.0
        elif case == "xor":
            A[(tx & 7) ^ (tx >> 2)] = 1.0         # interval says 0..15: reaches only 0..15
        elif case == "runtime_loop":
            for i in pg.serial(n):
                A[i * 32 + tx] = 1.0
        elif case == "zero_trip":
            for i in pg.serial(0):
                A[tx + 1000] = 1.0
        else:
            bx = pg.cta_id()
            A[bx * 32 + tx] = 1.0

    kw = dict(grid=lambda a: (2,)) if case == "callable_grid" else {}
    assert ".entry" in pg.kernel(k, block=(32,), **(kw or dict(grid=(1,)))).ptx("sm_90a")


def test_raw_control_flow_disables_the_proof():
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        pg.ptx["ret"]()
        A[tx + 1] = 1.0

    assert ".entry" in build(k)()
