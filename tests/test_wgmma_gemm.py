"""gemm_async into a register accumulator (wgmma, sm_90a) on the CPU.

* results: the kernels of gemm_cases.py run in ptxsim (whose wgmma model is written from the
  PTX ISA alone, tests/support/ptxsim_wgmma.py) and match numpy bit for bit, for every operand form;
* the fragment layouts are the ISA's (the D formula the H200 confirmed in test_wgmma_gpu.py,
  CUTLASS's A layouts) and an accumulator copied out lands where numpy says;
* PTX: the exact instruction forms, descriptors from the tiles' layouts, every legal N
  assembles for sm_90a (nvJitLink);
* wrong uses are build errors that name the rule and the fix (exact messages).
"""
import re

import numpy as np
import pytest

from support import gemm_cases as G
import ptxgen as pg
from support.asm import assemble
from ptxgen.errors import ArchError, LayoutError, PtxgenError, TraceError
from ptxgen.primitives.tcgen05 import canonical_layout
from ptxgen.primitives.wgmma import a_fragment_layout, accumulator_layout
from support.ptxsim import run

Case = G.Case

SIM_CASES = [
    Case(),                                                      # bf16 K-major 128B, N=64
    Case(N=8, ksteps=2, swizzle="64B"),
    Case(N=256, ksteps=2, swizzle="64B"),
    Case(a_major="MN", b_major="MN"),
    Case(ab="float16", N=128, a_major="MN", swizzle="64B"),
    Case(ab="float16", d="float16", N=16),
    Case(ab="float32", N=16),                                    # tf32
    Case(ab="float8_e4m3fn", N=16),                              # K = 128
    Case(ab="float8_e5m2", N=24, ksteps=2, a_regs=True, swizzle="64B"),
    Case(a_regs=True, N=16),
    Case(ab="float32", a_regs=True, N=8, swizzle="32B"),
    Case(ab="float16", d="float16", a_regs=True, N=16, swizzle="none"),
    Case(M=128, N=16, splits=2),                                 # two M atoms, two calls
]


def _run(c):
    a, b, ref = G.exact_inputs(c, seed=c.N + c.ksteps)
    D = np.full((c.M, c.N), np.nan, G.d_storage(c))
    run(G.kernel_for(c), [a, b, D])
    return G.decode_d(D, c.d), ref


@pytest.mark.parametrize("c", SIM_CASES, ids=lambda c: c.name)
def test_sim_matches_numpy(c):
    got, ref = _run(c)
    bad = int(np.sum(got != ref))
    assert bad == 0, f"{bad} of {ref.size} outputs differ; first at " \
        f"{np.argwhere(got != ref)[0]}: {got[tuple(np.argwhere(got != ref)[0])]} vs " \
        f"{ref[tuple(np.argwhere(got != ref)[0])]}"


@pytest.mark.parametrize("c", SIM_CASES, ids=lambda c: c.name)
def test_assembles_for_sm90a(c):
    ok, log = assemble(G.kernel_for(c).ptx("sm_90a"), "sm_90a")
    assert ok, log
    assert "0 bytes spill stores" in log


