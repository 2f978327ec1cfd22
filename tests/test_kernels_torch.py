"""ptxgen.kernels with torch but no GPU: the custom ops are registered with their schemas, and
torch.compile(fullgraph=True) traces the wrappers and pg.torch_op ops over fake CUDA tensors
(their fake implementations run the wrappers' rules, so a bad argument is refused at trace
time with the eager message).  Skipped where torch is not installed (CPU CI)."""
import math
import sys

import pytest

torch = pytest.importorskip("torch")

import ptxgen as pg  # noqa: E402
from ptxgen.kernels import ArgumentError, attention, gemm, rmsnorm, softmax  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from support.torch_refs import blockscaled_ref, grads, rms_ref  # noqa: E402


class Recorder:
    """A torch.compile backend that keeps the FX graph's code and runs nothing on a device."""

    def __init__(self):
        self.code = []

    def __call__(self, gm, example_inputs):
        self.code.append(gm.code)
        return gm.forward


def test_ops_are_registered_with_their_schemas():
    ops = torch.ops.ptxgen
    assert str(ops.softmax.default._schema) == \
        "ptxgen::softmax(Tensor x, SymInt? per_thread=None) -> Tensor"
    assert str(ops.softmax_out.default._schema) == \
        "ptxgen::softmax_out(Tensor x, Tensor(a1!) out, SymInt? per_thread=None) -> ()"
    assert str(ops.rmsnorm.default._schema).startswith(
        "ptxgen::rmsnorm(Tensor x, Tensor? weight=None, float eps=")
    for name in ("rmsnorm", "rmsnorm_out"):      # the wrappers' kernel options, as gemm's BN
        assert str(getattr(ops, name).default._schema).endswith(
            "SymInt? per_thread=None, bool? early_weight=None) -> " +
            ("Tensor" if name == "rmsnorm" else "()"))
    assert str(ops.gemm.default._schema).startswith(
        "ptxgen::gemm(Tensor a, Tensor b, Tensor? scale_a=None, Tensor? scale_b=None, "
        "bool fast_accum=False")
    for name in ("rmsnorm_out", "gemm_out"):
        assert "Tensor(a2!) out" in str(getattr(ops, name).default._schema)


def test_eager_refusals_name_the_argument():
    with pytest.raises(ArgumentError, match=r"^softmax: x is on cpu; ptxgen kernels run on "
                                            r"CUDA tensors \(move it with x.cuda\(\)\)$"):
        softmax(torch.zeros(2, 3))
    with pytest.raises(ArgumentError, match=r"^rmsnorm: x must be a torch tensor, got list$"):
        rmsnorm([1.0], None)
    with FakeTensorMode():
        x = torch.empty(4, 8, device="cuda", dtype=torch.bfloat16)
        with pytest.raises(ArgumentError, match=r"^softmax: x is a 0-d tensor"):
            softmax(torch.empty((), device="cuda"))
        with pytest.raises(ArgumentError, match=r"^softmax: out has shape \(4, 9\)"):
            softmax(x, out=torch.empty(4, 9, device="cuda", dtype=torch.bfloat16))
        with pytest.raises(ArgumentError, match=r"^rmsnorm: out has dtype float32, the result "
                                                r"is bfloat16$"):
            rmsnorm(x, None, out=torch.empty(4, 8, device="cuda"))
        with pytest.raises(ArgumentError, match=r"^gemm: b is on cpu"):
            gemm(x, torch.empty(8, 8, dtype=torch.bfloat16))


def test_fullgraph_compile_keeps_the_ops_between_torch_ops():
    def f(a, b, w):
        h = gemm(a * 2, b)
        h = rmsnorm(h.float(), None)
        h = rmsnorm(h.to(torch.bfloat16), w, 1e-5)
        out = torch.empty_like(h)
        softmax(h + 1, out=out)
        return softmax(out).sum(-1)

    rec = Recorder()
    with FakeTensorMode():
        a = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(32, 64, device="cuda", dtype=torch.bfloat16)
        w = torch.empty(32, device="cuda", dtype=torch.bfloat16)
        r = torch.compile(f, fullgraph=True, backend=rec)(a, b, w)
        assert r.shape == (64,) and r.dtype == torch.bfloat16
    code = rec.code[0]
    for op in ("torch.ops.ptxgen.gemm(", "torch.ops.ptxgen.rmsnorm(float_1, None, eps = 1e-06)",
               "torch.ops.ptxgen.rmsnorm(to, l_w_, eps = 1e-05)",
               "torch.ops.ptxgen.softmax_out(add, out)", "torch.ops.ptxgen.softmax(out)"):
        assert op in code, code


