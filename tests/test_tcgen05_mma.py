"""gemm_async / mma_commit / tmem_load / tmem_store / tmem_copy: the PTX they emit, the
instruction descriptors, dispatch reasons, build-time rejections and sm_100a assembly."""
import re

import pytest

import ptxgen as pg
from support.asm import assemble
from ptxgen.alloc import SMEMPool, TMEMPool
from ptxgen.errors import ArchError, LayoutError, PtxgenError, ResourceError
from ptxgen.layout import S, TileLayout, tid
from ptxgen.primitives.tmem_layout import register_layout


def gemm_kernel(scope="warp", a=((128, 64), "bfloat16"), b=((128, 64), "bfloat16"), cols=None,
                acc_shape=None, a_kw=None, b_kw=None, call_kw=None, region=None, dealloc=True):
    (ash, adt), (bsh, bdt) = a, b
    n = bsh[-2]
    cols = cols or max(32, 1 << (n - 1).bit_length())

    def k(Out: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB(ash, adt, **(a_kw or {}))
        Bs = pool.alloc_tcgen05_mma_AB(bsh, bdt, **(b_kw or {}))
        bar = pool.alloc_mbarrier(1)
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=cols, tmem_addr=slot)
        acc = tmem.alloc(acc_shape or (128, n), "float32")
        tmem.commit()
        A, B = (As, Bs) if region is None else region(As, Bs)
        kw = dict(accumulate=False) | (call_kw or {})
        if scope == "thread":
            with pg.if_(tx == 0):
                pg.tile.thread.gemm_async(acc, A, B, **kw)
                pg.tile.thread.mma_commit(bar)
        else:
            getattr(pg.tile, scope).gemm_async(acc, A, B, **kw)
            getattr(pg.tile, scope).mma_commit(bar)
        if dealloc:
            tmem.dealloc()
    return pg.kernel(k, grid=(1,), block=(128,))


def code(ptx):
    return [ln.strip() for ln in ptx.splitlines() if ln.strip() and not ln.strip().startswith("//")]


def mma_lines(ptx):
    return [ln for ln in code(ptx) if ln.startswith("tcgen05.mma")]


def enable_d(ptx, line):
    """The constant value of an MMA's enable-input-d predicate (`setp.eq/ne.b32 p, 0, 0`)."""
    p = line.rstrip(";").split(", ")[-1]
    m = re.search(rf"setp\.(eq|ne)\.b32 {re.escape(p)}, 0, 0;", ptx)
    return None if m is None else m.group(1) == "eq"


# ---------------------------------------------------------------- single-thread issue, K loop
@pytest.mark.parametrize("scope,guard", [("warp", "%laneid"), ("cta", "%tid.x"),
                                         ("warpgroup", "%tid.x"), ("thread", None)])
def test_one_thread_issues_every_mma(scope, guard):
    ptx = gemm_kernel(scope).ptx("sm_100a")
    lines = code(ptx)
    first = next(i for i, ln in enumerate(lines) if ln.startswith("tcgen05.mma"))
    # the last branch before the first MMA skips it unless the thread is the elected one
    bra = max(i for i in range(first) if re.match(r"@!?%p\d+ bra", lines[i]))
    label = lines[bra].split()[-1].rstrip(";")
    end = lines.index(label + ":")
    assert all(first <= i < end for i, ln in enumerate(lines) if ln.startswith("tcgen05.mma"))
    setp = [ln for ln in lines[:bra] if ln.startswith("setp.eq")][-1]
    assert setp.endswith(", 0;")
    if guard == "%laneid":                               # warp: lane 0, not the whole warp
        assert "%laneid" in " ".join(lines[max(0, bra - 3):bra])
    assert len(mma_lines(ptx)) == 4                         # K = 64 in steps of 16
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


def _adds(ptx):
    return [int(m.group(1)) for m in re.finditer(r"add\.u64 %rd\d+, %rd\d+, (\d+);", ptx)]


