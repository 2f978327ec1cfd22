"""Copy dispatch, vec_auto gmem_smem and fallback: chosen forms, reasons, model."""
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout
from support.asm import assemble


def roundtrip(shape, dtype, region=None, scope="warp", block=32, smem_layout=None, a_kw=None,
              name="rt"):
    """global -> shared -> global through `scope` copies."""
    region = region or tuple(slice(0, e) for e in shape)
    ext = tuple(r.stop - r.start for r in region)
    a_kw = a_kw or {}

    @pg.kernel(grid=(1,), block=(block,), name=name)
    def k(A: pg.Tensor(shape, dtype, **a_kw), B: pg.Tensor(shape, dtype, **a_kw)):
        pg.thread_id(block)
        sm = pg.alloc_shared(ext, dtype, layout=smem_layout, align=128)
        full = tuple(slice(0, e) for e in ext)
        getattr(pg.tile, scope).copy(sm[full], A[region])
        pg.cta_sync()
        getattr(pg.tile, scope).copy(B[region], sm[full])
    return k


def copy_lines(ptx):
    return re.findall(r"^\s+((?:ld|st)\.(?:global|shared)[.\w:]*)", ptx, re.M)


def test_warp_32x32_float32_is_v4_over_8_rounds():
    ptx = roundtrip((32, 32), "float32").ptx("sm_90a")
    assert copy_lines(ptx) == ["ld.global.v4.u32", "st.shared.v4.u32",
                               "ld.shared.v4.u32", "st.global.v4.u32"]
    assert ptx.count("setp.lt.s32") == 2 and re.search(r"setp\.lt\.s32 %p\d+, %r\d+, 8;", ptx)
    for arch in ("sm_90a", "sm_100a"):
        assert assemble(roundtrip((32, 32), "float32").ptx(arch), arch)[0]


def test_row_stride_20_float16_drops_to_v2():
    k = roundtrip((32, 20), "float16", region=(slice(0, 32), slice(0, 16)))
    assert copy_lines(k.ptx("sm_90a"))[:2] == ["ld.global.v2.u32", "st.shared.v2.u32"]


def test_region_at_column_3_float16_is_scalar():
    k = roundtrip((32, 64), "float16", region=(slice(0, 32), slice(3, 35)))
    assert copy_lines(k.ptx("sm_90a"))[:2] == ["ld.global.u16", "st.shared.u16"]


def test_elem_offset_3_float16_is_scalar():
    k = roundtrip((32, 32), "float16", a_kw={"elem_offset": 3})
    ptx = k.ptx("sm_90a")
    assert copy_lines(ptx)[:2] == ["ld.global.u16", "st.shared.u16"]


def test_swizzle_chunk_of_2_caps_vector():
    lay = ComposeLayout(Swizzle(2, 1, 3), TileLayout(S[(32, 32)]))   # chunks of 2 elements
    k = roundtrip((32, 32), "float32", smem_layout=lay)
    assert copy_lines(k.ptx("sm_90a"))[:2] == ["ld.global.v2.u32", "st.shared.v2.u32"]


def test_swizzled_128B_float16_uses_xor_add_and_no_div():
    lay = ComposeLayout(Swizzle.mma(128, 16), TileLayout(S[(32, 64)]))
    k = roundtrip((32, 64), "float16", smem_layout=lay)
    ptx = k.ptx("sm_90a")
    assert copy_lines(ptx)[:2] == ["ld.global.v4.u32", "st.shared.v4.u32"]
    body = ptx[ptx.index("{"):]
    assert "xor.b32" in body and "div." not in body and "rem." not in body
    assert assemble(ptx, "sm_90a")[0]


@pytest.mark.parametrize("scope,block", [("warp", 32), ("warpgroup", 128), ("cta", 256)])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "float8_e4m3fn", "float8_e5m2", "float16",
                                   "bfloat16", "float32"])
def test_roundtrip_assembles(scope, block, dtype):
    k = roundtrip((64, 64), dtype, scope=scope, block=block, name=f"rt_{scope}_{dtype}")
    for arch in ("sm_90a", "sm_100a"):
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, log
    assert copy_lines(k.ptx("sm_90a"))[0] == "ld.global.v4.u32"