def test_fullgraph_compile_of_gemm_over_leading_dimensions():
    """gemm(x (B, S, K), w) inside torch.compile: a reshape around the 2-D op, with out= too
    (a non-contiguous out, written through a copy, is a GPU test: fake CUDA copies need
    torch's CUDA build)."""
    def f(x, w, out):
        gemm(x, w, out)
        return gemm(x, w) + out

    rec = Recorder()
    with FakeTensorMode():
        x = torch.empty(2, 5, 64, device="cuda", dtype=torch.bfloat16)
        w = torch.empty(32, 64, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(2, 5, 32, device="cuda", dtype=torch.bfloat16)
        r = torch.compile(f, fullgraph=True, backend=rec)(x, w, out)
        assert r.shape == (2, 5, 32)
    code = rec.code[0]
    assert "torch.ops.ptxgen.gemm_out(" in code and "torch.ops.ptxgen.gemm(" in code, code


def test_fake_results_have_the_eager_shapes_and_dtypes():
    with FakeTensorMode():
        a8 = torch.empty(48, 64, device="cuda", dtype=torch.float8_e4m3fn)
        b8 = torch.empty(40, 64, device="cuda", dtype=torch.float8_e4m3fn)
        s = torch.empty(1, device="cuda")
        d = torch.ops.ptxgen.gemm(a8, b8, s, s)
        assert d.shape == (48, 40) and d.dtype == torch.bfloat16
        x = torch.empty(2, 3, 100, device="cuda", dtype=torch.float16)
        assert torch.ops.ptxgen.rmsnorm(x).shape == (2, 3, 100)
        assert torch.ops.ptxgen.softmax(x).dtype == torch.float16


def test_compile_refuses_at_trace_time_with_the_eager_message():
    with FakeTensorMode():
        x = torch.empty((), device="cuda")
        with pytest.raises(Exception, match=r"softmax: x is a 0-d tensor"):
            torch.compile(lambda t: softmax(t), fullgraph=True, backend=Recorder())(x)
        x = torch.empty(2, 65536, device="cuda")
        with pytest.raises(Exception, match=r"rmsnorm: early_weight=True keeps the weight row "
                                            r"in registers, but a row of 65536 elements"):
            torch.compile(lambda t: rmsnorm(t, None, early_weight=True), fullgraph=True,
                          backend=Recorder())(x)
        with pytest.raises(Exception, match=r"softmax: per_thread = 0: a positive int"):
            torch.compile(lambda t: softmax(t, per_thread=0), fullgraph=True,
                          backend=Recorder())(x)


def test_compile_passes_the_kernel_options_to_the_ops():
    """per_thread / early_weight reach torch.ops.ptxgen.* as gemm's BN does, not dropped."""
    def f(x, w, out):
        rmsnorm(x, w, per_thread=8, early_weight=False, out=out)
        return softmax(rmsnorm(x, w, 1e-5, per_thread=32), per_thread=64) + out

    rec = Recorder()
    with FakeTensorMode():
        x = torch.empty(4, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.empty(4096, device="cuda", dtype=torch.bfloat16)
        r = torch.compile(f, fullgraph=True, backend=rec)(x, w, torch.empty_like(x))
        assert r.shape == (4, 4096)
    code = rec.code[0]
    for op in ("torch.ops.ptxgen.rmsnorm_out(l_x_, l_w_, l_out_, eps = 1e-06, per_thread = 8, "
               "early_weight = False)",
               "torch.ops.ptxgen.rmsnorm(l_x_, l_w_, eps = 1e-05, per_thread = 32)",
               "torch.ops.ptxgen.softmax(rmsnorm, per_thread = 64)"):
        assert op in code, code
    rec = Recorder()           # a knob that varies between calls: a SymInt at trace time
    g = torch.compile(lambda t, pt: softmax(t, per_thread=pt), fullgraph=True, backend=rec,
                      dynamic=True)
    with FakeTensorMode():
        x = torch.empty(4, 4096, device="cuda", dtype=torch.bfloat16)
        assert g(x, 8).shape == g(x, 16).shape == (4, 4096)
    assert "torch.ops.ptxgen.softmax(l_t_, per_thread = l_pt_)" in rec.code[-1], rec.code


def test_rmsnorm_fake_builds_the_kernel_the_call_will_use(monkeypatch):
    """With kernel options, the fake checks them by building the kernel: the one of the call's
    weight (none, or its dtype), asked as the wrapper asks make, so the call finds it cached."""
    mod = sys.modules["ptxgen.kernels._ops"]
    asked = []
    monkeypatch.setattr(mod, "rmsnorm_make", lambda n, dtype, **kw: asked.append((n, dtype, kw)))
    ops = torch.ops.ptxgen
    with FakeTensorMode():
        x = torch.empty(4, 1024, device="cuda", dtype=torch.bfloat16)
        w = torch.empty(1024, device="cuda", dtype=torch.float32)
        ops.rmsnorm(x, None, per_thread=8)
        ops.rmsnorm_out(x, w, torch.empty_like(x), early_weight=False)
    assert asked == [(1024, "bfloat16", {"weighted": False, "weight_dtype": None,
                                          "per_thread": 8}),
                     (1024, "bfloat16", {"weighted": True, "weight_dtype": "float32",
                                          "early_weight": False})]


def test_torch_op_of_a_user_kernel_traces_under_fullgraph():
    N = pg.var("N")

    @pg.kernel(grid=lambda a: ((a["N"] + 127) // 128,), block=(128,), name="scale_by")
    def scale_by(x: pg.Tensor((N,), pg.float32), y: pg.Tensor((N,), pg.float32),
                 s: pg.float32):
        i = pg.let(pg.cta_id() * 128 + pg.thread_id(128))
        with pg.if_(i < N):
            y[i] = x[i] * s

    op = pg.torch_op(scale_by, name="ptxgen_test::scale_by", mutates_args=("y",))
    assert str(torch.ops.ptxgen_test.scale_by.default._schema) == \
        "ptxgen_test::scale_by(Tensor x, Tensor(a1!) y, float s) -> ()"

    def f(x):
        y = torch.empty_like(x)
        op(x + 1, y, 2.0)
        return y * 3

    rec = Recorder()
    with FakeTensorMode():
        x = torch.empty(1000, device="cuda")
        assert torch.compile(f, fullgraph=True, backend=rec)(x).shape == (1000,)
    assert "torch.ops.ptxgen_test.scale_by.default(add, y, 2.0)" in rec.code[0]


@pytest.mark.parametrize("torch_seen", [True, False], ids=["torch_seen", "kernel_made_first"])
def test_bare_kernel_call_is_one_graph_break_and_launches_eagerly(monkeypatch, torch_seen):
    """Dynamo stops at the kernel call (it never traces the launch machinery) and the launch
    runs outside the trace.  kernel_made_first: no kernel was made or launched since `import
    torch`, so the call finds torch itself."""
    from ptxgen.builder import kernel as K
    from support.compile_cases import add_one_between_torch_ops

    launched = []

    def launch_on_cpu(self, args, kw):     # the launch's stand-in: what the kernel computes
        launched.append(torch.compiler.is_compiling())
        args[1].copy_(args[0] + 1)

    monkeypatch.setattr(K.Kernel, "_launch", launch_on_cpu)
    _, f = add_one_between_torch_ops(torch)
    if not torch_seen:       # as if the kernel had been made before `import torch`
        monkeypatch.setattr(K, "_TORCH", [None])
    x = torch.randn(777)
    torch._dynamo.reset()
    ex = torch._dynamo.explain(f)(x)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1)
    assert "skipped" in str(ex.break_reasons[0].reason)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, backend="eager")(x), (x * 2 + 1) * 3)
    assert launched == [False, False]     # never traced: each launch ran eagerly


def test_torch_op_refusals():
    @pg.kernel(grid=(1,), block=(32,), name="touch")
    def touch(y: pg.Tensor((32,), pg.float32)):
        t = pg.thread_id(32)
        y[t] = 1.0

    with pytest.raises(pg.PtxgenError, match=r"^pg.torch_op: mutates_args names 'z', which is "
                                             r"not a tensor parameter of kernel 'touch' \(its "
                                             r"tensors: y\)$"):
        pg.torch_op(touch, name="ptxgen_test::touch", mutates_args=("z",))
    with pytest.raises(pg.PtxgenError, match=r"^pg.torch_op: kernel 'touch' returns nothing; "):
        pg.torch_op(touch, name="ptxgen_test::touch")
    with pytest.raises(pg.PtxgenError, match=r"^pg.torch_op: name must be 'namespace::op', "
                                             r"got 'touch'$"):
        pg.torch_op(touch, name="touch", mutates_args=("y",))


def test_readme_torch_op_recipe_runs_as_pasted():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = text.index("```python\n", text.index("Your own kernel as a torch op")) + 10
    env: dict = {}
    exec(compile(text[start:text.index("```", start)], "README.md", "exec"), env)
    assert str(torch.ops.mylib.scale.default._schema) == \
        "mylib::scale(Tensor x, Tensor(a1!) y, float s) -> ()"
    rec = Recorder()
    with FakeTensorMode():
        x = torch.empty(300, device="cuda")
        g = torch.compile(env["f"].__wrapped__ if hasattr(env["f"], "__wrapped__") else
                          env["f"]._torchdynamo_orig_callable, fullgraph=True, backend=rec)
        assert g(x).shape == (300,)
    assert "torch.ops.mylib.scale.default(sin, y, 2.0)" in rec.code[0]


# ---- the eager wrappers on CPU tensors, kernels replaced by torch stand-ins ----------------
class StandIn:
    """A kernel stand-in: checks what a launch would get ((rows, N) row-major, 16-byte
    aligned tensors; the grid) and computes the kernel's result with torch."""

    def __init__(self, fn, calls):
        self.fn, self.calls = fn, calls

    def __call__(self, *args, grid=None):
        for t in args:
            if isinstance(t, torch.Tensor) and t.dim():
                assert t.is_contiguous() and t.data_ptr() % 16 == 0
        self.calls.append((tuple(tuple(t.shape) if isinstance(t, torch.Tensor) else t
                                 for t in args), grid))
        self.fn(*args)

    def prepare(self, *args, grid=None):
        """Kernel.prepare's stand-in: the returned launch takes the tensors' addresses (ints)
        in their places, and reads them as tensors of the prepared metadata, (rows, N) for
        more than two dimensions, as the kernels' signatures have them."""
        metas = [(tuple(t.shape) if t.dim() <= 2 else (-1, t.shape[-1]), t.dtype, t.numel())
                 if isinstance(t, torch.Tensor) else None for t in args]

        def run(*ptrs):
            self(*[_tensor_at(p, *m) if m else p for p, m in zip(ptrs, metas)], grid=grid)
        return run


def _tensor_at(ptr, shape, dtype, numel):
    """The CPU tensor of `numel` elements at address `ptr` (shared memory, not a copy)."""
    import ctypes
    buf = (ctypes.c_char * (numel * dtype.itemsize)).from_address(ptr)
    return torch.frombuffer(buf, dtype=dtype).view(shape)


@pytest.fixture
def cpu_as_cuda(monkeypatch):
    """The wrappers' eager path on CPU tensors: the rules see cpu as cuda:0 and each kernel
    is a StandIn; returns the list of launches."""
    import sys
    from ptxgen.kernels import _checks
    S, R, G = (sys.modules[f"ptxgen.kernels.{m}"] for m in ("softmax", "rmsnorm", "gemm"))
    calls = []

    def meta(t):
        m = _checks.meta_of(t)
        return m._replace(device="cuda:0") if m.device == "cpu" else m

    def sm(x, y):
        y.copy_(torch.softmax(x.float(), -1).to(y.dtype))

    def rms(x, *rest):
        w, y, eps = rest if len(rest) == 3 else (None, *rest)
        r = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        y.copy_(r if w is None else r * w.float())

    def mm(a, b, d, sa, sb):
        r = (a.float() @ b.float().T) * (sa.item() * sb.item())
        d[:, :b.shape[0]].copy_(r.to(d.dtype))

    for mod in (S, R, G):
        monkeypatch.setattr(mod, "meta_of", meta)
        monkeypatch.setattr(mod, "_PLANS", {})
    monkeypatch.setattr(S, "make", lambda n, dtype, **kw: StandIn(sm, calls))
    monkeypatch.setattr(R, "make", lambda n, dtype, **kw: StandIn(rms, calls))
    monkeypatch.setattr(G, "_PATHS", [("sm90", lambda p, d: (True, ""),
                                       lambda p, d: StandIn(mm, calls), G._run_sm90)])
    monkeypatch.setattr(G, "_unit_scale", lambda dev: torch.ones(1))
    return calls


def _same(got, want):
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_softmax_eager_path(cpu_as_cuda):
    x = torch.randn(2, 3, 40)
    _same(softmax(x), torch.softmax(x, -1))
    assert cpu_as_cuda[-1] == (((6, 40), (6, 40)), (6,))      # viewed as (rows, N)
    x2 = torch.randn(5, 64)
    _same(softmax(x2), torch.softmax(x2, -1))
    assert cpu_as_cuda[-1] == (((5, 64), (5, 64)), (5,))
    nc = torch.randn(64, 10).T                                  # non-contiguous x
    _same(softmax(nc), torch.softmax(nc, -1))
    out = torch.full((64, 10), float("nan")).T                  # non-contiguous out
    assert softmax(nc, out=out) is out
    _same(out, torch.softmax(nc, -1))
    odd = torch.randn(1, 65)[:, 1:]                             # an unaligned view
    _same(softmax(odd), torch.softmax(odd, -1))
    off = torch.randn(200)[1:129].view(2, 64)                   # contiguous at a 4-byte offset
    _same(softmax(off), torch.softmax(off, -1))
    n = len(cpu_as_cuda)
    for shape in ((0, 8), (3, 0), (2, 0, 5)):
        e = torch.randn(shape)
        assert softmax(e).shape == torch.softmax(e, -1).shape
    assert len(cpu_as_cuda) == n                                # nothing launched


def test_softmax_over_any_dim(cpu_as_cuda):
    x = torch.randn(3, 5, 7)
    for d in (0, 1, -2, -3, 2, -1):   # the stand-in's rounding is torch's over the last dim
        y = softmax(x, dim=d)
        _same(y, torch.softmax(x.movedim(d, -1).contiguous(), -1).movedim(-1, d))
        assert y.is_contiguous()
    assert cpu_as_cuda[0] == (((35, 3), (35, 3)), (35,))     # dim 0 moved last: 35 rows of 3
    out = torch.full((3, 5, 7), float("nan"))
    assert softmax(x, out=out, dim=1) is out
    _same(out, softmax(x, dim=1))
    with pytest.raises(ArgumentError, match=r"^softmax: out has shape \(5, 3, 7\), the result "
                                            r"has shape \(3, 5, 7\)"):
        softmax(x, out=torch.empty(5, 3, 7), dim=0)
    with pytest.raises(ArgumentError, match=r"^softmax: dim must be an int in \[-3, 3\) for a "
                                            r"3-d tensor, got 3$"):
        softmax(x, dim=3)
    with pytest.raises(ArgumentError, match="^softmax: unknown keyword argument 'axis'"):
        softmax(x, axis=0)
    with pytest.raises(ArgumentError, match=r"^softmax: per_thread = \[8\]: a kernel option is "
                                            r"a plain value"):
        softmax(x, per_thread=[8])


def test_shares_memory_spans():
    from ptxgen.kernels._checks import shares_memory
    buf = torch.zeros(6, 8)
    x, shifted, apart = buf[:4], buf[1:5], buf[4:]
    assert not shares_memory(x, (x,), in_place=x)          # an exact alias written in place
    assert shares_memory(x, (x,))                          # ... unless the op reads it all first
    assert shares_memory(shifted, (x,), in_place=x)        # a partial overlap
    assert not shares_memory(apart, (x, None))
    assert shares_memory(buf[:, ::2], (buf[:, 1::2],))     # interleaved: spans meet (conservative)
    assert not shares_memory(buf[:0], (buf,))              # nothing written
    assert shares_memory(x.T, (x,), in_place=x)            # same bytes, other strides


def test_overlapping_out_is_computed_aside(cpu_as_cuda, monkeypatch):
    """A kernel that writes row r before it reads row r + 1: an out= one row past x would
    read rows already written, so the wrapper computes into a fresh tensor and copies; out= x
    itself (each row read before written) goes straight to the kernel."""
    import sys
    S = sys.modules["ptxgen.kernels.softmax"]
    seen = []

    def rows_in_order(x, y):
        seen.append((x.data_ptr(), y.data_ptr()))
        for r in range(x.shape[0]):
            y[r] = torch.softmax(x[r].float(), -1).to(y.dtype)

    monkeypatch.setattr(S, "make", lambda n, dtype, **kw: StandIn(rows_in_order, cpu_as_cuda))
    buf = torch.randn(5, 64)
    want = torch.softmax(buf[:4], -1)
    assert softmax(buf[:4], out=buf[1:]) is not None
    _same(buf[1:], want)
    assert seen[-1][1] != buf[1:].data_ptr()               # computed aside, then copied
    x = torch.randn(4, 64)
    want = torch.softmax(x, -1)
    assert softmax(x, out=x) is x
    _same(x, want)
    assert seen[-1] == (x.data_ptr(), x.data_ptr())         # in place: no copy

    G = sys.modules["ptxgen.kernels.gemm"]

    def mm_rows_in_order(a, b, d, sa, sb):
        for r in range(a.shape[0]):
            d[r, :b.shape[0]] = (a[r].float() @ b.float().T).to(d.dtype)

    monkeypatch.setattr(G, "_PATHS", [("sm90", lambda p, d: (True, ""),
                                       lambda p, d: StandIn(mm_rows_in_order, cpu_as_cuda),
                                       G._run_sm90)])
    monkeypatch.setattr(G, "_PLANS", {})
    buf = torch.randint(-2, 3, (40,)).to(torch.bfloat16)
    a, out = buf[:32].view(4, 8), buf[8:40].view(4, 8)     # out's row r is a's row r + 1
    b = torch.randint(-2, 3, (8, 8)).to(torch.bfloat16)
    want = (a.float() @ b.float().T).to(torch.bfloat16)
    assert gemm(a, b, out) is out
    _same(out, want)


def test_wrappers_train_through_their_ops(cpu_as_cuda, monkeypatch):
    """Inputs that require grad under grad mode go through torch.ops.ptxgen.*, whose autograd
    formulas give torch's gradients; the forward is still the kernel (a stand-in here)."""
    torch.manual_seed(0)
    x = torch.randn(3, 5, 64)
    g = torch.randn(3, 5, 64)
    n = len(cpu_as_cuda)
    for got, want in zip(grads(softmax, x, g=g), grads(lambda t: torch.softmax(t, -1), x, g=g)):
        torch.testing.assert_close(got, want)
    assert len(cpu_as_cuda) == n + 1                       # the kernel made the forward
    y0 = grads(lambda t: softmax(t, dim=0), x, g=g)[0]     # another dim: moved, then the op
    torch.testing.assert_close(y0, grads(lambda t: torch.softmax(t, 0), x, g=g)[0])
    w = torch.rand(64) + 0.5
    for got, want in zip(grads(lambda a, b: rmsnorm(a, b, 1e-5), x, w, g=g),
                         grads(lambda a, b: rms_ref(a, b, 1e-5), x, w, g=g)):
        torch.testing.assert_close(got, want)
    for got, want in zip(grads(lambda a, b: rmsnorm(a, b, 1e-5, per_thread=8,   # knobs too
                                                    early_weight=False), x, w, g=g),
                         grads(lambda a, b: rms_ref(a, b, 1e-5), x, w, g=g)):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(grads(lambda t: softmax(t, per_thread=8), x, g=g)[0],
                               grads(lambda t: torch.softmax(t, -1), x, g=g)[0])
    asked = []                                     # the knobs reach the op's kernel
    for mod in (sys.modules["ptxgen.kernels.softmax"], sys.modules["ptxgen.kernels.rmsnorm"]):
        monkeypatch.setattr(mod, "make", lambda n, dtype, make=mod.make, **kw:
                            asked.append(kw) or make(n, dtype, **kw))
    softmax(x.clone().requires_grad_(), per_thread=8).sum().backward()
    rmsnorm(x.clone().requires_grad_(), w, early_weight=False).sum().backward()
    assert {"per_thread": 8} in asked
    assert {"weighted": True, "weight_dtype": "float32", "early_weight": False} in asked
    torch.testing.assert_close(grads(lambda a: rmsnorm(a, None, 1e-5), x, g=g)[0],
                               grads(lambda a: rms_ref(a, None, 1e-5), x, g=g)[0])
    a, b = torch.randn(30, 16).to(torch.bfloat16), torch.randn(24, 16).to(torch.bfloat16)
    gd = torch.randn(30, 24).to(torch.bfloat16)
    for got, want in zip(grads(gemm, a, b, g=gd), grads(lambda p, q: p @ q.T, a, b, g=gd)):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    a8, b8 = (t.to(torch.float8_e4m3fn).requires_grad_() for t in (a, b))
    d8 = gemm(a8, b8, scale_a=torch.ones(1), scale_b=torch.ones(1))
    with pytest.raises(ArgumentError, match=r"^gemm: float8_e4m3fn inputs have no backward"):
        d8.float().sum().backward()
    with torch.no_grad():                                   # inference: the kernel directly
        assert not softmax(x.requires_grad_()).requires_grad
    x.requires_grad_(False)
    with pytest.raises(ArgumentError, match=r"^softmax: out= does not support autograd and an "
                                            r"input requires grad; drop out=, or run under "
                                            r"torch.no_grad\(\)$"):
        softmax(x.clone().requires_grad_(), out=torch.empty_like(x))
    with pytest.raises(ArgumentError, match=r"^softmax: out= does not support autograd"):
        softmax(x.clone().requires_grad_(), out=torch.empty_like(x), dim=0)


def test_opcheck_with_gradients(cpu_as_cuda, attention_stand_in, monkeypatch):
    """torch.library.opcheck of the functional ops on inputs that require grad (their schema,
    fake implementation, autograd registration, and aot_autograd's forward and backward with
    dynamic shapes against eager), on CPU tensors with stand-in kernels."""
    import sys
    O = sys.modules["ptxgen.kernels._ops"]
    from ptxgen.kernels import _checks
    monkeypatch.setattr(O, "meta_of", lambda t: _checks.meta_of(t)._replace(device="cuda:0"))
    bf = torch.bfloat16
    x, w = torch.randn(3, 64, requires_grad=True), torch.rand(64, requires_grad=True)
    a, b = (torch.randn(*s).to(bf).requires_grad_() for s in ((32, 16), (24, 16)))
    q = torch.randn(1, 4, 40, 64).to(bf).requires_grad_()
    kv = torch.randn(1, 2, 50, 64).to(bf).requires_grad_()
    ops = torch.ops.ptxgen
    for op, args, kw in ((ops.softmax.default, (x,), {}),
                         (ops.softmax.default, (x,), {"per_thread": 8}),
                         (ops.rmsnorm.default, (x, w), {"eps": 1e-5}),
                         (ops.rmsnorm.default, (x, w), {"per_thread": 8, "early_weight": False}),
                         (ops.gemm.default, (a, b), {}),
                         (ops.attention.default, (q, kv, kv), {"causal": True})):
        torch.library.opcheck(op, args, kw, test_utils=(
            "test_schema", "test_autograd_registration", "test_faketensor",
            "test_aot_dispatch_dynamic"))


def test_attention_trains_through_its_op(cpu_as_cuda, attention_stand_in):
    F = torch.nn.functional
    torch.manual_seed(1)
    bf = torch.bfloat16
    q = torch.randn(1, 4, 40, 64).to(bf)
    k, v = torch.randn(1, 2, 50, 64).to(bf), torch.randn(1, 2, 50, 64).to(bf)
    g = torch.randn(1, 4, 40, 64).to(bf)
    for kw in ({}, {"causal": True, "scale": 0.2}):
        want = grads(lambda a, b, c: F.scaled_dot_product_attention(
            a, b, c, is_causal=kw.get("causal", False), scale=kw.get("scale"), enable_gqa=True),
            q, k, v, g=g)
        for got, w in zip(grads(lambda a, b, c: attention(a, b, c, **kw), q, k, v, g=g), want):
            torch.testing.assert_close(got, w)
    o, lse = attention(q.clone().requires_grad_(), k, v, return_lse=True)
    assert o.requires_grad and not lse.requires_grad       # lse is read, not trained


def test_softmax_dtype_casts_first_as_torch(cpu_as_cuda):
    x = torch.randn(4, 64).to(torch.bfloat16)
    y = softmax(x, dtype=torch.float32)
    assert y.dtype == torch.float32
    _same(y, torch.softmax(x, -1, dtype=torch.float32))
    assert softmax(x, dtype=torch.bfloat16).dtype == torch.bfloat16     # already x's: no cast
    out = torch.empty(4, 64)
    assert softmax(x, out=out, dtype=torch.float32) is out
    with pytest.raises(ArgumentError, match=r"^softmax: out has dtype float32, the result is "
                                            r"bfloat16"):
        softmax(x, out=out)
    with pytest.raises(ArgumentError, match=r"^softmax: dtype torch.float64; it takes float16, "
                                            r"bfloat16, float32$"):
        softmax(x, dtype=torch.float64)


def test_scalar_arguments_are_checked_before_any_launch(cpu_as_cuda):
    x = torch.randn(4, 32)
    for eps, msg in (("a", "must be a real number, got 'a'"), (float("nan"), "must be finite")):
        with pytest.raises(ArgumentError, match=f"^rmsnorm: eps {msg}"):
            rmsnorm(x, None, eps)
    with pytest.raises(ArgumentError, match="^rmsnorm: unknown keyword argument 'dim'"):
        rmsnorm(x, dim=0)
    _same(rmsnorm(x, None, 1), rmsnorm(x, None, 1.0))        # an int eps is a real number
    assert not [c for c in cpu_as_cuda if c[0][-1] != 1.0]


def _sdpa_stand_in(causal, group, calls, D=None):
    """The attention kernel's contract in torch: out = softmax(q k^T * s) v and lse (natural
    log) into its first Sq of SqPad columns, with s = sl2 / log2(e); K/V head h // group.
    The kernel of width D reads narrower tensors as zero-filled past their edge."""
    def attn(q, k, v, out, lse, sl2):
        calls.append(("attention", tuple(q.shape), tuple(lse.shape), causal, group, D))
        s = sl2 / 1.4426950408889634
        kk = k.float().repeat_interleave(group, 1)
        vv = v.float().repeat_interleave(group, 1)
        sc = q.float() @ kk.transpose(-1, -2) * s
        if causal:
            Sq, Skv = sc.shape[-2:]
            sc = sc.masked_fill(torch.ones(Sq, Skv, dtype=torch.bool).triu(1), -math.inf)
        out.copy_((torch.softmax(sc, -1) @ vv).to(out.dtype))
        lse[..., :sc.shape[-2]] = torch.logsumexp(sc, -1)
    return attn


@pytest.fixture
def attention_stand_in(cpu_as_cuda, monkeypatch):
    """attention's eager path on CPU tensors: its rules see cpu as cuda:0 and its kernel is an
    SDPA stand-in (launches go to cpu_as_cuda)."""
    import sys
    A = sys.modules["ptxgen.kernels.attention"]
    from ptxgen.kernels import _checks
    monkeypatch.setattr(A, "meta_of", lambda t: _checks.meta_of(t)._replace(device="cuda:0"))
    monkeypatch.setattr(A, "kernel_for", lambda dt, D, causal, group, prescale=False,
                        narrow=False: StandIn(_sdpa_stand_in(causal, group, cpu_as_cuda, D),
                                              cpu_as_cuda))


def test_attention_eager_path(cpu_as_cuda, attention_stand_in):
    F = torch.nn.functional
    bf = torch.bfloat16
    q = torch.randn(2, 4, 100, 64).to(bf)
    k, v = torch.randn(2, 2, 77, 64).to(bf), torch.randn(2, 2, 77, 64).to(bf)

    def sdpa_on(q, k, v, **kw):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True,
                                              **kw).to(bf)

    def sdpa(**kw):
        return sdpa_on(q, k, v, **kw)

    want = sdpa()
    torch.testing.assert_close(attention(q, k, v), want)
    assert ("attention", (2, 4, 100, 64), (2, 4, 128), False, 2, 64) in cpu_as_cuda  # lse padded
    o, lse = attention(q, k, v, causal=True, scale=0.3, return_lse=True)
    torch.testing.assert_close(o, sdpa(is_causal=True, scale=0.3))
    assert lse.shape == (2, 4, 100) and lse.is_contiguous()
    out = torch.full_like(q, float("nan"))
    assert attention(q, k, v, out=out) is out
    torch.testing.assert_close(out, want)
    bshd = q.transpose(1, 2).contiguous().transpose(1, 2)      # a (B, S, H, D) tensor's view
    strided_out = torch.full((2, 100, 4, 64), float("nan")).to(bf).transpose(1, 2)
    assert attention(bshd, k[:, :, 1:].contiguous()[:, :, :76], v[:, :, :76],
                     out=strided_out) is strided_out
    torch.testing.assert_close(strided_out, sdpa_on(q, k[:, :, 1:77], v[:, :, :76]))
    calls = [c for c in cpu_as_cuda if c[0] == "attention"]
    assert all(c[1] == (2, 4, 100, 64) for c in calls)
    n = len(cpu_as_cuda)
    o, lse = attention(q, k[:, :, :0], v[:, :, :0], return_lse=True)   # no keys: zeros, -inf
    assert not o.abs().sum() and torch.isneginf(lse).all() and lse.shape == (2, 4, 100)
    for shape in ((0, 4, 8, 64), (2, 0, 8, 64), (2, 4, 0, 64)):
        e = torch.randn(shape).to(bf)
        assert attention(e, e, e).shape == shape
    assert len(cpu_as_cuda) == n                                  # nothing launched


