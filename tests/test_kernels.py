"""ptxgen.kernels without torch or a GPU: the package imports, its kernels dump PTX, and the
wrappers' rules (plain functions over (shape, dtype, device, contiguous)) refuse every bad
argument by name and plan every good one."""
import subprocess
import sys

import pytest

import ptxgen as pg
from ptxgen.kernels import ArgumentError
from ptxgen.kernels._checks import Meta, known_options, real, reduced_dim
from ptxgen.kernels.attention import attention_plan
from ptxgen.kernels.gemm import gemm_plan
from ptxgen.kernels.rmsnorm import rmsnorm_plan
from ptxgen.kernels.softmax import softmax_plan

CUDA = "cuda:0"


def T(shape, dtype="bfloat16", device=CUDA, contiguous=True):
    return Meta(tuple(shape), dtype, device, contiguous)


def test_package_exports_and_help_text():
    from ptxgen.kernels import gemm, rmsnorm, softmax
    for f, what in ((gemm, "TFLOP/s"), (rmsnorm, "GB/s"), (softmax, "torch.softmax")):
        assert what in f.__doc__ and "H200" in f.__doc__ and "dtypes:" in f.__doc__
    assert "attention" in dir(pg.kernels)
    assert pg.kernels.gemm is gemm


def test_import_needs_no_torch():
    code = ("import sys; sys.modules['torch'] = None\n"          # import torch fails
            "from ptxgen.kernels import gemm, rmsnorm, softmax\n"
            "from ptxgen.kernels.softmax import make\n"
            "assert '.entry softmax_float32_1024' in make(1024).ptx('sm_90a')\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("mod, name", [("gemm", "gemm_sm90_bfloat16_n256_s4"),
                                       ("rmsnorm", "rmsnorm_bfloat16_8192_t512"),
                                       ("softmax", "softmax_float32_8192_t512")])
def test_module_kernels_build(mod, name):
    import importlib
    m = importlib.import_module(f"ptxgen.kernels.{mod}")
    names = [k.name for k in m.KERNELS]
    assert name in names
    assert f".entry {name}(" in m.KERNELS[names.index(name)].ptx("sm_90a")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_rmsnorm_kernels_for_every_dtype_with_and_without_weight(dtype):
    from ptxgen.kernels.rmsnorm import make
    k = make(1024, dtype)
    assert [p.name for p in k.params if p.kind != "symbol"] == ["x", "weight", "y", "eps"]
    ptx = make(1024, dtype, weighted=False).ptx("sm_90a")
    assert f".entry rmsnorm_{dtype}_1024_t64_noweight(" in ptx
    nw = make(1024, dtype, weighted=False)
    assert [p.name for p in nw.params if p.kind != "symbol"] == ["x", "y", "eps"]
    if dtype == "float32":       # 16-byte loads of 4 floats
        assert "ld.global.v4.u32 " in ptx and "st.global.v4.u32 " in ptx


# ---- softmax ------------------------------------------------------------------------------
def test_softmax_plans_the_last_dimension_of_any_rank():
    assert softmax_plan(T((2, 3, 1000))) == (6, 1000, True)
    assert softmax_plan(T((7,), "float32")) == (1, 7, True)
    assert softmax_plan(T((0, 5), "float16")) == (0, 5, True)        # empty: nothing to launch
    assert softmax_plan(T((4, 0))) == (4, 0, True)
    assert softmax_plan(T((2, 8)), T((2, 8), contiguous=False)) == (2, 8, False)


@pytest.mark.parametrize("x, out, msg", [
    (T(()), None, "softmax: x is a 0-d tensor; it needs at least 1 dimension (shape (..., N))"),
    (T((4, 8), device="cpu"), None, "softmax: x is on cpu; ptxgen kernels run on CUDA tensors "
                                    "(move it with x.cuda())"),
    (T((4, 8), "int32"), None, "softmax: x has dtype int32; it takes float16, bfloat16, "
                               "float32"),
    (T((4, 8)), T((4, 9)), "softmax: out has shape (4, 9), the result has shape (4, 8); pass "
                           "an out of that shape or none"),
    (T((4, 8)), T((4, 8), "float32"), "softmax: out has dtype float32, the result is bfloat16"),
    (T((4, 8)), T((4, 8), device="cuda:1"), "softmax: out is on cuda:1, the inputs on cuda:0"),
    (T((4, 8)), T((4, 8), device="cpu"), "softmax: out is on cpu, the inputs on cuda:0"),
    ([1.0, 2.0], None, "softmax: x must be a torch tensor, got list"),
    (T((4, 8)), "y", "softmax: out must be a torch tensor, got str"),
])
def test_softmax_refusals_name_the_argument(x, out, msg):
    with pytest.raises(ArgumentError) as e:
        softmax_plan(x, out)
    assert str(e.value) == msg
    assert isinstance(e.value, pg.PtxgenError) and isinstance(e.value, ValueError)


