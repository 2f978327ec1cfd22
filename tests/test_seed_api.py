"""The seed documents' spellings (shared/seeds/000, 002, 003) that used to fail or were
missing, each written the way the seed writes it (Tx./T. become pg.), checked by results
through the PTX interpreter where it moves data and by assembly where it needs sm_100a."""
import re
import warnings

import numpy as np
import pytest

import ptxgen as pg
from support import ptxsim
from support.asm import assemble
from ptxgen.layout import S, TileLayout, laneid

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


# ---- seed 000: tensor memory declared by hand -------------------------------------------------
def _tmem_by_hand(layout_kw, allocated_addr=0, cta_group=1, ncols=512):
    """Seed 000's by-hand sequence: one warp allocates into a shared slot, the CTA syncs, the
    accumulator is declared at column `allocated_addr`, read with tcgen05.ld, freed."""
    from ptxgen.primitives.tmem_layout import register_layout

    CTA_M = 128

    @pg.kernel(grid=(1,), block=(128,))
    def k(Out: pg.Tensor((CTA_M, 32), "float32")):
        tx = pg.thread_id(128)
        warp_id = pg.warp_id()
        addr = pg.alloc_shared((1,), "uint32")
        with pg.if_(warp_id == 0):
            pg.ptx.tcgen05.alloc(pg.address_of(addr), n_cols=ncols, cta_group=cta_group)
        pg.cta_sync()
        acc = pg.decl_buffer((CTA_M, 512), "float32", scope="tmem",
                             allocated_addr=allocated_addr, **layout_kw)
        regs = pg.alloc_local((CTA_M, 32), "float32", layout=register_layout("32x32b", 128, 32))
        pg.tile.cta.tmem_load(regs, acc[0:CTA_M, 0:32])
        r = regs.local()
        for j in pg.unroll(32):
            Out[tx, j] = r[j]
        pg.cta_sync()
        with pg.if_(warp_id == 0):
            pg.ptx.tcgen05.relinquish_alloc_permit(cta_group=cta_group)
            pg.ptx.tcgen05.dealloc(addr[0], n_cols=ncols, cta_group=cta_group)
    return k


@pytest.mark.parametrize("layout_kw", [{}, {"layout": "tmem_layout"}])
def test_tmem_decl_buffer_with_column_offset_and_default_layout(layout_kw):
    """allocated_addr=0 (a plain int: column 0 of the allocation, as seed 000 says) and a TMEM
    view without layout= (layout D) both reach tcgen05.ld; they used to fail with an
    int32/uint32 TraceError and an AttributeError."""
    from ptxgen.primitives.tmem_layout import layout_D
    if layout_kw:
        layout_kw = {"layout": layout_D(128, 512)}
    ptx = _tmem_by_hand(layout_kw).ptx("sm_100a")
    # the view reads the slot once, after the barrier, and adds column 0 (nothing)
    body = ptx[ptx.index("bar.sync"):]
    assert re.search(r"ld\.shared\.u32 %r\d+, \[%r\d+\];", body)
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


def test_tmem_decl_buffer_column_offset_adds_to_the_base():
    ptx = _tmem_by_hand({}, allocated_addr=64).ptx("sm_100a")
    assert re.search(r"add\.s32 %r\d+, %r\d+, 64;|add\.u32 %r\d+, %r\d+, 64;", ptx)


def test_tmem_decl_buffer_errors():
    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pg.decl_buffer((128, 64), "float32", scope="tmem", allocated_addr=0)
    with pytest.raises(pg.TraceError, match=r"allocated_addr=0 is a column offset into this "
                       r"kernel's TMEM allocation, but nothing is allocated before it"):
        pg.kernel(k, grid=(1,), block=(128,))

    def k3(Out: pg.Tensor((1,), "uint32")):
        pg.thread_id(128)
        pg.decl_buffer((64, 64), "float32", scope="tmem", allocated_addr=Out[0])
    with pytest.raises(pg.TraceError, match=r"tmem view 'view': the default layout D is "
                       r"\(128, N\): one row per TMEM lane; got \(64, 64\)\. Pass layout="):
        pg.kernel(k3, grid=(1,), block=(128,))


