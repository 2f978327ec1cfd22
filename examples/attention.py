"""FlashAttention forward from tile ops: a demo of ptxgen.kernels.attention (the kernel, its
schedule and the torch wrapper live in the package; `help(ptxgen.kernels.attention)` tells
how it works).  Here: the check run_all makes on a GPU, against a float64 reference.

    python examples/attention.py      # the kernel's PTX resources; on a GPU also the check
"""
import math

import numpy as np

from ptxgen.kernels.attention import KERNELS, attention, make_attention  # noqa: F401

CASES = [  # (B, Hq, Hkv, Sq, Skv, D, causal)
    (1, 4, 1, 77, 300, 64, True), (2, 2, 2, 130, 130, 128, False), (1, 2, 1, 65, 200, 256, True)]


def check(xp, rng):
    """[(label, ok, True)]: the error against float64 within twice torch SDPA's own."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return []
    out = []
    for B, Hq, Hkv, Sq, Skv, D, causal in CASES:
        g = torch.Generator(device="cuda").manual_seed(Sq * Skv)
        q = torch.randn(B, Hq, Sq, D, device="cuda", generator=g).to(torch.bfloat16)
        k = torch.randn(B, Hkv, Skv, D, device="cuda", generator=g).to(torch.bfloat16)
        v = torch.randn(B, Hkv, Skv, D, device="cuda", generator=g).to(torch.bfloat16)
        o = attention(q, k, v, causal=causal, out=torch.full_like(q, float("nan")))
        kk, vv = (t.double().repeat_interleave(Hq // Hkv, 1) for t in (k, v))
        s = q.double() @ kk.transpose(-1, -2) / math.sqrt(D)
        if causal:
            s = s.masked_fill(torch.ones(Sq, Skv, device="cuda", dtype=torch.bool).triu(1),
                              -math.inf)
        ref = torch.softmax(s, -1) @ vv
        lib = F.scaled_dot_product_attention(q, k.repeat_interleave(Hq // Hkv, 1),
                                             v.repeat_interleave(Hq // Hkv, 1), is_causal=causal)
        err = (o.double() - ref).abs().max().item()
        lib_err = (lib.double() - ref).abs().max().item()
        out.append((f"attention(B={B}, H={Hq}/{Hkv}, S={Sq}/{Skv}, D={D}, causal={causal}): "
                    f"error {err:.2e} (SDPA {lib_err:.2e})",
                    np.array([err <= 2 * lib_err + 1e-6]), np.array([True])))
    return out


if __name__ == "__main__":
    for kern in KERNELS:
        print(f"{kern.name}: {len(kern.ptx('sm_90a').splitlines())} PTX lines for sm_90a")