# ---- attention ----------------------------------------------------------------------------
def test_attention_plans():
    q, kv = T((2, 8, 100, 128)), T((2, 2, 77, 128))
    assert attention_plan(q, kv, kv) == (2, 8, 2, 100, 77, 128, "bfloat16")
    f16 = T((1, 4, 0, 64), "float16")
    assert attention_plan(f16, f16, f16, f16) == (1, 4, 4, 0, 0, 64, "float16")
    strided = T((2, 8, 100, 128), contiguous=False)   # (B, S, H, D).transpose(1, 2): copied
    assert attention_plan(strided, kv, kv, strided)[0] == 2
    none = T((3, 0, 16, 64))                       # no heads: an empty result, as SDPA's
    assert attention_plan(none, none, none) == (3, 0, 0, 16, 16, 64, "bfloat16")


Q = T((2, 4, 64, 64))


@pytest.mark.parametrize("q, k, v, out, msg", [
    (T((4, 64, 64)), Q, Q, None, "attention: q must be 4-D, got shape (4, 64, 64)"),
    (T(Q.shape, "float32"), Q, Q, None, "attention: q has dtype float32; it takes bfloat16, "
                                        "float16"),
    (Q, T(Q.shape, device="cpu"), Q, None, "attention: k is on cpu; ptxgen kernels run on CUDA "
                                           "tensors (move it with k.cuda())"),
    (Q, Q, T(Q.shape, device="cuda:1"), None, "attention: v is on cuda:1 but q is on cuda:0; put "
                                              "every tensor on one device"),
    (Q, T(Q.shape, "float16"), T(Q.shape, "float16"), None,
     "attention: k and v must have q's dtype bfloat16, got float16 and float16"),
    (Q, Q, T((2, 4, 65, 64)), None, "attention: v must have k's shape (2, 4, 64, 64), got "
                                    "(2, 4, 65, 64)"),
    (Q, T((3, 4, 64, 64)), T((3, 4, 64, 64)), None,
     "attention: k has shape (3, 4, 64, 64), which does not match q's (2, 4, 64, 64) in the "
     "batch or head dimension"),
    (T((2, 4, 64, 320)), T((2, 4, 64, 320)), T((2, 4, 64, 320)), None,
     "attention: q has head dimension 320; the kernels take D up to 256 (64, 128, 192, 256, "
     "or padded to the next of them)"),
    (Q, T((2, 3, 64, 64)), T((2, 3, 64, 64)), None,
     "attention: k has 3 heads, which do not divide q's 4 (GQA needs Hq % Hkv == 0)"),
    (Q, T((2, 0, 64, 64)), T((2, 0, 64, 64)), None,
     "attention: k has 0 heads, which do not divide q's 4 (GQA needs Hq % Hkv == 0)"),
    (T((70000, 1, 8, 64)), T((70000, 1, 8, 64)), T((70000, 1, 8, 64)), None,
     "attention: q has shape (70000, 1, 8, 64); a launch takes at most 65535 batches and 65535 "
     "heads (CUDA's grid y and z: split the batch)"),
    (Q, Q, Q, T((2, 4, 64, 32)), "attention: out has shape (2, 4, 64, 32), the result has shape "
                                 "(2, 4, 64, 64); pass an out of that shape or none"),
    ("q", Q, Q, None, "attention: q must be a torch tensor, got str"),
])
def test_attention_refusals_name_the_argument(q, k, v, out, msg):
    with pytest.raises(ArgumentError) as e:
        attention_plan(q, k, v, out)
    assert str(e.value) == msg


# ---- scalar and option arguments ---------------------------------------------------------
def test_real_arguments():
    assert real("rmsnorm", "eps", 1e-5) == 1e-5
    assert real("attention", "scale", 2) == 2.0 and type(real("a", "s", 2)) is float
    assert real("rmsnorm", "eps", -0.5) == -0.5            # torch takes any finite eps too