# ---- seed 002: strides=, B.strides / B.byte_offset / B.elem_offset -------------------------------
def test_strides_on_declarations():
    """strides= on a parameter, alloc_buffer and decl_buffer is the layout S[shape:strides];
    B.strides reads it back, B.elem_offset / B.byte_offset the view's offset."""
    seen = {}

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((4, 8), "float32", strides=(16, 1)), B: pg.Tensor((4, 8), "float32")):
        i = pg.thread_id(32)
        sm = pg.alloc_buffer((4, 8), "float32", scope="shared", strides=(1, 4))
        # sm's columns 2..7 (a (2, 8) view at elem_offset 8 would reach element 37 of 32)
        v = pg.decl_buffer((4, 6), "float32", data=sm.data, elem_offset=8, strides=(1, 4))
        seen.update(A=A.strides, B=B.strides, sm=sm.strides, v=v.strides,
                    eo=v.elem_offset, bo=v.byte_offset, h=pg.decl_buffer(
                        (4, 4), "float16", data=sm.data, byte_offset=6).elem_offset)
        r, c = i // 8, i % 8
        sm[r, c] = A[r, c]
        pg.cta_sync()
        B[r, c] = sm[r, c]

    assert seen == dict(A=(16, 1), B=(8, 1), sm=(1, 4), v=(1, 4), eo=8, bo=32, h=3)
    a = RNG.standard_normal((4, 16)).astype(np.float32)
    b = np.zeros((4, 8), np.float32)
    ptxsim.run(k, [a, b])
    assert np.array_equal(b, a[:, :8])


def test_strides_errors():
    with pytest.raises(pg.TraceError, match=r"give layout= or strides=, not both"):
        pg.Tensor((4, 8), "float32", layout=TileLayout(S[(4, 8)]), strides=(8, 1))
    with pytest.raises(pg.TraceError, match=r"strides \(8,\) must give one stride per dimension"):
        pg.Tensor((4, 8), "float32", strides=(8,))

    def k(A: pg.Tensor((4, 8), "float32")):
        pg.thread_id(32)
        t = pg.alloc_shared((4, 8), "float32", layout=TileLayout(S[(4, (2, 4)):(4, (16, 1))]))
        t.strides
    with pytest.raises(pg.TraceError, match=r"dimension 1 of layout .* is not one stride"):
        pg.kernel(k, grid=(1,), block=(32,))


# ---- seed 000 / 002: access_ptr, ptr_byte_offset, address_of ----------------------------------
def test_access_ptr_and_ptr_byte_offset_feed_raw_ptx():
    """B.access_ptr("r", offset=k) and T.ptr_byte_offset(B.data, n, ty=B.data.ty) are typed
    element pointers for a raw intrinsic: here a ld.global.f32 of element 5 and of the element
    12 bytes (3 floats) further."""
    @pg.kernel(grid=(1,), block=(1,))
    def k(A: pg.Tensor((4, 8), "float32"), B: pg.Tensor((2,), "float32")):
        pg.thread_id(1)
        r = pg.alloc_local((2,), "float32")
        p = A.access_ptr("r", offset=5, extent=1)
        q = pg.ptr_byte_offset(p, 12, ty=A.data.ty)
        pg.ptx["ld.global.f32"](r[0], p)
        pg.ptx["ld.global.f32"](r[1], q)
        B[0] = r[0]
        B[1] = r[1]

    a = RNG.standard_normal((4, 8)).astype(np.float32)
    b = np.zeros(2, np.float32)
    ptxsim.run(k, [a, b])
    assert np.array_equal(b, a.reshape(-1)[[5, 8]])


def test_access_ptr_checks():
    def k(A: pg.Tensor((4, 8), "float32")):
        pg.thread_id(1)
        A.access_ptr("x")
    with pytest.raises(pg.TraceError, match=r"access_mask must be 'r', 'w', 'rw'"):
        pg.kernel(k, grid=(1,), block=(1,))

    def k2(A: pg.Tensor((4, 8), "float32")):
        pg.thread_id(1)
        A.access_ptr("rw", offset=30, extent=4)
    with pytest.raises(pg.TraceError, match=r"elements \[30, 34\) are outside its 32 elements"):
        pg.kernel(k2, grid=(1,), block=(1,))


