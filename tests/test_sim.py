"""Emitted kernels checked *by their results* on the CPU: tests/support/ptxsim.py interprets the PTX
(threads, barriers, global/shared/local memory) and the outputs are compared bit for bit with
numpy, outputs poisoned first.  This guards every change made between GPU runs."""
import warnings

import numpy as np
import pytest

import ptxgen as pg
from support import ptxsim
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout, laneid

RNG = np.random.default_rng(2026)
NP = {"int8": np.int8, "uint8": np.uint8, "float8_e4m3fn": np.uint8, "float16": np.float16,
      "bfloat16": np.uint16, "float32": np.float32, "int32": np.int32, "float64": np.float64,
      "int64": np.int64, "int16": np.int16, "float8_e5m2": np.uint8, "uint16": np.uint16}


def rand(shape, dt):
    npdt = np.dtype(NP[dt])
    raw = RNG.integers(0, 256, int(np.prod(shape)) * npdt.itemsize, dtype=np.uint8)
    return raw.view(npdt).reshape(shape)


def poison(shape, dt):
    npdt = np.dtype(NP[dt])
    return np.frombuffer(b"\xa5" * (int(np.prod(shape)) * npdt.itemsize), npdt).reshape(shape).copy()


def same(a, b):
    return a.tobytes() == b.tobytes()


def test_seed_examples():
    import add_one
    import dyn_arena
    import let_scalar
    import phase_loop
    import smem_demo

    class XP:   # the examples' check() protocol, on host arrays run through the simulator
        def asarray(self, a):
            return np.array(a)

        def full(self, shape, value, dtype):
            return np.full(shape, value, dtype=dtype)

        def ptr(self, a):
            return a

        def asnumpy(self, a):
            return a

    for mod in (smem_demo, dyn_arena, phase_loop, let_scalar, add_one):
        for k in mod.KERNELS:
            k.__dict__["_sim"] = True
        launched = []

        def fake_call(k, *args, **kw):
            arrays = [a for a in args if isinstance(a, np.ndarray)]
            scalars = [a for a in args if not isinstance(a, np.ndarray)]
            ptxsim.run(k, arrays, scalars)
            launched.append(k.name)

        for k in mod.KERNELS:
            k.__class__ = type("SimKernel", (pg.Kernel,), {"__call__": fake_call})
        try:
            for label, got, want in mod.check(XP(), np.random.default_rng(5)):
                assert same(np.asarray(got), np.asarray(want)), f"{mod.__name__}: {label}"
        finally:
            for k in mod.KERNELS:
                k.__class__ = pg.Kernel
        assert launched


def roundtrip(shape, dt, region, scope, block, smem_layout=None, eo=0, dispatch=None):
    ext = tuple(r.stop - r.start for r in region)

    @pg.kernel(grid=(1,), block=(block,), name="rt")
    def k(A: pg.Tensor(shape, dt, elem_offset=eo), B: pg.Tensor(shape, dt, elem_offset=eo)):
        pg.thread_id(block)
        sm = pg.alloc_shared(ext, dt, layout=smem_layout, align=1024)
        full = tuple(slice(0, e) for e in ext)
        kw = {"dispatch": dispatch} if dispatch else {}
        getattr(pg.tile, scope).copy(sm[full], A[region], **kw)
        pg.cta_sync()
        getattr(pg.tile, scope).copy(B[region], sm[full], **kw)

    n = int(np.prod(shape)) + eo
    a, b = rand((n,), dt), poison((n,), dt)
    want = b.copy()
    want[eo:].reshape(shape)[region] = a[eo:].reshape(shape)[region]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ptxsim.run(k, [a, b])
    assert same(b, want)


@pytest.mark.parametrize("scope,block", [("thread", 32), ("warp", 32), ("warpgroup", 128),
                                         ("cta", 64)])
@pytest.mark.parametrize("dt", ["int8", "float16", "bfloat16", "float32", "float64"])
def test_copy_roundtrips(scope, block, dt):
    roundtrip((16, 40), dt, (slice(4, 12), slice(8, 40)), scope, block)


