"""ptxgen/kernels/gemm_small_m.py on the CPU: the decode-shaped GEMM (A/B swapped, split-K,
fixed-order reduction, evict-first weight stream) assembles for sm_90a with no spills and the
forms it was designed around, runs in ptxsim bit for bit against numpy on ragged shapes (split
and not), and its heuristic table and forced-configuration checks behave as documented."""
import re

import numpy as np
import pytest

from support import gemm_cases as G
from support.ptxsim import run
from support.tilemath_ref import bf16_bits

from ptxgen.errors import PtxgenError
from ptxgen.kernels import gemm_small_m as S
from ptxgen.kernels import ArgumentError


def _instrs(k):
    return "\n".join(ln for ln in k.ptx("sm_90a").splitlines()
                     if not ln.lstrip().startswith("//"))


@pytest.mark.parametrize("dt,MN,split,wgmma", [
    ("bfloat16", 8, False, "m64n8k16.f32.bf16.bf16"),
    ("bfloat16", 16, True, "m64n16k16.f32.bf16.bf16"),
    ("float16", 256, True, "m64n256k16.f32.f16.f16"),
    ("float8_e4m3fn", 32, True, "m64n32k32.f32.e4m3.e4m3"),
])
def test_assembles_without_spills(dt, MN, split, wgmma):
    k = S.make_small_m(dt, MN=MN, STAGES=S.stages_for(MN, dt), split=split)
    r = k.compile("sm_90a")
    assert r.spill_bytes == 0
    assert r.registers <= 168
    assert r.resources["smem_bytes"] <= 227 * 1024
    ptx = _instrs(k)
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{wgmma}") == 4          # BK / instr K
    loads = ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx"
                      "::bytes.L2::cache_hint")
    assert loads == 3                                  # two weight halves, one token tile
    assert "createpolicy.fractional.L2::evict_first" in ptx
    assert "createpolicy.fractional.L2::evict_last" in ptx
    dims = "3d" if split else "2d"                     # W (S, M, N) fp32, or D (M, N)
    assert f"cp.async.bulk.tensor.{dims}.global.shared::cta.bulk_group" in ptx


def test_reduce_loads_every_split_then_adds_in_order():
    """The split loop is unrolled: the loads are independent (in flight together), the adds
    chain s = 0, 1, 2, 3 in that order (the fixed order is what makes it deterministic)."""
    k = S.make_reduce("bfloat16", 4)
    assert k.compile("sm_90a").spill_bytes == 0
    body = _instrs(k)
    assert body.count("ld.global.f32") == 4
    assert body.count("add.rn.f32") == 3


