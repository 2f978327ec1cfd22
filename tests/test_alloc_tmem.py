"""TMEMPool and the checked tcgen05 alloc/dealloc helpers: emitted sequence, assembly for
sm_100a, arch gating, and every build-time error with its fix (no GPU: tcgen05 cannot run on
the H200, so correctness is shown by assembly and by the instruction sequence)."""
import re

import pytest

import ptxgen as pg
from support.asm import assemble
from ptxgen.alloc import SMEMPool, TMEMPool, check_tmem_live
from ptxgen.errors import ArchError, PtxgenError, ResourceError


def _body(ptx):
    return [ln.strip() for ln in ptx.splitlines()
            if ln.strip() and not ln.strip().startswith("//")]


def _guard_of(lines, i):
    """(predicate, label) of the innermost `@!%p bra L` whose label is placed after line i."""
    for j in range(i - 1, -1, -1):
        m = re.match(r"@!(%p\d+) bra (\S+);", lines[j])
        if m and f"{m.group(2)}:" in lines[i:]:
            return m.group(1), m.group(2)
    return None


def _defined_by(lines, reg, before):
    for j in range(before - 1, -1, -1):
        m = re.match(r"\S+ " + re.escape(reg) + r", (.*);", lines[j])
        if m:
            return lines[j]
    return None


def _assert_warp_uniform(lines, i):
    """The instruction at line i runs under `tid.x >> 5 == w`: one whole warp, never one lane."""
    g = _guard_of(lines, i)
    assert g is not None, f"{lines[i]} is not under a branch"
    setp = _defined_by(lines, g[0], i)
    m = re.match(r"setp\.eq\.s32 %p\d+, (%r\d+), (\d+);", setp)
    assert m, setp
    shr = _defined_by(lines, m.group(1), i)
    m2 = re.match(r"shr\.s32 %r\d+, (%r\d+), 5;", shr)
    assert m2, shr
    assert _defined_by(lines, m2.group(1), i).endswith("%tid.x;")


def test_pool_example_sequence_and_assembly():
    import pool_sm100

    k = pool_sm100.pool_sm100
    ptx = k.ptx("sm_100a")
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log
    lines = _body(ptx)
    allocs = [i for i, ln in enumerate(lines) if ln.startswith("tcgen05.alloc.")]
    deallocs = [i for i, ln in enumerate(lines) if ln.startswith("tcgen05.dealloc.")]
    assert len(allocs) == 1 and len(deallocs) == 1
    assert lines[allocs[0]].endswith(", 512;") and lines[deallocs[0]].endswith(", 512;")
    for i in allocs + deallocs:
        _assert_warp_uniform(lines, i)
    # alloc -> fence::before -> bar.sync -> fence::after -> the first read of the slot
    a = allocs[0]
    slot = re.search(r"\[(%r\d+(?:\+\d+)?)\]", lines[a]).group(1)
    first_read = next(i for i, ln in enumerate(lines) if i > a and f"[{slot}]" in ln)
    assert lines[first_read].startswith("ld.shared.u32")
    between = lines[a:first_read]
    bar = between.index("bar.sync 0;")
    assert "tcgen05.fence::before_thread_sync;" in between[:bar]
    assert "tcgen05.fence::after_thread_sync;" in between[bar:]
    # dealloc: fence::before + CTA barrier first, then relinquish and dealloc in the warp
    d = deallocs[0]
    g = _guard_of(lines, d)
    top = lines.index(f"@!{g[0]} bra {g[1]};", a + 1)
    assert lines[top - 2:top] == ["tcgen05.fence::before_thread_sync;", "bar.sync 0;"]
    assert lines[top + 1:d + 1] == [
        "tcgen05.fence::after_thread_sync;",
        "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
        lines[d]]
    base = re.search(r"b32 (%r\d+), 512;", lines[d]).group(1)
    assert re.match(r"mov\.b32 " + re.escape(base), _defined_by(lines, base, d)) or \
        _defined_by(lines, base, d).startswith("ld.shared.u32")
    r = k.resources
    assert r["tmem_cols"] == 512 and r["barriers"] == 1


