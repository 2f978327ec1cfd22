"""pg.tile.warp.gemm (mma.sync) and examples/gemm_sm80.py on a real GPU (sm_80+).

Integer inputs and integer-valued float inputs are compared with numpy bit for bit (every
fp32 partial sum is exact); random float16/bfloat16 inputs within the fp32 accumulation
bound.  Outputs are poisoned before every launch.  The kernels are the CPU tests' own
(tests/test_mma_sync.py), so the interpreter and the hardware check the same PTX.

Marked ``gpu``; skipped without a CUDA device or without torch.
"""
import numpy as np
import pytest

from ptxgen.runtime import has_gpu

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]

RNG = np.random.default_rng(80)


def dev(x: np.ndarray, dt: str):
    """A device tensor of ptxgen dtype `dt` holding the bytes of `x`."""
    t = torch.from_numpy(np.ascontiguousarray(x).view(np.uint8).copy()).cuda()
    return t.view(getattr(torch, dt)).reshape(x.shape)


def host(t, like: np.ndarray) -> np.ndarray:
    torch.cuda.synchronize()
    return t.contiguous().view(torch.uint8).cpu().numpy().view(like.dtype).reshape(like.shape)


def poisoned(like: np.ndarray, dt: str):
    return dev(np.frombuffer(b"\xa5" * like.nbytes, like.dtype).reshape(like.shape), dt)


def sm():
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


@pytest.fixture(autouse=True)
def _needs_sm80():
    if sm() < 80:
        pytest.skip("mma.sync needs sm_80")


def launch(k, a, b, c, dts, flag=1):
    A, B, C = dev(a, dts[0]), dev(b, dts[1]), dev(c, dts[2])
    k(A, B, C, flag)
    return host(C, c)


@pytest.mark.parametrize("dt", ["int8", "uint8"])
@pytest.mark.parametrize("M,N,K", [(16, 8, 32), (32, 24, 64)])
def test_integer_gemm_bit_exact(dt, M, N, K):
    from test_mma_sync import NP, gemm_kernel
    a = RNG.integers(0, 256, (M, K)).astype(np.uint8).view(NP[dt])
    b = RNG.integers(0, 256, (K, N)).astype(np.uint8).view(NP[dt])
    c = RNG.integers(-2 ** 31, 2 ** 31, (M, N)).astype(np.int32)
    c[0, 0] = 2 ** 31 - 1
    want = ((c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64) + 2 ** 31)
            % 2 ** 32 - 2 ** 31).astype(np.int32)
    got = launch(gemm_kernel(dt, M, N, K), a, b, c, (dt, dt, "int32"))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("M,N,K", [(16, 8, 32), (32, 16, 64)])
def test_float_gemm_integer_values_bit_exact(dt, M, N, K):
    from test_mma_sync import decode, encode_small_ints, gemm_kernel
    if dt.startswith("float8") and sm() < 89:
        pytest.skip("fp8 mma.sync needs sm_89")
    a = encode_small_ints(RNG.integers(-4, 5, (M, K)), dt)
    b = encode_small_ints(RNG.integers(-4, 5, (K, N)), dt)
    c = RNG.integers(-1000, 1000, (M, N)).astype(np.float32)
    want = (c + decode(a, dt) @ decode(b, dt)).astype(np.float32)
    got = launch(gemm_kernel(dt, M, N, K), a, b, c, (dt, dt, "float32"))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_float_gemm_within_fp32_accumulation_error(dt):
    from test_mma_sync import decode, gemm_kernel
    M, N, K = 32, 16, 64
    f = [RNG.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N))]
    a, b = ([x.astype(np.float16) for x in f] if dt == "float16" else
            [(x.view(np.uint32) >> 16).astype(np.uint16) for x in f])
    c = RNG.standard_normal((M, N)).astype(np.float32)
    want = c.astype(np.float64) + decode(a, dt) @ decode(b, dt)
    got = launch(gemm_kernel(dt, M, N, K), a, b, c, (dt, dt, "float32"))
    bound = 2 ** -23 * (np.abs(c) + np.abs(decode(a, dt)) @ np.abs(decode(b, dt))) * (K + 1)
    assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize("flag", [0, 1])
