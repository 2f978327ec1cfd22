"""ptxgen.kernels inside PyTorch on the H200: torch.library.opcheck of every op,
torch.compile(fullgraph=True) and mode="reduce-overhead" (CUDA graphs) against eager,
pg.torch_op under fullgraph, a bare kernel call graph-breaking cleanly, graph replay of the
TMA GEMM, and the wrappers' strictness (out=, empty dimensions, N-D, dtypes, refusals)."""
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

import ptxgen as pg  # noqa: E402
from ptxgen.kernels import ArgumentError, attention, gemm, rmsnorm, softmax  # noqa: E402
from support.compile_cases import add_one_between_torch_ops  # noqa: E402
from support.torch_refs import grads, rms_ref  # noqa: E402


def _ints(*shape, dtype=torch.bfloat16):
    """Small integers: products and sums are exact in fp32, so results compare bit for bit."""
    return torch.randint(-2, 3, shape, device="cuda").to(dtype)


def _close(got, want, dtype):
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=2e-5, atol=1e-6)
    else:      # one rounding of float32 arithmetic each: within one ulp of the dtype
        torch.testing.assert_close(got.float(), want.float(), rtol=torch.finfo(dtype).eps,
                                   atol=torch.finfo(dtype).eps * 1e-3)


# ---- opcheck -------------------------------------------------------------------------------
def _opcheck_inputs():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 1000, device="cuda", dtype=torch.bfloat16)
    return dict(
        x=x, w=torch.rand(1000, device="cuda", dtype=torch.bfloat16) + 0.5,
        xf=torch.randn(4, 256, device="cuda"), a=_ints(300, 64), b=_ints(200, 64),
        a8=_ints(128, 64, dtype=torch.float8_e4m3fn), b8=_ints(96, 64, dtype=torch.float8_e4m3fn),
        s=torch.tensor([0.5], device="cuda"),
        q=torch.randn(1, 4, 77, 64, device="cuda", dtype=torch.bfloat16),
        kv=torch.randn(1, 2, 130, 64, device="cuda", dtype=torch.bfloat16))


# label -> (op name, its arguments from the inputs, keyword arguments); the tensors are made on
# the GPU when a case runs, and the labels name the test cases
_OPCHECK_CASES = {
    "softmax bf16 3-d": ("softmax", lambda t: (t["x"],), {}),
    "softmax f32": ("softmax", lambda t: (t["xf"],), {}),
    "softmax out": ("softmax_out", lambda t: (t["x"], torch.empty_like(t["x"])), {}),
    "rmsnorm": ("rmsnorm", lambda t: (t["x"], t["w"]), {"eps": 1e-5}),
    "rmsnorm f32 no weight": ("rmsnorm", lambda t: (t["xf"], None), {}),
    "rmsnorm f32 weight": ("rmsnorm", lambda t: (t["x"], t["w"].float()), {}),
    "rmsnorm out": ("rmsnorm_out", lambda t: (t["x"], t["w"], torch.empty_like(t["x"])), {}),
    "softmax per_thread": ("softmax", lambda t: (t["x"],), {"per_thread": 8}),
    "rmsnorm knobs": ("rmsnorm", lambda t: (t["x"], t["w"]), {"per_thread": 8,
                                                                "early_weight": False}),
    "rmsnorm out knobs": ("rmsnorm_out", lambda t: (t["x"], t["w"], torch.empty_like(t["x"])),
                          {"per_thread": 32}),
    "gemm bf16": ("gemm", lambda t: (t["a"], t["b"]), {}),
    "gemm fp8": ("gemm", lambda t: (t["a8"], t["b8"], t["s"], t["s"]), {}),
    "gemm block scales": ("gemm", lambda t: (
        _ints(128, 300, dtype=torch.float8_e4m3fn), _ints(96, 300, dtype=torch.float8_e4m3fn),
        torch.rand(128, 3, device="cuda") + 0.5, torch.rand(1, 3, device="cuda") + 0.5), {}),
    "gemm out": ("gemm_out", lambda t: (t["a"], t["b"], torch.empty(
        300, 200, device="cuda", dtype=torch.bfloat16)), {}),
    "attention causal": ("attention", lambda t: (t["q"], t["kv"], t["kv"]), {"causal": True}),
    "attention scale": ("attention", lambda t: (t["q"], t["kv"], t["kv"]), {"scale": 0.2}),
    "attention out": ("attention_out", lambda t: (t["q"], t["kv"], t["kv"],
                                                  torch.empty_like(t["q"])), {}),
    # inputs that require grad: the autograd formulas (kernels/_autograd.py) too
    "softmax grad": ("softmax", lambda t: (t["x"].float().requires_grad_(),), {}),
    "softmax grad per_thread": ("softmax", lambda t: (t["x"].float().requires_grad_(),),
                                {"per_thread": 8}),
    "rmsnorm grad": ("rmsnorm", lambda t: (t["x"].float().requires_grad_(),
                                           t["w"].float().requires_grad_()), {}),
    "gemm grad": ("gemm", lambda t: (t["a"].clone().requires_grad_(),
                                     t["b"].clone().requires_grad_()), {}),
    "attention grad": ("attention", lambda t: (
        t["q"].clone().requires_grad_(), t["kv"].clone().requires_grad_(),
        t["kv"].clone().requires_grad_()), {"causal": True}),
}