def test_tcgen05_is_rejected_for_sm_90a():
    import pool_sm100

    with pytest.raises(ArchError) as e:
        pool_sm100.pool_sm100.ptx("sm_90a")
    assert "sm_100a" in str(e.value) and "sm_90a" in str(e.value)
    assert "pool_sm100.py:" in str(e.value)
    with pytest.raises(ArchError, match="sm_100a"):
        pool_sm100.pool_sm100.ptx("sm_100")


def _tmem_kernel(dtype="float32", shape=(128, 256), total=512, cta_group=1, alloc_warp=0,
                 second=None):
    @pg.kernel(grid=(1,), block=(128,))
    def k(Out: pg.Tensor((1,), "uint32")):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=total, cta_group=cta_group, tmem_addr=slot,
                        alloc_warp=alloc_warp)
        a = tmem.alloc(shape, dtype)
        b = tmem.alloc(second, dtype) if second else None
        tmem.commit()
        with pg.if_(tx == 0):
            Out[0] = tmem.base
        check_tmem_live(a)
        tmem.dealloc()
    return k


def test_16_bit_tiles_pack_two_per_column():
    k = _tmem_kernel("float16", (128, 256), total=256, second=(128, 128))
    bufs = {s.buffer.name: s.buffer for s in k.ir.body if getattr(s, "buffer", None) is not None
            and s.buffer.scope == "tmem"}
    a, b = bufs["a"], bufs["b"]
    assert a.layout.apply(5, 37, shape=(128, 256)) == {"m": 1, "TLane": 5, "TCol": 18}
    assert pg.ir.format_expr(b.tmem_addr).endswith("+ uint32(128)")   # 256 halves = 128 cols
    f32 = _tmem_kernel()
    a32 = next(s.buffer for s in f32.ir.body if getattr(s, "buffer", None) is not None and
               s.buffer.scope == "tmem")
    assert a32.layout.apply(5, 37, shape=(128, 256)) == {"m": 0, "TLane": 5, "TCol": 37}
    ok, log = assemble(k.ptx("sm_100a"), "sm_100a")
    assert ok, log


def test_cta_pair_and_alloc_warp():
    k = _tmem_kernel(cta_group=2, total=256, alloc_warp=3)
    ptx = k.ptx("sm_100a")
    assert "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32" in ptx
    assert "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" in ptx
    assert re.search(r"tcgen05\.dealloc\.cta_group::2\.sync\.aligned\.b32 %r\d+, 256;", ptx)
    assert re.search(r"setp\.eq\.s32 %p\d+, %r\d+, 3;", ptx)
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


def test_hand_managed_tmem_with_checked_helpers():
    """Seed 002's by-hand path: one warp allocates into a shared slot, barrier, decl_buffer a
    tmem view, then relinquish + dealloc from the same warp."""
    @pg.kernel(grid=(1,), block=(128,))
    def k(Out: pg.Tensor((1,), "uint32")):
        tx = pg.thread_id(128)
        warp = pg.warp_id()
        addr = pg.alloc_shared((1,), "uint32")
        with pg.if_(warp == 0):
            pg.ptx.tcgen05.alloc(addr, 128)
        pg.ptx.tcgen05.fence_before_thread_sync()
        pg.cta_sync()
        pg.ptx.tcgen05.fence_after_thread_sync()
        base = pg.let(addr[0])
        acc = pg.decl_buffer((128, 128), "float32", scope="tmem", allocated_addr=base)
        with pg.if_(tx == 0):
            Out[0] = base
        pg.cta_sync()
        with pg.if_(warp == 0):
            pg.ptx.tcgen05.relinquish_alloc_permit()
            pg.ptx.tcgen05.dealloc(base, 128)

    ok, log = assemble(k.ptx("sm_100a"), "sm_100a")
    assert ok, log
    assert k.resources["tmem_cols"] == 128