def test_k_tiled_shared_layout_keeps_strides():
    # a 64x64 tile stored as two 64x32 K-tiles: (row, (ktile, col)) -> ktile*2048 + row*32 + col
    lay = TileLayout(S[(64, (2, 32)):(32, (2048, 1))])
    k = roundtrip((64, 64), "float16", smem_layout=lay, scope="cta", block=128)
    ptx = k.ptx("sm_90a")
    assert copy_lines(ptx)[:2] == ["ld.global.v4.u32", "st.shared.v4.u32"]
    assert assemble(ptx, "sm_90a")[0]


def test_subregion_of_3d_tensor():
    k = roundtrip((4, 64, 96), "float16", region=(slice(2, 3), slice(16, 48), slice(32, 96)),
                  scope="cta", block=128)
    ptx = k.ptx("sm_90a")
    assert copy_lines(ptx)[:2] == ["ld.global.v4.u32", "st.shared.v4.u32"]
    assert assemble(ptx, "sm_90a")[0]


def test_fallback_for_region_not_divisible_by_threads():
    k = roundtrip((10, 10), "float32", scope="warp")
    with pytest.warns(UserWarning, match=r"uses the scalar fallback; declined: .*vec_auto: "
                      r"gmem_smem: region has 100 elements, not divisible by the 32 threads"):
        ptx = k.ptx("sm_90a")
    assert copy_lines(ptx)[:2] == ["ld.global.u32", "st.shared.u32"]
    assert assemble(ptx, "sm_90a")[0]


def test_explain_table_marks_choice():
    out = {}

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 32), "float32")):
        pg.lane_id()
        sm = pg.alloc_shared((32, 32), "float32")
        out["t"] = pg.tile.explain("copy", sm[0:32, 0:32], A[0:32, 0:32], scope="warp")

    t = out["t"]
    assert t.chosen == "vec_auto"
    text = str(t)
    assert "-> vec_auto     10  ok  gmem_smem: 128-bit vectors, 32 threads x 8 round(s)" in text
    assert "   fallback      0  ok  scalar element copy" in text


def _bad(fn):
    return pg.kernel(grid=(1,), block=(32,))(fn)


def test_dtype_mismatch():
    def k(A: pg.Tensor((32, 32), "float32")):
        sm = pg.alloc_shared((32, 32), "float16")
        pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])

    with pytest.raises(pg.TraceError, match=r"test_copy.py:\d+: copy dtype mismatch: dst "
                       r"sm\[0:32, 0:32\] is float16, src A\[0:32, 0:32\] is float32"):
        _bad(k)


def test_extent_mismatch():
    def k(A: pg.Tensor((32, 32), "float32")):
        sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(sm[0:16, 0:32], A[0:32, 0:32])

    with pytest.raises(pg.TraceError, match=r"copy extent mismatch: dst sm\[0:16, 0:32\] has "
                       r"extents \(16, 32\), src A\[0:32, 0:32\] has \(32, 32\)"):
        _bad(k)


def test_region_out_of_bounds():
    def k(A: pg.Tensor((32, 32), "float32")):
        sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(sm[0:32, 0:32], A[16:48, 0:32])

    with pytest.raises(pg.TraceError, match=r"region 16:48 is out of bounds for dimension 0 of "
                       r"'A' \(extent 32\)"):
        _bad(k)


def test_partial_scope_rejected():
    """Lanes 0-3 and 21-31: no build-time progression of threads for the fallback to use
    (lane < 16 is taken by it: tests/test_seed_api.py)."""
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 32), "float32")):
        lane = pg.lane_id()
        sm = pg.alloc_shared((32, 32), "float32")
        with pg.if_((lane < 4) | (lane > 20)):
            pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])

    with pytest.raises(pg.DispatchError, match=r"not all 32 threads of the warp scope are active "
                       r"here \(the branch condition differs between threads 0..31 of one group\)"
                       r"[\s\S]*fallback: .*not a build-time progression"):
        k.ptx("sm_90a")


