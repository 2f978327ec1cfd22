"""The asynchronous copies checked by their results on the CPU (tests/support/ptxsim.py models TMA
boxes, swizzles, zero fill and clipping, multicast, cp.async and bulk groups, clusters), and
every kernel assembled by nvJitLink for sm_90a and sm_100a (cp.async also for sm_80).  The
same cases run on the GPU in tests/gpu/test_async_gpu.py."""
import numpy as np
import pytest

from support import async_cases as ac
import ptxgen as pg
from ptxgen.layout import S, ComposeLayout, Swizzle, TileLayout
from support.asm import assemble

RNG = np.random.default_rng(15)

# (dtype, tensor shape, box, swizzle, region start): interior, edges (partial tiles, zero
# fill), negative starts; 2-D and 3-D
# Innermost starts are multiples of 16 bytes: TMA faults otherwise (tmap.INNER_START_ALIGN);
# edges are still crossed on every side, negative starts included.
LOADS = [
    ("float16", (40, 96), (16, 64), "128B", (3, 8)),
    ("float16", (40, 96), (16, 64), "128B", (30, 40)),
    ("bfloat16", (40, 96), (16, 32), "64B", (8, 64)),
    ("float32", (40, 96), (16, 16), "64B", (-3, -4)),
    ("float32", (40, 96), (8, 32), "128B", (36, 80)),
    ("int8", (40, 96), (16, 32), "32B", (5, 64)),
    ("int8", (40, 256), (8, 128), "128B", (1, 192)),
    ("float8_e4m3fn", (3, 20, 256), (2, 8, 128), "128B", (2, 13, 144)),
    ("bfloat16", (3, 20, 48), (2, 8, 24), "none", (1, 15, 32)),
    ("float16", (4, 24, 64), (2, 8, 16), "32B", (3, 20, 56)),
    ("float32", (5, 24, 64), (4, 8, 32), "none", (0, 0, 0)),
]


@pytest.mark.parametrize("case", LOADS, ids=lambda c: f"{c[0]}-{c[3]}-{len(c[1])}d-{c[4]}")
def test_tma_load(case):
    ac.run_sim(ac.tma_load_case(RNG, *case))


@pytest.mark.parametrize("scope", ["warp", "cta"])
def test_tma_load_elected_by_a_scope(scope):
    ac.run_sim(ac.tma_load_case(RNG, "float16", (40, 96), (16, 64), "128B", (30, 40), scope))


def test_tma_load_narrower_than_the_swizzle_span_is_refused():
    """A 64-byte box row under the 128B swizzle made the H200 write past the tile (an
    illegal memory access): the tma variant declines it and names the fix."""
    seen = {}

    def k(A: pg.Tensor((40, 96), "float16")):
        pool = pg.SMEMPool()
        t = pool.alloc((16, 32), "float16", align=1024,
                       layout=ComposeLayout(Swizzle.mma("128B", 16), TileLayout(S[(16, 32)])))
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        seen["t"] = pg.tile.explain("copy_async", t, A[0:16, 0:32], mbar=bar[0], scope="thread")
    pg.kernel(k, grid=(1,), block=(32,))
    reason = {r.name: r.reason for r in seen["t"]}["tma"]
    assert "narrower than the 128B swizzle span (128 B): a swizzled TMA box row is the whole " \
           "span" in reason and "lay the tile out with the 64B swizzle" in reason


STORES = [
    ("float16", (40, 96), (16, 64), "128B", (3, 8), None, "cta"),
    ("float16", (40, 96), (16, 64), "128B", (30, 40), None, "cta"),
    ("float32", (40, 96), (16, 16), "64B", (30, 88), None, "warp"),
    ("int8", (4, 24, 64), (2, 8, 32), "32B", (3, 20, 48), None, "warpgroup"),
    ("float16", (40, 96), (16, 64), "none", (30, 40), None, "thread"),
    ("float32", (40, 96), (16, 32), "128B", (30, 68), "add", "cta"),
    ("int32", (40, 96), (16, 16), "none", (3, 8), "add", "cta"),
    ("bfloat16", (40, 96), (16, 64), "none", (3, 8), "add", "cta"),
]


@pytest.mark.parametrize("case", STORES, ids=lambda c: f"{c[0]}-{c[3]}-{c[5] or 'store'}-{c[6]}")
def test_tma_store(case):
    ac.run_sim(ac.tma_store_case(RNG, *case))


@pytest.mark.parametrize("dt,n", [("float16", 512), ("float32", 64), ("int8", 2048)])
def test_bulk(dt, n):
    ac.run_sim(ac.bulk_case(RNG, dt, 8192, n, 3))


CP = [  # dtype, tensor, rows, cols, scope: 16-, 8- and 4-byte cp.async in each scope
    ("float32", (64, 16), 32, 16, "warp"), ("float32", (300, 6), 32, 2, "warp"),
    ("float32", (300, 3), 32, 3, "warp"), ("float16", (200, 64), 128, 64, "warpgroup"),
    ("float32", (300, 6), 128, 2, "warpgroup"), ("float16", (300, 2), 128, 2, "warpgroup"),
    ("int8", (300, 64), 256, 64, "cta"), ("float32", (300, 6), 256, 2, "cta"),
    ("float32", (300, 3), 256, 3, "cta"),
]


