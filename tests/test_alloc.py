"""SMEMPool, MMA swizzle inference, the resource summary and the mbarrier helpers (no GPU).

Every build-time error is asserted together with the fix its message proposes.
"""
import itertools
import re

import pytest

import ptxgen as pg
from support.asm import assemble
from ptxgen.alloc import MAX_DYNAMIC_SMEM, Resources, SMEMPool, resources_of
from ptxgen.alloc import swizzle as swz
from ptxgen.errors import ArchError, LayoutError, PtxgenError, ResourceError, TraceError
from ptxgen.layout import ComposeLayout, Swizzle
from ptxgen.primitives import mma_desc


def _offsets(k):
    """name -> byte offset of every pool view (from the IR)."""
    out = {}
    for s in k.ir.body:
        b = getattr(s, "buffer", None)
        if b is not None and b.data is not None and b.scope == "shared.dyn":
            out[b.name] = b.elem_offset * b.dtype.bits // 8
    return out


# ---- SMEMPool: bump allocation ----------------------------------------------------------------
def test_bump_alignment_commit_and_launch_bytes():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        pool = SMEMPool()
        a = pool.alloc((3,), "uint8")                # [0, 3)
        b = pool.alloc((4,), "float32")              # 16-aligned -> [16, 32)
        c = pool.alloc((2,), "float16", align=128)   # [128, 132)
        d = pool.alloc((1,), "float64", align=1)     # natural alignment wins: [136, 144)
        assert pool.offset == 144 and pool.high_water == 144
        assert pool.commit() == 144 and pool.size == 144
        tx = pg.thread_id(32)
        b[0] = A[tx]

    assert _offsets(k) == {"a": 0, "b": 16, "c": 128, "d": 136}
    assert k.ir.dynamic_smem_bytes == 144
    assert k.resources["smem_dynamic_bytes"] == 144
    ptx = k.ptx("sm_90a")
    assert ".extern .shared .align 128 .b8 smem_pool[];" in ptx
    assert ptx.count(".extern .shared") == 1
    assert assemble(ptx, "sm_90a")[0]


def test_sub_byte_dtypes_are_packed():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        pool = SMEMPool()
        f4 = pool.alloc((5,), "float4_e2m1fn", align=1)    # 5 x 4 bit -> 3 bytes
        u8 = pool.alloc((1,), "uint8", align=1)            # right after: byte 3
        big = pool.alloc((64, 64), "float4_e2m1fn")       # 2048 bytes at 16
        pool.commit()

    b = {s.buffer.name: s.buffer for s in k.ir.body if hasattr(s, "buffer")}
    assert b["u8"].elem_offset == 3
    assert b["big"].elem_offset == 32                      # 16 bytes = 32 fp4 elements
    assert k.ir.dynamic_smem_bytes == 16 + 2048


def test_alloc_mbarrier_and_move_base_to_reuse():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        pool = SMEMPool()
        x = pool.alloc((1,), "uint8")
        bars = pool.alloc_mbarrier(3)                      # 8-aligned: [8, 32)
        t1 = pool.alloc((256,), "float32")                 # [32, 1056)
        mark = pool.offset
        pool.move_base_to(t1)                              # reuse t1's bytes
        t2 = pool.alloc((128,), "float16")                 # [32, 288)
        pool.move_base_to(mark)
        t3 = pool.alloc((4,), "int32")                     # [1056, 1072)
        pool.commit()

    assert _offsets(k) == {"x": 0, "bars": 8, "t1": 32, "t2": 32, "t3": 1056}
    b = {s.buffer.name: s.buffer for s in k.ir.body if hasattr(s, "buffer")}
    assert b["bars"].dtype.name == "uint64" and b["bars"].align == 8
    assert k.ir.dynamic_smem_bytes == 1072
    assert k.resources["barriers"] == 3
    assert isinstance(k.resources["memory"], Resources)