@pytest.mark.parametrize("value, msg", [
    ("a", "rmsnorm: eps must be a real number, got 'a'"),
    (None, "rmsnorm: eps must be a real number, got None"),
    (True, "rmsnorm: eps must be a real number, got True"),
    (1j, "rmsnorm: eps must be a real number, got 1j"),
    (float("nan"), "rmsnorm: eps must be finite, got nan"),
    (float("-inf"), "rmsnorm: eps must be finite, got -inf"),
])
def test_real_refusals_name_the_argument(value, msg):
    with pytest.raises(ArgumentError) as e:
        real("rmsnorm", "eps", value)
    assert str(e.value) == msg


def test_dimension_arguments():
    assert [reduced_dim("softmax", (2, 3, 4), d) for d in (-3, -1, 0, 2)] == [0, 2, 0, 2]
    for d in (3, -4, 1.0, "0", True, None):
        with pytest.raises(ArgumentError) as e:
            reduced_dim("softmax", (2, 3, 4), d)
        assert str(e.value) == f"softmax: dim must be an int in [-3, 3) for a 3-d tensor, " \
                               f"got {d!r}"


def test_kernel_options_are_checked_by_name():
    known_options("softmax", {"per_thread": 8}, ("per_thread",))
    with pytest.raises(ArgumentError) as e:
        known_options("rmsnorm", {"per_thread": 8, "dim": 0}, ("per_thread", "early_weight"))
    assert str(e.value) == "rmsnorm: unknown keyword argument 'dim'; its kernel options are " \
                           "per_thread, early_weight"
    with pytest.raises(ArgumentError) as e:
        known_options("softmax", {"per_thread": [8]}, ("per_thread",))
    assert str(e.value) == "softmax: per_thread = [8]: a kernel option is a plain value (an " \
                           "int, a bool or None), not a list"


# ---- rmsnorm ------------------------------------------------------------------------------
def test_rmsnorm_plans():
    assert rmsnorm_plan(T((2, 3, 64), "float32"), T((64,), "float32")) == (6, 64, True)
    assert rmsnorm_plan(T((5, 64), "float16")) == (5, 64, True)          # no weight
    assert rmsnorm_plan(T((0, 64)), T((64,))) == (0, 64, True)
    assert rmsnorm_plan(T((3, 65536))) == (3, 65536, True)
    assert rmsnorm_plan(T((2, 65537))) == (2, 65537, True)    # past the registers: in chunks
    assert rmsnorm_plan(T((4, 64)), T((64,), "float32")) == (4, 64, True)   # torch's rule


@pytest.mark.parametrize("x, w, out, msg", [
    (T(()), None, None, "rmsnorm: x is a 0-d tensor; it needs at least 1 dimension (shape "
                        "(..., N))"),
    (T((4, 8), "float64"), None, None, "rmsnorm: x has dtype float64; it takes float32, "
                                       "bfloat16, float16"),
    (T((4, 8)), T((8,), "float64"), None, "rmsnorm: weight has dtype float64; it takes "
                                          "float32, bfloat16, float16"),
    (T((4, 8)), T((4, 8)), None, "rmsnorm: weight must be (8,) like x's last dimension, got "
                                 "(4, 8)"),
    (T((4, 8)), T((8,), device="cpu"), None, "rmsnorm: weight is on cpu; ptxgen kernels run "
                                             "on CUDA tensors (move it with weight.cuda())"),
    (T((4, 8)), T((8,), device="cuda:1"), None, "rmsnorm: weight is on cuda:1 but x is on "
                                                "cuda:0; put every tensor on one device"),
    (T((4, 8)), None, T((8, 4)), "rmsnorm: out has shape (8, 4), the result has shape (4, 8); "
                                 "pass an out of that shape or none"),
])
def test_rmsnorm_refusals_name_the_argument(x, w, out, msg):
    with pytest.raises(ArgumentError) as e:
        rmsnorm_plan(x, w, out)
    assert str(e.value) == msg


# ---- gemm ---------------------------------------------------------------------------------
def test_gemm_plans():
    p = gemm_plan(T((300, 203)), T((160, 203)))
    assert (p.M, p.N, p.K, p.out_dtype, p.direct, p.K_pad) == (300, 160, 203, "bfloat16",
                                                                True, 208)
    p = gemm_plan(T((64, 64), "float8_e4m3fn"), T((32, 64), "float8_e4m3fn"),
                  T((1,), "float32"), T((), "float32"), T((64, 32), contiguous=False))
    assert (p.out_dtype, p.direct, p.K_pad) == ("bfloat16", False, 64)
    p = gemm_plan(T((0, 16)), T((5, 16)))
    assert (p.M, p.N, p.K) == (0, 5, 16)
    assert gemm_plan(T((4, 0), "float16"), T((5, 0), "float16")).K_pad == 0