@pytest.mark.parametrize("case", CP, ids=lambda c: f"{c[0]}-{c[3]}-{c[4]}")
def test_cp_async(case):
    ac.run_sim(ac.cp_async_case(RNG, *case, r0=5))


def test_cp_async_thread_scope_with_mbar():
    ac.run_sim(ac.cp_async_case(RNG, "float16", (64, 64), 16, 64, "thread", 8, use_mbar=True))


@pytest.mark.parametrize("n,how", [(2, "cluster"), (4, "cluster"), (2, "slice"), (4, "slice")])
def test_multicast(n, how):
    ac.run_sim(ac.multicast_case(RNG, n, how, rows=32))


@pytest.mark.parametrize("n", [2, 4])
def test_dsmem_exchange(n):
    ac.run_sim(ac.dsmem_case(RNG, n))


def test_a_load_read_before_its_wait_sees_stale_data(monkeypatch):
    """The simulator lands a TMA load only when its barrier is waited on: a kernel whose
    threads read the tile before waiting reads stale bytes (here thread 0, which runs first),
    so the tests above do check the waits.  The build refuses the kernel (the protocol
    check); it is built here with the check off."""
    import ptxgen as pg
    import ptxgen.passes
    from support import ptxsim

    def k(A: pg.Tensor((16, 64), "float16"), O: pg.Tensor((16, 64), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((16, 64), "float16", align=1024)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        with pg.if_(tx == 0):
            pg.tile.thread.copy_async(T, A, mbar=bar)
        pg.tile.cta.copy(O, T)
        pg.ptx.mbarrier.try_wait(bar, 0)
    a = np.ones((16, 64), np.float16)
    o = np.full((16, 64), 7, np.float16)
    with pytest.raises(pg.TraceError, match="before any wait on its mbarrier 'bar'"):
        pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_90a")
    monkeypatch.setattr(ptxgen.passes, "check_protocol", lambda f, t=None: [])
    ptxsim.run(pg.kernel(k, grid=(1,), block=(128,)), [a, o])
    assert (o[0, :8] == 0).all() and (o == 1).any()


@pytest.mark.parametrize("uniform", [False, True])
def test_pipeline_example_and_warpgroup_consumers(uniform):
    """uniform: the consumers pick their stage with cons.uniform_stage, lane 0's copy
    (shfl.sync.idx), which must read the same ring slots."""
    import re
    import async_copy as ex
    import ptxgen as pg
    from support import ptxsim
    from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

    rows = 1000
    a = RNG.integers(0, 2**16, size=(rows, 128)).astype(np.uint16)
    o = np.full((rows, 128), 0xA5A5, np.uint16)
    ptxsim.run(ex.ring_copy, [a, o], [rows])
    assert (a == o).all()

    R, C, ST, K = 16, 64, 2, 5     # two consumer warpgroups read each stage, then release it

    def k(A: pg.Tensor((K * R, C), "float16"), O: pg.Tensor((K * R, C), "float16")):
        tx = pg.thread_id(384)
        pool = pg.SMEMPool()
        ring = pool.alloc((ST, R, C), "float16", align=1024,
                          layout=ComposeLayout(Swizzle.mma("128B", 16), TileLayout(S[(ST, R, C)])))
        pipe = pg.Pipeline(pool, stages=ST, consumers=2)
        pool.commit()
        pipe.init()
        wg = pg.warpgroup_id()
        with pg.if_(tx == 0):
            prod = pipe.producer()
            for i in pg.serial(K):
                s = prod.stage
                prod.acquire()
                pg.tile.thread.copy_async(ring[s:s + 1, 0:R, 0:C], A[i * R:i * R + R, 0:C],
                                          mbar=prod.full)
                prod.commit()
        with pg.if_(wg > 0):
            cons = pipe.consumer(scope="warpgroup")
            half = pg.let((wg - 1) * (R // 2))
            for i in pg.serial(K):
                s = cons.uniform_stage if uniform else cons.stage
                cons.wait()
                pg.tile.warpgroup.copy(O[i * R + half:i * R + half + R // 2, 0:C],
                                       ring[s:s + 1, half:half + R // 2, 0:C])
                cons.release()
    a = RNG.integers(0, 2**16, size=(K * R, C)).astype(np.uint16)
    o = np.full((K * R, C), 0xA5A5, np.uint16)
    kern = pg.kernel(k, grid=(1,), block=(384,))
    ptxsim.run(kern, [a, o])
    assert (a == o).all()
    ptx = kern.ptx("sm_90a")
    assert len(re.findall(r"shfl\.sync\.idx\.b32 %r\d+, %r\d+, 0, 31, -1;", ptx)) == uniform
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log


def test_uniform_stage_of_a_thread_consumer_is_a_plain_binding():
    """One thread consumes: its stage is not shared by a warp, so no lane 0 copy."""
    import ptxgen as pg

    def k(A: pg.Tensor((32, 64), "float16"), O: pg.Tensor((32, 64), "float16")):
        tx = pg.thread_id(32)
        pool = pg.SMEMPool()
        ring = pool.alloc((2, 16, 64), "float16", align=1024)
        pipe = pg.Pipeline(pool, stages=2, consumers=1)
        pool.commit()
        pipe.init()
        with pg.if_(tx == 0):
            prod = pipe.producer()
            cons = pipe.consumer(scope="thread")
            for i in pg.serial(2):
                prod.acquire()
                pg.tile.thread.copy_async(ring[prod.stage:prod.stage + 1, 0:16, 0:64],
                                          A[i * 16:i * 16 + 16, 0:64], mbar=prod.full)
                prod.commit()
                s = cons.uniform_stage
                cons.wait()
                pg.tile.thread.copy(O[i * 16:i * 16 + 16, 0:64], ring[s:s + 1, 0:16, 0:64])
                cons.release()
    kern = pg.kernel(k, grid=(1,), block=(32,))
    import re
    assert re.search(r"\w+ = pg\.let\(pipe_consumer_stage\[0\]\)$", str(kern.ir), re.M)
    assert "shfl.sync.idx" not in kern.ptx("sm_90a")


def _all_kernels():
    r = np.random.default_rng(0)
    for c in LOADS[:3] + LOADS[7:9]:
        yield ac.tma_load_case(r, *c)[0], ()
    for c in STORES:
        yield ac.tma_store_case(r, *c)[0], ()
    yield ac.bulk_case(r, "float16", 8192, 512, 3)[0], ()
    for c in CP:
        yield ac.cp_async_case(r, *c)[0], ("sm_80",)
    yield ac.cp_async_case(r, "float16", (64, 64), 16, 64, "thread", 8, True)[0], ()
    for n in (2, 4):
        yield ac.multicast_case(r, n, "cluster", rows=32)[0], ()
        yield ac.multicast_case(r, n, "slice", rows=32)[0], ()
        yield ac.dsmem_case(r, n)[0], ()


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_80"])
def test_everything_assembles(arch):
    import async_copy as ex

    kernels = [(k, extra) for k, extra in _all_kernels()] + [(ex.ring_copy, ())]
    for k, extra in kernels:
        if arch == "sm_80" and arch not in extra:
            continue
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, f"{k.name} on {arch}: {log[:1500]}"


def test_bench_kernels():
    """`ptxgen bench copy`'s tma_ring (ragged ROWS, stages refilled behind the stores) and
    cp_async streams, on the simulator."""
    from support import ptxsim
    from ptxgen.bench.async_kernels import cp_async_stream_kernel, ring_shape, tma_ring_kernel

    assert ring_shape("float16", (128, 64)) == (8, 1) and ring_shape("float16", (32, 32)) == (8, 8)
    assert "TMA box" in ring_shape("float32", (64, 512)).reason
    k, _ = tma_ring_kernel("float16", (16, 64), stages=4, ctas_per_sm=1, nsm=2)
    lines = [ln.strip() for ln in k.ptx("sm_90a").splitlines() if not ln.strip().startswith("//")]
    # the default L2 hints: every load under an evict_last policy, every store evict_first
    kind = {ln.split()[1].rstrip(","): ln.split()[0].split("::")[1].split(".")[0]
            for ln in lines if ln.startswith("createpolicy.fractional.L2::")}
    loads = [ln for ln in lines if ln.startswith("cp.async.bulk.tensor.2d.shared::cluster.global")]
    stores = [ln for ln in lines if ln.startswith("cp.async.bulk.tensor.2d.global.shared::cta")]
    assert loads and stores and all(".L2::cache_hint " in ln for ln in loads + stores)
    assert {kind[ln.rstrip(";").split(", ")[-1]] for ln in loads} == {"evict_last"}
    assert {kind[ln.rstrip(";").split(", ")[-1]] for ln in stores} == {"evict_first"}
    plain, _ = tma_ring_kernel("float16", (16, 64), 4, 1, 2, load_hint=None, store_hint=None)
    assert "createpolicy" not in plain.ptx("sm_90a") and "cache_hint" not in plain.ptx("sm_90a")
    rows = 16 * 9 + 5
    a = RNG.integers(0, 2**16, (rows, 64)).astype(np.uint16)
    o = np.full_like(a, 0xA5A5)
    ptxsim.run(k, [a, o], [rows])
    assert (a == o).all()
    k, _ = cp_async_stream_kernel("float16", "warp", (32, 64), ctas_per_sm=1, nsm=1)
    a = RNG.integers(0, 2**16, (256, 64)).astype(np.uint16)
    o = np.full_like(a, 0xA5A5)
    ptxsim.run(k, [a, o], [256])
    assert (a == o).all()