def test_sm80_pool_limit_at_the_allocating_line():
    with pytest.raises(ResourceError) as e:
        @pg.kernel(grid=(1,), block=(32,))
        def k(A: pg.Tensor((32,), "float32")):
            pool = SMEMPool(arch="sm_80")
            pool.alloc((160 * 1024,), "uint8")
            pool.alloc((4096,), "uint8")                   # 164 KiB > 163 KiB
    msg = str(e.value)
    assert "test_alloc.py:" in msg and "163 KiB" in msg and "sm_80" in msg
    assert "move_base_to" in msg


def test_overflow_past_227k():
    with pytest.raises(ResourceError) as e:
        @pg.kernel(grid=(1,), block=(32,))
        def k(A: pg.Tensor((32,), "float32")):
            pool = SMEMPool()
            pool.alloc((200 * 1024,), "uint8")
            pool.alloc((28 * 1024,), "uint8", align=1024)
    assert str(MAX_DYNAMIC_SMEM) in str(e.value) and "227 KiB" in str(e.value)
    assert "reuse space with pool.move_base_to" in str(e.value)


def test_target_limit_checked_at_emit():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        pool = SMEMPool()
        pool.alloc((200 * 1024,), "uint8")
        pool.commit()

    with pytest.raises(ResourceError, match="sm_80"):
        k.ptx("sm_80")
    assert assemble(k.ptx("sm_90a"), "sm_90a")[0]


@pytest.mark.parametrize("case, fix", [
    ("after_commit", "move every allocation before commit()"),
    ("move_after_commit", "move every allocation before commit()"),
    ("commit_twice", "commit() called twice"),
    ("never_committed", "call pool.commit() after the last allocation"),
    ("bad_align", "must be a power of two"),
    ("symbolic_shape", "positive int constants"),
    ("bad_move", "byte position in"),
    ("in_branch", "top level of the kernel body"),
])
def test_pool_misuse(case, fix):
    with pytest.raises(PtxgenError) as e:
        @pg.kernel(grid=(1,), block=(32,))
        def k(A: pg.Tensor((32,), "float32"), n: pg.int32):
            tx = pg.thread_id(32)
            if case == "in_branch":
                with pg.if_(tx == 0):
                    SMEMPool()
            pool = SMEMPool()
            pool.alloc((16,), "float32", align=3 if case == "bad_align" else 16)
            if case == "symbolic_shape":
                pool.alloc((n,), "float32")
            if case == "bad_move":
                pool.move_base_to(-4)
            if case != "never_committed":
                pool.commit()
            if case == "after_commit":
                pool.alloc((16,), "float32")
            if case == "move_after_commit":
                pool.move_base_to(0)
            if case == "commit_twice":
                pool.commit()
    assert fix in str(e.value)
    assert "test_alloc.py:" in str(e.value)


def test_two_arenas_are_rejected():
    with pytest.raises(ResourceError, match="allocate from that pool"):
        @pg.kernel(grid=(1,), block=(32,))
        def k1(A: pg.Tensor((32,), "float32")):
            SMEMPool()
            SMEMPool()
    with pytest.raises(ResourceError, match="allocate every dynamic tile through the pool"):
        @pg.kernel(grid=(1,), block=(32,))
        def k2(A: pg.Tensor((32,), "float32")):
            pg.alloc_buffer((64,), "float32", scope="shared.dyn")
            SMEMPool()
    with pytest.raises(TraceError, match="only one shared.dyn allocation"):
        @pg.kernel(grid=(1,), block=(32,))
        def k3(A: pg.Tensor((32,), "float32")):
            SMEMPool()
            pg.alloc_buffer((64,), "float32", scope="shared.dyn")


def test_launch_reserve_smaller_than_pool():
    with pytest.raises(TraceError, match="less than the 4096 bytes"):
        @pg.kernel(grid=(1,), block=(32,))
        def k(A: pg.Tensor((32,), "float32")):
            pg.launch(dynamic_smem_bytes=1024)
            pool = SMEMPool()
            pool.alloc((1024,), "float32")
            pool.commit()