@pytest.mark.parametrize("case", list(_OPCHECK_CASES))
def test_opcheck(case):
    name, make_args, kwargs = _OPCHECK_CASES[case]
    op, args = getattr(torch.ops.ptxgen, name).default, make_args(_opcheck_inputs())
    if any(getattr(a, "dtype", None) == torch.float8_e4m3fn for a in args):
        # opcheck's schema test multiplies the inputs, which torch cannot do for float8
        utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
        torch.library.opcheck(op, args, kwargs, test_utils=utils)
    else:
        torch.library.opcheck(op, args, kwargs)


# ---- torch.compile -------------------------------------------------------------------------
def _model(a, b, w):
    h = torch.relu(gemm(a, b)) + 1.0
    h = rmsnorm(h, w, 1e-6)
    h = h * 0.5
    qkv = h.view(2, 4, 128, 128) * 0.25         # (B, H, S, D) from the 256 x 512 tile
    att = attention(qkv, qkv.flip(2).contiguous(), qkv, causal=True)
    return softmax(h).float().sum(-1, keepdim=True) * softmax(h) + att.reshape(256, 512)


def _model_inputs():
    torch.manual_seed(1)
    return _ints(256, 128), _ints(512, 128), torch.rand(512, device="cuda").to(torch.bfloat16)


def test_compile_fullgraph_matches_eager():
    args = _model_inputs()
    want = _model(*args)
    got = torch.compile(_model, fullgraph=True)(*args)
    torch.testing.assert_close(got, want)      # inductor may fuse the torch ops around ours


def test_compile_fullgraph_calls_the_ops_directly():
    args = _model_inputs()

    def f(a, b, w):
        h = torch.ops.ptxgen.gemm(a, b)
        return torch.ops.ptxgen.softmax(torch.ops.ptxgen.rmsnorm(h * 2, w) + 1)

    want = f(*args)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(*args), want)


def test_reduce_overhead_matches_eager():
    args = _model_inputs()
    want = _model(*args)
    f = torch.compile(_model, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):                      # warm-up, record, then replays
        got = f(*args)
    torch.testing.assert_close(got, want)
    a2 = _ints(256, 128)                    # new data through the same graph
    torch.testing.assert_close(f(a2, *args[1:]), _model(a2, *args[1:]))


def test_cuda_graph_replay_of_the_tma_gemm():
    """Tensor maps are kernel parameters frozen into the graph: replay with the captured
    buffers' new contents is correct (maps are keyed on pointer, shape and strides)."""
    a, b = _ints(300, 128), _ints(200, 128)
    out = torch.empty(300, 200, device="cuda", dtype=torch.bfloat16)
    gemm(a, b, out)                         # build and load outside capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gemm(a, b, out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gemm(a, b, out)
    for _ in range(3):
        a.copy_(_ints(300, 128))
        b.copy_(_ints(200, 128))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, (a.float() @ b.float().T).to(torch.bfloat16),
                                   rtol=0, atol=0)


def test_torch_op_user_kernel_fullgraph():
    N = pg.var("N")

    @pg.kernel(grid=lambda a: ((a["N"] + 127) // 128,), block=(128,), name="gpu_scale_by")
    def scale_by(x: pg.Tensor((N,), pg.float32), y: pg.Tensor((N,), pg.float32),
                 s: pg.float32):
        i = pg.let(pg.cta_id() * 128 + pg.thread_id(128))
        with pg.if_(i < N):
            y[i] = x[i] * s

    op = pg.torch_op(scale_by, name="ptxgen_gpu_test::scale_by", mutates_args=("y",))

    def f(x):
        y = torch.empty_like(x)
        op(torch.sin(x), y, 3.0)
        return y + 1

    x = torch.randn(1000, device="cuda")
    want = torch.sin(x) * 3.0 + 1
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x), want)
    torch.testing.assert_close(torch.compile(f, mode="reduce-overhead")(x), want)