@pytest.mark.parametrize("swz", [32, 64, 128])
def test_copy_swizzled(swz):
    cols = swz // 2
    lay = ComposeLayout(Swizzle.mma(swz, 16), TileLayout(S[(16, cols)]))
    roundtrip((20, 2 * cols), "float16", (slice(4, 20), slice(cols, 2 * cols)), "cta", 64, lay)


def test_copy_alignment_drops_and_fallback():
    roundtrip((8, 20), "float16", (slice(0, 8), slice(0, 16)), "warp", 32)        # v2
    roundtrip((8, 64), "float16", (slice(0, 8), slice(3, 35)), "warp", 32)        # scalar
    roundtrip((8, 32), "float16", (slice(0, 8), slice(0, 32)), "warp", 32, eo=3)  # elem_offset
    roundtrip((5, 7), "float32", (slice(0, 5), slice(0, 7)), "warp", 32)          # fallback
    roundtrip((8, 8), "int8", (slice(0, 8), slice(0, 8)), "cta", 64, dispatch="fallback")


def test_k_tiled_smem():
    lay = TileLayout(S[(16, (2, 32)):(32, (512, 1))])
    roundtrip((16, 64), "float16", (slice(0, 16), slice(0, 64)), "cta", 64, lay)


def test_grid_stride_copy_small_grid():
    import grid_stride_copy as g

    k = g.make(threads=32, unroll=4, ctas=3, name="gsc_small", load_hint="nc", store_hint="cs")
    for n in (1000, 1003, 4096):
        a, b = rand((n,), "float32"), poison((n,), "float32")
        ptxsim.run(k, [a, b], [n])
        assert same(a, b)


