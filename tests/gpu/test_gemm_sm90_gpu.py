"""ptxgen.kernels.gemm (through its demo examples/gemm_sm90.py) on the H200: bit-exact on integer data (every dtype, ragged shapes, a
padded output pitch, CTAs with several tiles), and on random normal data as accurate as
cuBLAS against an fp64 reference; outputs poisoned with NaN first."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def example():
    import torch
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma needs an sm_90 GPU")
    import gemm_sm90
    return gemm_sm90


def test_bit_exact_on_integer_data(example):
    bad = [label for label, got, want in example.check(None, np.random.default_rng(1))
           if got.tobytes() != want.tobytes()]
    assert not bad, bad


def test_as_accurate_as_cublas(example):
    rows = example.accuracy()
    bad = [(label, err, lib) for label, err, lib in rows
           if not (err == err and err <= 1.25 * lib + 1e-6)]
    assert not bad, bad


def test_ragged_k_and_bad_inputs(example):
    """K = 36 (72-byte rows, not TMA's 16-byte pitch) is zero-padded and computed; a float32
    input is refused, naming the argument."""
    import torch

    from ptxgen.kernels import ArgumentError
    a = torch.randint(-2, 3, (64, 36), device="cuda").to(torch.bfloat16)
    torch.testing.assert_close(example.gemm(a, a), (a.float() @ a.float().T).to(torch.bfloat16),
                               rtol=0, atol=0)
    with pytest.raises(ArgumentError, match=r"^gemm: a has dtype float32; it takes bfloat16, "
                                            r"float16, float8_e4m3fn$"):
        example.gemm(a.float(), a.float())


@pytest.mark.parametrize("cfg", [("bfloat16", 256, 4, False, 0), ("float16", 128, 5, False, 0),
                                 ("float8_e4m3fn", 256, 4, True, 0),
                                 ("float8_e4m3fn", 128, 5, True, 1),
                                 ("float8_e4m3fn", 192, 4, True, 1),
                                 ("float8_e4m3fn", 192, 4, True, 1, "pingpong"),
                                 ("float8_e4m3fn", 128, 5, True, 1, "overlap"),
                                 ("float8_e4m3fn", 192, 4, True, 1, "cluster"),
                                 ("bfloat16", 256, 4, False, 0, "cluster"),
                                 ("bfloat16", 224, 4, False, 0), ("float16", 112, 5, False, 0),
                                 ("bfloat16", 240, 4, False, 0)])
def test_driver_jit_no_spills(example, cfg):
    """Loaded from PTX (the driver's whole-program JIT keeps setmaxnreg): the entry count is
    168 registers (64 Ki / 384 threads) and nothing is spilled to local memory."""
    from ptxgen.runtime import Module
    dt, BN, ST, scaled, promote, *schedule = cfg
    k = example.make_gemm(dt, BN=BN, STAGES=ST, scaled=scaled, promote=promote,
                          **{v: 2 if v == "cluster" else True for v in schedule})
    fn = Module.load(ptx=k.ptx("sm_90a"), name=k.name).function(k.name)
    assert fn.attribute("NUM_REGS") == 168
    assert fn.attribute("LOCAL_SIZE_BYTES") == 0


@pytest.mark.parametrize("BN", [80, 112, 176, 208, 224, 240])
def test_tile_widths_past_whole_boxes_are_bit_exact(example, BN):
    """BN a multiple of 16 but not of 64: the columns past the 64-column store boxes go out
    in 32- and / or 16-column tail boxes.  Small integers (exact in fp32), so the result is
    the fp64 product rounded once; ragged shapes, 2000 x 1500 gives CTAs several tiles;
    outputs poisoned with NaN first."""
    import torch
    from ptxgen.kernels import gemm
    rng = np.random.default_rng(BN)
    for dt in (torch.bfloat16, torch.float16):
        for M, N, K in ((300, 1000, 200), (2000, 1500, 64), (130, 3 * BN + 40, 72)):
            a = torch.tensor(rng.integers(-2, 3, size=(M, K)), device="cuda").to(dt)
            b = torch.tensor(rng.integers(-2, 3, size=(N, K)), device="cuda").to(dt)
            out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
            assert gemm(a, b, out, BN=BN) is out
            want = (a.double() @ b.double().T).to(dt)
            assert torch.equal(out.view(torch.int16), want.view(torch.int16)), (dt, M, N, K)


def test_pingpong_gives_the_same_bits(example):
    """fp8 promoted, random data, 3 tiles per CTA and more: the consumers taking turns, two
    partial tiles overlapped, and clusters of two sharing B change when and from where the
    wgmmas read, not the sums (the same bits as the default kernel of the same tile width)."""
    import torch
    torch.manual_seed(5)
    f8 = torch.float8_e4m3fn
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    one = torch.tensor([1.0], device="cuda")
    for M, N, K in [(2048, 4096, 1024), (300, 520, 1040), (4096, 4096, 4096)]:
        a = torch.randn(M, K, device="cuda").to(f8)
        b = torch.randn(N, K, device="cuda").to(f8)
        outs = []
        for BN, kw in ((192, {}), (192, dict(pingpong=True)), (128, {}),
                       (128, dict(overlap=True)), (192, dict(cluster=2)),
                       (128, dict(overlap=True, cluster=2))):
            k = example.make_gemm("float8_e4m3fn", BN=BN, STAGES=4, ctas=sms - sms % 2,
                                  scaled=True, promote=1, **kw)
            out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
            k(a, b, out, one, one)
            outs.append(out.view(torch.int16))
        assert torch.equal(outs[0], outs[1]), "ping-pong"
        assert torch.equal(outs[2], outs[3]), "overlap"
        assert torch.equal(outs[0], outs[4]), "cluster"
        assert torch.equal(outs[2], outs[5]), "overlap + cluster"