def test_bare_kernel_graph_breaks_and_runs():
    _, f = add_one_between_torch_ops(torch, "gpu_add_one")
    x = torch.randn(777, device="cuda")
    torch._dynamo.reset()
    ex = torch._dynamo.explain(f)(x)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1)   # at the call, nowhere inside
    for _ in range(3):   # inductor, then CUDA graphs around the eager launch
        torch.testing.assert_close(torch.compile(f)(x), (x * 2 + 1) * 3)
        torch.testing.assert_close(torch.compile(f, mode="reduce-overhead")(x), (x * 2 + 1) * 3)


# ---- the wrappers, as strict as torch ------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("weighted", [True, False])
def test_rmsnorm_dtypes_and_nd(dtype, weighted):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 1000, device="cuda", dtype=dtype)
    w = (torch.rand(1000, device="cuda") + 0.5).to(dtype) if weighted else None
    _close(rmsnorm(x, w, 1e-5), rms_ref(x, w, 1e-5), dtype)
    _close(torch.ops.ptxgen.rmsnorm(x, w, 1e-5), rms_ref(x, w, 1e-5), dtype)


@pytest.mark.parametrize("dtype,wdt", [(torch.bfloat16, torch.float32),
                                       (torch.float32, torch.bfloat16),
                                       (torch.float16, torch.bfloat16)])