# ---- swizzle inference ----------------------------------------------------------------------
# (dtype, K elements) -> mode; row bytes = K * bits / 8
SWIZZLE_TABLE = [
    ("float16", 128, "128B"), ("float16", 64, "128B"), ("float16", 96, "64B"),
    ("float16", 32, "64B"), ("float16", 48, "32B"), ("float16", 16, "32B"),
    ("float16", 8, "none"), ("float16", 24, "none"),
    ("bfloat16", 192, "128B"), ("bfloat16", 160, "64B"),
    ("float32", 64, "128B"), ("float32", 32, "128B"), ("float32", 16, "64B"),
    ("float32", 24, "32B"), ("float32", 8, "32B"), ("float32", 4, "none"),
    ("float8_e4m3fn", 256, "128B"), ("float8_e4m3fn", 128, "128B"), ("float8_e4m3fn", 64, "64B"),
    ("float8_e4m3fn", 32, "32B"), ("float8_e4m3fn", 16, "none"), ("int8", 80, "none"),
    ("float4_e2m1fn", 256, "128B"), ("float4_e2m1fn", 128, "64B"),
    ("float4_e2m1fn", 64, "32B"), ("float4_e2m1fn", 32, "none"),
]


@pytest.mark.parametrize("dt, k, mode", SWIZZLE_TABLE)
def test_swizzle_table(dt, k, mode):
    assert swz.infer_mode((64, k), dt) == mode


@pytest.mark.parametrize("dt, k", [("float16", 4), ("float8_e4m3fn", 8), ("float32", 2),
                                   ("float16", 12)])
def test_rows_that_no_mode_fits(dt, k):
    with pytest.raises(LayoutError, match=r"pad shape\[-1\] to a multiple of"):
        swz.infer_mode((64, k), dt)


def _cute_reference(r, c, rows, k, bits, mode, order):
    """Byte offset per the canonical K-major atom grid, swizzled by CuTe's byte formula."""
    a = {"128B": 128, "64B": 64, "32B": 32, "none": 16}[mode]
    e = a * 8 // bits
    g, kg = r // 8, c // e
    n_k, n_g = k // e, rows // 8
    atom = g * n_k + kg if order == "k" else kg * n_g + g
    lin = atom * 8 * a + (r % 8) * a + (c % e) * bits // 8
    b = {"128B": 3, "64B": 2, "32B": 1, "none": 0}[mode]      # CuTe Swizzle<B,4,3> on bytes
    return lin ^ ((lin >> 3) & (((1 << b) - 1) << 4))


CUTE_CASES = [(dt, rows, k, mode, order)
              for (dt, k, mode) in SWIZZLE_TABLE for rows in (8, 32)
              for order in ("k", "mn")]


@pytest.mark.parametrize("dt, rows, k, mode, order", CUTE_CASES)
def test_layouts_match_cute_byte_swizzle(dt, rows, k, mode, order):
    bits = pg.dtype(dt).bits
    lay = swz.mma_layout((rows, k), dt, mode, order)
    assert isinstance(lay, ComposeLayout) and lay.swizzle == Swizzle.mma(mode, bits)
    seen = set()
    for r, c in itertools.product(range(rows), range(k)):
        m = lay.apply(r, c, shape=(rows, k))["m"]
        if bits < 8 and c % 2:                # a 4-bit element shares a byte with its pair
            assert m % 2 == 1
            continue
        byte = m * bits // 8
        assert byte == _cute_reference(r, c, rows, k, bits, mode, order), (r, c)
        seen.add(byte)
    assert len(seen) == rows * k * min(bits, 8) // 8       # a bijection onto the tile's bytes
    assert max(seen) < rows * k * bits / 8


@pytest.mark.parametrize("dt, k, mode", [c for c in SWIZZLE_TABLE
                                         if pg.dtype(c[0]).bits in (8, 16, 32)])
