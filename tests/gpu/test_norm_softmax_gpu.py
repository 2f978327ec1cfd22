"""examples/rmsnorm.py and examples/softmax.py on torch tensors: against float64 numpy
within the stated bounds and against torch's own kernels within one ulp of the dtype
(both round float32 arithmetic once), on ragged N, M = 1 and one-element rows."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

RMS_SHAPES = [(64, 8192), (1, 1000), (7, 1001), (3, 4096), (2, 24), (1, 1), (5, 12345),
              (33, 2048), (3, 32768), (2, 65536), (2, 100003)]
SM_SHAPES = [(16, 8192), (1, 1000), (5, 1001), (3, 50000), (2, 40001), (4, 24), (1, 1),
             (2, 65536), (9, 32000)]


def _ulps(a, b):
    import torch
    fi = torch.finfo(a.dtype)
    x, y = a.double(), b.double()
    unit = torch.exp2(torch.floor(torch.log2(y.abs().clamp(min=fi.tiny)))) * fi.eps
    return ((x - y).abs() / unit).max().item()


@pytest.mark.parametrize("m,n", RMS_SHAPES)
def test_rmsnorm(m, n):
    import torch
    import rmsnorm as RMS
    torch.manual_seed(n)
    x = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    w = (torch.rand(n, device="cuda") + 0.5).to(torch.bfloat16)
    y = RMS.rmsnorm(x, w, 1e-6)
    want = RMS.reference(x.view(torch.uint16).cpu().numpy(), w.view(torch.uint16).cpu().numpy(),
                         1e-6)
    assert RMS.bf16_ulps(y.view(torch.uint16).cpu().numpy(), want).max() <= 1.0
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
           * w.float()).to(torch.bfloat16)
    assert _ulps(y, ref) <= 1.0


@pytest.mark.parametrize("dt,wdt", [("float32", "float32"), ("float16", "float16"),
                                    ("bfloat16", "float32"), ("float32", None),
                                    ("float16", None)])
def test_rmsnorm_rows_past_the_registers(dt, wdt):
    """Rows read in chunks (ptxgen.kernels.rmsnorm.chunked), into a poisoned out, with a
    weight of x's dtype, of float32 beside bfloat16 x, or none: the error against float64 is
    within 2x torch's."""
    import torch
    from ptxgen.kernels import rmsnorm
    torch.manual_seed(5)
    dtype = getattr(torch, dt)
    n = 70001
    weighted = wdt is not None
    x = (torch.randn(3, n, device="cuda") * 3).to(dtype)
    w = (torch.rand(n, device="cuda") + 0.5).to(getattr(torch, wdt)) if weighted else None
    out = torch.full_like(x, float("nan"))
    y = rmsnorm(x, w, 1e-6, out=out)
    assert y.data_ptr() == out.data_ptr()
    xd = x.double()
    want = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6)
    if weighted:
        want = want * w.double()
    ours = (y.double() - want).abs().max().item()
    theirs = (torch.nn.functional.rms_norm(x, (n,), w, 1e-6).double() - want).abs().max().item()
    assert ours <= 2 * theirs + 1e-7, (ours, theirs)


@pytest.mark.parametrize("per_thread", [8, 32])
def test_rmsnorm_knobs(per_thread):
    import torch
    import rmsnorm as RMS
    x = torch.randn(8, 8192, device="cuda").to(torch.bfloat16)
    w = torch.ones(8192, device="cuda", dtype=torch.bfloat16)
    for early in (True, False):
        y = RMS.rmsnorm(x, w, 1e-5, per_thread=per_thread, early_weight=early)
        ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
               ).to(torch.bfloat16)
        assert _ulps(y, ref) <= 1.0


def test_rmsnorm_knobs_on_a_chunked_row():
    """A knob the kernel for this row cannot honour is refused by name; the ones it can
    (a late weight, per_thread past the registers: the chunk stays within them) run, within
    2x torch's error against float64 (float32: another summation order than torch's)."""
    import torch
    import rmsnorm as RMS
    from ptxgen.kernels import ArgumentError
    x = torch.randn(2, 65536, device="cuda")
    w = torch.rand(65536, device="cuda") + 0.5
    with pytest.raises(ArgumentError, match=r"^rmsnorm: early_weight=True keeps the weight row "
                                            r"in registers, but a row of 65536 elements"):
        RMS.rmsnorm(x, w, 1e-6, early_weight=True)
    with pytest.raises(ArgumentError, match=r"^rmsnorm: per_thread = 0: a positive int"):
        RMS.rmsnorm(x, w, 1e-6, per_thread=0)
    xd = x.double()
    want = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    theirs = (torch.nn.functional.rms_norm(x, (65536,), w, 1e-6).double() - want).abs().max()
    for knobs in ({"early_weight": False}, {"per_thread": 64}, {"per_thread": 1000}):
        ours = (RMS.rmsnorm(x, w, 1e-6, **knobs).double() - want).abs().max()
        assert ours <= 2 * theirs + 1e-7, (knobs, ours.item(), theirs.item())


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("m,n", SM_SHAPES)
def test_softmax(m, n, dt):
    import torch
    import softmax as SM
    torch.manual_seed(m * n)
    x = (torch.randn(m, n, device="cuda") * 3).to(getattr(torch, dt))
    y = SM.softmax(x)
    v = x.double().cpu().numpy()
    got = y.view(torch.uint16).cpu().numpy() if dt == "bfloat16" else y.cpu().numpy()
    assert (SM.ulps(got, SM.reference(v), dt) / SM.bound(v, dt)).max() <= 1.0
    ref = torch.softmax(x.float(), dim=-1).to(x.dtype)
    assert _ulps(y, ref) <= (1.0 if dt != "float32" else float(SM.bound(v, dt).max()) + 2)


@pytest.mark.parametrize("per_thread", [64, 1000])
def test_softmax_per_thread_past_the_registers(per_thread):
    """per_thread past IN_REGISTERS: fewer threads, chunks within the registers, the same
    bound against float64 as the default."""
    import torch
    import softmax as SM
    x = torch.randn(3, 65536, device="cuda") * 3
    y = SM.softmax(x, per_thread=per_thread)
    v = x.double().cpu().numpy()
    assert (SM.ulps(y.cpu().numpy(), SM.reference(v), "float32") /
            SM.bound(v, "float32")).max() <= 1.0


def test_softmax_3d_and_out():
    import torch
    import softmax as SM
    x = torch.randn(2, 3, 1000, device="cuda", dtype=torch.float16)
    out = torch.empty_like(x)
    y = SM.softmax(x, out=out)
    assert y.data_ptr() == out.data_ptr()
    assert _ulps(y, torch.softmax(x.float(), -1).half()) <= 1.0


def test_examples_run_all():
    """examples/run_all.py's checks of both examples pass."""
    import rmsnorm as RMS
    import softmax as SM
    from _xp import xp
    rng = np.random.default_rng(3)
    for label, got, want in RMS.check(xp, rng) + SM.check(xp, rng):
        assert bool(np.asarray(got).all()), label
