"""ptxgen.kernels.attention on the GPU: error against an fp64 reference no worse than 2x
torch SDPA's own, for bf16 / f16, D 64 / 128 / 192 / 256 and widths zero-padded to them,
causal or not, GQA 4:1 and 8:1 and ragged sequence lengths; outputs poisoned with NaN first;
lse against torch's logsumexp of the scaled scores; bad inputs refused naming the argument."""
import math

import pytest

pytestmark = pytest.mark.gpu

CASES = [  # (B, Hq, Hkv, Sq, Skv, D)
    (1, 2, 2, 1, 1, 64), (1, 2, 2, 77, 77, 128), (2, 4, 1, 513, 513, 64),
    (1, 8, 2, 1000, 1000, 128), (1, 8, 1, 2049, 2049, 256), (1, 4, 4, 77, 1000, 128),
    (1, 4, 2, 1000, 77, 256), (2, 2, 2, 300, 513, 64), (1, 16, 2, 512, 512, 128),
    (1, 8, 2, 1000, 1000, 192), (1, 4, 4, 300, 513, 192),          # the fourth kernel width
    (1, 4, 2, 300, 300, 96), (1, 2, 2, 65, 130, 40), (2, 2, 1, 200, 77, 160),   # narrower
    (1, 2, 2, 33, 33, 8), (1, 2, 1, 70, 90, 100), (1, 1, 1, 17, 17, 1),   # (padded copies)
]


def _ref(q, k, v, causal, scale):
    """fp64 attention on the GPU (repeated K/V heads), with the natural-log lse."""
    import torch
    g = q.shape[1] // k.shape[1]
    kk = k.double().repeat_interleave(g, dim=1)
    vv = v.double().repeat_interleave(g, dim=1)
    s = q.double() @ kk.transpose(-1, -2) * scale
    if causal:
        Sq, Skv = s.shape[-2:]
        s = s.masked_fill(torch.ones(Sq, Skv, dtype=torch.bool, device=s.device).triu(1),
                          -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    return torch.softmax(s, dim=-1) @ vv, lse


def _sdpa(q, k, v, causal):
    import torch
    import torch.nn.functional as F
    g = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1),
                                          v.repeat_interleave(g, 1), is_causal=causal)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_matches_fp64_within_twice_sdpa_error(case, causal, dtype):
    import torch
    from ptxgen.kernels.attention import attention
    B, Hq, Hkv, Sq, Skv, D = case
    dt = getattr(torch, dtype)
    torch.manual_seed(sum(case) + causal)
    q = torch.randn(B, Hq, Sq, D, device="cuda").to(dt)
    k = torch.randn(B, Hkv, Skv, D, device="cuda").to(dt)
    v = torch.randn(B, Hkv, Skv, D, device="cuda").to(dt)
    out = torch.full_like(q, float("nan"))
    got, lse = attention(q, k, v, causal=causal, out=out, return_lse=True)
    assert got is out
    ref, ref_lse = _ref(q, k, v, causal, 1 / math.sqrt(D))
    err = (got.double() - ref).abs().max().item()
    lib = (_sdpa(q, k, v, causal).double() - ref).abs().max().item()
    assert err == err and err <= 2 * lib + 1e-6, (err, lib)
    assert lse.shape == (B, Hq, Sq)
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4 * max(1.0, ref_lse.abs().max().item())


@pytest.mark.parametrize("scale", [0.3, -0.2, 0.0])
def test_scale_and_gqa_index_heads_without_copies(scale):
    import torch
    from ptxgen.kernels.attention import attention
    q = torch.randn(1, 8, 100, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 2, 130, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, 2, 130, 64, device="cuda", dtype=torch.bfloat16)
    got = attention(q, k, v, scale=scale, causal=True)
    ref, _ = _ref(q, k, v, True, scale)
    assert (got.double() - ref).abs().max().item() < 2e-2


@pytest.mark.parametrize("bad,msg", [
    (lambda q, k, v: (q.float(), k, v), "attention: q has dtype float32; it takes bfloat16, float16"),
    # (a transposed, non-contiguous q is copied, not refused: test_torch_ops_gpu.py)
    (lambda q, k, v: (q[0], k, v), "attention: q must be 4-D, got shape (4, 16, 64)"),
    (lambda q, k, v: (q, k.repeat(2, 1, 1, 1), v.repeat(2, 1, 1, 1)),
     "attention: k has shape (2, 4, 16, 64), which does not match q's (1, 4, 16, 64) in the "
     "batch or head dimension"),
    (lambda q, k, v: (q.repeat(1, 1, 1, 5), k.repeat(1, 1, 1, 5), v.repeat(1, 1, 1, 5)),
     "attention: q has head dimension 320; the kernels take D up to 256"),
    (lambda q, k, v: (q, k[:, :3].contiguous(), v[:, :3].contiguous()),
     "attention: k has 3 heads, which do not divide q's 4"),
    (lambda q, k, v: (q.cpu(), k, v), "attention: q is on cpu; ptxgen kernels run on CUDA"),
    (lambda q, k, v: (q, k, v[:, :, :5].contiguous()), "attention: v must have k's shape"),
])
def test_bad_inputs_name_the_argument(bad, msg):
    import torch
    from ptxgen.errors import PtxgenError
    from ptxgen.kernels.attention import attention
    q = torch.randn(1, 4, 16, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 4, 16, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(PtxgenError, match="^" + msg.replace("(", r"\(").replace(")", r"\)")):
        attention(*bad(q, k, k.clone()))