def test_layouts_are_canonical_for_the_descriptor(dt, k, mode):
    """mma_desc (written from the PTX ISA canonical layouts) accepts the pool's layout and
    derives SBO = the 8-row group stride."""
    bits, rows = pg.dtype(dt).bits, 64
    lay = swz.mma_layout((rows, k), dt, mode)
    try:
        p = mma_desc.check_layout_matches(lambda r, c: lay.apply(r, c, shape=(rows, k))["m"],
                                          major="K", swizzle=mode, elem_bits=bits, rows=rows,
                                          k_extent=k, atom_order="k")
    except LayoutError as e:
        if "must be a positive multiple" in str(e):
            pytest.skip(f"K shorter than one MMA K step: {e}")
        raise
    assert p.sbo_bytes == 8 * k * bits // 8          # 8 rows of the whole K extent
    if mode == "none":
        assert p.lbo_bytes == 128                     # core matrices adjacent along K


def test_explicit_swizzle_that_does_not_fit_names_the_one_that_does():
    with pytest.raises(LayoutError) as e:
        swz.mma_layout((128, 32), "float16", "128B")
    assert "64B rows cannot use a 128B swizzle atom" in str(e.value)
    assert "use swizzle='64B'" in str(e.value)
    with pytest.raises(LayoutError, match="192B rows are not a multiple .* use swizzle='64B'"):
        swz.check_mode((128, 96), "float16", "128B")
    with pytest.raises(LayoutError, match="pad rows to 16"):
        swz.infer_mode((12, 64), "float16")
    with pytest.raises(LayoutError, match="'auto', '128B'"):
        swz.normalize_mode("256B")


def test_alloc_tcgen05_mma_AB_in_a_pool():
    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((128, 64), "float16")):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        pad = pool.alloc((3,), "uint8")
        Ta = pool.alloc_tcgen05_mma_AB((128, 64), "float16")             # 128B, 1024-aligned
        Tb = pool.alloc_tcgen05_mma_AB((64, 32), "bfloat16")             # 64B, 512-aligned
        Tc = pool.alloc_tcgen05_mma_AB((2, 64, 64), "float16")           # two stages
        Td = pool.alloc_tcgen05_mma_AB((64, 64), "float16", swizzle="32B")
        pool.commit()
        for i in pg.serial(64):
            Ta[tx, i] = A[tx, i]
        pg.cta_sync()
        Tc[1, tx // 2, (tx % 2) * 32] = Ta[tx, 0]

    b = {s.buffer.name: s.buffer for s in k.ir.body if hasattr(s, "buffer")}
    offs = _offsets(k)
    assert offs["Ta"] == 1024 and offs["Tb"] == 1024 + 16384
    assert offs["Tc"] % 1024 == 0 and offs["Td"] % 256 == 0
    assert b["Ta"].layout.swizzle.mode == "128B" and b["Tb"].layout.swizzle.mode == "64B"
    assert b["Td"].layout.swizzle.mode == "32B"
    two = swz.mma_layout((64, 64), "float16", "128B")
    for s, r, c in [(0, 5, 17), (1, 63, 63), (1, 8, 0)]:
        assert b["Tc"].layout.apply(s, r, c, shape=(2, 64, 64))["m"] == \
            s * 4096 + two.apply(r, c, shape=(64, 64))["m"]
    ptx = k.ptx("sm_90a")
    assert ".extern .shared .align 1024 .b8 smem_pool[];" in ptx
    assert assemble(ptx, "sm_90a")[0]
    with pytest.raises(LayoutError) as e:
        @pg.kernel(grid=(1,), block=(32,))
        def bad(A: pg.Tensor((32,), "float32")):
            pool = SMEMPool()
            pool.alloc_tcgen05_mma_AB((128, 32), "float16", swizzle="128B")
    assert "test_alloc.py:" in str(e.value) and "use swizzle='64B'" in str(e.value)


# ---- resources --------------------------------------------------------------------------------
def test_resources_compose():
    a = Resources(1024, 4096, 2, 128)
    b = Resources(0, 8192, 1, 256)
    assert a + b == Resources(1024, 12288, 3, 384)
    assert (a | b) == Resources(1024, 8192, 2, 256)
    assert (a + b).smem_bytes == 13312
    assert "13312 B" in str(a + b) and (a + b).as_dict()["smem_bytes"] == 13312


def test_kernel_resources_include_static_smem():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        s = pg.alloc_shared((100,), "float32")
        pool = SMEMPool()
        pool.alloc_mbarrier(2)
        pool.alloc((256,), "float32")
        pool.commit()
        tx = pg.thread_id(32)
        s[tx] = A[tx]

    r = k.resources
    assert r["smem_static_bytes"] == 400 and r["smem_dynamic_bytes"] == 16 + 1024
    assert r["memory"] == Resources(400, 1040, 2, 0) and r["barriers"] == 2
    assert resources_of(k) == r["memory"]

    @pg.kernel(grid=(1,), block=(32,))
    def plain(A: pg.Tensor((32,), "float32")):     # no pool: the IR alone
        s = pg.alloc_shared((8,), "float64")
        arena = pg.alloc_buffer((300,), "float32", scope="shared.dyn")
        tx = pg.thread_id(32)
        arena[tx] = A[tx]
        s[0] = pg.float64(1.0)

    assert resources_of(plain) == Resources(64, 1200, 0, 0)


# ---- mbarrier helpers -----------------------------------------------------------------------
def _mbar_kernel(wait="try_wait", expect_tx=False, fence=True, unrolled=False):
    @pg.kernel(grid=(1,), block=(64,))
    def mbar(A: pg.Tensor((64,), "int32"), B: pg.Tensor((64,), "int32")):
        tx = pg.thread_id(64)
        pool = SMEMPool()
        bars = pool.alloc_mbarrier(2)
        buf = pool.alloc((64,), "int32")
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bars, 64)
            pg.ptx.mbarrier.init(bars.ptr_to([1]), 1)
        if fence:
            pg.ptx.fence.mbarrier_init()
            pg.ptx.fence.proxy_async()
        pg.cta_sync()
        buf[tx] = A[tx]
        tok = pg.ptx.mbarrier.arrive(bars)
        getattr(pg.ptx.mbarrier, wait)(bars, 0)
        if expect_tx:
            with pg.if_(tx == 0):           # one arrival per phase waited on below
                for _ in range(2 if unrolled else 1):
                    pg.ptx.mbarrier.arrive_expect_tx(bars[1], 0)
        if unrolled:
            for i in pg.unroll(2):
                getattr(pg.ptx.mbarrier, wait)(bars[1], i)
        B[tx] = buf[63 - tx]
    return mbar