@pytest.mark.parametrize("args, msg", [
    ((T((8,)), T((8, 8))), "gemm: a must be 2-D, got shape (8,)"),
    ((T(()), T((8, 8))), "gemm: a must be 2-D, got shape ()"),
    ((T((8, 8)), T((2, 8, 8))), "gemm: b must be 2-D, got shape (2, 8, 8)"),
    ((T((8, 8), "float32"), T((8, 8))), "gemm: a has dtype float32; it takes bfloat16, "
                                        "float16, float8_e4m3fn"),
    ((T((8, 8)), T((8, 8), "float16")), "gemm: a is bfloat16 but b is float16; give both one "
                                        "dtype"),
    ((T((8, 16)), T((8, 8))), "gemm computes a (M, K) @ b (N, K)^T: b has K = 8, a has K = 16 "
                              "(got (8, 16) and (8, 8))"),
    ((T((8, 8), device="cpu"), T((8, 8))), "gemm: a is on cpu; ptxgen kernels run on CUDA "
                                          "tensors (move it with a.cuda())"),
    ((T((8, 8)), T((8, 8), device="cuda:1")), "gemm: b is on cuda:1 but a is on cuda:0; put "
                                              "every tensor on one device"),
    ((T((8, 8)), T((8, 8)), T((1,), "float32")), "gemm: scale_a scales float8_e4m3fn inputs; a "
                                                 "and b are bfloat16 (drop scale_a)"),
    ((T((8, 16), "float8_e4m3fn"), T((8, 16), "float8_e4m3fn"), None, T((2,), "float32")),
     "gemm: scale_b has shape (2,); a per-tensor scale holds one element, and block scales "
     "are (1, 1): one per 128 rows of b and 128-wide K block"),
    ((T((8, 272), "float8_e4m3fn"), T((130, 272), "float8_e4m3fn"), T((8, 3), "float32")),
     "gemm: scale_b is none but scale_a holds block scales; scale_b's block scales are "
     "(2, 3): one per 128 rows of b and 128-wide K block"),
    ((T((8, 272), "float8_e4m3fn"), T((130, 272), "float8_e4m3fn"), T((1,), "float32"),
      T((2, 3), "float32")),
     "gemm: scale_a is a per-tensor scale but scale_b holds block scales; scale_a's block "
     "scales are (8, 3): one per row of a and 128-wide K block"),
    ((T((8, 272), "float8_e4m3fn"), T((130, 272), "float8_e4m3fn"), T((8, 2), "float32"),
      T((2, 3), "float32")),
     "gemm: scale_a has shape (8, 2); a per-tensor scale holds one element, and block scales "
     "are (8, 3): one per row of a and 128-wide K block"),
    ((T((8, 272), "float8_e4m3fn"), T((130, 272), "float8_e4m3fn"), T((8, 3), "float32"),
      T((3, 2), "float32")),
     "gemm: scale_b has shape (3, 2); a per-tensor scale holds one element, and block scales "
     "are (2, 3): one per 128 rows of b and 128-wide K block"),
    ((T((8, 272), "float8_e4m3fn"), T((130, 272), "float8_e4m3fn"), T((8, 3), "float32"),
      T((2, 3), "float32"), None, True),
     "gemm: block scales are applied per 128-wide K step in fp32 by gemm_blockscaled's "
     "kernel, which takes no fast_accum, BN or STAGES (drop them; make_blockscaled builds "
     "other configurations)"),
    ((T((8, 16), "float8_e4m3fn"), T((8, 16), "float8_e4m3fn"), T((1,), "bfloat16")),
     "gemm: scale_a has dtype bfloat16; it takes float32"),
    ((T((8, 16), "float8_e4m3fn"), T((8, 16), "float8_e4m3fn"), T((1,), "float32", "cpu")),
     "gemm: scale_a is on cpu; ptxgen kernels run on CUDA tensors (move it with "
     "scale_a.cuda())"),
    ((T((8, 8)), T((4, 8)), None, None, T((8, 8))), "gemm: out has shape (8, 8), the result "
                                                     "has shape (8, 4); pass an out of that "
                                                     "shape or none"),
    ((T((8, 16), "float8_e4m3fn"), T((4, 16), "float8_e4m3fn"), None, None,
      T((8, 4), "float8_e4m3fn")), "gemm: out has dtype float8_e4m3fn, the result is bfloat16"),
])
def test_gemm_refusals_name_the_argument(args, msg):
    with pytest.raises(ArgumentError) as e:
        gemm_plan(*args)
    assert str(e.value) == msg