def _raises(build, fix, exc=ResourceError):
    with pytest.raises(exc) as e:
        build()
    assert fix in str(e.value), str(e.value)
    assert ".py:" in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("total, fix", [
    (1024, "use at most 512"),
    (384, "not a power of two; tcgen05.alloc takes 32, 64, 128, 256 or 512: use 512"),
    (48, "use 64"),
    (16, "allocate 32"),
    (512.0, "int constant"),
])
def test_column_count_errors(total, fix):
    _raises(lambda: _tmem_kernel(total=total), fix)


def test_tile_larger_than_its_allocation():
    msg = _raises(lambda: _tmem_kernel(total=256, shape=(128, 512)),
                  "raise total_cols (a power of two, at most 512)")
    assert "needs 512 columns but only 256" in msg
    _raises(lambda: _tmem_kernel(total=256, shape=(128, 128), second=(128, 256)),
            "only 128 of this pool's total_cols=256 remain")


@pytest.mark.parametrize("case, fix", [
    ("alloc_after_commit", "allocate every TMEM tile before commit()"),
    ("dealloc_missing", "tcgen05.dealloc never issued"),
    ("commit_missing", "call tmem.commit() before using its tiles"),
    ("use_after_dealloc", "move the use before dealloc()"),
    ("base_after_dealloc", "move the use before dealloc()"),
    ("use_before_commit", "call tmem.commit() first"),
    ("dealloc_before_commit", "nothing is allocated yet"),
    ("dealloc_twice", "dealloc() called twice"),
    ("commit_twice", "commit() called twice"),
    ("commit_in_branch", "top level of the kernel body"),
    ("lane_alloc", "all 32 lanes of one warp"),
    ("lane_dealloc", "all 32 lanes of one warp"),
    ("partial_warp", "warp-uniform condition"),
    ("mixed_cta_group", "use cta_group=1 everywhere"),
    ("cta_group_3", "must be 1 (one CTA) or 2"),
    ("alloc_warp_too_big", "use an alloc_warp below 4"),
    ("too_many_live", "dealloc the earlier allocation first"),
    ("alloc_after_relinquish", "relinquish only after the last allocation"),
    ("slot_in_global", "32-bit word in shared memory"),
    ("slot_pointer_to_dealloc", "not a pointer to the slot"),
    ("layout_d_rows", "Pass layout="),
    ("odd_halves", "use a multiple of 2"),
    ("wide_dtype", "use a 32-, 16-, 8- or 4-bit type"),
    ("slot_after_pool_commit", "before pool.commit()"),
])
def test_tmem_misuse(case, fix):
    def build():
        @pg.kernel(grid=(1,), block=(128,))
        def k(Out: pg.Tensor((1,), "uint32")):
            tx = pg.thread_id(128)
            warp = pg.warp_id()
            pool = SMEMPool()
            slot = pool.alloc((1,), "uint32")
            slot2 = pool.alloc((1,), "uint32")
            if case != "slot_after_pool_commit":
                pool.commit()
            tmem = TMEMPool(pool, total_cols=256, tmem_addr=slot,
                            alloc_warp=4 if case == "alloc_warp_too_big" else 0,
                            cta_group=3 if case == "cta_group_3" else 1)
            if case == "slot_after_pool_commit":
                pool.commit()
                TMEMPool(pool, total_cols=32)
            acc = tmem.alloc((128, 64), "float32")
            if case == "layout_d_rows":
                tmem.alloc((64, 64), "float32")
            if case == "odd_halves":
                tmem.alloc((128, 3), "float16")
            if case == "wide_dtype":
                tmem.alloc((128, 4), "float64")
            if case == "use_before_commit":
                check_tmem_live(acc)
            if case == "dealloc_before_commit":
                tmem.dealloc()
            if case == "commit_in_branch":
                with pg.if_(warp == 0):
                    tmem.commit()
            if case == "commit_missing":
                return
            tmem.commit()
            if case == "commit_twice":
                tmem.commit()
            if case == "alloc_after_commit":
                tmem.alloc((128, 32), "float32")
            if case == "mixed_cta_group":
                with pg.if_(warp == 1):
                    pg.ptx.tcgen05.alloc(slot2, 32, cta_group=2)
            if case == "lane_alloc":
                with pg.if_(tx == 0):
                    pg.ptx.tcgen05.alloc(slot2, 32)
            if case == "partial_warp":
                with pg.if_(tx < 16):
                    pg.ptx.tcgen05.alloc(slot2, 32)
            if case == "too_many_live":
                with pg.if_(warp == 1):
                    pg.ptx.tcgen05.alloc(slot2, 512)
            if case == "slot_in_global":
                with pg.if_(warp == 1):
                    pg.ptx.tcgen05.alloc(Out, 32)
            if case == "slot_pointer_to_dealloc":
                with pg.if_(warp == 1):
                    pg.ptx.tcgen05.dealloc(slot2, 32)
            if case == "dealloc_missing":
                return
            tmem.dealloc()
            if case == "lane_dealloc":
                with pg.if_(pg.lane_id() == 0):
                    pg.ptx.tcgen05.dealloc(tmem._base, 256)
            if case == "use_after_dealloc":
                check_tmem_live(acc)
            if case == "base_after_dealloc":
                Out[0] = tmem.base
            if case == "dealloc_twice":
                tmem.dealloc()
            if case == "alloc_after_relinquish":
                with pg.if_(warp == 1):
                    pg.ptx.tcgen05.alloc(slot2, 32)
    _raises(build, fix)


