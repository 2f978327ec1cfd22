"""Views at the builder level: views, permute, local, swizzled element indexing, errors."""
import re

import pytest

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout, laneid
from support.asm import assemble


def index_lines(ptx, marker):
    seg = ptx[ptx.index(marker):]
    return seg[:seg.index("ld.global") if "ld.global" in seg else len(seg)]


def test_view_and_permute_change_only_index_math():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((64,), "float32"),
          C: pg.Tensor((256,), "float32")):
        tx = pg.thread_id(64)
        A2 = A.view(64, 4)
        B[tx] = A2[tx, 0] + A2[tx, 3]
        At = A2.permute(1, 0)
        C[tx] = At[3, tx]          # == A2[tx, 3] == A[tx*4 + 3]

    ptx = k.ptx("sm_90a")
    assert "// A2 = pg.decl_buffer((64, 4), \"float32\", scope=\"global\", data=A.data)" in ptx
    assert "+12]" in ptx                      # A2[tx, 3]: +3 floats folded into the address
    assert ptx.count("ld.global.f32") == 3    # A2[tx, 0], A2[tx, 3], At[3, tx] (no copies)
    assert "div" not in ptx and "rem" not in ptx
    assert assemble(ptx, "sm_90a")[0]


def test_local_of_thread_axis_layout():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 8), "float32"), B: pg.Tensor((32, 8), "float32")):
        lane = pg.lane_id()
        R = pg.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8):(1 @ laneid, 1)]))
        flat = R.local()
        two = R.local(2, 4)
        for j in pg.unroll(8):
            flat[j] = A[lane, j]
        for a in pg.unroll(2):
            for b in pg.unroll(4):
                B[lane, a * 4 + b] = two[a, b] * 2.0

    ptx = k.ptx("sm_90a")
    assert ".local" not in ptx                 # 8 registers per lane, no local memory
    assert ptx.count("ld.global.f32") == 8 and ptx.count("st.global.f32") == 8
    assert assemble(ptx, "sm_90a")[0]


def test_local_reshape_must_cover_the_span():
    def k(A: pg.Tensor((32,), "float32")):
        R = pg.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8):(1 @ laneid, 1)]))
        R.local(3, 3)

    with pytest.raises(pg.TraceError, match=r"local\(3, 3\) of 'R' has 9 elements but this "
                       r"thread holds 8"):
        pg.kernel(grid=(1,), block=(32,))(k)


def test_local_with_layout_and_no_shape_takes_the_logical_size_not_the_span():
    """Seed 002: without layout=, local() is the raw span (7 registers here, gaps included);
    the explicit-layout= form with no shape infers the logical size a thread holds (4)."""
    import numpy as np
    from support import ptxsim

    got = {}

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 4), "float32"), B: pg.Tensor((32, 4), "float32")):
        lane = pg.lane_id()
        R = pg.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4):(1 @ laneid, 2)]))
        flat = R.local()                                  # registers 0..6
        for j in pg.unroll(4):
            flat[2 * j] = A[lane, j]
        elems = R.local(layout=TileLayout(S[4:2]))        # R's 4 elements, registers 0, 2, 4, 6
        got["shapes"] = (flat.shape, elems.shape)
        for j in pg.unroll(4):
            B[lane, j] = elems[j] * 2.0

    assert got["shapes"] == ((7,), (4,))
    ptx = k.ptx("sm_90a")
    assert ".local" not in ptx
    assert assemble(ptx, "sm_90a")[0]
    a = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    b = np.zeros((32, 4), np.float32)
    ptxsim.run(k, [a, b])
    assert np.array_equal(b, 2 * a)


def test_local_with_a_layout_of_another_size_and_no_shape_says_so():
    def k(A: pg.Tensor((32,), "float32")):
        R = pg.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4):(1 @ laneid, 2)]))
        R.local(layout=TileLayout(S[7]))

    with pytest.raises(pg.TraceError, match=r"test_views\.py:\d+: 'R_local': layout "
                       r"TileLayout\(S\[7:1\]\) has 7 elements but the shape \(4,\) has 4"):
        pg.kernel(k, grid=(1,), block=(32,))