def test_attention_runs_other_head_dims_on_the_next_kernel_width(cpu_as_cuda,
                                                                attention_stand_in):
    """D = 40 and D = 36 run the D = 64 kernel, whose extra columns are zeros (no score
    changes; scaled by 1/sqrt(D)): 40-element rows are read in place (TMA's zero fill past
    the edge), 36-element rows (72 bytes, off TMA's 16-byte pitch) as padded copies, whose
    first D columns of o are the result, also into a strided out=.  D = 0 gives an empty o
    and the lse of all-zero scores."""
    F = torch.nn.functional
    bf = torch.bfloat16
    for D, launched in ((40, (1, 2, 30, 40)), (36, (1, 2, 30, 64))):
        q, k, v = (torch.randn(1, 2, n, D).to(bf) for n in (30, 50, 50))
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(bf)
        o = attention(q, k, v)
        assert o.shape == (1, 2, 30, D) and o.is_contiguous()
        torch.testing.assert_close(o, want)
        assert cpu_as_cuda[-1] == ("attention", launched, (1, 2, 128), False, 1, 64)
        out = torch.full((1, 30, 2, D), float("nan")).to(bf).transpose(1, 2)
        assert attention(q, k, v, out=out) is out
        torch.testing.assert_close(out, want)
    e, lse = attention(*(t[..., :0] for t in (q, k, v)), return_lse=True)
    assert e.shape == (1, 2, 30, 0)
    torch.testing.assert_close(lse, torch.full((1, 2, 30), math.log(50)))