def _sim(dt, M, N, K, MN, splits, ctas, stages=3, seed=0, data=None):
    """Run the GEMM (and with splits > 1 the reduction) in ptxsim; (got, want) output bits.
    Outputs and workspace poisoned with NaN first.  data: (a, b) instead of the seeded
    small integers."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(M, K)) / 2
    b = rng.integers(-3, 4, size=(N, K)) / 2
    if data is not None:
        a, b = data
    fp8 = dt.startswith("float8")
    ref = (a @ b.T) * (0.125 if fp8 else 1.0)
    want = ref.astype(np.float16).view(np.uint16) if dt == "float16" else bf16_bits(ref)
    split = splits > 1
    k = S.make_small_m(dt, MN=MN, STAGES=stages, ctas=ctas, split=split)
    ND, NW = -(-N // 8) * 8, -(-N // 4) * 4
    D = np.full((M, ND), 0x7FC1, np.uint16)
    W = np.full((splits, M, NW) if split else (1, 1, 4), np.nan, np.float32)
    sa, sb = np.array([0.5], np.float32), np.array([0.25], np.float32)
    run(k, [G.encode(a, dt), G.encode(b, dt), D, W, sa, sb],
        scalars=[M, K, N, ND, *W.shape])
    if split:
        assert not np.isnan(W[:, :, :N]).any()        # every split wrote its whole tile
        out_dt = "bfloat16" if fp8 else dt
        D = np.full((M, N), 0x7FC1, np.uint16)
        run(S.make_reduce(out_dt, splits, ctas=2, threads=64), [W, D], scalars=[M, NW, N])
    return D[:, :N], want


@pytest.mark.parametrize("dt,M,N,K,MN,splits,ctas", [
    ("bfloat16", 5, 130, 72, 8, 1, 2),        # M = 5 on wgmma N = 8; N ragged, padded D pitch
    ("bfloat16", 5, 130, 200, 8, 2, 2),       # split-K into the workspace + the reduction
    ("bfloat16", 13, 200, 300, 16, 3, 1),     # one CTA, 6 units: the ring wraps across units
    ("float16", 1, 64, 64, 8, 1, 1),          # M = 1, K inside one stage
    ("float16", 1, 8, 8, 8, 1, 1),            # 1 x 8 x 8: everything past the edges zero
    ("float16", 3, 64, 256, 8, 2, 1),         # float16 split into the workspace
    ("float8_e4m3fn", 1, 40, 16, 8, 1, 1),    # fp8, K = 16 of a 128-wide stage
    ("float8_e4m3fn", 20, 130, 500, 32, 2, 2),  # fp8, promoted, scaled, K zero-filled
    ("bfloat16", 70, 64, 128, 128, 1, 1),     # MN 128: two 64-token epilogue chunks
    ("bfloat16", 300, 64, 64, 256, 1, 2),     # M > 256: two token tiles
    ("float8_e4m3fn", 200, 64, 128, 128, 1, 1),  # fp8 past 192 tokens: two tiles of 128
    ("float16", 3, 64, 256, 8, 4, 3),         # splits spread over CTAs, some CTAs idle
    ("bfloat16", 70, 64, 256, 64, 2, 2),      # two token tiles, each split twice
    ("bfloat16", 5, 70, 640, 8, 10, 3),       # ten splits of one K-block each
])
def test_sim_matches_numpy(dt, M, N, K, MN, splits, ctas):
    got, want = _sim(dt, M, N, K, MN, splits, ctas)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {want.size} differ, first at {bad[0]}"


def test_split_k_sums_the_partials_in_split_order():
    """The reduce kernel adds the partials in split order, whichever CTA wrote which.  The
    data makes the order visible: K = 3 blocks of 64, one per split, whose partial sums are
    2^24, then 1, then -2^24: in fp32, in order 0, 1, 2 the small one is lost
    ((2^24 + 1) - 2^24 = 0), in any other order it survives."""
    M, N, K = 6, 70, 192
    a = np.ones((M, K))
    b = np.zeros((N, K))
    b[:, 0:64] = 2.0 ** 18
    b[:, 64] = 1
    b[:, 128:192] = -2.0 ** 18
    for ctas in (1, 2, 3):     # the units land on different CTAs
        got, exact = _sim("bfloat16", M, N, K, 8, 3, ctas, data=(a, b))
        assert (got == 0).all() and (exact != 0).all()


def test_split_results_do_not_depend_on_the_split_count():
    """Integer data: every split count sums exactly, so the bits agree with one split."""
    one, want = _sim("bfloat16", 9, 70, 320, 16, 1, 2)
    four, _ = _sim("bfloat16", 9, 70, 320, 16, 4, 2)
    assert (one == want).all() and (four == want).all()


@pytest.mark.parametrize("M,N,K,MN,splits", [
    (1, 4096, 14336, 8, 4),          # 32 weight tiles: split 4 ways -> 128 units on 132 SMs
    (16, 4096, 14336, 16, 4),
    (32, 8192, 8192, 32, 2),         # 64 tiles -> 128 units
    (128, 4096, 14336, 128, 4),
    (16, 14336, 4096, 16, 1),        # 112 tiles already stream; the workspace would cost more
    (1000, 4096, 14336, 256, 1),     # 128 tiles (4 token tiles x 32)
])
def test_choose_config_table(M, N, K, MN, splits):
    cfg = S.choose_config(M, N, K, "bfloat16", 132, skip=("gemv",))   # M = 1: test_gemm_gemv
    assert (cfg.MN, cfg.splits) == (MN, splits)
    assert cfg.STAGES == S.stages_for(MN, "bfloat16")
    assert cfg.reason.startswith("split-k: ")


@pytest.mark.parametrize("M,N,K,dt,path", [
    (1, 14336, 4096, "bfloat16", "small_m"),
    (128, 131072, 4096, "bfloat16", "small_m"),     # up to 128 tokens whatever the tiles
    # 129-256 tokens: the general kernel's 128-row tiles against 132 SMs
    (256, 14336, 4096, "bfloat16", "sm90"),         # 128 tiles of 224: 97% of a round,
                                                    # 224 columns an SM against 256
    (192, 14336, 4096, "bfloat16", "small_m"),      # the same tiles, against 192 columns
    (256, 4096, 14336, "bfloat16", "small_m"),      # 64 tiles: 48% of a round
    (256, 8192, 8192, "bfloat16", "sm90"),          # 128 tiles: 97% of a round
    (200, 33792, 4096, "bfloat16", "sm90"),         # 264 tiles of 256: two whole rounds
    (256, 14336, 4096, "float8_e4m3fn", "small_m"),  # promoted fp8: 128-wide tiles, 85%
    (257, 4096, 14336, "bfloat16", "sm90"),         # past 256 tokens
    (256, 0, 4096, "bfloat16", "sm90"),             # no tiles: nothing to fill
])
def test_gemm_routes_by_how_the_general_tiles_fill_the_sms(monkeypatch, M, N, K, dt, path):
    """gemm() takes the decode path up to 128 tokens, and up to 256 where the general
    kernel's tiles would fill under 90% of their rounds of SMs or give an SM more columns
    to compute than the decode path's (benchmarks/RESULTS.md, thirty-seventh session, H100:
    at 14336 x 4096 the general kernel's 224-wide tiles were level with the decode path at
    M = 256 and 9% slower at M = 192); the refusal names the fill and both paths' columns."""
    import importlib
    from ptxgen.kernels._checks import Meta
    G = importlib.import_module("ptxgen.kernels.gemm")
    monkeypatch.setattr(G, "sm_count", lambda device: 132)
    plan = G.gemm_plan(Meta((M, K), dt, "cuda:0"), Meta((N, K), dt, "cuda:0"))
    ok, why = G._small_m_accepts(plan, "cuda:0")
    assert ok == (path == "small_m"), why
    if (M, N) == (256, 8192):
        assert why == ("M = 256 > 128 and the general kernel's 128 tiles of 128 columns "
                       "fill 97% of 1 round(s) of 132 SMs, 128 columns an SM where the decode "
                       "path's take 128")
    if M == 257:
        assert why == "M = 257 > 256: the general kernel's tiles fill the SMs"


