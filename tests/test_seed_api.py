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
     r"model; its tcgen05 MMAs use M=128 with cta_group=1"),
    (lambda t: t.alloc_tcgen05_mma_D((128, 256), "float16"), r"accumulators are 32-bit"),
    (lambda t: t.alloc_sf((128, 8), "float16"), r"scale factors are 8-bit"),
    (lambda t: t.move_base_to(1024), r"the column must be an int in \[0, 512\]"),
])
def test_tmem_pool_helper_errors(call, msg):
    with pytest.raises(pg.ResourceError, match=msg):
        _pool_kernel(call)