# ---- seed 000: T.local_scalar / T.shared_scalar / T.alloc_scalar --------------------------------
def test_scalars_in_an_explicit_scope():
    reprs = []

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "int32"), B: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        phase = pg.local_scalar("int32", 0)
        total = pg.shared_scalar("int32")
        s = pg.alloc_scalar("int32", scope="shared")
        reprs.extend([repr(phase), repr(total)])
        with pg.if_(tx == 0):
            total.set(0)
            s.set(7)
        pg.cta_sync()
        with pg.while_(phase < 4):
            phase += 1
        with pg.if_(tx == 0):
            for j in pg.serial(32):
                total += A[j]
        pg.cta_sync()
        B[tx] = total + s * phase

    assert reprs == ["<local scalar phase: int32>", "<shared scalar total: int32>"]
    a = RNG.integers(-100, 100, 32).astype(np.int32)
    b = np.zeros(32, np.int32)
    ptxsim.run(k, [a, b])
    assert np.array_equal(b, np.full(32, a.sum() + 7 * 4, np.int32))

    def bad(A: pg.Tensor((1,), "int32")):
        pg.alloc_scalar("int32", scope="global")
    with pytest.raises(pg.TraceError, match=r"alloc_scalar scope must be 'local' or 'shared'"):
        pg.kernel(bad, grid=(1,), block=(1,))


# ---- seed 002: TMEMPool operand helpers ---------------------------------------------------------
def _pool_kernel(body, total_cols=512):
    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = pg.SMEMPool()
        tmem_addr = pool.alloc((1,), "uint32")
        pool.commit()
        tmem_pool = pg.TMEMPool(pool, total_cols=total_cols, cta_group=1, tmem_addr=tmem_addr)
        body(tmem_pool)
        tmem_pool.commit()
        tmem_pool.dealloc()
    return pg.kernel(k, grid=(1,), block=(128,))


def test_tmem_pool_operand_helpers():
    got = {}

    def body(tmem_pool):
        acc = tmem_pool.alloc_tcgen05_mma_D((128, 256), "float32", M=128, cta_group=1)
        a = tmem_pool.alloc_tcgen05_mma_A((128, 64), "float16")
        sf = tmem_pool.alloc_sf((128, 8), "uint8")
        got["first"] = list(tmem_pool.tiles)
        tmem_pool.move_base_to(a)                       # reuse A's and sf's columns
        c = tmem_pool.alloc_tcgen05_mma_C((128, 64), "float32")
        tmem_pool.move_base_to(0)
        again = tmem_pool.alloc((128, 32), "float32")
        got["tiles"] = list(tmem_pool.tiles)
        got["lay"] = (acc.layout.apply(5, 7, shape=(128, 256)), a.layout.apply(5, 7, shape=(128, 64)))

    _pool_kernel(body).ptx("sm_100a")
    assert got["first"] == [("acc", 0, 256), ("a", 256, 32), ("sf", 288, 2)]
    assert got["tiles"][3:] == [("c", 256, 64), ("again", 0, 32)]
    assert got["lay"] == ({"m": 0, "TLane": 5, "TCol": 7}, {"m": 1, "TLane": 5, "TCol": 3})


@pytest.mark.parametrize("call,msg", [
    (lambda t: t.alloc_tcgen05_mma_D((64, 256), "float32", M=128, cta_group=2),
     r"cta_group=2 but this TMEMPool is cta_group=1"),
    (lambda t: t.alloc_tcgen05_mma_D((64, 256), "float32", M=64),
     r"M=64 with cta_group=1 accumulates in another TMEM datapath layout .* ptxgen does not "
     r"model; it models M=128 with cta_group=1 \(layout D\), M=256 with cta_group=2 \(layout "
     r"A\), M=128 with cta_group=2 \(layout B\)"),
    (lambda t: t.alloc_tcgen05_mma_D((128, 256), "float16"), r"accumulators are 32-bit"),
    (lambda t: t.alloc_sf((128, 8), "float16"), r"scale factors are 8-bit"),
    (lambda t: t.move_base_to(1024), r"the column must be an int in \[0, 512\]"),
])
def test_tmem_pool_helper_errors(call, msg):
    with pytest.raises(pg.ResourceError, match=msg):
        _pool_kernel(call)


# ---- seed 003 / API.md: dispatch="vec_auto" on a register copy takes vec_auto's reg path --------
LANE_ROWS = TileLayout(S[(32, 8):(1 @ laneid, 1)])


def _reg_round_trip(dtype, force, explain=None):
    """A -> R (a lane per row) -> B, with dispatch="vec_auto" forced on both copies or not."""
    kw = {"dispatch": "vec_auto"} if force else {}

    @pg.kernel(grid=(1,), block=(32,), name="reg_round_trip")
    def k(A: pg.Tensor((32, 8), dtype), B: pg.Tensor((32, 8), dtype)):
        R = pg.alloc_local((32, 8), dtype, layout=LANE_ROWS)
        if explain is not None:
            explain.append(pg.tile.explain("copy", B[:, :], R[:, :], scope="warp", **kw))
        pg.tile.warp.copy(R[:, :], A[:, :], **kw)
        pg.tile.warp.copy(B[:, :], R[:, :], **kw)
    return k