@pytest.mark.parametrize("shape,sw,order,steps", [
    ((128, 64), "128B", "k", [2, 4, 6]),                   # +32 B inside the 128B atom
    ((128, 128), "128B", "k", [2, 4, 6, 64, 66, 68, 70]),  # then the next atom (1024 B)
    ((128, 64), "32B", "k", [16, 32, 48]),                 # 32B atoms: one step per atom
    ((128, 64), "64B", "mn", [2, 512, 514]),               # 64B atoms, 8-row groups first
])
def test_k_loop_advances_the_start_address(shape, sw, order, steps):
    kw = dict(swizzle=sw, atom_order=order)
    ptx = gemm_kernel(a=(shape, "bfloat16"), b=(shape, "bfloat16"), a_kw=kw,
                      b_kw=kw).ptx("sm_100a")
    adds = _adds(ptx)
    assert adds == [s for s in steps for _ in (0, 1)]      # A and B advance together
    mm = mma_lines(ptx)
    assert len(mm) == len(steps) + 1
    assert [enable_d(ptx, m) for m in mm] == [False] + [True] * len(steps)
    assert assemble(ptx, "sm_100a")[0]


def test_descriptor_template_in_ptx():
    ors = [ln for ln in code(gemm_kernel().ptx("sm_100a")) if ln.startswith("or.b64")]
    assert len(ors) == 2 and all(ln.endswith(f", {0x4000404000010000};") for ln in ors)


def test_accumulate_expression_becomes_the_predicate():
    def k(Out: pg.Tensor((1,), "float32"), n: pg.int32):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=128, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        tmem.commit()
        for kt in pg.serial(n):
            pg.tile.warp.gemm_async(acc, As, As, accumulate=kt > 0)
        tmem.dealloc()
    ptx = pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_100a")
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, "
                     r"0x08200490, %p\d+;", ptx)
    assert assemble(ptx, "sm_100a")[0]


# ---------------------------------------------------------------- instruction descriptors
def _idesc(kind, a, b, d, M, N, ta=0, tb=0):
    """Independent Table 42 formula."""
    fmt = {"float16": 0, "bfloat16": 1, "float32": 2, "float8_e4m3fn": 0, "float8_e5m2": 1}
    return ((1 if d == "float32" else 0) << 4 | fmt[a] << 7 | fmt[b] << 10 | ta << 15 | tb << 16
            | (N >> 3) << 17 | (M >> 4) << 24)


@pytest.mark.parametrize("dt,N,kind", [
    ("bfloat16", 128, "f16"), ("bfloat16", 256, "f16"), ("float16", 64, "f16"),
    ("bfloat16", 8, "f16"), ("float16", 248, "f16"), ("float32", 128, "tf32"),
    ("float8_e4m3fn", 128, "f8f6f4"), ("float8_e5m2", 64, "f8f6f4")])
def test_instruction_descriptor_table(dt, N, kind):
    ptx = gemm_kernel(a=((128, 64), dt), b=((N, 64), dt)).ptx("sm_100a")
    want = _idesc(kind, dt, dt, "float32", 128, N)
    mm = mma_lines(ptx)
    assert all(f"kind::{kind} " in m and f", {want:#010x}, " in m for m in mm)
    k_instr = {"f16": 16, "tf32": 8, "f8f6f4": 32}[kind]
    assert len(mm) == 64 // k_instr
    assert assemble(ptx, "sm_100a")[0]