@pytest.mark.parametrize("M,N,dt,BN", [
    (8192, 8192, "bfloat16", 256),          # 2048 tiles: 97% of 16 rounds, as before
    (4096, 14336, "bfloat16", 256),
    (256, 8192, "bfloat16", 128),           # 128 tiles of 128: 97% of a round
    (256, 14336, "bfloat16", 224),          # 112 tiles of 256 (85%) -> 128 of 224
    (512, 14336, "bfloat16", 224),          # 224 of 256 in 2 rounds (85%) -> 256 of 224
    (1024, 14336, "bfloat16", 176),         # 5 rounds of 176 columns < 4 rounds of 224
    (256, 14336, "float8_e4m3fn", 128),     # promoted fp8 keeps its overlapped 128
    (0, 5, "bfloat16", 128),                # an empty result: no tiles, nothing idle
])
def test_general_tile_width_fits_the_rounds_of_sms(M, N, dt, BN):
    """The general kernel's BN: 256 or 128 where their tiles fill >= 90% of their rounds of
    SMs, else the multiple of 16 from 128 up with the least rounds x BN (a CTA's work)."""
    import importlib
    from ptxgen.kernels._checks import Meta
    G = importlib.import_module("ptxgen.kernels.gemm")
    plan = G.gemm_plan(Meta((M, 4096), dt, "cuda:0"), Meta((N, 4096), dt, "cuda:0"))
    assert G._general_bn(plan, 132) == BN
    assert G._general_bn(plan._replace(BN=80), 132) == 80      # a forced width stays


def test_choose_config_rows():
    assert S.choose_config(16, 4096, 256, "bfloat16", 132).reason.startswith("one-split")
    big = S.choose_config(256, 131072, 4096, "bfloat16", 132)
    assert big.splits == 1 and big.reason.startswith("fills-machine")
    assert S.choose_config(3, 100, 64, "float8_e4m3fn", 132).MN == 8