def _code(ptx):
    """The PTX without its comment lines (the forced copies' source lines say dispatch=)."""
    return [ln for ln in ptx.splitlines() if not ln.strip().startswith("//")]


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
def test_forcing_vec_auto_on_a_register_copy_takes_its_reg_path(dtype):
    forced_ex, auto_ex = [], []
    forced = _reg_round_trip(dtype, True, forced_ex)
    auto = _reg_round_trip(dtype, False, auto_ex)
    # the automatic choice names the reg row; forcing vec_auto takes the same path, same code
    assert auto_ex[0].chosen == "reg" and forced_ex[0].chosen == "vec_auto"
    row = {r.name: r.reason for r in forced_ex[0]}["vec_auto"]
    assert row == "reg: " + {r.name: r.reason for r in auto_ex[0]}["reg"]
    assert row.startswith("reg: 128-bit vectors, 32 thread(s) x ") or dtype == "int8"
    for arch in ("sm_80", "sm_90a"):
        ptx = forced.ptx(arch)
        assert _code(ptx) == _code(auto.ptx(arch))
        assert "dispatch='vec_auto'" in ptx
        ok, log = assemble(ptx, arch)
        assert ok, log
    a = (RNG.standard_normal((32, 8)) * 8).astype(dtype)
    b = np.zeros_like(a)
    ptxsim.run(forced, [a, b])
    assert np.array_equal(a, b)


def test_vec_auto_and_fallback_rows_name_the_reg_row():
    ex = []
    _reg_round_trip("float32", False, ex).ptx("sm_90a")
    rows = {r.name: (r.priority, r.ok, r.reason) for r in ex[0]}
    assert rows["reg"] == (11, True, "128-bit vectors, 32 thread(s) x 2 vector(s)")
    assert rows["vec_auto"] == (10, True, "reg: 128-bit vectors, 32 thread(s) x 2 vector(s)")
    assert rows["fallback"] == (0, False, "moves memory only (local -> global); register "
                                          "copies use the reg row (vec_auto's reg path)")
    assert [r.name for r in ex[0]].index("reg") < [r.name for r in ex[0]].index("vec_auto")


def test_readme_explain_example_is_the_current_table():
    """The README's explain output, row for row, as the code prints it now."""
    import os
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    start = readme.index("copy pg.tile.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])")
    shown = readme[start:readme.index("```", start)].rstrip("\n")
    got = []

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 32), "float32")):
        A_smem = pg.alloc_shared((32, 32), "float32")
        got.append(str(pg.tile.explain("copy", A_smem[0:32, 0:32], A[0:32, 0:32], scope="warp")))
        pg.tile.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])

    assert shown == got[0]
    assert "   reg          11  no  neither side is registers (global -> shared)" in shown


def test_forcing_vec_auto_on_a_register_copy_reg_declines_gives_reg_reason():
    from ptxgen.layout import tid

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 8), "float32")):
        R = pg.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8):(1 @ tid, 1)]))
        pg.tile.warp.copy(R[:, :], A[:, :], dispatch="vec_auto")

    with pytest.raises(pg.DispatchError, match=r"vec_auto: reg: the register layout uses the "
                       r"tid axis, which does not number the threads of the warp scope"):
        k.ptx("sm_90a")


# ---- seed 000: pg.launch inside the body; thread ids without an extent ---------------------------
def test_thread_id_without_extent_takes_the_launch_block():
    @pg.kernel
    def k(A: pg.Tensor((4, 64), "float32")):
        pg.launch(grid=(1,), block=(64, 4))
        tx = pg.thread_id()
        ty = pg.thread_id(dim="y")
        A[ty, tx] = pg.cast(ty * 64 + tx, "float32")

    ptx = k.ptx("sm_90a")
    assert ".maxntid 64, 4, 1" in ptx
    assert "mov.u32 %r1, %tid.x;" in ptx and re.search(r"mov\.u32 %r\d+, %tid\.y;", ptx)
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    a = np.zeros((4, 64), np.float32)
    ptxsim.run(k, [a])
    assert np.array_equal(a, np.arange(256, dtype=np.float32).reshape(4, 64))


def test_thread_id_without_extent_is_bounded_by_the_decorator_block():
    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id()
        A[tx] = 1.0

    assert "tx = pg.let(%tid.x)" in str(k.ir)
    assert k.ir.block == (128, 1, 1)