def test_mn_major_b_sets_the_transpose_bit():
    from ptxgen.primitives.tcgen05 import canonical_layout

    def k(Out: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        Bs = pool.alloc((128, 64), "bfloat16", align=1024, layout=canonical_layout(
            128, 64, "bfloat16", major="MN", swizzle="128B"))
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=128, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        tmem.commit()
        pg.tile.warp.gemm_async(acc, As, Bs)
        tmem.dealloc()
    ptx = pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_100a")
    want = _idesc("f16", "bfloat16", "bfloat16", "float32", 128, 128, tb=1)
    assert all(f", {want:#010x}, " in m for m in mma_lines(ptx))
    assert _adds(ptx)[1::2] == [128, 256, 384]         # MN-major B: 2 K groups (2 x 1024 B)


# ---------------------------------------------------------------- rejections at build time
@pytest.mark.parametrize("kw,exc,match", [
    (dict(a=((128, 64), "bfloat16"), b=((128, 64), "float16")), PtxgenError,
     r"kind::f16 needs A and B of the same type, got bfloat16 x float16"),
    (dict(a=((256, 64), "bfloat16"), b=((128, 64), "bfloat16")), PtxgenError,
     r"M=256 is illegal for cta_group::1 .*\(M=256 needs cta_group::2, a CTA pair\)"),
    (dict(b=((264, 64), "bfloat16"), cols=512), PtxgenError,
     r"N=264 is illegal for M=128, cta_group::1 \(rule: Table 39 N is a multiple of 8"),
    (dict(b=((256, 64), "bfloat16"), acc_shape=(128, 128), cols=256), PtxgenError,
     r"writes an 128x256 tile, larger than the TMEM region acc\[0:128, 0:128\]"),
    (dict(call_kw=dict(swizzle_a="64B")), LayoutError,
     r"swizzle='64B' is declared but the buffer's ComposeLayout swizzles 128B"),
    (dict(region=lambda A, B: (A[0:128, 0:24], B[0:128, 0:24])), LayoutError,
     r"K-step misalignment: K extent 24 is not a multiple of the instruction K = 16"),
    (dict(call_kw=dict(d_dtype="float16")), PtxgenError,
     r"kind::f16 with A/B bfloat16 cannot accumulate into D = float16"),
])
def test_gemm_async_rejections(kw, exc, match):
    with pytest.raises(exc, match=match) as ei:
        gemm_kernel(**kw)
    assert "test_tcgen05_mma.py:" in str(ei.value)           # at the user's line


def test_reject_accumulator_not_in_tmem():
    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        pool.commit()
        C = pg.alloc_shared((128, 128), "float32")
        pg.tile.warp.gemm_async(C, As, As)
    with pytest.raises(PtxgenError, match=r"the accumulator D C\[0:128, 0:128\] is in shared "
                       r"memory; tcgen05.mma accumulates into tensor memory"):
        pg.kernel(k, grid=(1,), block=(128,))


def test_reject_tmem_tile_larger_than_its_allocation():
    from ptxgen.primitives.tmem_layout import layout_D

    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        Bs = pool.alloc_tcgen05_mma_AB((256, 64), "bfloat16")
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=128, tmem_addr=slot)
        tmem.alloc((128, 128), "float32")
        tmem.commit()
        big = pg.decl_buffer((128, 256), "float32", scope="tmem", allocated_addr=tmem.base,
                             layout=layout_D(128, 256))
        pg.tile.warp.gemm_async(big, As, Bs)
    with pytest.raises(PtxgenError, match=r"TMEM tile 'big' reaches column 256 but its TMEMPool "
                       r"allocated 128 columns \(rule: a TMEM tile must fit its allocation"):
        pg.kernel(k, grid=(1,), block=(128,))


def test_reject_tmem_used_before_commit():
    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=128, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        pg.tile.warp.gemm_async(acc, As, As)
    with pytest.raises(ResourceError, match=r"used before tmem.commit\(\)"):
        pg.kernel(k, grid=(1,), block=(128,))


def test_reject_a_from_tmem_with_n_not_multiple_of_16():
    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        Bs = pool.alloc_tcgen05_mma_AB((136, 64), "bfloat16")
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=256, tmem_addr=slot)
        acc = tmem.alloc((128, 136), "float32")
        a_t = tmem.alloc((128, 64), "bfloat16")
        tmem.commit()
        pg.tile.warp.gemm_async(acc, a_t, Bs)
    with pytest.raises(PtxgenError, match=r"N=136 is illegal .*A-from-TMEM rule N is a "
                       r"multiple of 16"):
        pg.kernel(k, grid=(1,), block=(128,))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_120a", "sm_100"])
def test_rejected_without_tcgen05_naming_the_arch(arch):
    k = gemm_kernel()
    with pytest.raises(ArchError, match=rf"the target is {arch}"):
        k.ptx(arch)