def test_blockscaled_eager_path(monkeypatch):
    """gemm_blockscaled's rules and its padded store on CPU tensors: a stand-in kernel does the
    block-scaled product in float64."""
    import importlib
    BS = importlib.import_module("ptxgen.kernels.gemm_blockscaled")
    calls, scale_ptrs = [], []

    def product(a, b, d, sat, sbt):     # the ring kernel's scales: transposed, padded
        scale_ptrs.append((sat.data_ptr(), sbt.data_ptr()))
        M, NB = a.shape[0], -(-b.shape[0] // 128)
        assert sat.shape[1] % 4 == 0 and sbt.shape[1] % 4 == 0
        r = blockscaled_ref(a, b, sat[:, :M].T, sbt[:, :NB].T)
        d[:, :r.shape[1]].copy_(r.to(d.dtype))

    monkeypatch.setattr(BS, "cuda_tensors", lambda op, *named: None)
    monkeypatch.setattr(BS, "sm_count", lambda device: 132)
    def kernel_for(*config):
        assert config == (4, 132, False, False, 1, "ring", 192), config
        return StandIn(product, calls)
    monkeypatch.setattr(BS, "kernel_for", kernel_for)
    f8 = torch.float8_e4m3fn
    a = torch.randint(-3, 4, (40, 272)).to(f8)
    b = torch.randint(-3, 4, (130, 272)).to(f8)
    sa, sb = torch.rand(40, 3) + 0.5, torch.rand(2, 3) + 0.5
    d = BS.gemm_blockscaled(a, b, sa, sb)
    want = blockscaled_ref(a, b, sa, sb).to(torch.bfloat16)
    assert d.dtype == torch.bfloat16 and torch.equal(d, want)
    assert calls[-1][0][2] == (40, 136)             # N = 130 stored through a padded tile
    out = torch.full((40, 130), float("nan"), dtype=torch.bfloat16)
    assert BS.gemm_blockscaled(a, b, sa, sb, out) is out and torch.equal(out, want)
    n = len(calls)
    assert BS.gemm_blockscaled(a[:0], b, sa[:0], sb).shape == (0, 130)
    assert not BS.gemm_blockscaled(a[:, :0], b[:, :0], sa[:, :0], sb[:, :0]).float().any()
    assert len(calls) == n
    # scales stored column-major, columns padded to 4 rows (DeepGEMM's layout): read in place
    ca, cb = BS.column_major_scales(sa), BS.column_major_scales(sb)
    assert ca.shape == (40, 3) and ca.stride() == (1, 40) and cb.stride() == (1, 4)
    assert torch.equal(BS.gemm_blockscaled(a, b, ca, cb), want)
    assert scale_ptrs[-1] == (ca.data_ptr(), cb.data_ptr())
    col = sa.T.contiguous().T      # pitch 40, a multiple of 4: also read in place
    assert torch.equal(BS.gemm_blockscaled(a, b, col, sb), want)
    assert scale_ptrs[-1][0] == col.data_ptr()
    for args, msg in (
            ((a, b, torch.rand(40, 2), sb), r"^scale_a: float32 of shape \(40, 3\)"),
            ((a, b, torch.rand(3, 41).T[:40], sb), r"^scale_a: a contiguous 2-D tensor \(or "
             r"column_major_scales' layout\), got shape \(40, 3\), strides \(1, 41\)$"),
            ((a, b, sa, sb.T.contiguous().T), r"^scale_b: a contiguous 2-D tensor \(or "
             r"column_major_scales' layout\), got shape \(2, 3\), strides \(1, 2\)$"),
            ((a, b, sa, sb.double()), r"^scale_b: float32 of shape \(2, 3\)"),
            ((a[:, :100].contiguous(), b[:, :100].contiguous(), sa[:, :1].contiguous(),
              sb[:, :1].contiguous()), r"^K = 100: a row of 100 bytes"),
            ((a, b[:, :256].contiguous(), sa, sb), r"^a \(M, K\) @ b \(N, K\)\^T"),
            ((a.to(torch.bfloat16), b, sa, sb), r"^a and b: float8_e4m3fn"),
            ((a, b, sa, sb, torch.empty(40, 130)), r"^out: a contiguous \(40, 130\) bfloat16")):
        with pytest.raises(ArgumentError, match=msg):
            BS.gemm_blockscaled(*args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rmsnorm_eager_path(cpu_as_cuda, dtype):
    x = torch.randn(2, 3, 32).to(dtype)
    w = (torch.rand(32) + 0.5).to(dtype)
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5))
    _same(rmsnorm(x, w, 1e-5), (ref * w.float()).to(dtype))
    assert cpu_as_cuda[-1] == (((6, 32), (32,), (6, 32), 1e-5), (6,))
    _same(rmsnorm(x, None, 1e-5), ref.to(dtype))
    assert cpu_as_cuda[-1] == (((6, 32), (6, 32), 1e-5), (6,))
    out = torch.empty(3, 2, 32, dtype=dtype).transpose(0, 1)   # non-contiguous (2, 3, 32)
    assert rmsnorm(x, w, 1e-5, out=out) is out
    _same(out, (ref * w.float()).to(dtype))
    assert rmsnorm(torch.randn(0, 32).to(dtype), w).shape == (0, 32)
    for wdt in (torch.float32, torch.bfloat16, torch.float16):    # as torch: x's dtype out
        w2 = w.to(wdt)
        _same(rmsnorm(x, w2, 1e-5), (ref * w2.float()).to(dtype))