def test_thread_id_without_extent_or_launch_names_the_fix():
    def k(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id()
        A[tx] = 1.0

    with pytest.raises(pg.TraceError, match=r"test_seed_api\.py:\d+: pg\.thread_id\(dim='x'\) "
                       r"without an extent takes blockDim\.x from the launch, but nothing gave "
                       r"it: call pg\.launch\(block=\.\.\.\) before it, give "
                       r"@pg\.kernel\(block=\.\.\.\), or pass the extent: "
                       r"pg\.thread_id\(n, dim='x'\)"):
        pg.kernel(k)


# ---- seed 002: alloc_tensor / decl_tensor / decl_tmem(ty_args=[pg.Tensor(...)]) -----------------
def test_dynamic_arena_with_alloc_tensor_and_decl_tensor_views():
    """Seed 002's dynamic shared memory example, as written there (Tx. -> pg.)."""
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((64,), "float32"), B: pg.Tensor((64,), "float32"),
          C: pg.Tensor((64,), "float32")):
        tx = pg.thread_id(64)
        arena = pg.alloc_tensor(
            ty_args=[pg.Tensor((128,), "float32", scope="shared.dyn")]
        )  # the one arena
        As = pg.decl_tensor(
            arena.data, ty_args=[pg.Tensor((64,), "float32", scope="shared.dyn")]
        )  # offset 0
        Bs = pg.decl_tensor(
            arena.data, ty_args=[pg.Tensor((64,), "float32", elem_offset=64, scope="shared.dyn")]
        )  # offset 64
        As[tx] = A[tx]
        Bs[tx] = B[tx]
        pg.cuda.cta_sync()
        C[tx] = As[tx] + Bs[tx]

    ptx = k.ptx("sm_90a")
    assert k.ir.dynamic_smem_bytes == 512
    assert 'arena = pg.alloc_buffer((128,), "float32", scope="shared.dyn")' in ptx
    assert re.search(r"st\.shared\.f32 \[%r\d+\+256\], %f\d+;", ptx)      # Bs: +64 floats
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    a, b = RNG.standard_normal(64).astype(np.float32), RNG.standard_normal(64).astype(np.float32)
    c = np.zeros(64, np.float32)
    ptxsim.run(k, [a, b, c])
    assert np.array_equal(c, a + b)


def test_per_thread_local_example_with_alloc_tensor():
    """Seed 002's `local` example as written there: a thread-axis local tensor from
    alloc_tensor, its flat and 2x4 per-lane views, all in registers."""
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 8), "float32"), B: pg.Tensor((32, 8), "float32")):
        lane = pg.lane_id()
        R = pg.alloc_tensor(
            ty_args=[
                pg.Tensor(
                    (32, 8), "float32", scope="local",
                    layout=TileLayout(S[(32, 8) : (1 @ laneid, 1)])
                )
            ]
        )
        R_flat = R.local()       # this lane's 8 local elements, physical order
        R_2d = R.local(2, 4)     # the same elements, row-major 2x4 reshape
        for j in pg.unroll(8):
            R_flat[j] = A[lane, j]
        for a in pg.unroll(2):
            for b in pg.unroll(4):
                B[lane, a * 4 + b] = R_2d[a, b] + 1.0

    ptx = k.ptx("sm_90a")
    assert ".local" not in ptx
    a = np.arange(256, dtype=np.float32).reshape(32, 8)
    b = np.zeros_like(a)
    ptxsim.run(k, [a, b])
    assert np.array_equal(b, a + 1)


def test_alloc_tensor_is_alloc_buffer_and_decl_tensor_views_keep_the_storage():
    """Seed 002's declaring example: an alloc_shared tile and a decl_tensor view over it give
    the same IR as alloc_buffer / decl_buffer (one implementation)."""
    def body(spelled):
        def k(A: pg.Tensor((16, 32), "float16", align=16), B: pg.Tensor((16, 32), "float16")):
            tx = pg.thread_id(32)
            if spelled:
                As = pg.alloc_tensor(ty_args=[pg.Tensor((16, 32), "float16", scope="shared")])
                view = pg.decl_tensor(
                    As.data, ty_args=[pg.Tensor((16, 32), "float16", scope="shared")])
            else:
                As = pg.alloc_buffer((16, 32), "float16", scope="shared")
                view = pg.decl_buffer((16, 32), "float16", data=As.data)
            for i in pg.serial(16):
                As[i, tx] = A[i, tx]
                B[i, tx] = view[i, tx]
        return pg.kernel(k, grid=(1,), block=(32,), name="k")

    assert str(body(True).ir) == str(body(False).ir)
    assert body(True).ptx("sm_90a") == body(False).ptx("sm_90a")