def test_uniform_branch_is_fine():
    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((32, 32), "float32")):
        w = pg.warp_id()
        sm = pg.alloc_shared((32, 32), "float32")
        with pg.if_(w == 1):
            pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])

    assert "ld.global.v4.u32" in k.ptx("sm_90a")


@pytest.mark.parametrize("cond", [lambda: pg.cta_rank_in_cluster() == 1,
                                  lambda: pg.cluster_id() == 0,
                                  lambda: pg.cta_id_in_cluster() == 0])
def test_a_branch_on_the_cta_s_place_in_its_cluster_is_uniform(cond):
    """%cluster_ctarank, %clusterid, %cluster_ctaid are the same in every thread of a CTA
    (a 2-CTA GEMM picks its half of a shared tile by rank)."""
    @pg.kernel(grid=(2,), block=(128,), cluster=(2, 1, 1))
    def k(A: pg.Tensor((32, 32), "float32")):
        pg.warp_id()
        sm = pg.alloc_shared((32, 32), "float32")
        with pg.if_(cond()):
            pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])

    assert "ld.global.v4.u32" in k.ptx("sm_90a")


def _copy_under_flag(flag_index):
    """A warp-scope copy under a condition that reads a flag: `flag_index(tx, w)` picks the
    element (shared flags, or the global G with "global")."""
    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((32, 32), "float32"), G: pg.Tensor((4,), "int32")):
        tx = pg.thread_id(128)
        w = pg.warp_id()
        flags = pg.alloc_shared((4,), "int32")
        sm = pg.alloc_shared((32, 32), "float32")
        with pg.if_(tx == 0):
            flags[0] = 1
        pg.cta_sync()
        cond = G[0] == 1 if flag_index == "global" else flags[flag_index(tx, w)] == 1
        with pg.if_(cond):
            pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])
    return k


@pytest.mark.parametrize("index", [lambda tx, w: 0, lambda tx, w: w])
def test_a_shared_flag_read_at_a_warp_uniform_index_is_a_uniform_branch(index):
    """Every lane reads the same shared element (the flag one thread set before the barrier),
    so every lane takes the same way: the warp's copy runs under it."""
    assert "ld.global.v4.u32" in _copy_under_flag(index).ptx("sm_90a")


@pytest.mark.parametrize("index,why", [
    (lambda tx, w: tx % 4, "reads shared memory at an index that differs between threads"),
    ("global", "reads memory or per-thread values")])
def test_a_flag_read_per_lane_or_from_global_memory_is_not_uniform(index, why):
    with pytest.raises(pg.DispatchError, match=r"not all 32 threads of the warp scope are active "
                       r"here \(the branch condition " + why):
        _copy_under_flag(index).ptx("sm_90a")


def test_cache_hint_on_shared_source_rejected():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 32), "float32")):
        pg.lane_id()
        sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(A[0:32, 0:32], sm[0:32, 0:32], cache_hint="nc")

    with pytest.raises(pg.DispatchError, match=r"vec_auto: cache hints \(nc\) apply only to global "
                       r"loads; the source is shared"):
        k.ptx("sm_90a")


def test_cache_hint_on_global_load():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 32), "float32")):
        pg.lane_id()
        sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32], cache_hint=["L1::no_allocate", "nc"])

    ptx = k.ptx("sm_90a")
    assert "ld.global.nc.L1::no_allocate.v4.u32" in ptx
    assert assemble(ptx, "sm_90a")[0]


# ---- property test: every draw assembles or is rejected with a reason; the partition model
# moves every element exactly once with aligned vectors ------------------------------------
DTYPES = ["int8", "float16", "bfloat16", "float32", "float8_e4m3fn"]