def test_gemm_eager_path(cpu_as_cuda):
    def ints(*s, dtype=torch.bfloat16):
        return torch.randint(-2, 3, s).to(dtype)

    a, b = ints(30, 7), ints(203, 7)                 # K padded to 8, N padded to 208
    want = (a.float() @ b.float().T).to(torch.bfloat16)
    _same(gemm(a, b), want)
    assert cpu_as_cuda[-1][0][:3] == ((30, 8), (203, 8), (30, 208))
    out = torch.full((203, 30), float("nan"), dtype=torch.bfloat16).T   # non-contiguous out
    assert gemm(a, b, out) is out
    _same(out, want)
    a8, b8 = ints(16, 32, dtype=torch.float8_e4m3fn), ints(24, 32, dtype=torch.float8_e4m3fn)
    sa, sb = torch.tensor([0.5]), torch.tensor(0.25)
    r = gemm(a8, b8, scale_a=sa, scale_b=sb)
    assert r.dtype == torch.bfloat16
    _same(r, (a8.float() @ b8.float().T * 0.125).to(torch.bfloat16))
    n = len(cpu_as_cuda)
    assert gemm(ints(0, 16), ints(5, 16)).shape == (0, 5)
    z = gemm(ints(4, 0), ints(5, 0))
    assert z.shape == (4, 5) and not z.float().abs().sum()
    assert len(cpu_as_cuda) == n