def test_decl_tmem_is_decl_buffer_at_a_tmem_address():
    from ptxgen.primitives.tmem_layout import layout_D, register_layout

    def body(spelled):
        def k(Out: pg.Tensor((128, 32), "float32")):
            tx = pg.thread_id(128)
            warp_id = pg.warp_id()
            addr = pg.alloc_shared((1,), "uint32")
            with pg.if_(warp_id == 0):
                pg.ptx.tcgen05.alloc(pg.address_of(addr), n_cols=512)
            pg.cta_sync()
            if spelled:
                acc = pg.cuda.decl_tmem(addr[0], ty_args=[pg.Tensor(
                    (128, 512), "float32", scope="tmem", layout=layout_D(128, 512))])
            else:
                acc = pg.decl_buffer((128, 512), "float32", scope="tmem", allocated_addr=addr[0],
                                     layout=layout_D(128, 512))
            regs = pg.alloc_local((128, 32), "float32", layout=register_layout("32x32b", 128, 32))
            pg.tile.cta.tmem_load(regs, acc[0:128, 0:32])
            r = regs.local()
            for j in pg.unroll(32):
                Out[tx, j] = r[j]
            pg.cta_sync()
            with pg.if_(warp_id == 0):
                pg.ptx.tcgen05.relinquish_alloc_permit()
                pg.ptx.tcgen05.dealloc(addr[0], n_cols=512)
        return pg.kernel(k, grid=(1,), block=(128,), name="k")

    ptx = body(True).ptx("sm_100a")
    assert ptx == body(False).ptx("sm_100a")
    assert pg.decl_tmem is pg.cuda.decl_tmem
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


@pytest.mark.parametrize("call,msg", [
    (lambda A: pg.alloc_tensor(ty_args=pg.Tensor((4,), "float32", scope="shared")),
     r"alloc_tensor takes ty_args=\[pg\.Tensor\(shape, dtype, scope=\.\.\.\)\] \(one tensor "
     r"type\), got pg\.Tensor\(\(4,\), float32\)"),
    (lambda A: pg.alloc_tensor(ty_args=[pg.Tensor((4,), "float32")]),
     r"alloc_buffer scope must be one of shared, shared\.dyn, local, tmem, got 'global'"),
    (lambda A: pg.decl_tensor(A.data, ty_args=[pg.Tensor((4,), "float32", scope="shared")]),
     r"view 'view' declares scope 'shared' over 'global' storage 'A'"),
    (lambda A: pg.decl_tmem(0, ty_args=[pg.Tensor((128, 4), "float32", scope="shared")]),
     r"decl_tmem declares tensor memory; the type says scope='shared' \(write scope='tmem'\)"),
    (lambda A: pg.Tensor((4,), "float32", scope="texture"),
     r"unknown scope 'texture'; scopes are global, shared"),
])
def test_tensor_type_spelling_errors(call, msg):
    def k(A: pg.Tensor((4,), "float32")):
        pg.thread_id(32)
        call(A)

    with pytest.raises(pg.PtxgenError, match=r"test_seed_api\.py:\d+: " + msg):
        pg.kernel(k, grid=(1,), block=(32,))


def test_a_non_global_tensor_type_is_not_a_parameter():
    def k(A: pg.Tensor((4,), "float32", scope="shared")):
        pg.thread_id(32)

    with pytest.raises(pg.TraceError, match=r"tensor parameter 'A': parameters live in global "
                       r"memory; got scope='shared' \(a pg\.Tensor of another scope is a type "
                       r"argument of pg\.alloc_tensor / pg\.decl_tensor / pg\.decl_tmem\)"):
        pg.kernel(k, grid=(1,), block=(32,))