def test_runtime_accumulate_flag(flag):
    from test_mma_sync import gemm_kernel
    M, N, K = 16, 16, 32
    a = RNG.integers(-128, 128, (M, K)).astype(np.int8)
    b = RNG.integers(-128, 128, (K, N)).astype(np.int8)
    c = RNG.integers(-1000, 1000, (M, N)).astype(np.int32)
    k = gemm_kernel("int8", M, N, K, accumulate=False, runtime_acc=True)
    got = launch(k, a, b, c, ("int8", "int8", "int32"), flag)
    want = a.astype(np.int64) @ b.astype(np.int64) + (c if flag else 0)
    assert np.array_equal(got, want.astype(np.int32))


@pytest.mark.parametrize("dt,b_kn", [("float16", True), ("bfloat16", False), ("int8", False)])
def test_fragments_from_shared_memory(dt, b_kn):
    from test_mma_sync import NP, acc_of, decode, encode_small_ints, ldsm_gemm
    M, N, K = 32, 16, 64
    if dt == "int8":
        a = RNG.integers(-128, 128, (M, K)).astype(np.int8)
        bt = RNG.integers(-128, 128, (N, K)).astype(np.int8)
        want = a.astype(np.int64) @ bt.T.astype(np.int64)
    else:
        a = encode_small_ints(RNG.integers(-4, 5, (M, K)), dt)
        bt = encode_small_ints(RNG.integers(-4, 5, (N, K)), dt)
        want = decode(a, dt) @ decode(bt, dt).T
    b = bt.T.copy() if b_kn else bt
    want = want.astype(NP[acc_of(dt)])
    A, B, C = dev(a, dt), dev(b, dt), poisoned(want, acc_of(dt))
    ldsm_gemm(dt, M, N, K, b_kn)(A, B, C)
    assert np.array_equal(host(C, want), want)


def test_example_bit_exact():
    """examples/gemm_sm80.py's own check (integer-valued inputs: exact in fp32)."""
    from _xp import assert_results, xp
    import gemm_sm80
    assert_results(gemm_sm80.check(xp, np.random.default_rng(3)))


@pytest.mark.parametrize("tdt", ["float16", "bfloat16"])
@pytest.mark.parametrize("out", [None, "float16", "bfloat16", "float32"])
def test_example_gemm_on_torch_tensors(tdt, out):
    """gemm(a, b) on random torch tensors: within the fp32 accumulation bound of a float64
    product (plus the output rounding)."""
    import gemm_sm80
    M, N, K = 256, 128, 96
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g).to(getattr(torch, tdt))
    b = torch.randn(K, N, device="cuda", generator=g).to(getattr(torch, tdt))
    o = None if out is None else torch.full((M, N), float("nan"), device="cuda",
                                            dtype=getattr(torch, out))
    got = gemm_sm80.gemm(a, b, o).double()
    exact = a.double() @ b.double()
    bound = 2 ** -23 * (a.double().abs() @ b.double().abs()) * (K + 1)
    if out in ("float16", "bfloat16"):
        bound = bound + exact.abs() * (2 ** -10 if out == "float16" else 2 ** -7)
    assert bool(((got - exact).abs() <= bound + 1e-30).all())


def test_example_int8_on_torch_tensors():
    import gemm_sm80
    M, N, K = 128, 256, 64
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (K, N), dtype=torch.int8, device="cuda")
    got = gemm_sm80.gemm(a, b).cpu().numpy()
    want = a.cpu().numpy().astype(np.int64) @ b.cpu().numpy().astype(np.int64)
    assert np.array_equal(got, want.astype(np.int32))
