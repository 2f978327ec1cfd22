"""ptxgen.kernels with torch but no GPU: the custom ops are registered with their schemas, and
torch.compile(fullgraph=True) traces the wrappers and pg.torch_op ops over fake CUDA tensors
(their fake implementations run the wrappers' rules, so a bad argument is refused at trace
time with the eager message).  Skipped where torch is not installed (CPU CI)."""
import pytest

torch = pytest.importorskip("torch")

import ptxgen as pg  # noqa: E402
from ptxgen.kernels import ArgumentError, gemm, rmsnorm, softmax  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402


class Recorder:
    """A torch.compile backend that keeps the FX graph's code and runs nothing on a device."""

    def __init__(self):
        self.code = []

    def __call__(self, gm, example_inputs):
        self.code.append(gm.code)
        return gm.forward


def test_ops_are_registered_with_their_schemas():
    ops = torch.ops.ptxgen
    assert str(ops.softmax.default._schema) == "ptxgen::softmax(Tensor x) -> Tensor"
    assert str(ops.softmax_out.default._schema) == \
        "ptxgen::softmax_out(Tensor x, Tensor(a1!) out) -> ()"
    assert str(ops.rmsnorm.default._schema).startswith(
        "ptxgen::rmsnorm(Tensor x, Tensor? weight=None, float eps=")
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