@pytest.mark.parametrize("N", range(8, 257, 8))
def test_every_legal_n_assembles(N):
    c = Case(N=N, ksteps=1, swizzle="32B")
    ptx = G.kernel_for(c).ptx("sm_90a")
    assert f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.bf16.bf16 {{" in ptx
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log


# ---------------------------------------------------------------- fragments
def _isa_d(t, j):
    """D register j of warpgroup thread t (the formula the H200 proved, wgmma_desc_check)."""
    w, lane = divmod(t, 32)
    return 16 * w + lane // 4 + 8 * ((j // 2) % 2), 8 * (j // 4) + 2 * (lane % 4) + j % 2


def _cutlass_a(t, v, bits):
    """CUTLASS ALayout_64x{8,16,32} (thread, value) -> (m, k), read off its shape:stride."""
    t0, t1, t2 = t % 4, (t // 4) % 8, t // 32
    if bits == 32:       # ((4,8,4),(2,2)) : ((64,1,16),(8,256))
        off = 64 * t0 + t1 + 16 * t2 + 8 * (v % 2) + 256 * (v // 2)
    elif bits == 16:     # ((4,8,4),(2,2,2)) : ((128,1,16),(64,8,512))
        off = 128 * t0 + t1 + 16 * t2 + 64 * (v % 2) + 8 * ((v // 2) % 2) + 512 * (v // 4)
    else:                # ((4,8,4),(4,2,2)) : ((256,1,16),(64,8,1024))
        off = 256 * t0 + t1 + 16 * t2 + 64 * (v % 4) + 8 * ((v // 4) % 2) + 1024 * (v // 8)
    return off % 64, off // 64


@pytest.mark.parametrize("M,N", [(64, 8), (64, 64), (64, 256), (128, 32)])
def test_accumulator_layout_is_the_isa_fragment(M, N):
    lay = accumulator_layout(M, N)
    for t in range(128):
        for j in range(M * N // 128):
            atom, jj = divmod(j, N // 2)
            r, c = _isa_d(t, jj)
            o = lay.apply(64 * atom + r, c, shape=(M, N))
            assert (o["tid_in_wg"], o["m"]) == (t, j)


@pytest.mark.parametrize("dt,bits", [("float32", 32), ("bfloat16", 16), ("float8_e4m3fn", 8)])
def test_a_fragment_layout_is_cutlass_alayout(dt, bits):
    k = 256 // bits
    lay = a_fragment_layout(64, 2 * k, dt)          # two K steps
    for t in range(128):
        for v in range(4 * 32 // bits):
            m, kk = _cutlass_a(t, v, bits)
            for s in range(2):
                o = lay.apply(m, kk + s * k, shape=(64, 2 * k))
                assert (o["tid_in_wg"], o["m"]) == (t, v + s * (4 * 32 // bits))


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_accumulator_copied_to_global_lands_where_numpy_says(dt):
    """Register j of thread t holds t * 256 + j; after pg.tile.warpgroup.copy(D, acc),
    D[r, c] is that value at the ISA's (r, c) of (t, j).  No wgmma: only the layout + copy."""
    N = 32

    @pg.kernel(grid=(1,), block=(128,))
    def k(D: pg.Tensor((64, N), dt)):
        tx = pg.thread_id(128)
        acc = pg.tile.warpgroup.mma_accumulator((64, N), dt)
        r = acc.local()
        for j in pg.unroll(N // 2):
            r[j] = pg.cast(tx * 16 + j, dt)
        pg.tile.warpgroup.copy(D, acc)

    D = np.full((64, N), np.nan, np.float32 if dt == "float32" else np.float16)
    run(k, [D])
    want = np.zeros((64, N))
    for t in range(128):
        for j in range(N // 2):
            want[_isa_d(t, j)] = t * 16 + j
    assert np.array_equal(D.astype(np.float64), want)


def test_f16_accumulator_goes_to_shared_with_stmatrix():
    N = 64

    @pg.kernel(grid=(1,), block=(128,))
    def k(D: pg.Tensor((64, N), "float16")):
        tx = pg.thread_id(128)
        acc = pg.tile.warpgroup.mma_accumulator((64, N), "float16")
        r = acc.local()
        for j in pg.unroll(N // 2):
            r[j] = pg.cast(tx * 8 + j, "float16")
        Cs = pg.alloc_shared((64, N), "float16")
        pg.tile.warpgroup.copy(Cs, acc)
        pg.cta_sync()
        pg.tile.cta.copy(D, Cs)

    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in k.ptx("sm_90a")
    D = np.zeros((64, N), np.float16)
    run(k, [D])
    want = np.zeros((64, N))
    for t in range(128):
        for j in range(N // 2):
            want[_isa_d(t, j)] = t * 8 + j
    assert np.array_equal(D.astype(np.float64), want)


def test_column_slices_of_one_accumulator():
    """Two N=16 MMAs into the column halves of one (64, 32) accumulator, each with its half
    of B: the register maps follow the region starts."""
    c = Case(N=32)
    LA, LB = (canonical_layout(r, 64, "bfloat16") for r in (64, 32))

    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((64, 64), "bfloat16"), B: pg.Tensor((32, 64), "bfloat16"),
          D: pg.Tensor((64, 32), "float32")):
        tx = pg.thread_id(128)
        As = pg.alloc_shared((64, 64), "bfloat16", layout=LA, align=1024)
        Bs = pg.alloc_shared((32, 64), "bfloat16", layout=LB, align=1024)
        for src, dst, rows in ((A, As, 64), (B, Bs, 32)):
            for i in pg.serial(rows * 64 // 128):
                e = pg.let(i * 128 + tx)
                dst[e // 64, e % 64] = src[e // 64, e % 64]
        pg.ptx.fence.proxy_async()          # plain stores -> the async proxy wgmma reads
        pg.cta_sync()
        acc = pg.tile.warpgroup.mma_accumulator((64, 32))
        pg.tile.warpgroup.gemm_async(acc[0:64, 0:16], As, Bs[0:16, 0:64], accumulate=False)
        pg.tile.warpgroup.gemm_async(acc[0:64, 16:32], As, Bs[16:32, 0:64], accumulate=False)
        pg.tile.warpgroup.gemm_wait(0)
        pg.tile.warpgroup.copy(D, acc)

    assert k.ptx("sm_90a").count("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {") == 8
    a, b, ref = G.exact_inputs(c, seed=2)
    D = np.full((64, 32), np.nan, np.float32)
    run(k, [a, b, D])
    assert np.array_equal(D, ref)


def test_k_loop_over_pipeline_stages():
    """The GEMM main-loop shape: a pg.serial K loop, the stage index symbolic (a leading dim
    moving by whole swizzle repeats), accumulate=kt > 0 as a runtime predicate."""
    c = Case(N=64, ksteps=8)                                   # K = 128: two stages of 64
    LA, LB = (canonical_layout(r, 64, "bfloat16", stages=2) for r in (64, 64))

    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((64, 128), "bfloat16"), B: pg.Tensor((64, 128), "bfloat16"),
          D: pg.Tensor((64, 64), "float32")):
        tx = pg.thread_id(128)
        As = pg.alloc_shared((2, 64, 64), "bfloat16", layout=LA, align=1024)
        Bs = pg.alloc_shared((2, 64, 64), "bfloat16", layout=LB, align=1024)
        for src, dst in ((A, As), (B, Bs)):
            for i in pg.serial(64 * 128 // 128):
                e = pg.let(i * 128 + tx)
                dst[e % 128 // 64, e // 128, e % 64] = src[e // 128, e % 128]
        pg.ptx.fence.proxy_async()
        pg.cta_sync()
        acc = pg.tile.warpgroup.mma_accumulator((64, 64))
        for kt in pg.serial(2):
            pg.tile.warpgroup.gemm_async(acc, As[kt, 0:64, 0:64], Bs[kt, 0:64, 0:64],
                                         accumulate=kt > 0)
            pg.tile.warpgroup.gemm_wait(0)
        pg.tile.warpgroup.copy(D, acc)

    ptx = k.ptx("sm_90a")
    assert re.search(r"setp\.gt\.s32 %p\d+, %r\d+, 0;", ptx)           # kt > 0
    ok, log = assemble(ptx, "sm_90a")
    assert ok and "0 bytes spill stores" in log, log
    a, b, ref = G.exact_inputs(c, seed=4)
    D = np.full((64, 64), np.nan, np.float32)
    run(k, [a, b, D])
    assert np.array_equal(D, ref)


def test_a_fragment_is_loaded_with_ldmatrix():
    ptx = G.kernel_for(Case(a_regs=True, N=16)).ptx("sm_90a")
    ld = [ln for ln in _lines(ptx) if ln.startswith("ldmatrix")]
    assert len(ld) == 4 and all(ln.startswith("ldmatrix.sync.aligned.m8n8.x4.shared.b16")
                                for ln in ld)                                   # 4 K steps


# ---------------------------------------------------------------- PTX forms
def _lines(ptx):
    return [ln.strip() for ln in ptx.splitlines() if ln.strip() and not
            ln.strip().startswith("//")]


def _wgmma(ptx):
    return [ln for ln in _lines(ptx) if ln.startswith("wgmma.")]


def test_protocol_fence_mmas_commit_wait():
    ptx = G.kernel_for(Case(M=128, N=16, splits=2)).ptx("sm_90a")
    ops = [ln.split()[0].rstrip(";") for ln in _wgmma(ptx)]
    call = ["wgmma.fence.sync.aligned"] + ["wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16."
                                           "bf16"] * 4 + ["wgmma.commit_group.sync.aligned"]
    assert ops == call * 2 + ["wgmma.wait_group.sync.aligned"]
    assert _wgmma(ptx)[-1] == "wgmma.wait_group.sync.aligned 0;"


def test_ss_form_operands_and_descriptors():
    c = Case(N=8, ksteps=2, swizzle="64B", b_major="K")
    ptx = G.kernel_for(c).ptx("sm_90a")
    mma = [ln for ln in _wgmma(ptx) if "mma_async" in ln]
    pat = (r"wgmma\.mma_async\.sync\.aligned\.m64n8k16\.f32\.bf16\.bf16 "
           r"\{%f\d+, %f\d+, %f\d+, %f\d+\}, (%rd\d+), (%rd\d+), (%p\d+), 1, 1, 0, 0;")
    m = [re.fullmatch(pat, ln) for ln in mma]
    assert all(m) and len(m) == 2, mma
    assert f"setp.ne.b32 {m[0].group(3)}, 0, 0;" in _lines(ptx)     # first: D = A * B
    assert f"setp.eq.b32 {m[1].group(3)}, 0, 0;" in _lines(ptx)     # then accumulate
    # descriptors: (addr >> 4) | the SmemOperand's template; step 2 adds 32 B >> 4
    from ptxgen.ir import Buffer, BufferRegion
    from ptxgen.dtypes import dtype
    from ptxgen.primitives.tcgen05 import smem_operand
    ops = [smem_operand(BufferRegion(Buffer("t", (r, 32), dtype("bfloat16"), "shared",
                                            canonical_layout(r, 32, "bfloat16", swizzle="64B"),
                                            0, 1024), ((0, r), (0, 32))), k_instr=16)
           for r in (64, 8)]
    ors = [int(ln.rstrip(";").split(", ")[-1]) for ln in _lines(ptx) if ln.startswith("or.b64")]
    assert sorted(ors) == sorted(op.template("sm_90a") for op in ops)
    for reg, step in ((m[1].group(1), m[0].group(1)), (m[1].group(2), m[0].group(2))):
        assert f"add.u64 {reg}, {step}, 2;" in _lines(ptx)


@pytest.mark.parametrize("c,tail", [
    (Case(a_regs=True, N=16), r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1, 0;"),
    (Case(ab="float32", N=16), r"%rd\d+, %rd\d+, %p\d+, 1, 1;"),
    (Case(ab="float8_e4m3fn", N=16), r"%rd\d+, %rd\d+, %p\d+, 1, 1;"),
    (Case(a_major="MN", b_major="MN"), r"%rd\d+, %rd\d+, %p\d+, 1, 1, 1, 1;"),
    (Case(ab="float16", a_major="MN", swizzle="64B"), r"%rd\d+, %rd\d+, %p\d+, 1, 1, 1, 0;"),
])
def test_operand_forms(c, tail):
    mma = [ln for ln in _wgmma(G.kernel_for(c).ptx("sm_90a")) if "mma_async" in ln]
    assert mma and all(re.search(r"\}, " + tail + "$", ln) for ln in mma), mma[0]


def test_f16_accumulator_is_packed_and_waited():
    ptx = G.kernel_for(Case(ab="float16", d="float16", N=16)).ptx("sm_90a")
    mma = [ln for ln in _wgmma(ptx) if "mma_async" in ln]
    assert all(re.match(r"wgmma\.mma_async\.sync\.aligned\.m64n16k16\.f16\.f16\.f16 "
                        r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, ", ln) for ln in mma)
    ops = [ln.split()[0].rstrip(";") for ln in _wgmma(ptx)]
    assert ops[-3:] == ["wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
                        "wgmma.wait_group.sync.aligned"]     # its own wait, then gemm_wait


def test_explain_lists_the_wgmma_family_only():
    tables = []

    @pg.kernel(grid=(1,), block=(128,))
    def k(D: pg.Tensor((64, 64), "float32")):
        pg.thread_id(128)
        As = pg.alloc_shared((64, 64), "bfloat16", layout=canonical_layout(64, 64, "bfloat16"),
                             align=1024)
        acc = pg.tile.warpgroup.mma_accumulator((64, 64))
        tables.append(pg.tile.explain("gemm_async", acc, As, As, scope="warpgroup"))
        tables.append(pg.tile.explain("gemm_async", acc, As, As, scope="warpgroup",
                                      arch="sm_100a"))
    ok, no = tables
    assert ok.chosen == "wgmma_ss" and [r.name for r in ok] == ["wgmma_ss", "wgmma_rs"]
    assert [r.reason for r in ok] == [
        "m64n64k16.f32.bf16.bf16, A from shared memory, B from shared",
        "A is in shared memory; this variant reads A from registers"]
    assert no.chosen is None and all("the target sm_100a has no wgmma (needs sm_90a)" in r.reason
                                     for r in no)


# ---------------------------------------------------------------- errors
def _kernel(N=64, K=64, shape=(64, 64), dt="bfloat16", lb="canon", scope="warpgroup",
            acc_plain=False, d="float32"):
    def k(D: pg.Tensor((64, 8), "float32")):
        pg.thread_id(128)
        As = pg.alloc_shared((64, K), dt, layout=canonical_layout(64, K, dt), align=1024)
        Bs = pg.alloc_shared((N, K), dt, layout=canonical_layout(N, K, dt) if lb == "canon"
                             else lb, align=1024)
        if acc_plain:
            acc = pg.alloc_local(shape, d)
        else:
            acc = pg.tile.warpgroup.mma_accumulator(shape, d)
        getattr(pg.tile, scope).gemm_async(acc, As, Bs)
        pg.tile.warpgroup.gemm_wait(0)
    return pg.kernel(k, grid=(1,), block=(128,))


def _msg(e):
    return str(e.value).split(": ", 1)[1]      # drop the file:line


@pytest.mark.parametrize("N", [12, 264, 4])
def test_illegal_n(N):
    with pytest.raises(PtxgenError) as e:
        _kernel(N=N, shape=(64, 16), lb=None)
    assert _msg(e) == (f"gemm_async (wgmma): wgmma N={N} is illegal for bfloat16 (rule: PTX ISA "
                       f"wgmma shapes: N is a multiple of 8 in [8, 256])")


def test_accumulator_shape_must_match():
    with pytest.raises(PtxgenError) as e:
        _kernel(shape=(64, 128))
    assert _msg(e) == ("gemm_async: the accumulator acc[0:64, 0:128] is 64x128 but A x B^T is "
                       "64x64 (A 64x64, B 64x64); allocate it with "
                       "pg.tile.warpgroup.mma_accumulator((64, 64), 'float32')")


def test_accumulator_needs_the_fragment_layout():
    with pytest.raises(PtxgenError) as e:
        _kernel(acc_plain=True)
    assert _msg(e) == ("gemm_async: the accumulator acc[0:64, 0:64] has no thread-axis layout; "
                       "allocate it with pg.tile.warpgroup.mma_accumulator((M, N), dtype)")


def test_accumulator_with_a_wrong_thread_layout():
    from ptxgen.layout import S, TileLayout, tid_in_wg
    lay = TileLayout(S[(64, 64):(2 @ tid_in_wg, 1)])      # rows over threads: not wgmma's

    def k(D: pg.Tensor((64, 8), "float32")):
        pg.thread_id(128)
        As = pg.alloc_shared((64, 64), "bfloat16", layout=canonical_layout(64, 64, "bfloat16"),
                             align=1024)
        acc = pg.alloc_local((64, 64), "float32", layout=lay)
        pg.tile.warpgroup.gemm_async(acc, As, As)
    with pytest.raises(PtxgenError) as e:
        pg.kernel(k, grid=(1,), block=(128,))
    assert _msg(e) == ("gemm_async: the accumulator acc[0:64, 0:64]: element (0, 2) is held by "
                       "thread 0, but wgmma puts it in thread 1 of the warpgroup (rule: PTX ISA "
                       "wgmma register fragments); allocate it with "
                       "pg.tile.warpgroup.mma_accumulator((M, N), dtype)")


def test_tile_no_descriptor_can_express_names_the_layout_that_would():
    from ptxgen.layout import S, TileLayout
    with pytest.raises(LayoutError) as e:
        _kernel(lb=TileLayout(S[(64, 64)]))                  # plain row-major
    msg = _msg(e)
    assert msg.startswith("gemm_async (wgmma): MMA operand B Bs[0:64, 0:64]: its layout is "
                          "neither K-major- nor MN-major-compatible for a none-swizzled 64x64 "
                          "bfloat16 tile")
    assert msg.endswith("; fix: lay 'Bs' out as canonical_layout(64, 64, 'bfloat16', major='K', "
                        "swizzle='128B') (ptxgen.primitives.tcgen05), e.g. with "
                        "pool.alloc_tcgen05_mma_AB for 128B")


def test_mn_major_tf32_is_refused_with_the_k_major_fix():
    with pytest.raises(PtxgenError) as e:
        _kernel(dt="float32", K=32, lb=canonical_layout(64, 32, "float32", major="MN"))
    assert _msg(e) == ("gemm_async (wgmma): wgmma MN-major operand with tf32: rule: transpose is "
                       "only supported for .f16/.bf16; fix: lay 'Bs' out as canonical_layout(64, "
                       "32, 'float32', major='K', swizzle='128B') (ptxgen.primitives.tcgen05), "
                       "e.g. with pool.alloc_tcgen05_mma_AB for 128B")


def test_bf16_cannot_accumulate_in_f16():
    with pytest.raises(PtxgenError) as e:
        _kernel(d="float16")
    assert _msg(e) == ("gemm_async (wgmma): wgmma bfloat16 cannot accumulate into float16 (rule: "
                       "D is f32, or f16 for f16/fp8 inputs)")


def test_register_accumulator_needs_the_warpgroup_scope():
    with pytest.raises(PtxgenError) as e:
        _kernel(scope="warp")
    assert _msg(e) == ("gemm_async into registers is wgmma, which all 128 threads of a "
                       "warpgroup issue together: use pg.tile.warpgroup.gemm_async (not the "
                       "warp scope)")


@pytest.mark.parametrize("arch,alt", [
    ("sm_90", "sm_90 without the 'a' suffix has no wgmma"),
    ("sm_80", "on other targets use mma.sync (pg.tile.warp.gemm)"),
    ("sm_120a", "on other targets use mma.sync (pg.tile.warp.gemm)"),
    ("sm_100", "on sm_100a accumulate in tensor memory (TMEMPool(...).alloc((128, N), "
               "'float32')) for tcgen05.mma"),
    ("sm_100a", "on sm_100a accumulate in tensor memory (TMEMPool(...).alloc((128, N), "
                "'float32')) for tcgen05.mma"),
])
def test_wgmma_outside_sm90a_is_an_arch_error_with_the_fix(arch, alt):
    k = _kernel()
    with pytest.raises(ArchError) as e:
        k.ptx(arch)
    assert _msg(e) == (f"instruction 'wgmma.mma_async' needs one of sm_90a; the target is {arch} "
                       f"(gemm_async into a register accumulator is wgmma, which exists only on "
                       f"sm_90a: build for sm_90a; {alt})")


def test_tmem_gemm_below_sm100a_names_the_fix():
    import gemm_sm100
    with pytest.raises(ArchError) as e:
        gemm_sm100.gemm_sm100.ptx("sm_90a")
    assert str(e.value).endswith(
        "; the target is sm_90a (gemm_async into a TMEM accumulator is tcgen05.mma: build for "
        "sm_100a; on sm_90a accumulate in registers, pg.tile.warpgroup.mma_accumulator, for "
        "wgmma)")


def test_gemm_wait_is_wgmma_only():
    @pg.kernel(grid=(1,), block=(128,))
    def k(D: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pg.tile.warpgroup.gemm_wait(1)
    assert "wgmma.wait_group.sync.aligned 1;" in k.ptx("sm_90a")
    with pytest.raises(ArchError) as e:
        k.ptx("sm_100a")
    assert _msg(e) == ("instruction 'wgmma.wait_group' needs one of sm_90a; the target is "
                       "sm_100a (gemm_wait waits for wgmma groups, which exist only on sm_90a; "
                       "a tcgen05 gemm_async completes through pg.tile.*.mma_commit(bar) and an "
                       "mbarrier wait)")


@pytest.mark.parametrize("bad,msg", [
    (-1, "gemm_wait(pending) takes a non-negative int (groups left in flight), got -1"),
    ("0", "gemm_wait(pending) takes a non-negative int (groups left in flight), got '0'"),
])
def test_gemm_wait_pending_is_checked(bad, msg):
    def k(D: pg.Tensor((1,), "float32")):
        pg.thread_id(128)
        pg.tile.warpgroup.gemm_wait(bad)
    with pytest.raises(TraceError) as e:
        pg.kernel(k, grid=(1,), block=(128,))
    assert _msg(e) == msg


def test_gemm_under_a_branch_that_splits_the_warpgroup():
    def k(D: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(128)
        As = pg.alloc_shared((64, 64), "bfloat16", layout=canonical_layout(64, 64, "bfloat16"),
                             align=1024)
        acc = pg.tile.warpgroup.mma_accumulator((64, 64))
        with pg.if_(tx < 64):
            pg.tile.warpgroup.gemm_async(acc, As, As)
    k = pg.kernel(k, grid=(1,), block=(128,))
    with pytest.raises(pg.DispatchError, match=r"not all 128 threads of the warpgroup scope are "
                       r"active here"):
        k.ptx("sm_90a")


def test_legacy_target_gates_still_work():
    """A tile op declared with requires(target) (the former protocol) is called with the
    call's target; requires(call) gets the call."""
    from ptxgen.primitives.registry import _call_gate
    from ptxgen.target import parse_target

    class Call:
        target = parse_target("sm_90a")
    seen = []
    _call_gate(lambda target: seen.append(target.arch))(Call())
    _call_gate(lambda call: seen.append(call.target.sm))(Call())
    assert seen == ["sm_90a", 90]