def test_explain_lists_every_variant_with_reasons():
    tables = []

    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=128, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        tmem.commit()
        tables.append(pg.tile.explain("gemm_async", acc, As, As, scope="warp"))
        tables.append(pg.tile.explain("gemm_async", acc, As, As, scope="warp", arch="sm_90a"))
        tmem.dealloc()
    pg.kernel(k, grid=(1,), block=(128,))
    ok, no = tables
    assert ok.chosen == "tcgen05_ss"
    assert [r.reason for r in ok if r.name == "tcgen05_ts"] == [
        "A is in shared.dyn memory; this variant reads A from tmem memory"]
    assert no.chosen is None and all("the target sm_90a has no tcgen05" in r.reason for r in no)
    assert "tcgen05_ss" in str(ok)


# ---------------------------------------------------------------- A from TMEM, tcgen05.cp, commit
def test_a_from_tmem_and_tmem_copy():
    def k(Out: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        Bs = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        bar = pool.alloc_mbarrier(1)
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=256, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        a_t = tmem.alloc((128, 64), "bfloat16")            # 2 bf16 per 32-bit column
        tmem.commit()
        with pg.if_(tx == 0):
            pg.tile.thread.tmem_copy(a_t, As)
            pg.tile.thread.gemm_async(acc, a_t, Bs, accumulate=False)
            pg.tile.thread.mma_commit(bar)
        tmem.dealloc()
    ptx = pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_100a")
    cps = [ln for ln in code(ptx) if ln.startswith("tcgen05.cp")]
    assert [re.search(r"\[%r\d+(\+\d+)?\]", c).group(1) for c in cps] == [None, "+8", "+16", "+24"]
    assert all(c.startswith("tcgen05.cp.cta_group::1.128x256b ") for c in cps)
    mm = mma_lines(ptx)
    assert [re.search(r"\], \[%r\d+(\+\d+)?\]", m).group(1) for m in mm] == [None, "+8", "+16",
                                                                             "+24"]
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64" in ptx
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


# ---------------------------------------------------------------- tcgen05.ld / st
def io_kernel(shape=None, layout=None, scope="cta", store=True, cols=32):
    def k(Out: pg.Tensor((128, cols), "float32")):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=64, tmem_addr=slot)
        acc = tmem.alloc((128, 64), "float32")
        tmem.commit()
        axis = {"warpgroup": "tid_in_wg"}.get(scope, "tid")
        lay = layout if layout is not None else register_layout(shape, 128, cols, axis=axis)
        regs = pg.alloc_local((128, cols), "float32", layout=lay)
        if store:
            getattr(pg.tile, scope).tmem_store(acc[0:128, 0:cols], regs)
        getattr(pg.tile, scope).tmem_load(regs, acc[0:128, 0:cols])
        r = regs.local()
        for j in pg.unroll(cols):
            Out[tx, j] = r[j]
        tmem.dealloc()
    return pg.kernel(k, grid=(1,), block=(128,))


@pytest.mark.parametrize("shape,cols,want", [
    ("32x32b", 32, ["32x32b.x32"]), ("32x32b", 8, ["32x32b.x8"]),
    ("16x256b", 32, ["16x256b.x4", "16x256b.x4"]), ("16x256b", 8, ["16x256b.x1"] * 2)])