def test_gemm_of_leading_dimensions(cpu_as_cuda):
    """a (..., K) @ b (N, K)^T as torch's a @ b.T: the 2-D kernel over a's rows (a copy of
    them where a's strides have no (M, K) view); out= through its (M, N) view, or a copy
    where it is not contiguous."""
    def ints(*s):
        return torch.randint(-2, 3, s).to(torch.bfloat16)

    def want(a, b):
        return (a.float() @ b.float().T).to(torch.bfloat16)

    a, b = ints(2, 3, 16), ints(24, 16)
    _same(gemm(a, b), want(a, b))
    assert cpu_as_cuda[-1][0][:3] == ((6, 16), (24, 16), (6, 24))
    v = ints(16)
    assert gemm(v, b).shape == (24,)
    _same(gemm(v, b), want(v, b))
    at = ints(3, 2, 16).transpose(0, 1)                 # no (6, 16) view: rows copied
    _same(gemm(at, b), want(at, b))
    out = torch.full((2, 3, 24), float("nan"), dtype=torch.bfloat16)
    assert gemm(a, b, out) is out
    _same(out, want(a, b))
    out = torch.full((24, 3, 2), float("nan"), dtype=torch.bfloat16).permute(2, 1, 0)
    assert gemm(a, b, out) is out                       # not contiguous: written aside
    _same(out, want(a, b))
    n = len(cpu_as_cuda)
    assert gemm(ints(2, 0, 16), b).shape == (2, 0, 24)
    z = gemm(ints(2, 3, 0), ints(24, 0))
    assert z.shape == (2, 3, 24) and not z.float().abs().sum()
    assert len(cpu_as_cuda) == n
    with pytest.raises(ArgumentError, match=r"^gemm: a is a 0-d tensor; it needs at least 1 "
                                            r"dimension \(shape \(\.\.\., K\)\)$"):
        gemm(torch.tensor(1.0, dtype=torch.bfloat16), b)
    with pytest.raises(ArgumentError, match=r"^gemm: out has shape \(2, 3, 25\), the result "
                                            r"has shape \(2, 3, 24\); pass an out"):
        gemm(a, b, torch.empty(2, 3, 25, dtype=torch.bfloat16))
    for bad in (torch.empty(2, 3, 24), torch.empty(24, 3, 2).permute(2, 1, 0)):
        with pytest.raises(ArgumentError, match=r"^gemm: out has dtype float32, the result "
                                                r"is bfloat16$"):
            gemm(a, b, bad)
    with pytest.raises(ArgumentError, match=r"^gemm: b must be 2-D, got shape \(1, 24, 16\)"):
        gemm(a, b[None])


