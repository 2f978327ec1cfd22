"""The decode path's CUDA-core GEMV (gemm_small_m.GemvConfig, _small_m_kernel.make_gemv) on the
CPU: its PTX streams 16-byte vectors and reduces once per token, it runs in ptxsim bit for bit
against numpy on ragged shapes (rows past a CTA's warps, K tails of every length), the table
gives it one token of a 16-bit dtype only, and bad forced shapes are refused by rule."""
import numpy as np
import pytest

from support import gemm_cases as G
from support.ptxsim import run
from support.tilemath_ref import bf16_bits

from ptxgen.errors import PtxgenError
from ptxgen.kernels import gemm_small_m as S


def _body(k):
    return "\n".join(ln for ln in k.ptx("sm_90a").splitlines()
                     if not ln.lstrip().startswith("//"))


def _rounded_bits(x, dt):
    """x (float64, exact in fp32) rounded once, to nearest even, into dt's storage bits."""
    return x.astype(np.float16).view(np.uint16) if dt == "float16" else bf16_bits(x)


@pytest.mark.parametrize("dt,tokens,U,W", [("bfloat16", 1, 8, 4), ("float16", 2, 4, 8),
                                           ("bfloat16", 5, 2, 2)])
def test_assembles_without_spills_streaming_16_byte_vectors(dt, tokens, U, W):
    k = S.make_gemv(dt, tokens, U, W)
    r = k.compile("sm_90a")
    assert r.spill_bytes == 0
    body = _body(k)
    # a chunk: U vectors of the weight row and of each token row; the tail: one of each
    assert body.count("ld.global.v4.u32") == (U + 1) * (tokens + 1)
    assert body.count("shfl.sync.bfly.b32") == 5 * tokens         # one lane sum per token
    assert body.count("fma.rn.f32") == (U + 1) * 8 * tokens
    assert "wgmma" not in body and "bar.sync" not in body          # no shared memory at all


@pytest.mark.parametrize("dt,M,N,K,U,W", [
    ("bfloat16", 1, 13, 1320, 2, 4),    # 2 chunks of 64 vectors, a 37-vector tail; N ragged
    ("bfloat16", 1, 3, 8, 8, 4),        # K = one vector: no whole chunk, a lane of tail
    ("float16", 2, 5, 520, 1, 2),       # two tokens; 2 chunks of 32 vectors and one more
    ("bfloat16", 3, 9, 1024, 1, 8),     # three tokens, 4 whole chunks, no tail
    ("float16", 1, 7, 4104, 8, 1),      # one warp a CTA; 2 chunks of 256 vectors + 1
])
def test_sim_matches_numpy(dt, M, N, K, U, W):
    rng = np.random.default_rng(M * N + K)
    a = rng.integers(-3, 4, size=(M, K)) / 2
    b = rng.integers(-3, 4, size=(N, K)) / 2
    D = np.full((M, N), 0x7FC1, np.uint16)                      # poisoned: NaN
    run(S.make_gemv(dt, M, U, W), [G.encode(a, dt), G.encode(b, dt), D],
        scalars=[M, K // 8, N], grid=(-(-N // W), 1, 1))
    want = _rounded_bits(a @ b.T, dt)
    bad = np.argwhere(D != want)
    assert bad.size == 0, f"{len(bad)} of {want.size} differ, first at {bad[0]}"


def test_the_table_gives_one_token_of_a_16_bit_dtype_to_the_cuda_cores():
    for dt in ("bfloat16", "float16"):
        cfg = S.choose_config(1, 14336, 4096, dt, 132)
        assert cfg == S.GemvConfig(8, 4, cfg.reason) and cfg.reason.startswith("gemv: ")
    assert isinstance(S.choose_config(1, 14336, 4096, "float8_e4m3fn", 132), S.Config)
    assert isinstance(S.choose_config(2, 14336, 4096, "bfloat16", 132), S.Config)
    wg = S.choose_config(1, 14336, 4096, "bfloat16", 132, skip=("gemv",))
    assert wg.MN == 8 and wg.reason.startswith("split-k: ")


@pytest.mark.parametrize("cfg,dt,M,msg", [
    (S.GemvConfig(8, 4), "float8_e4m3fn", 1,
     "GemvConfig: dtype float8_e4m3fn: the CUDA-core GEMV takes bfloat16 or float16"),
    (S.GemvConfig(0, 4), "bfloat16", 1, "GemvConfig: U = 0: 1 to 8 16-byte vectors a lane"),
    (S.GemvConfig(4, 3), "bfloat16", 1, "GemvConfig: W = 3: 1, 2, 4, 8, 16 or 32 warps"),
    (S.GemvConfig(8, 4), "bfloat16", 2,
     r"GemvConfig: 2 token\(s\) with U = 8, W = 4: a lane keeps \(2 x tokens \+ 1\) x U x 8 "
     r"fp32 registers, at most 192 with 4 warps a CTA; use fewer vectors or warps, or the "
     r"wgmma path"),
    # 1024 threads leave 64 registers a thread: the driver JIT spilled 336 bytes for this
    (S.GemvConfig(1, 32), "bfloat16", 11, r"at most 32 with 32 warps a CTA"),
])
def test_bad_forced_gemv_config(cfg, dt, M, msg):
    with pytest.raises(S.ConfigError, match=msg) as e:
        S.check_config(cfg, dt, 4096, M)
    assert isinstance(e.value, PtxgenError)
    with pytest.raises(S.ConfigError, match=msg.replace("GemvConfig: ", "")):
        S.make_gemv(dt, M, cfg.U, cfg.W)


def test_dump_lists_the_gemv_for_16_bit_dtypes_only():
    names = [k.name for k in S.dump()]
    assert "gemm_gemv_bfloat16_m1_u8_w4" in names
    assert not any("gemv" in k.name for k in S.dump("float8_e4m3fn", MN=32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_assembles_for_every_claimed_arch(arch):
    """Plain loads, FMAs and shuffles: nothing Hopper-only, so it assembles everywhere."""
    assert S.make_gemv("bfloat16", 1, 8, 4).compile(arch).spill_bytes == 0


def test_weights_past_int32_indexing_stay_on_the_wgmma_path():
    """The GEMV's element index is int32 arithmetic: N x K up to 2^31 takes it (a 128256 x
    8192 LM head), one more row does not, and forcing it names the limit."""
    assert isinstance(S.choose_config(1, 128256, 8192, "bfloat16", 132), S.GemvConfig)
    assert isinstance(S.choose_config(1, 2 ** 18, 8192, "bfloat16", 132), S.GemvConfig)
    assert isinstance(S.choose_config(1, 2 ** 18 + 1, 8192, "bfloat16", 132), S.Config)
    with pytest.raises(S.ConfigError, match=r"GemvConfig: b has 262145 x 8192 = 2147491840 "
                                            r"elements; the GEMV indexes them in 32-bit "
                                            r"arithmetic, at most 2147483648 \(use Config"):
        S.check_config(S.GemvConfig(), "bfloat16", 8192, 1, 2 ** 18 + 1)