def test_gemm_knob_refusals():
    a = T((8, 64))
    with pytest.raises(ArgumentError, match=r"^gemm: BN = 100: a multiple of 16 from 64 to 256"):
        gemm_plan(a, a, BN=100)
    with pytest.raises(ArgumentError, match=r"^gemm: BN = 48: a multiple of 16 from 64 to 256"):
        gemm_plan(a, a, BN=48)
    assert gemm_plan(a, a, BN=112).BN == 112
    f8 = T((8, 64), "float8_e4m3fn")
    with pytest.raises(ArgumentError, match=r"^gemm: BN = 256: .*192 for float8 without "):
        gemm_plan(f8, f8, BN=256)
    assert gemm_plan(f8, f8, BN=256, fast_accum=True).BN == 256
    with pytest.raises(ArgumentError, match=r"^gemm: STAGES = 0: 1 to 8 ring stages"):
        gemm_plan(a, a, STAGES=0)
    for bn in ("128", 128.0, True):      # only an int (not a str's % formatting, a float)
        with pytest.raises(ArgumentError, match=rf"^gemm: BN = {bn!r}: a multiple of 16"):
            gemm_plan(a, a, BN=bn)
    with pytest.raises(ArgumentError, match=r"^gemm: STAGES = '4': 1 to 8 ring stages"):
        gemm_plan(a, a, STAGES="4")


def test_gemm_paths_are_registered_units(monkeypatch):
    G = sys.modules["ptxgen.kernels.gemm"]      # the module (the package's `gemm` is the wrapper)
    assert G._PATHS[-1][0] == "sm90" and G._PATHS[-1][2] is G._sm90_kernel
    monkeypatch.setattr(G, "_PATHS", [])
    G.path("small_m", lambda p, d: (p.M <= 64, f"M = {p.M} > 64"))(lambda *a: None)
    with pytest.raises(ArgumentError) as e:
        G._choose(gemm_plan(T((128, 64)), T((8, 64))), "cuda:0")
    assert str(e.value) == "gemm: no path takes this call: small_m: M = 128 > 64"
    name, run, prepared = G._choose(gemm_plan(T((8, 64)), T((8, 64))), "cuda:0")
    assert name == "small_m" and prepared is None


@pytest.mark.parametrize("M,N,dtype,knobs,want", [
    (8192, 8192, "float8_e4m3fn", {}, "n128_s5_scaled_p1_ov"),     # promoted fp8: overlapped
    (300, 200, "float8_e4m3fn", {}, "n128_s5_scaled_p1_ov"),       # few tiles: the same
    (8192, 8192, "float8_e4m3fn", dict(BN=192), "n192_s4_scaled_p1"),   # no overlap at 192
    (8192, 8192, "float8_e4m3fn", dict(BN=64), "n64_s5_scaled_p1_ov"),
    (8192, 8192, "float8_e4m3fn", dict(fast_accum=True), "n256_s4_scaled"),
    (8192, 8192, "bfloat16", {}, "n256_s4"),
    (300, 200, "bfloat16", {}, "n128_s5"),                           # < 132 wide tiles
])
def test_gemm_sm90_kernel_choice(monkeypatch, M, N, dtype, knobs, want):
    """The persistent kernel a plan gets: which tile width and schedule (kernel name)."""
    G = sys.modules["ptxgen.kernels.gemm"]
    monkeypatch.setattr(G, "sm_count", lambda device: 132)
    k = G._sm90_kernel(gemm_plan(T((M, 256), dtype), T((N, 256), dtype), **knobs), "cuda:0")
    assert k.name == f"gemm_sm90_{dtype}_{want}"


def _readme_block(after: str) -> str:
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = text.index("```python\n", text.index(after)) + len("```python\n")
    return text[start:text.index("```", start)]


def test_readme_tour_runs_as_pasted(tmp_path):
    code = _readme_block("## 30-second tour")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, env={**__import__("os").environ,
                                          "PYTHONPATH": str(__import__("pathlib").Path(
                                              __file__).resolve().parents[1])})
    assert r.returncode == 0, r.stderr
    assert ".entry smem_demo(" in r.stdout