def test_mbarrier_round_trip_ptx():
    k = _mbar_kernel(expect_tx=True, unrolled=True)
    ptx = k.ptx("sm_90a")
    assert re.search(r"mbarrier\.init\.shared\.b64 \[%r\d+\], 64;", ptx)
    assert re.search(r"mbarrier\.init\.shared\.b64 \[%r\d+\+8\], 1;", ptx)
    assert re.search(r"mbarrier\.arrive\.shared\.b64 %rd\d+, \[%r\d+\];", ptx)
    assert re.search(r"mbarrier\.arrive\.expect_tx\.shared\.b64 %rd\d+, \[%r\d+\+8\], 0;", ptx)
    assert "fence.mbarrier_init.release.cluster;" in ptx
    assert "fence.proxy.async.shared::cta;" in ptx
    # each wait is a loop: label, try_wait into a predicate, branch back while it is false
    lines = [ln.strip() for ln in ptx.splitlines() if not ln.strip().startswith("//")]
    waits = [i for i, ln in enumerate(lines) if ln.startswith("mbarrier.try_wait.parity")]
    assert len(waits) == 3
    labels = [ln[:-1] for ln in lines if ln.endswith(":")]
    assert len(labels) == len(set(labels))          # unique, also inside the unrolled loop
    for i in waits:
        pred = re.match(r"mbarrier\.try_wait\.parity\.shared\.b64 (%p\d+),", lines[i]).group(1)
        top = max(j for j in range(i) if lines[j].endswith(":"))
        assert lines[i + 1].startswith("bra.uni " + lines[top][:-1])   # back to the top
        assert any(pred in lines[j] for j in range(top, i))           # tested on the way in
    for arch in ("sm_90", "sm_90a", "sm_100a"):
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, log