def test_gemm_takes_block_scales_through_the_blockscaled_kernel(cpu_as_cuda, monkeypatch):
    """gemm(a8, b8, scale_a=(M, KB), scale_b=(NB, KB)): the block-scaled path, with K padded
    to TMA's pitch (KB unchanged), N to the store's, the scales transposed for the ring or
    read in place (column_major_scales); one-element scales keep the per-tensor path."""
    import sys
    G = sys.modules["ptxgen.kernels.gemm"]
    BS = sys.modules["ptxgen.kernels.gemm_blockscaled"]
    ring = []

    def product(a, b, d, sat, sbt):     # the ring kernel's operands: scales transposed
        ring.append((sat.data_ptr(), sbt.data_ptr()))
        M, NB = a.shape[0], -(-b.shape[0] // 128)
        r = blockscaled_ref(a, b, sat[:, :M].T, sbt[:, :NB].T)
        d[:, :r.shape[1]].copy_(r.to(d.dtype))

    monkeypatch.setattr(G, "_PATHS", [("blockscaled", G._blockscaled_accepts, None,
                                       G._run_blockscaled)] + G._PATHS)
    monkeypatch.setattr(BS, "sm_count", lambda device: 132)
    monkeypatch.setattr(BS, "kernel_for", lambda *config: StandIn(product, cpu_as_cuda))
    f8 = torch.float8_e4m3fn
    a = torch.randint(-3, 4, (40, 270)).to(f8)
    b = torch.randint(-3, 4, (130, 270)).to(f8)
    sa, sb = torch.rand(40, 3) + 0.5, torch.rand(2, 3) + 0.5
    want = blockscaled_ref(a, b, sa, sb).to(torch.bfloat16)
    d = gemm(a, b, scale_a=sa, scale_b=sb)
    assert d.dtype == torch.bfloat16 and torch.equal(d, want)
    assert cpu_as_cuda[-1][0][:3] == ((40, 272), (130, 272), (40, 136))
    out = torch.full((130, 40), float("nan"), dtype=torch.bfloat16).T   # non-contiguous out
    assert gemm(a, b, out, scale_a=sa, scale_b=sb) is out and torch.equal(out, want)
    a2, b2 = a[:, :256].contiguous(), b[:, :256].contiguous()
    ca, cb = BS.column_major_scales(sa[:, :2]), BS.column_major_scales(sb[:, :2])
    want2 = blockscaled_ref(a2, b2, sa[:, :2], sb[:, :2]).to(torch.bfloat16)
    assert torch.equal(gemm(a2, b2, scale_a=ca, scale_b=cb), want2)
    assert ring[-1] == (ca.data_ptr(), cb.data_ptr())           # read in place
    n = len(cpu_as_cuda)
    assert gemm(a[:0], b, scale_a=sa[:0], scale_b=sb).shape == (0, 130)
    assert len(cpu_as_cuda) == n
    one = torch.tensor([0.5])                         # per-tensor: the sm90 stand-in
    r = gemm(a2[:, :32].contiguous(), b2[:, :32].contiguous(), scale_a=one, scale_b=one)
    _same(r, (a2[:, :32].float() @ b2[:, :32].float().T * 0.25).to(torch.bfloat16))
    assert len(ring) == 3
    a3 = a.view(5, 8, 270)                              # (..., K): scales (..., KB)
    assert torch.equal(gemm(a3, b, scale_a=sa.view(5, 8, 3), scale_b=sb), want.view(5, 8, 130))
    with pytest.raises(ArgumentError, match=r"^gemm: scale_b is none but scale_a holds block "
                                            r"scales; scale_b's block scales are \(2, 3\)"):
        gemm(a, b, scale_a=sa)


def test_gemm_blockscaled_is_the_gemm_op_under_fullgraph_compile():
    import importlib
    BS = importlib.import_module("ptxgen.kernels.gemm_blockscaled")

    def f(a, b, sa, sb):
        return BS.gemm_blockscaled(a, b, sa, sb).float().sum(-1)

    rec = Recorder()
    with FakeTensorMode():
        a8 = torch.empty(48, 256, device="cuda", dtype=torch.float8_e4m3fn)
        b8 = torch.empty(200, 256, device="cuda", dtype=torch.float8_e4m3fn)
        sa, sb = torch.empty(48, 2, device="cuda"), torch.empty(2, 2, device="cuda")
        assert torch.compile(f, fullgraph=True, backend=rec)(a8, b8, sa, sb).shape == (48,)
    assert "torch.ops.ptxgen.gemm(" in rec.code[0], rec.code[0]


@pytest.mark.parametrize("dynamic", [False, True])
def test_fake_gemm_with_block_scales(dynamic):
    """The op's fake implementation reads block scales (static and symbolic shapes)."""
    def f(a, b, sa, sb):
        return gemm(a, b, scale_a=sa, scale_b=sb) * 2

    with FakeTensorMode():
        a8 = torch.empty(48, 300, device="cuda", dtype=torch.float8_e4m3fn)
        b8 = torch.empty(200, 300, device="cuda", dtype=torch.float8_e4m3fn)
        sa, sb = torch.empty(48, 3, device="cuda"), torch.empty(2, 3, device="cuda")
        d = torch.ops.ptxgen.gemm(a8, b8, sa, sb)
        assert d.shape == (48, 200) and d.dtype == torch.bfloat16
        r = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=dynamic)(a8, b8, sa,
                                                                                  sb)
        assert r.shape == (48, 200) and r.dtype == torch.bfloat16
        with pytest.raises(ArgumentError, match=r"^gemm: scale_b has shape \(3, 3\)"):
            torch.ops.ptxgen.gemm(a8, b8, sa, torch.empty(3, 3, device="cuda"))


@pytest.mark.parametrize("dynamic", [False, True])
def test_aot_eager_functionalizes_the_out_ops(dynamic):
    """aot_autograd over the fake implementations: the _out ops' mutations are
    functionalized, with static and symbolic shapes."""
    def f(a, b, w):
        h = gemm(a * 2, b)
        out = torch.empty_like(h)
        rmsnorm(h, w, out=out)
        o2 = torch.empty_like(h)
        softmax(out + 1, out=o2)
        return softmax(o2)

    with FakeTensorMode():
        a = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(32, 64, device="cuda", dtype=torch.bfloat16)
        w = torch.empty(32, device="cuda", dtype=torch.bfloat16)
        r = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=dynamic)(a, b, w)
        assert r.shape == (64, 32) and r.dtype == torch.bfloat16