@pytest.mark.parametrize("cfg,msg", [
    (S.Config(12, 4, 1), "config.MN = 12: wgmma N is a multiple of 8 from 8 to 256"),
    (S.Config(96, 4, 1), "config.MN = 96: above 64 the epilogue's 64-token chunks need a "
                         "multiple of 64"),
    (S.Config(16, 1, 1), "config.STAGES = 1: 2 to 16 ring stages"),
    (S.Config(256, 8, 1), "config.STAGES = 8: the ring needs 393216 bytes of shared memory, "
                          "more than 204800 or than the 232448 a CTA has beside the epilogue; "
                          "use at most 4 stages for MN = 256"),
    # 5 stages of 192 tokens fit the ring budget, but not beside the split's fp32 chunks
    (S.Config(192, 5, 2), "config.STAGES = 5: the ring needs 204800 bytes of shared memory, "
                          "more than 204800 or than the 232448 a CTA has beside the epilogue; "
                          "use at most 4 stages for MN = 192"),
    (S.Config(16, 4, 9), r"config.splits = 9: 1 to 8 \(the K-blocks of 64 for K = 512\), so "
                         r"every split has work"),
])
def test_bad_forced_config(cfg, msg):
    with pytest.raises(S.ConfigError, match=msg) as e:
        S.check_config(cfg, "bfloat16", 512)
    assert isinstance(e.value, PtxgenError)
    assert isinstance(e.value, ArgumentError)    # one except clause for every wrapper


@pytest.mark.parametrize("dt,BN,STAGES,fits", [
    ("bfloat16", 64, 8, True), ("bfloat16", 128, 6, True), ("bfloat16", 128, 7, False),
    ("float8_e4m3fn", 192, 4, True), ("float8_e4m3fn", 192, 5, False),
    ("float16", 256, 4, True), ("float16", 256, 5, False),
    ("bfloat16", 224, 4, True), ("bfloat16", 224, 5, False),    # one box a pass, a tail box
    ("bfloat16", 112, 6, True), ("bfloat16", 112, 7, False),
])
def test_gemm_forced_stages_fit_shared_memory(monkeypatch, dt, BN, STAGES, fits):
    """A forced STAGES that the tile's ring and epilogue boxes do not fit in 227 KiB is
    refused naming STAGES, BN and the deepest ring that fits (it was a SMEMPool overflow from
    inside the kernel); every ring max_stages admits builds."""
    import importlib
    from ptxgen.kernels._checks import Meta
    G = importlib.import_module("ptxgen.kernels.gemm")
    monkeypatch.setattr(G, "sm_count", lambda device: 132)
    plan = G.gemm_plan(Meta((4096, 512), dt, "cuda:0"), Meta((4096, 512), dt, "cuda:0"),
                       BN=BN, STAGES=STAGES)
    if fits:
        assert "wgmma.mma_async" in G._sm90_kernel(plan, "cuda:0").ptx("sm_90a")
    else:
        with pytest.raises(ArgumentError, match=(
                rf"^gemm: STAGES = {STAGES} with BN = {BN}: the ring \({STAGES} x "
                rf"{(128 + BN) * 128} bytes\) and the epilogue tiles need more than the 232448 "
                rf"bytes of shared memory a CTA has; use at most {G.max_stages(BN)} stages "
                rf"for BN = {BN}$")):
            G._sm90_kernel(plan, "cuda:0")


def test_fp8_token_tiles_stop_at_192():
    """fp8 keeps the sum and each K-step's partial, two 64 x MN fp32 tiles, in a consumer's
    232 registers: 256 tokens (which spilled 400 bytes) run as two tiles of 128; a forced 256
    is refused with the reason."""
    assert [S.round_mn(m, "float8_e4m3fn") for m in (129, 192, 193, 256)] == [192, 192, 128,
                                                                             128]
    assert [S.round_mn(m) for m in (129, 192, 193, 256)] == [192, 192, 256, 256]
    cfg = S.choose_config(256, 14336, 4096, "float8_e4m3fn", 132)
    assert cfg.MN == 128
    with pytest.raises(S.ConfigError, match=r"config.MN = 256: float8 keeps two 64 x MN fp32 "
                                            r"tiles \(the sum and each K-step's partial\) in "
                                            r"232 registers a thread, so at most 192"):
        S.check_config(S.Config(256, 4, 1), "float8_e4m3fn", 4096)