# ---- seed 002: B[pg.Ramp(base, 1, lanes)] vector access ------------------------------------------
def test_ramp_index_is_a_vector_load_and_store():
    """Seed 002: B[Tx.Ramp(tx * 4, 1, 4)] = A[Tx.Ramp(tx * 4, 1, 4)], one float4 each way."""
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((256,), "float32"),
          C: pg.Tensor((8, 64), "float16"), D: pg.Tensor((8, 64), "float16")):
        tx = pg.thread_id(64)
        B[pg.Ramp(tx * 4, 1, 4)] = A[pg.Ramp(tx * 4, 1, 4)]
        with pg.if_(tx < 8):
            D[tx, pg.Ramp(8, 1, 8)] = C[tx, pg.Ramp(8, 1, 8)]        # 2-D: last index

    ptx = k.ptx("sm_90a")
    moves = re.findall(r"(?:ld|st)\.global\.\S+ [^\n]*", ptx)
    assert [m.split()[0] for m in moves] == ["ld.global.v4.b32", "st.global.v4.b32"] * 2
    assert moves[2].endswith("+16];") and moves[3].split()[1].endswith("+16],")   # C[tx, 8:16]
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    a = np.arange(256, dtype=np.float32)
    b = np.zeros_like(a)
    c = RNG.standard_normal((8, 64)).astype(np.float16)
    d = np.zeros_like(c)
    ptxsim.run(k, [a, b, c, d])
    assert np.array_equal(a, b)
    assert np.array_equal(d[:, 8:16], c[:, 8:16]) and not d[:, :8].any() and not d[:, 16:].any()


def test_ramp_is_the_vload_vstore_form():
    def body(ramp):
        def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((256,), "float32")):
            tx = pg.thread_id(64)
            if ramp:
                B[pg.Ramp(tx * 4, 1, 4)] = A[pg.Ramp(tx * 4, 1, 4)]
            else:
                B.vstore([tx * 4], A.vload([tx * 4], "float32x4"))
        return pg.kernel(k, grid=(1,), block=(64,), name="k")

    assert str(body(True).ir) == str(body(False).ir)


@pytest.mark.parametrize("access,msg", [
    (lambda A, B, tx: A[pg.Ramp(tx * 4, 2, 4)],
     r"'A': Ramp stride 2 is not supported: vector accesses need unit stride \(Ramp\(base, 1, "
     r"lanes\)\); load strided elements one by one"),
    (lambda A, B, tx: A[pg.Ramp(tx * 4, 1, 3)], r"'A': Ramp lanes must be a power of two >= 2"),
    (lambda A, B, tx: B.__setitem__((pg.Ramp(0, 1, 4), 0), 1.0),
     r"'B': a Ramp index must be the last one"),
    (lambda A, B, tx: B.__setitem__((0, pg.Ramp(0, 1, 4)), 1.0),
     r"'B'\[Ramp\(\.\.\., 4\)\] stores a float32x4 vector; got 1\.0"),
    (lambda A, B, tx: A[pg.Ramp(254, 1, 4)],
     r"float32x4 access at index 254 of 'A' runs past the last dimension \(extent 256\)"),
])
def test_ramp_errors(access, msg):
    def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((4, 4), "float32")):
        tx = pg.thread_id(64)
        access(A, B, tx)

    with pytest.raises(pg.TraceError, match=r"test_seed_api\.py:\d+: " + msg):
        pg.kernel(k, grid=(1,), block=(64,))


# ---- seed 002: B.sub[...] ------------------------------------------------------------------------
def test_sub_views_narrow_step_and_drop():
    got = {}

    @pg.kernel(grid=(1,), block=(16,))
    def k(C: pg.Tensor((8, 16), "float32"), D: pg.Tensor((8, 4), "float32")):
        tx = pg.thread_id(16)
        blk = C.sub[2:6, 1::4]          # rows 2..5, columns 1, 5, 9, 13
        row = C.sub[7]                  # row 7 (the dim dropped)
        col = C.sub[:, 3]               # column 3
        got["shapes"] = (blk.shape, row.shape, col.shape)
        i, j = tx // 4, tx % 4
        D[i, j] = blk[i, j] + row[j]
        with pg.if_(tx < 8):
            D[4 + i, j] = col[tx]
        for r in pg.serial(2):
            dyn = C.sub[r]              # a symbolic row: a view at r * 16
            D[6 + r, j] = dyn[15 - j]

    assert got["shapes"] == ((4, 4), (16,), (8,))
    ptx = k.ptx("sm_90a")
    assert "blk = pg.decl_buffer((4, 4), \"float32\", scope=\"global\", " \
           "layout=TileLayout(S[(4, 4):(16, 4)] + 33), data=C.data)" in ptx
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    c = np.arange(128, dtype=np.float32).reshape(8, 16)
    d = np.zeros((8, 4), np.float32)
    ptxsim.run(k, [c, d])
    assert np.array_equal(d[:4], c[2:6, 1::4] + c[7, 0:4])
    assert np.array_equal(d[4:6].reshape(-1), c[:, 3])
    assert np.array_equal(d[6:8], c[0:2, 15:11:-1])