@pytest.mark.parametrize("scope", ["cta", "warpgroup"])
def test_tmem_load_store_shape_from_register_layout(shape, cols, want, scope):
    ptx = io_kernel(shape, scope=scope, cols=cols).ptx("sm_100a")
    lines = code(ptx)
    ld = [ln.split()[0] for ln in lines if ln.startswith("tcgen05.ld")]
    st = [ln.split()[0] for ln in lines if ln.startswith("tcgen05.st")]
    assert ld == [f"tcgen05.ld.sync.aligned.{w}.b32" for w in want]
    assert st == [f"tcgen05.st.sync.aligned.{w}.b32" for w in want]
    i = lines.index(next(ln for ln in lines if ln.startswith("tcgen05.ld")))
    assert lines[i - 1] == "tcgen05.fence::after_thread_sync;"
    j = max(n for n, ln in enumerate(lines) if ln.startswith("tcgen05.ld"))
    assert lines[j + 1:j + 3] == ["tcgen05.wait::ld.sync.aligned;",
                                  "tcgen05.fence::before_thread_sync;"]
    if shape == "16x256b":      # the second instruction of each warp reads lanes +16
        assert re.search(r"tcgen05\.ld\.[^\[]*\[%r\d+\+1048576\]", ptx)
    assert "shl.b32" in ptx and ", 21;" in ptx                   # warp quarter << 21
    ok, log = assemble(ptx, "sm_100a")
    assert ok, log


def test_tmem_load_rejects_a_layout_no_shape_delivers():
    with pytest.raises(PtxgenError, match=r"tmem_load: no tcgen05 shape delivers the register "
                       r"layout .*32x32b: element \(0, 1\) .* is in thread 1 of the register "
                       r"layout, but .32x32b delivers it to thread 0; 16x256b: "):
        io_kernel(layout=TileLayout(S[(128, 32):(1, 1 @ tid)]), store=False)


def test_tmem_load_explain_and_forced_variant():
    tables = []

    def k(Out: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pool = SMEMPool()
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=32, tmem_addr=slot)
        acc = tmem.alloc((128, 32), "float32")
        tmem.commit()
        regs = pg.alloc_local((128, 32), "float32", layout=register_layout("16x256b", 128, 32))
        tables.append(pg.tile.explain("tmem_load", regs, acc, scope="cta"))
        with pytest.raises(PtxgenError, match=r"32x32b: element \(0, 2\)"):
            pg.tile.cta.tmem_load(regs, acc, dispatch="32x32b")
        tmem.dealloc()
    pg.kernel(k, grid=(1,), block=(128,))
    (t,) = tables
    assert t.chosen == "16x256b"
    assert [r.ok for r in t] == [False, True]


def test_tmem_load_scope_rules():
    with pytest.raises(PtxgenError, match=r"warp collective \(.sync.aligned\)"):
        io_kernel("32x32b", scope="thread", store=False)
    with pytest.raises(PtxgenError, match=r"a warp reads 32 TMEM lanes; the region has 128"):
        io_kernel("32x32b", scope="warp", store=False)


# ---------------------------------------------------------------- fences
def test_fence_lint():
    from ptxgen.primitives.tcgen05.common import check_fences

    assert check_fences(io_kernel("32x32b").ptx("sm_100a")) == []
    bad = "bar.sync 0;\ntcgen05.ld.sync.aligned.32x32b.x1.b32 {%r1}, [%r2];\n" \
          "tcgen05.wait::ld.sync.aligned;\nbar.sync 0;\n"
    v = check_fences(bad)
    assert len(v) == 2 and "without tcgen05.fence::after_thread_sync" in v[0] \
        and "without tcgen05.fence::before_thread_sync" in v[1]


def test_fence_false_leaves_them_out():
    with_f = code(gemm_kernel().ptx("sm_100a"))
    without = code(gemm_kernel(call_kw=dict(fence=False)).ptx("sm_100a"))
    first = next(i for i, ln in enumerate(with_f) if ln.startswith("tcgen05.mma"))
    assert with_f[first - 1] == "tcgen05.fence::after_thread_sync;"
    assert len(without) == len(with_f) - 1


def test_partial_scope_is_rejected_with_the_reason():
    def k(Out: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=128, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        tmem.commit()
        with pg.if_(tx == 5):            # thread 0 of the cta, the elected one, is not here
            pg.tile.cta.gemm_async(acc, As, As)
        tmem.dealloc()
    k = pg.kernel(k, grid=(1,), block=(128,))
    with pytest.raises(PtxgenError, match=r"(?s)no gemm_async variant accepts .*not all 128 "
                       r"threads of the cta scope are active") as ei:
        k.ptx("sm_100a")
    assert str(ei.value).count("test_tcgen05_mma.py:") == 1