@pytest.mark.parametrize("M,dt", [(192, "bfloat16"), (256, "float8_e4m3fn"),
                                  (160, "float8_e4m3fn")])
def test_every_token_count_up_to_256_builds_its_chosen_kernels(M, dt):
    """The configurations choose_config gives fit the CTA's shared memory (192 tokens with
    split-K took 5 stages and overflowed it by 5 KiB).  (Spills: nvJitLink's relocatable
    compile drops setmaxnreg, so the GPU test test_driver_jit_no_spills checks them.)"""
    for N, K in ((4096, 14336), (14336, 4096)):
        cfg = S.choose_config(M, N, K, dt, 132)
        k = S.make_small_m(dt, MN=cfg.MN, STAGES=cfg.STAGES, split=cfg.splits > 1)
        assert k.ptx("sm_90a").count("wgmma.mma_async") > 0, (M, N, K, dt, cfg)


def test_bad_inputs_without_a_gpu():
    torch = pytest.importorskip("torch")
    a = torch.zeros(4, 64, dtype=torch.bfloat16)
    with pytest.raises(S.GemmInputError, match=r"a is on cpu: gemm_small_m runs on a CUDA "
                                               r"device; move it with \.cuda\(\)"):
        S.gemm_small_m(a, a)
    with pytest.raises(S.GemmInputError, match="a: a torch tensor, got ndarray"):
        S.gemm_small_m(np.zeros((4, 64)), a)


# ---------------------------------------------------------------- block-scaled fp8
def test_blockscaled_assembles_without_spills():
    from ptxgen.kernels import gemm_blockscaled as BS
    k = BS.make_blockscaled()
    r = k.compile("sm_90a")
    assert r.spill_bytes == 0 and r.registers <= 168
    ptx = _instrs(k)
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") == 4
    assert ptx.count("fma.rn.f32") >= 64            # acc += part * scale: 64 per thread


def test_blockscaled_ring_scales_ride_in_the_stage():
    """scales="ring": the producer's two scale loads join each stage's barrier (5 arrivals),
    and the consumers read no global memory: their scales come from shared memory."""
    from ptxgen.kernels import gemm_blockscaled as BS
    k = BS.make_blockscaled(scales="ring")
    ptx = _instrs(k)
    assert "ld.global" not in ptx and "ld.shared.f32" in ptx
    assert re.findall(r"mbarrier\.init\.shared\.b64 \[[^]]+\], (\d+);", ptx)[::2] == ["5"] * 5
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") == 5
    assert k.compile("sm_90a").spill_bytes == 0
    with pytest.raises(ValueError, match='scales=\'smem\': "global" or "ring"'):
        BS.make_blockscaled(scales="smem")


def test_blockscaled_tile_widths():
    """BN 192: 4 wgmma n192 a K-step and two promotions (n0 % 128 == 0 or 64), each 96 fmas
    a thread (the GPU tests check the driver JIT does not spill it).  The widths and
    schedules the registers do not fit are refused."""
    from ptxgen.kernels import gemm_blockscaled as BS
    k = BS.make_blockscaled(STAGES=4, BN=192)
    ptx = _instrs(k)
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3") == 4
    assert ptx.count("fma.rn.f32") == 2 * 96
    with pytest.raises(ValueError, match="BN=256: 64, 128 or 192 columns"):
        BS.make_blockscaled(BN=256)
    with pytest.raises(ValueError, match="overlap keeps three 64 x BN fp32 tiles: BN <= 128"):
        BS.make_blockscaled(BN=192, overlap=True)