def test_sub_of_a_tmem_tile_reaches_tmem_load():
    """A column block of a TMEM accumulator as a sub-tensor: its address moves by the columns."""
    from ptxgen.primitives.tmem_layout import register_layout

    @pg.kernel(grid=(1,), block=(128,))
    def k(Out: pg.Tensor((128, 32), "float32")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        tmem_addr = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = pg.TMEMPool(pool, total_cols=256, tmem_addr=tmem_addr)
        acc = tmem.alloc_tcgen05_mma_D((128, 256), "float32")
        tmem.commit()
        blk = acc.sub[:, 64:96]
        regs = pg.alloc_local((128, 32), "float32", layout=register_layout("32x32b", 128, 32))
        pg.tile.cta.tmem_load(regs, blk[0:128, 0:32])
        r = regs.local()
        for j in pg.unroll(32):
            Out[tx, j] = r[j]
        tmem.dealloc()

    ptx = k.ptx("sm_100a")
    assert re.search(r"add\.u32 %r\d+, %r\d+, 64;", ptx)
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


@pytest.mark.parametrize("key,msg", [
    (lambda C, i: C.sub[0, 0, 0], r"'C'\.sub: 3 indices for 2 dimension\(s\)"),
    (lambda C, i: C.sub[9], r"'C'\.sub: index 9 is out of range for dimension 0 \(extent 8\)"),
    (lambda C, i: C.sub[2:10], r"'C'\.sub: dim 0 range 2:10 must be constant and inside \[0, 8\)"),
    (lambda C, i: C.sub[:, 1:9:3], r"'C'\.sub: dim 1 stepped slice 1::3 needs a positive int step "
                                   r"dividing the extent 16, no stop, and a start in \[0, 3\)"),
    (lambda C, i: C.sub[i:i + 2], r"'C'\.sub: dim 0 range .* must be constant"),
])
def test_sub_errors(key, msg):
    def k(C: pg.Tensor((8, 16), "float32")):
        tx = pg.thread_id(16)
        key(C, tx)

    with pytest.raises(pg.TraceError, match=r"test_seed_api\.py:\d+: " + msg):
        pg.kernel(k, grid=(1,), block=(16,))


# ---- seed 002: pg.cuda.* (Tx.cuda.*) -------------------------------------------------------------
def test_smem_demo_with_the_seed_cuda_names():
    """Seed 002's static shared memory example with the launch inside the body."""
    @pg.kernel
    def smem_demo(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
        pg.launch(grid=(1,), block=(128,))
        bx = pg.cuda.block_idx("x")
        tx = pg.cuda.thread_idx("x")
        sm = pg.alloc_shared((128,), "float32")  # static shared memory
        sm[tx] = A[tx]
        pg.cuda.cta_sync()
        B[tx] = sm[tx] * pg.float32(2.0) + pg.cast(bx, "float32")

    text = str(smem_demo.ir)
    assert "tx = pg.let(%tid.x)" in text and "bx = pg.let(%ctaid.x)" in text
    ptx = smem_demo.ptx("sm_90a")
    assert ".maxntid 128, 1, 1" in ptx and "bar.sync 0;" in ptx
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    a, b = RNG.standard_normal(128).astype(np.float32), np.zeros(128, np.float32)
    ptxsim.run(smem_demo, [a, b])
    assert np.array_equal(b, a * 2)


@pytest.mark.parametrize("name,msg", [
    ("LaunchConfig", r"for Tx\.cuda\.LaunchConfig write pg\.launch\(grid=\.\.\., block=\.\.\.\) "
                     r"in the body, or @pg\.kernel\(grid=\.\.\., block=\.\.\.\)"),
    ("func_call", r"for Tx\.cuda\.func_call write pg\.ptx\['opcode\.modifiers'\]\(\.\.\.\) "
                  r"\(inline CUDA C\+\+ is out of scope by design\)"),
    ("printf", r"it has no 'printf'"),
])
def test_other_cuda_names_say_what_to_write(name, msg):
    def k(A: pg.Tensor((4,), "float32")):
        pg.thread_id(32)
        getattr(pg.cuda, name)

    with pytest.raises(pg.TraceAttributeError, match=r"test_seed_api\.py:\d+: pg\.cuda has "
                       r"decl_tmem, cta_sync, thread_idx and block_idx \(seed 002's Tx\.cuda "
                       r"names\); " + msg):
        pg.kernel(k, grid=(1,), block=(32,))