def _full_warp_verdict(block, cond):
    """'ok' or the error of pg.ptx.tcgen05.alloc under pg.if_(cond(tx, ty)) (at trace time)."""
    def k(Out: pg.Tensor((1,), "uint32")):
        tx, ty = pg.thread_id(block[0]), pg.thread_id(block[1], "y")
        slot = pg.alloc_shared((1,), "uint32")
        with pg.if_(cond(tx, ty)):
            pg.ptx.tcgen05.alloc(slot, 32)
    try:
        pg.kernel(grid=(1,), block=block)(k)
    except ResourceError as e:
        return str(e)
    return "ok"


@pytest.mark.parametrize("block, cond, verdict", [
    ((128, 1), lambda tx, ty: (tx // 32 == 1) & (tx < 100), "ok"),   # warp 1 lies below 100
    ((16, 8), lambda tx, ty: ty == 0, "all 32 lanes"),              # a warp spans ty 0 and 1
    ((32, 4), lambda tx, ty: ty == 0, "ok"),
    ((16, 1), lambda tx, ty: tx < 16, "ok"),                        # true for the whole block
    ((48, 1), lambda tx, ty: tx < 40, "all 32 lanes"),              # the partial last warp
])
def test_full_warp_check_is_the_exact_uniformity_analysis(block, cond, verdict):
    assert verdict in _full_warp_verdict(block, cond)


def test_mixed_cta_group_is_also_what_ptxas_rejects():
    """The check mirrors ptxas: a kernel mixing ::1 and ::2 does not assemble."""
    text = _tmem_kernel(cta_group=1, shape=(128, 64), total=64).ptx("sm_100a")
    mixed = text.replace("tcgen05.dealloc.cta_group::1", "tcgen05.dealloc.cta_group::2")
    ok, log = assemble(mixed, "sm_100a")
    assert not ok and "cta_group" in log


def test_helpers_are_registered():
    for name in ("alloc", "dealloc", "relinquish_alloc_permit"):
        assert callable(getattr(pg.ptx.tcgen05, name))
    for name in ("init", "arrive", "arrive_expect_tx", "try_wait", "test_wait"):
        assert callable(getattr(pg.ptx.mbarrier, name))
    assert callable(pg.ptx.fence.proxy_async) and callable(pg.ptx.fence.mbarrier_init)
    with pytest.raises(AttributeError, match="raw PTX"):
        pg.ptx.tcgen05.no_such_helper
    assert issubclass(ResourceError, PtxgenError)


# ---- direct element access to TMEM is refused at the user's line --------------------------------
_TMEM_ONLY = (r"which cannot be {what} directly by a thread: TMEM is reached only through "
              r"tcgen05\.ld/st/cp, i\.e\. pg\.tile\.<scope>\.tmem_load\(regs, acc\[\.\.\.\]\), "
              r"tmem_store\(acc\[\.\.\.\], regs\) and tmem_copy\(acc\[\.\.\.\], smem\) \(their "
              r"dispatch picks the tcgen05 shape\), or raw pg\.ptx\['tcgen05\.ld\.\.\.'\] "
              r"instructions given its TMEM address")


def _direct(access, pooled):
    def k(Out: pg.Tensor((128, 4), "float32")):
        tx = pg.thread_id(128)
        if pooled:
            pool = SMEMPool()
            slot = pool.alloc((1,), "uint32")
            pool.commit()
            tmem = TMEMPool(pool, total_cols=32, tmem_addr=slot)
            acc = tmem.alloc((128, 32), "float32")
            tmem.commit()
        else:
            slot = pg.alloc_shared((1,), "uint32")
            with pg.if_(pg.warp_id() == 0):
                pg.ptx.tcgen05.alloc(slot, 32)
            pg.cta_sync()
            acc = pg.decl_buffer((128, 32), "float32", scope="tmem", allocated_addr=0)
        access(acc, Out, tx)                                   # the line the error names
        if pooled:
            tmem.dealloc()
    return k


@pytest.mark.parametrize("pooled", [True, False])
@pytest.mark.parametrize("access,what", [
    (lambda acc, Out, tx: Out.__setitem__((tx, 0), acc[tx, 0]), "loaded"),
    (lambda acc, Out, tx: acc.__setitem__((tx, 0), 1.0), "stored"),
    (lambda acc, Out, tx: acc.ptr_to([tx, 0]), r"pointed into \(ptr_to\)"),
    (lambda acc, Out, tx: acc.vload([tx, 0], "float32x4"), r"loaded or stored \(vload/vstore\)"),
    (lambda acc, Out, tx: acc.vstore([tx, 0], Out.vload([tx, 0], "float32x4")),
     r"loaded or stored \(vload/vstore\)"),
])
def test_direct_tmem_access_is_refused_at_the_users_line(access, what, pooled):
    line = access.__code__.co_firstlineno
    with pytest.raises(pg.TraceError, match=rf"test_alloc_tmem\.py:{line}: 'acc' is in tensor "
                       rf"memory \(TMEM\), " + _TMEM_ONLY.format(what=what)):
        pg.kernel(_direct(access, pooled), grid=(1,), block=(128,))


def test_tmem_regions_still_reach_the_tcgen05_primitives():
    """Regions (slices) of a TMEM tile are what tmem_load takes: not refused."""
    from ptxgen.primitives.tmem_layout import register_layout

    def load(acc, Out, tx):
        regs = pg.alloc_local((128, 32), "float32", layout=register_layout("32x32b", 128, 32))
        pg.tile.cta.tmem_load(regs, acc[0:128, 0:32])
        Out[tx, 0] = regs.local()[0]

    ptx = pg.kernel(_direct(load, True), grid=(1,), block=(128,)).ptx("sm_100a")
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


# ---- seed 002: the CTA-pair accumulator, layout B ------------------------------------------------
def _pair_kernel(N, scope="cta", dtype="float32"):
    from ptxgen.primitives.tmem_layout import datapath_register_layout

    @pg.kernel(grid=(2,), block=(128,), cluster=(2,))
    def k(Out: pg.Tensor((64, N), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        tmem_addr = pool.alloc((1,), "uint32")
        pool.commit()
        tmem_pool = TMEMPool(pool, total_cols=max(32, N // 2), cta_group=2, tmem_addr=tmem_addr)
        # Layout B: PTX M=128, cta_group=2, 64 logical rows in this CTA (seed 002's spelling)
        acc = tmem_pool.alloc_tcgen05_mma_D((64, N), dtype, M=128, cta_group=2)
        tmem_pool.commit()
        axis = {"cta": "tid", "warpgroup": "tid_in_wg"}[scope]
        regs = pg.alloc_local((64, N), "float32",
                              layout=datapath_register_layout(acc.layout, 64, N, "32x32b", axis))
        getattr(pg.tile, scope).tmem_load(regs, acc[0:64, 0:N])
        getattr(pg.tile, scope).copy(Out[0:64, 0:N], regs[0:64, 0:N])
        tmem_pool.dealloc()
    return k


@pytest.mark.parametrize("N,scope", [(64, "cta"), (256, "warpgroup")])
def test_cta_pair_accumulator_layout_B_loads_and_assembles(N, scope):
    k = _pair_kernel(N, scope)
    tiles = [s.buffer for s in k.ir.body if getattr(s, "buffer", None) is not None
             and s.buffer.scope == "tmem"]
    lay = tiles[0].layout
    assert lay.apply(5, N // 2 + 3, shape=(64, N)) == {"m": 0, "TLane": 69, "TCol": 3}
    ptx = k.ptx("sm_100a")
    assert f"tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r2], {max(32, N // 2)};" \
        in ptx
    x = N // 2
    lds = [ln for ln in _body(ptx) if ln.startswith("tcgen05.ld.")]
    assert len(lds) == 1 and lds[0].startswith(f"tcgen05.ld.sync.aligned.32x32b.x{x}.b32 {{")
    assert "tcgen05.dealloc.cta_group::2.sync.aligned.b32" in ptx
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


def test_cta_pair_accumulator_takes_half_the_columns():
    got = {}

    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        t = TMEMPool(pool, total_cols=256, cta_group=2, tmem_addr=slot)
        d_b = t.alloc_tcgen05_mma_D((64, 256), "float32", M=128, cta_group=2)   # layout B
        d_a = t.alloc_tcgen05_mma_D((128, 128), "float32", M=256)               # layout A
        got["tiles"] = list(t.tiles)
        got["cells"] = (d_b.layout.apply(63, 255, shape=(64, 256)),
                        d_a.layout.apply(127, 127, shape=(128, 128)))
        t.commit()
        t.dealloc()

    pg.kernel(k, grid=(2,), block=(128,), cluster=(2,))
    assert got["tiles"] == [("d_b", 0, 128), ("d_a", 128, 128)]
    assert got["cells"] == ({"m": 0, "TLane": 127, "TCol": 127},
                            {"m": 0, "TLane": 127, "TCol": 127})


@pytest.mark.parametrize("call,msg", [
    (lambda t: t.alloc_tcgen05_mma_D((128, 256), "float32", M=128, cta_group=2),
     r"alloc_tcgen05_mma_D: an M=128 cta_group=2 accumulator is \(64, N\) per CTA of the "
     r"pair; got \(128, 256\)"),
    (lambda t: t.alloc_tcgen05_mma_D((64, 255), "float32", M=128, cta_group=2),
     r"alloc_tcgen05_mma_D: layout B: N=255 must be even"),
    (lambda t: t.alloc_tcgen05_mma_D((32, 256), "float32", M=64, cta_group=2),
     r"M=64 with cta_group=2 accumulates in another TMEM datapath layout"),
])
def test_cta_pair_accumulator_errors(call, msg):
    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        call(TMEMPool(pool, total_cols=256, cta_group=2, tmem_addr=slot))

    with pytest.raises(ResourceError, match=msg):
        pg.kernel(k, grid=(2,), block=(128,), cluster=(2,))


def test_layout_B_region_must_cover_all_128_lanes_for_a_warpgroup():
    from ptxgen.primitives.tmem_layout import register_layout

    def k(Out: pg.Tensor((64, 64), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        t = TMEMPool(pool, total_cols=32, cta_group=2, tmem_addr=slot)
        acc = t.alloc_tcgen05_mma_D((64, 64), "float32", M=128, cta_group=2)
        t.commit()
        regs = pg.alloc_local((64, 32), "float32", layout=register_layout("32x32b", 64, 32))
        pg.tile.cta.tmem_load(regs, acc[0:64, 0:32])     # one column half: lanes 0..63 only
        t.dealloc()

    with pytest.raises(PtxgenError, match=r"tmem_load: a cta reads 128 TMEM lanes; the region "
                       r"has 64 rows"):
        pg.kernel(k, grid=(2,), block=(128,), cluster=(2,))