def test_grid_stride_copy_one_chunk_per_cta():
    """The example's default: a callable grid (one chunk of THREADS*UNROLL vectors per CTA),
    sizes with partial chunks, leftover vectors and leftover elements."""
    import grid_stride_copy as g

    k = g.make(threads=32, unroll=2, name="gsc_chunks")
    for n in (3, 256, 1000, 1003):
        a, b = rand((n,), "float32"), poison((n,), "float32")
        grid = k._grid_fn({"N": n})
        assert grid == (max(1, n // 4 // 64),)
        ptxsim.run(k, [a, b], [n], grid=grid)
        assert same(a, b)


def test_unrolled_inner_loop_facts():
    @pg.kernel(grid=(1,), block=(1,))
    def k(B: pg.Tensor((2, 16), "int32")):
        for u in pg.unroll(2):
            for j in pg.serial(0, 8 * (u + 1)):
                B[u, j] = j // 8

    b = np.full((2, 16), -1, np.int32)
    ptxsim.run(k, [b])
    want = np.full((2, 16), -1, np.int32)
    want[0, :8] = 0
    want[1, :] = np.arange(16) // 8
    assert same(b, want)


@pytest.mark.parametrize("dt,lanes", [("int8", 2), ("int8", 4), ("float64", 2), ("float16", 8),
                                      ("float32", 4), ("int64", 2)])
def test_register_vectors(dt, lanes):
    @pg.kernel(grid=(1,), block=(32,), name="vec")
    def k(A: pg.Tensor((32 * lanes,), dt), B: pg.Tensor((32 * lanes,), dt)):
        tx = pg.thread_id(32)
        r = pg.alloc_local((lanes,), dt)
        r.vstore([0], A.vload([tx * lanes], f"{dt}x{lanes}"))
        B.vstore([tx * lanes], r.vload([0], f"{dt}x{lanes}"))

    a, b = rand((32 * lanes,), dt), poison((32 * lanes,), dt)
    ptxsim.run(k, [a, b])
    assert same(a, b)


def test_views_and_unsigned_index():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((64,), "float32"),
          C: pg.Tensor((256,), "float32"), n: pg.uint32):
        tx = pg.thread_id(64)
        A2 = A.view(64, 4)
        B[tx] = A2[tx, 0] + A2[tx, 3]
        At = A2.permute(1, 0)
        C[tx] = At[3, tx]
        C[n + pg.cast(tx, "uint32")] = A[tx]

    a = rand((256,), "float32")
    a = np.where(np.isfinite(a), a, 1.0).astype(np.float32)
    b, c = poison((64,), "float32"), poison((256,), "float32")
    ptxsim.run(k, [a, b, c], [128])
    assert same(b, (a.reshape(64, 4)[:, 0] + a.reshape(64, 4)[:, 3]).astype(np.float32))
    want = poison((256,), "float32")
    want[:64] = a.reshape(64, 4)[:, 3]
    want[128:192] = a[:64]
    assert same(c, want)


def test_register_layout_local_and_select():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 8), "int32"), B: pg.Tensor((32, 8), "int32")):
        lane = pg.lane_id()
        R = pg.alloc_local((32, 8), "int32", layout=TileLayout(S[(32, 8):(1 @ laneid, 1)]))
        flat = R.local()
        two = R.local(2, 4)
        for j in pg.unroll(8):
            flat[j] = A[lane, j]
        for i in pg.unroll(2):
            for j in pg.unroll(4):
                v = two[i, j]
                B[lane, i * 4 + j] = pg.select((v & 1).eq(0), v // 2, -v % 7)

    a = rand((32, 8), "int32")
    b = poison((32, 8), "int32")
    ptxsim.run(k, [a, b])
    want = np.where(a % 2 == 0, a // 2, (-a) % 7).astype(np.int32)
    assert same(b, want)


def test_bench_streaming_kernels():
    from ptxgen.bench.copy_kernels import streaming_copy_kernel

    for scope in ("warp", "warpgroup", "cta"):
        k, _ = streaming_copy_kernel("float16", scope, (16, 32), nsm=1, ctas_per_sm=1)
        rows = 96
        a, b = rand((rows, 32), "float16"), poison((rows, 32), "float16")
        ptxsim.run(k, [a, b], [rows])
        assert same(a, b), scope


@pytest.mark.parametrize("kind,dtype,scope,tile", [
    ("g2s2g", "float16", "warpgroup", (16, 32)),       # one tile per instance (grid from ROWS)
    ("g2s2g", "float16", "cta", (32, 32)),             # half the threads move data
    ("g2s2g", "int8", "warp", (8, 64)),
    ("reg", "float32", "warp", (16, 32)),
    ("reg", "int8", "cta", (64, 64)),
    ("vec_64b", "float16", "warp", (8, 64)),
    ("vec_16b", "int8", "warpgroup", (16, 16)),
    ("ldstmatrix", "bfloat16", "warp", (16, 16)),
    ("ldstmatrix", "float16", "warpgroup", (32, 16)),
    ("bulk", "float16", "cta", (16, 32)),
    ("bulk", "int8", "cta", (8, 16)),
])
def test_bench_copy_kernels_one_tile_per_instance(kind, dtype, scope, tile):
    """The bench's g2s2g / g2r2g / forced-vector / ldstmatrix kernels copy every byte, with
    the per-launch grid (one tile per scope instance) their launch computes."""
    from ptxgen.bench import copy_kernels as ck

    ebytes = np.dtype(NP[dtype]).itemsize
    if kind == "bulk":
        k, _ = ck.bulk_copy_kernel(dtype, tile)
    elif kind == "g2s2g":
        k, _ = ck.streaming_copy_kernel(dtype, scope, tile)
    elif kind == "reg":
        k, _ = ck.register_copy_kernel(dtype, scope, tile, 16 // ebytes)
    elif kind == "ldstmatrix":
        k, _ = ck.ldstmatrix_copy_kernel(dtype, scope, tile)
    else:
        k, _ = ck.forced_vec_copy_kernel(dtype, scope, tile, int(kind[4:-1]))
    rows = tile[0] * 2 * (256 // ck.SCOPE_THREADS[scope]) + tile[0]   # a partial last CTA
    a, b = rand((rows, tile[1]), dtype), poison((rows, tile[1]), dtype)
    grid = k._grid_fn({"ROWS": rows})
    ptxsim.run(k, [a, b], [rows], grid=grid)
    assert same(a, b)


def test_float16_arithmetic_matches_numpy():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((64,), "float16"), B: pg.Tensor((64,), "float16"),
          C: pg.Tensor((64,), "float16"), D: pg.Tensor((64,), "int32")):
        tx = pg.thread_id(64)
        C[tx] = A[tx] * B[tx] + A[tx] / B[tx] - pg.float16(0.5)
        D[tx] = pg.cast(A[tx] * pg.float16(100.0), "int32")

    a = (RNG.standard_normal(64) * 4).astype(np.float16)
    b = (RNG.standard_normal(64) + 3).astype(np.float16)
    c, d = poison((64,), "float16"), poison((64,), "int32")
    ptxsim.run(k, [a, b, c, d])
    want = ((a * b) + (a / b)) - np.float16(0.5)
    assert same(c, want.astype(np.float16))
    assert same(d, (a * np.float16(100.0)).astype(np.int32))


def test_integer_semantics_match_python():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((64,), "int32"), B: pg.Tensor((64,), "int32"), n: pg.int32):
        tx = pg.thread_id(64)
        x = A[tx]
        B[tx] = x // n + x % n * 3 - (x >> 2) + (x & 7) ^ (x << 1) | pg.min(x, n)

    a = RNG.integers(-1000, 1000, 64).astype(np.int32)
    for n in (7, -5, 16):
        b = poison((64,), "int32")
        ptxsim.run(k, [a, b], [n])
        x = a.astype(np.int64)
        want = (x // n + x % n * 3 - (x >> 2) + (x & 7)) ^ (x << 1) | np.minimum(x, n)
        assert same(b, want.astype(np.int32)), n


def _variants_gpu_module():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "gpu", "test_copy_variants_gpu.py")
    spec = importlib.util.spec_from_file_location("_copy_variants_gpu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("mem", ["global", "shared"])
@pytest.mark.parametrize("case", ["warp-rows-f16", "warp-cols-f32", "warp-pairs-bf16",
                                  "warp-f64", "warp-int16", "warpgroup-lanes-int8", "cta-fp8",
                                  "cta-interleaved-f16"])
def test_register_path_roundtrips(case, mem):
    """vec_auto's reg path, the same kernels as the GPU suite, run in the simulator."""
    mod = _variants_gpu_module()
    scope, block, shape, dt, layout = mod.REG_CASES[case]
    k = mod.reg_roundtrip_kernel(scope, block, shape, dt, layout, mem)
    a, b = rand(shape, dt), poison(shape, dt)
    ptxsim.run(k, [a, b])
    assert same(a, b)


@pytest.mark.parametrize("rows,cols,trans,scope,block,warps,swz", [
    (8, 8, False, "warp", 32, 1, None), (8, 8, True, "warp", 32, 1, None),
    (16, 16, False, "warp", 32, 1, None), (16, 16, True, "warp", 32, 1, None),
    (32, 32, False, "warp", 32, 1, None), (64, 16, True, "warpgroup", 128, 4, None),
    (128, 16, False, "cta", 256, 8, None),
    (16, 64, False, "warp", 32, 1, 128), (16, 32, True, "warp", 32, 1, 64)])
def test_ldstmatrix(rows, cols, trans, scope, block, warps, swz):
    """ldmatrix -> registers (dumped) -> stmatrix round trips; the register dump must equal
    the fragment the layout promises, element by element."""
    mod = _variants_gpu_module()
    k, lay, span = mod.ldsm_kernel(rows, cols, trans, scope, block, warps, "float16", swz, True)
    a = rand((rows, cols), "float16")
    b, c = poison((rows, cols), "float16"), poison((rows, cols), "float16")
    d = poison((block, span), "float16")
    ptxsim.run(k, [a, b, c, d])
    assert "ldmatrix" in k.ptx("sm_90a") and "stmatrix" in k.ptx("sm_90a")
    want_d = mod.fragment_dump(a, lay, (rows, cols), block, span)
    assert same(d, want_d)
    assert same(c, a) and same(b, a)


def test_byte_offset_and_raw_ptx_pointer():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32", byte_offset=8), B: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        r = pg.alloc_local((1,), "float32")
        pg.ptx["ld.global.f32"](r[0], A.ptr_to([tx]))
        B[tx] = r[0] + 1.0

    a = rand((34,), "float32")
    a = np.where(np.isfinite(a), a, 2.0).astype(np.float32)
    b = poison((32,), "float32")
    ptxsim.run(k, [a, b])
    assert same(b, a[2:] + np.float32(1.0))


# ---- property: random copies, executed ----------------------------------------------------
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
from test_copy_variants import _layout_from_roles  # noqa: E402


@st.composite
def sim_case(draw):
    dt = draw(st.sampled_from(["int8", "float16", "float32", "float64"]))
    ebits = pg.dtype(dt).bits
    rows = draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    cols = draw(st.sampled_from([2, 4, 8, 16, 32, 64]))
    pad = draw(st.sampled_from([0, 1, 3, 8]))
    r0 = draw(st.integers(0, 2))
    c0 = draw(st.sampled_from([0, 1, 2, 8]))
    eo = draw(st.sampled_from([0, 1, 4]))
    colmajor = draw(st.booleans())
    scope, block = draw(st.sampled_from([("thread", 32), ("warp", 32), ("warpgroup", 128),
                                         ("cta", 64)]))
    swz = None
    if not colmajor and cols * ebits // 8 in (32, 64, 128) and rows % 8 == 0 and draw(st.booleans()):
        swz = cols * ebits // 8
    return dt, rows, cols, pad, r0, c0, eo, colmajor, scope, block, swz


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sim_case())
def test_property_copies_move_exactly_the_region(case):
    dt, rows, cols, pad, r0, c0, eo, colmajor, scope, block, swz = case
    shape = (r0 + rows + 1, c0 + cols + pad)
    g_lay = TileLayout(S[shape:(1, shape[0])]) if colmajor else None
    s_lay = None
    if swz:
        s_lay = ComposeLayout(Swizzle.mma(swz, pg.dtype(dt).bits), TileLayout(S[(rows, cols)]))
    region = (slice(r0, r0 + rows), slice(c0, c0 + cols))

    @pg.kernel(grid=(1,), block=(block,), name="prop_sim")
    def k(A: pg.Tensor(shape, dt, layout=g_lay, elem_offset=eo),
          B: pg.Tensor(shape, dt, layout=g_lay, elem_offset=eo)):
        pg.thread_id(block)
        sm = pg.alloc_shared((rows, cols), dt, layout=s_lay, align=1024)
        getattr(pg.tile, scope).copy(sm[0:rows, 0:cols], A[region])
        pg.cta_sync()
        getattr(pg.tile, scope).copy(B[region], sm[0:rows, 0:cols])

    n = shape[0] * shape[1] + eo
    a, b = rand((n,), dt), poison((n,), dt)
    want = b.copy()
    order = "F" if colmajor else "C"
    av = a[eo:].reshape(shape, order=order)
    wv = want[eo:].reshape(shape, order=order)
    wv[region] = av[region]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            k.ptx("sm_90a")
        except pg.PtxgenError as e:       # rejected with a reason is an allowed outcome
            assert str(e)
            return
        ptxsim.run(k, [a, b])
    assert same(b, want)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["int8", "float16", "float32", "float64"]), st.integers(5, 8),
       st.data(), st.booleans())