def test_blockscaled_overlap_keeps_one_wgmma_in_flight_without_serializing():
    """The overlapped schedule: each promotion waits for all but the newest wgmma group, and
    ptxas does not serialize the wgmmas (C7514) or inject waits (C7517), which it does when
    a wgmma is issued under a branch.  (nvJitLink's relocatable compile drops setmaxnreg, so
    its 168-register cap spills the second partial tile; the driver JIT keeps 232 registers:
    the GPU test checks that it does not spill.)"""
    from ptxgen.kernels import gemm_blockscaled as BS
    k = BS.make_blockscaled(overlap=True)
    notes = " ".join(k.compile("sm_90a").notes)
    assert "C7514" not in notes and "C7517" not in notes, notes
    ptx = _instrs(k)
    assert ptx.count("wgmma.wait_group.sync.aligned 1;") == 3    # the loop's two, the tail's
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 2    # the two tails' last steps
    with pytest.raises(ValueError, match="pingpong and overlap are two schedules; pick one"):
        BS.make_blockscaled(pingpong=True, overlap=True)


@pytest.mark.parametrize("M,N,K,ctas,schedule", [
    (70, 130, 300, 2, {}),     # ragged M, N (padded D), K (a partial last scale block)
    (130, 64, 256, 1, dict(pingpong=True)),    # the consumers taking turns, two tiles
    # two partial tiles: 1 K-step (the even tail alone), 2 (the odd tail), 3 (a pair, then
    # the even tail) on two tiles of one CTA (the ring positions carry over)
    (70, 64, 100, 1, dict(overlap=True)),
    (70, 64, 256, 1, dict(overlap=True)),
    (130, 64, 300, 1, dict(overlap=True)),
    # a cluster of two sharing B: rank 1's rows past M; both ranks' rows inside
    (70, 64, 256, 2, dict(cluster=2)),
    (130, 64, 256, 2, dict(overlap=True, cluster=2)),
    # 192-wide tiles span two scale_b blocks: at n0 = 0 the first 128 columns take block 0,
    # at n0 = 192 the first 64 take block 1 (the rest block 2)
    (70, 330, 128, 2, dict(BN=192, STAGES=3)),
    # the scales in the TMA ring: M and NB not multiples of 4 (padded); 192-wide tiles up to
    # column block 4 (scale_b's box from nb // 4 * 4 = 4) and past NB = 5 (n0 = 576), two
    # tiles a CTA (the ring positions carry over), a partial K block; overlapped in a cluster
    (70, 600, 100, 2, dict(BN=192, STAGES=3, scales="ring")),
    (130, 64, 256, 2, dict(scales="ring", overlap=True, cluster=2)),
    (70, 130, 128, 2, dict(BN=64)),          # 64-wide tiles: two per scale_b block
])
def test_blockscaled_sim_matches_numpy(M, N, K, ctas, schedule):
    """Integer data and power-of-two scales: every product and sum is exact in fp32, so the
    output is the reference rounded once to bfloat16."""
    from ptxgen.kernels import gemm_blockscaled as BS
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, size=(M, K)) / 2
    b = rng.integers(-3, 4, size=(N, K)) / 2
    KB, NB = -(-K // 128), -(-N // 128)
    sa = (2.0 ** rng.integers(-3, 3, size=(M, KB))).astype(np.float32)
    sb = (2.0 ** rng.integers(-3, 3, size=(NB, KB))).astype(np.float32)
    ND = -(-N // 8) * 8
    D = np.full((M, ND), 0x7FC1, np.uint16)
    if schedule.get("scales") == "ring":     # transposed, padded to 4 with poison
        sat = np.full((KB, -(-M // 4) * 4), np.nan, np.float32)
        sbt = np.full((KB, -(-NB // 4) * 4), np.nan, np.float32)
        sat[:, :M], sbt[:, :NB] = sa.T, sb.T
        scales, scalars = [sat, sbt], [M, K, N, ND, KB, sat.shape[1], sbt.shape[1]]
    else:
        scales, scalars = [sa, sb], [M, K, N, ND, KB, NB]
    run(BS.make_blockscaled(ctas=ctas, **{"STAGES": 3, **schedule}),
        [G.encode(a, "float8_e4m3fn"), G.encode(b, "float8_e4m3fn"), D] + scales,
        scalars=scalars)
    ref = np.zeros((M, N))
    for kb in range(KB):
        ks = slice(kb * 128, kb * 128 + 128)
        ref += (a[:, ks] @ b[:, ks].T) * sa[:, kb:kb + 1] * np.repeat(sb[:, kb], 128)[None, :N]
    bad = np.argwhere(D[:, :N] != bf16_bits(ref))
    assert bad.size == 0, f"{len(bad)} differ, first at {bad[0]}"