def test_rmsnorm_weight_of_another_dtype_as_torch(dtype, wdt):
    """An fp32 weight beside bf16 activations (and the other mixes): x's dtype out, as
    torch's rms_norm gives it; eager, the op, and fullgraph compile."""
    torch.manual_seed(3)
    x = torch.randn(4, 5, 4096, device="cuda", dtype=dtype)
    w = (torch.rand(4096, device="cuda") + 0.5).to(wdt)
    want = rms_ref(x, w, 1e-5)
    assert torch.nn.functional.rms_norm(x, (4096,), w, 1e-5).dtype == want.dtype == dtype
    for f in (rmsnorm, torch.ops.ptxgen.rmsnorm, torch.compile(rmsnorm, fullgraph=True)):
        _close(f(x, w, 1e-5), want, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_softmax_nd_matches_torch(dtype):
    x = torch.randn(2, 3, 4, 1000, device="cuda", dtype=dtype)
    _close(softmax(x), torch.softmax(x.float(), -1).to(dtype), dtype)


def test_softmax_over_any_dim_eager_and_compiled():
    x = torch.randn(6, 40, 300, device="cuda")

    def f(x, out):
        softmax(x * 2, out=out, dim=1)
        return softmax(x, dim=0) + out

    want = torch.softmax(x, 0) + torch.softmax(x * 2, 1)
    for g in (f, torch.compile(f, fullgraph=True)):
        out = torch.full_like(x, float("nan"))
        _close(g(x, out), want, torch.float32)
        _close(out, torch.softmax(x * 2, 1), torch.float32)
    xb = x.to(torch.bfloat16)                      # dtype=, as torch's: x cast first
    _close(softmax(xb, dtype=torch.float32), torch.softmax(xb, -1, dtype=torch.float32),
           torch.float32)


def test_noncontiguous_inputs_and_out_are_written():
    x = torch.randn(64, 200, device="cuda")[:, ::2]          # non-contiguous input
    out = torch.full((100, 64), float("nan"), device="cuda").T    # non-contiguous out
    r = softmax(x, out=out)
    assert r is out
    _close(out, torch.softmax(x, -1), torch.float32)
    w = torch.rand(100, device="cuda") + 0.5
    out2 = torch.full((100, 64), float("nan"), device="cuda").T
    assert rmsnorm(x, w, 1e-6, out=out2) is out2
    _close(out2, rms_ref(x, w, 1e-6), torch.float32)
    a, b = _ints(128, 64), _ints(96, 64)
    d = torch.full((96, 128), float("nan"), device="cuda", dtype=torch.bfloat16).T
    assert gemm(a.T.contiguous().T, b, d) is d                 # a non-contiguous too
    torch.testing.assert_close(d, (a.float() @ b.float().T).to(torch.bfloat16), rtol=0, atol=0)


def test_out_overlapping_an_input():
    """out= x in place (the row kernels read each element before writing it), and outs that
    overlap an input partially (computed aside, then copied), for every wrapper."""
    buf = torch.randn(9, 1000, device="cuda")
    x = buf[:8].clone()
    want = torch.softmax(x, -1)
    assert softmax(buf[:8], out=buf[:8]) is not None
    _close(buf[:8], want, torch.float32)
    buf[:8] = x
    softmax(buf[:8], out=buf[1:])                            # one row ahead
    _close(buf[1:], want, torch.float32)
    w = torch.rand(1000, device="cuda") + 0.5
    y = x.clone()
    rmsnorm(y, w, 1e-6, out=y)
    _close(y, rms_ref(x, w, 1e-6), torch.float32)
    flat = _ints(64 * 64 + 64 * 64)
    a, out = flat[:64 * 64].view(64, 64), flat[64 * 32:64 * 32 + 64 * 64].view(64, 64)
    b = _ints(64, 64)
    want = (a.float() @ b.float().T).to(torch.bfloat16)
    assert gemm(a, b, out) is out
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    want = attention(q, k, v)
    assert attention(q, k, v, out=k) is k                    # out is an input the kernel reads
    torch.testing.assert_close(k, want, rtol=0, atol=0)


@pytest.mark.parametrize("compiled", [False, True])
def test_training_through_the_ops(compiled):
    """Gradients through every wrapper (eager, and torch.compile with fullgraph) against the
    same function written with torch ops."""
    c = (lambda f: torch.compile(f, fullgraph=True)) if compiled else (lambda f: f)
    F = torch.nn.functional
    torch.manual_seed(3)
    x, w = torch.randn(64, 512, device="cuda"), torch.rand(512, device="cuda") + 0.5
    g = torch.randn(64, 512, device="cuda")
    for got, want in zip(grads(c(lambda t: softmax(t * 2)), x, g=g),
                         grads(lambda t: torch.softmax(t * 2, -1), x, g=g)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    for got, want in zip(grads(c(lambda t, u: rmsnorm(t, u, 1e-6)), x, w, g=g),
                         grads(lambda t, u: rms_ref(t, u, 1e-6), x, w, g=g)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    a, b = _ints(128, 64), _ints(96, 64)
    gd = torch.randn(128, 96, device="cuda")
    for got, want in zip(grads(c(gemm), a, b, g=gd), grads(lambda p, q: p @ q.T, a, b, g=gd)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    bf = torch.bfloat16
    q = torch.randn(1, 4, 200, 128, device="cuda", dtype=bf)
    k, v = (torch.randn(1, 2, 300, 128, device="cuda", dtype=bf) for _ in range(2))
    go = torch.randn(1, 4, 200, 128, device="cuda")
    want = grads(lambda *t: F.scaled_dot_product_attention(*t, is_causal=True, enable_gqa=True),
                  q, k, v, g=go)
    got = grads(c(lambda *t: attention(*t, causal=True)), q, k, v, g=go)
    for a_, b_ in zip(got, want):      # the same SDPA backward; the forwards differ by rounding
        torch.testing.assert_close(a_.float(), b_.float(), rtol=2e-2, atol=2e-2)


def test_attention_takes_any_strides():
    """(B, S, H, D) tensors viewed as (B, H, S, D), as models hold them: copied for TMA, the
    same result as their contiguous copies, and a strided out= written."""
    torch.manual_seed(5)
    bf = torch.bfloat16
    q, k, v = (torch.randn(2, 300, h, 64, device="cuda", dtype=bf).transpose(1, 2)
               for h in (8, 2, 2))
    want = attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)
    out = torch.full((2, 300, 8, 64), float("nan"), device="cuda", dtype=bf).transpose(1, 2)
    assert attention(q, k, v, causal=True, out=out) is out
    torch.testing.assert_close(out, want, rtol=0, atol=0)


def test_empty_dimensions_give_empty_results():
    for shape in ((0, 16), (16, 0), (2, 0, 8)):
        x = torch.randn(shape, device="cuda")
        assert softmax(x).shape == torch.softmax(x, -1).shape
        assert rmsnorm(x, None).shape == x.shape
    e = gemm(_ints(0, 16), _ints(5, 16))
    assert e.shape == (0, 5)
    z = gemm(_ints(4, 0), _ints(5, 0))
    assert z.shape == (4, 5) and not z.float().abs().sum()


@pytest.mark.parametrize("compiled", [False, True])
def test_gemm_over_leading_dimensions_is_a_linear_layer(compiled):
    """gemm(x (B, S, K), w (N, K)) as F.linear(x, w), bit for bit on integer data: bf16 on
    the decode and general paths, fp8 with per-tensor scales, a transposed (B, S) layout, a
    1-D x, and out= with and without an (M, N) view; eager and under fullgraph compile."""
    import torch.nn.functional as F
    f = torch.compile(gemm, fullgraph=True) if compiled else gemm
    w = _ints(96, 64)
    for x in (_ints(2, 5, 64), _ints(3, 100, 64), _ints(40, 4, 64).transpose(0, 1), _ints(64)):
        want = F.linear(x.float(), w.float()).to(torch.bfloat16)
        torch.testing.assert_close(f(x, w), want, rtol=0, atol=0)
    x = _ints(4, 80, 64)
    want = F.linear(x.float(), w.float()).to(torch.bfloat16)
    for out in (torch.full((4, 80, 96), float("nan"), device="cuda", dtype=torch.bfloat16),
                torch.full((96, 80, 4), float("nan"), device="cuda",
                           dtype=torch.bfloat16).permute(2, 1, 0)):
        torch.testing.assert_close(f(x, w, out), want, rtol=0, atol=0)
        torch.testing.assert_close(out, want, rtol=0, atol=0)
    x8, w8 = _ints(2, 3, 64, dtype=torch.float8_e4m3fn), _ints(48, 64, dtype=torch.float8_e4m3fn)
    s = torch.tensor(0.5, device="cuda")
    want = (F.linear(x8.float(), w8.float()) * 0.25).to(torch.bfloat16)
    torch.testing.assert_close(f(x8, w8, scale_a=s, scale_b=s), want, rtol=0, atol=0)


@pytest.mark.parametrize("K", [1, 7, 100])
def test_gemm_any_k(K):
    a, b = _ints(33, K), _ints(17, K)
    torch.testing.assert_close(gemm(a, b), (a.float() @ b.float().T).to(torch.bfloat16),
                               rtol=0, atol=0)


def test_refusals_name_the_argument():
    x = torch.randn(4, 8, device="cuda")
    with pytest.raises(ArgumentError, match=r"^softmax: x is a 0-d tensor"):
        softmax(torch.tensor(1.0, device="cuda"))
    with pytest.raises(ArgumentError, match=r"^softmax: out has shape \(4, 9\)"):
        softmax(x, out=torch.empty(4, 9, device="cuda"))
    with pytest.raises(ArgumentError, match=r"^rmsnorm: out has dtype float16"):
        rmsnorm(x, None, out=torch.empty(4, 8, device="cuda", dtype=torch.float16))
    with pytest.raises(ArgumentError, match=r"^rmsnorm: weight is on cpu"):
        rmsnorm(x, torch.ones(8))
    with pytest.raises(ArgumentError, match=r"^gemm: a is on cpu"):
        gemm(torch.zeros(8, 8, dtype=torch.bfloat16), _ints(8, 8))
    with pytest.raises(ArgumentError, match=r"^softmax: dim must be an int in \[-2, 2\)"):
        softmax(x, dim=2)
    with pytest.raises(ArgumentError, match=r"^rmsnorm: eps must be a real number"):
        rmsnorm(x, None, "1e-6")
    q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ArgumentError, match=r"^attention: scale must be finite, got nan"):
        attention(q, q, q, scale=float("nan"))
    with pytest.raises(ArgumentError, match=r"^gemm: out has shape \(8, 8\)"):
        gemm(_ints(8, 16), _ints(4, 16), torch.empty(8, 8, device="cuda", dtype=torch.bfloat16))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_mixed_devices_are_refused():
    with pytest.raises(ArgumentError, match=r"^gemm: b is on cuda:1 but a is on cuda:0"):
        gemm(_ints(8, 16), _ints(8, 16).to("cuda:1"))
    with pytest.raises(ArgumentError, match=r"^softmax: out is on cuda:1, the inputs on cuda:0"):
        softmax(torch.randn(2, 8, device="cuda"), out=torch.empty(2, 8, device="cuda:1"))