def test_property_register_layouts_executed(dt, nbits, data, pad):
    """Random lane/register bit layouts (the reg path or ldstmatrix) moving global -> registers
    -> global: every element must land where it came from."""
    a_bits = data.draw(st.integers(0, nbits))
    roles = data.draw(st.permutations(["l0", "l1", "l2", "l3", "l4"] +
                                      [f"r{i}" for i in range(nbits - 5)]))
    lay, _ = _layout_from_roles(a_bits, nbits - a_bits, list(roles))
    rows, cols = 1 << a_bits, 1 << (nbits - a_bits)
    mshape = (rows, cols + (4 if pad else 0))

    @pg.kernel(grid=(1,), block=(32,), name="reg_prop")
    def k(A: pg.Tensor(mshape, dt), B: pg.Tensor(mshape, dt)):
        R = pg.alloc_local((rows, cols), dt, layout=lay)
        pg.tile.warp.copy(R[:, :], A[0:rows, 0:cols])
        pg.tile.warp.copy(B[0:rows, 0:cols], R[:, :])

    try:
        k.ptx("sm_90a")
    except pg.PtxgenError as e:
        assert str(e)
        return
    a, b = rand(mshape, dt), poison(mshape, dt)
    want = b.copy()
    want[:, :cols] = a[:, :cols]
    ptxsim.run(k, [a, b])
    assert same(b, want)