def test_swizzled_32x64_f16_indexed_by_lane_and_loop_uses_xor_add():
    lay = ComposeLayout(Swizzle.mma(128, 16), TileLayout(S[(32, 64)]))

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 64), "float16"), B: pg.Tensor((32, 64), "float16")):
        lane = pg.lane_id()
        sm = pg.alloc_shared((32, 64), "float16", layout=lay, align=1024)
        for c in pg.serial(64):
            sm[lane, c] = A[lane, c]
        pg.cta_sync()
        for c in pg.serial(64):
            B[lane, c] = sm[lane, c]

    ptx = k.ptx("sm_90a")
    body = ptx[ptx.index("{"):]
    assert "xor.b32" in body and "div." not in body and "rem." not in body
    assert assemble(ptx, "sm_90a")[0]


def test_view_larger_than_storage_rejected():
    def k(A: pg.Tensor((32,), "float32")):
        arena = pg.alloc_buffer((64,), "float32", scope="shared.dyn")
        pg.decl_buffer((32,), "float32", data=arena.data, elem_offset=48, scope="shared.dyn")

    with pytest.raises(pg.TraceError, match=r"view 'view' covers bytes \[192, 320\) but its "
                       r"storage 'arena' has 256 bytes"):
        pg.kernel(grid=(1,), block=(32,))(k)


def test_layout_shape_mismatch_rejected():
    with pytest.raises(pg.PtxgenError, match=r"has 32 elements but the shape \(4, 16\) has 64"):
        @pg.kernel(grid=(1,), block=(32,))
        def k(A: pg.Tensor((4, 16), "float32", layout=TileLayout(S[(4, 8)]))):
            pass


@pytest.mark.parametrize("kind,ops", [
    ("row_major", ["shl.b32 %r{a}, %r1, 3;", "add.s32 %r{b}, %r{a}, %r2;", "+0"]),
    ("col_major", ["shl.b32 %r{a}, %r2, 2;", "add.s32 %r{b}, %r{a}, %r1;", "+0"]),
    ("shifted", ["shl.b32 %r{a}, %r1, 3;", "add.s32 %r{b}, %r{a}, %r2;", "+256"]),
    ("row_stride_16", ["shl.b32 %r{a}, %r1, 4;", "add.s32 %r{b}, %r{a}, %r2;", "+0"]),
])
def test_seed_b_declarations_lower_to_their_index(kind, ops):
    """i*8+j, j*4+i, i*8+j+64 (64 floats = +256 bytes), i*16+j: only B's metadata differs."""
    import add_one

    k = add_one.KERNELS[list(add_one.B_DECLS).index(kind)]
    ptx = k.ptx("sm_90a")
    store = ptx[ptx.index("add.rn.f32"):]          # B's address math comes after the add
    m = re.search(r"shl\.b32 %r(\d+), %r(\d), (\d);\n\s+add\.s32 %r(\d+), %r\1, %r(\d);", store)
    if kind in ("row_major", "shifted"):            # same index as A's: reused, not recomputed
        m = re.search(r"shl\.b32 %r(\d+), %r(\d), (\d);\n\s+add\.s32 %r(\d+), %r\1, %r(\d);", ptx)
    assert m, ptx
    text = f"shl.b32 %r{m.group(1)}, %r{m.group(2)}, {m.group(3)};"
    assert text == ops[0].format(a=m.group(1))
    assert f"add.s32 %r{m.group(4)}, %r{m.group(1)}, %r{m.group(5)};" == \
        ops[1].format(a=m.group(1), b=m.group(4))
    st = re.search(r"st\.global\.f32 \[%rd\d+(\+\d+)?\]", ptx).group(1) or "+0"
    assert st == ops[2]
    assert "div" not in ptx and "rem" not in ptx