def test_mbarrier_sm80_test_wait_and_gating():
    k80 = _mbar_kernel(wait="test_wait", fence=False)
    assert "mbarrier.test_wait.parity.shared.b64" in k80.ptx("sm_80")
    assert assemble(k80.ptx("sm_80"), "sm_80")[0]
    with pytest.raises(ArchError, match=r"use pg\.ptx\.mbarrier\.test_wait.*needs sm_90"):
        _mbar_kernel(fence=False).ptx("sm_80")
    with pytest.raises(ArchError, match="sm_90"):
        _mbar_kernel(wait="test_wait", expect_tx=True, fence=False).ptx("sm_80")
    with pytest.raises(ArchError, match="sm_90"):
        _mbar_kernel(wait="test_wait").ptx("sm_80")


@pytest.mark.parametrize("case, fix", [
    ("float_buffer", "allocate it with pool.alloc_mbarrier(n)"),
    ("global_buffer", "allocate it with pool.alloc_mbarrier(n)"),
    ("not_a_buffer", "pool.alloc_mbarrier(n)"),
    ("count_zero", "outside [1, 1048575]"),
    ("count_huge", "outside [1, 1048575]"),
    ("tx_huge", "outside [0, 1048575]"),
    ("parity_2", "use phase & 1"),
    ("parity_float", "must be a 32-bit integer"),
    ("fence_space", "'shared::cta' (default)"),
])
def test_mbarrier_operand_errors(case, fix):
    with pytest.raises(ResourceError) as e:
        @pg.kernel(grid=(1,), block=(32,))
        def k(A: pg.Tensor((32,), "uint64")):
            pool = SMEMPool()
            bars = pool.alloc_mbarrier(1)
            f = pool.alloc((2,), "float64")
            pool.commit()
            mb = pg.ptx.mbarrier
            {"float_buffer": lambda: mb.init(f, 1),
             "global_buffer": lambda: mb.arrive(A),
             "not_a_buffer": lambda: mb.arrive(3),
             "count_zero": lambda: mb.init(bars, 0),
             "count_huge": lambda: mb.init(bars, 1 << 20),
             "tx_huge": lambda: mb.arrive_expect_tx(bars, 1 << 21),
             "parity_2": lambda: mb.try_wait(bars, 2),
             "parity_float": lambda: mb.try_wait(bars, pg.float32(0.0)),
             "fence_space": lambda: pg.ptx.fence.proxy_async("local"),
             }[case]()
    assert fix in str(e.value) and "test_alloc.py:" in str(e.value)


def test_mbarrier_on_static_shared_counts_as_barrier():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        bars = pg.alloc_shared((4,), "uint64", align=8)
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bars[2], 32)
        pg.cta_sync()
        pg.ptx.mbarrier.arrive(bars[2])
        pg.ptx.mbarrier.try_wait(bars[2], 0)
        pg.ptx.mbarrier.inval(bars[2])

    assert k.resources["barriers"] == 4
    assert k.resources["smem_static_bytes"] == 32
    ptx = k.ptx("sm_90a")
    assert re.search(r"mbarrier\.init\.shared\.b64 \[\w+\+16\], 32;", ptx) or \
        re.search(r"mbarrier\.init\.shared\.b64 \[%r\d+\+16\], 32;", ptx)
    assert assemble(ptx, "sm_90a")[0]


def test_parity_from_a_phase_variable():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        pool = SMEMPool()
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 32)
        pg.cta_sync()
        phase = pg.local_scalar("int32", 0)
        for i in pg.serial(4):
            pg.ptx.mbarrier.arrive(bar)
            pg.ptx.mbarrier.try_wait(bar, phase)
            phase ^= 1
        A[tx] = phase

    ptx = k.ptx("sm_90a")
    assert re.search(r"mbarrier\.try_wait\.parity\.shared\.b64 %p\d+, \[%r\d+\], %r\d+;", ptx)
    assert assemble(ptx, "sm_90a")[0]