def test_smem_pool_demo_with_mbarriers():
    """The 100 KB SMEMPool example (tile reuse via move_base_to, an mbarrier round trip)."""
    import smem_pool_demo as m

    rng = np.random.default_rng(3)
    a = rng.integers(-2**31, 2**31, size=(m.G, m.N_IN), dtype=np.int64).astype(np.int32)
    h = rng.integers(0, 2**16, size=(m.G, m.HALVES), dtype=np.int64).astype(np.uint16) \
        .view(np.float16)
    out_a = np.full((m.G, m.N_IN), -1, np.int32)
    out_h = np.full((m.G, m.HALVES), np.nan, np.float16)
    ptxsim.run(m.pool_copy, [a, h, out_a, out_h], grid=(1,))   # one CTA keeps it quick
    want_a, want_h = m.pool_copy_expected(a, h)
    assert same(out_a[0], want_a[0]) and same(out_h[0], want_h[0])
    assert (out_a[1:] == -1).all()


def test_wgmma_check_tiles_are_laid_out_as_the_descriptors_expect():
    """The CPU half of the wgmma hardware proof: the swizzled / MN-major shared tiles the
    check kernel builds (dumped before the first wgmma) equal the canonical layouts the
    descriptor builder encodes.  The multiply itself needs an sm_90a GPU."""
    import wgmma_desc_check as ex

    for case in ex.CASES:
        N, sw, am, bm = case
        a, b, ref = ex.inputs(N, seed=N + len(sw))
        D = np.full((ex.M, N), np.nan, np.float32)
        dump_a = np.full(ex.M * ex.K, 0xFFFF, np.uint16)
        dump_b = np.full(N * ex.K, 0xFFFF, np.uint16)
        ptxsim.run(ex.kernel_for(*case), [a.view(np.uint16), b.view(np.uint16), D, dump_a,
                                          dump_b], stop_at=("wgmma",))
        for name, dump, bits, major in (("A", dump_a, a, am), ("B", dump_b, b, bm)):
            assert same(dump, ex.expected_dump(bits, major, sw)), (case, name)