@st.composite
def copy_case(draw):
    dtype = draw(st.sampled_from(DTYPES))
    ebytes = pg.dtype(dtype).bits // 8
    rows = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    cols = draw(st.sampled_from([4, 8, 16, 32, 64, 128]))
    pad = draw(st.sampled_from([0, 1, 2, 4, 8, 16]))
    r0 = draw(st.integers(0, 3))
    c0 = draw(st.sampled_from([0, 1, 2, 4, 8, 16]))
    eo = draw(st.sampled_from([0, 1, 2, 4, 8]))
    scope, block = draw(st.sampled_from([("thread", 32), ("warp", 32), ("warpgroup", 128),
                                         ("cta", 64)]))
    swz = None
    if cols * ebytes in (32, 64, 128) and rows >= 8 and draw(st.booleans()):
        swz = cols * ebytes
    return dtype, rows, cols, pad, r0, c0, eo, scope, block, swz


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copy_case())
def test_property_copy(case):
    dtype, rows, cols, pad, r0, c0, eo, scope, block, swz = case
    shape = (r0 + rows + 1, c0 + cols + pad)
    lay = None
    ebits = pg.dtype(dtype).bits
    if swz:
        lay = ComposeLayout(Swizzle.mma(swz, ebits), TileLayout(S[(rows, cols)]))
    seen = {}

    @pg.kernel(grid=(1,), block=(block,), name="prop")
    def k(A: pg.Tensor(shape, dtype, elem_offset=eo), B: pg.Tensor(shape, dtype)):
        pg.thread_id(block)
        sm = pg.alloc_shared((rows, cols), dtype, layout=lay, align=1024)
        region = (slice(r0, r0 + rows), slice(c0, c0 + cols))
        getattr(pg.tile, scope).copy(sm[0:rows, 0:cols], A[region])
        seen["table"] = pg.tile.explain("copy", sm[0:rows, 0:cols], A[region], scope=scope)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ptx = k.ptx("sm_90a")
        except pg.PtxgenError as e:
            assert str(e)   # a reason
            return
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    # numpy model of the vec_auto partition the dispatcher chose
    from ptxgen.primitives.copy.vec_auto import plan_memory_copy
    table = seen["table"]
    plan = table.call.plan(plan_memory_copy)[0]
    if table.chosen != "vec_auto" or plan is None:
        return
    vec, threads, outer = plan.groups
    T = {"thread": 1, "warp": 32, "warpgroup": 128, "cta": block}[scope]
    hits = np.zeros(rows * cols, np.int32)
    src_side, dst_side = table.call.src_side, table.call.dst_side

    def offs(group, x, k_):
        total, div = 0, 1
        for ext, strides in group:
            total += ((x // div) % ext) * strides[k_]
            div *= ext
        return total

    for f in range(plan.outer):
        for t in range(T):
            so = src_side.base + offs(outer, f, 0) + offs(threads, t, 0)
            do = dst_side.base + offs(outer, f, 1) + offs(threads, t, 1)
            assert (so + eo) % plan.V == 0 and do % plan.V == 0      # aligned vectors
            for v in range(plan.V):
                d = do + offs(vec, v, 1)
                if dst_side.swizzle is not None:
                    d = dst_side.swizzle.apply(d)
                hits[d] += 1
    assert (hits == 1).all()


def test_copy_inside_unroll_uses_the_unrolled_index():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((4, 32, 32), "float32"), B: pg.Tensor((4, 32, 32), "float32")):
        pg.lane_id()
        sm = pg.alloc_shared((32, 32), "float32")
        for u in pg.unroll(4):
            pg.tile.warp.copy(sm[0:32, 0:32], A[u:u + 1, 0:32, 0:32])
            pg.warp_sync()
            pg.tile.warp.copy(B[u:u + 1, 0:32, 0:32], sm[0:32, 0:32])
            pg.warp_sync()

    ptx = k.ptx("sm_90a")
    for u in range(1, 4):          # each unrolled copy starts u * 4096 bytes further
        assert f"+{u * 4096}]" in ptx
    assert assemble(ptx, "sm_90a")[0]


def test_explain_covers_tcgen05_ops():
    from ptxgen.alloc import SMEMPool, TMEMPool
    out = []

    @pg.kernel(grid=(1,), block=(128,))
    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=128, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        tmem.commit()
        out.append(pg.tile.explain("gemm_async", acc, As, As, scope="warp"))
        tmem.dealloc()

    assert out[0].chosen == "tcgen05_ss"