def test_bulk_copy_kernel_loops_with_mbarrier_phases():
    """Two CTAs, five tiles: the one-thread bulk loop flips its mbarrier parity per tile."""
    from ptxgen.bench import copy_kernels as ck

    k, ctas = ck.bulk_copy_kernel("float32", (8, 16), ctas_per_sm=1, nsm=2)
    assert ctas == 2
    rows = 8 * 5
    a, b = rand((rows, 16), "float32"), poison((rows, 16), "float32")
    ptxsim.run(k, [a, b], [rows])
    assert same(a, b)


def test_f32_to_bf16_and_f16_shortcut_gives_the_exact_models_bits():
    """The simulator's f32 -> bf16 / f16 round-to-nearest conversion (the GEMM epilogues')
    skips the exact Fraction model; both give the same bits: ties to even, carries into the
    exponent, overflow to inf, subnormals, signed zeros, NaNs as the canonical NaN."""
    import random
    import struct

    from support.ptxsim_math import _F32_NARROW_RN, _cvt_float, cvt_exact

    rng = random.Random(7)
    f32 = [struct.unpack("<I", struct.pack("<f", rng.uniform(-lim, lim)))[0]
           for lim in (7e4, 1e-4, 1e-7) for _ in range(400)]
    edges = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F7FFFFF,
             0xFF7FFFFF, 1, 0x80000001, 0x007FFFFF, 0x00800000, 0x3F808000, 0x3F818000,
             0x3F807FFF, 0x477FEFFF, 0x477FF000, 0x33000000, 0x33000001, 0x387FF000]
    for bits in edges + f32 + [rng.getrandbits(32) for _ in range(1500)]:
        for fmt in _F32_NARROW_RN:
            assert _cvt_float(bits, "f32", fmt, "rn", False) == \
                cvt_exact(bits, "f32", fmt, "rn", False), (hex(bits), fmt)
