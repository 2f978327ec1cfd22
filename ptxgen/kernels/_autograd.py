"""Backward formulas of the shipped kernels, in torch ops.

The kernels are forward only.  So that a model can train through them, their torch custom ops
get these as autograd formulas (`_ops.register`): softmax and rmsnorm differentiate from the
saved output or input in fp32, the bf16 / f16 GEMM's gradients are two matmuls, and
attention recomputes its forward with torch's scaled_dot_product_attention and lets torch
differentiate that (its flash / memory-efficient backward: no S x S matrix is kept).  Every
gradient is returned in its input's dtype.
"""
from ._checks import ArgumentError
from ._torch import torch


def softmax_backward(y, g):
    """dL/dx of y = softmax(x, -1): y * (g - sum(g * y, -1))."""
    yf, gf = y.float(), g.float()
    return (yf * (gf - (gf * yf).sum(-1, keepdim=True))).to(y.dtype)


def rmsnorm_backward(x, weight, eps: float, g):
    """(dL/dx, dL/dweight or None) of y = x * r * weight, r = rsqrt(mean(x^2, -1) + eps):
    dx = r * (h - x * r^2 * mean(h * x, -1)) with h = g * weight."""
    xf, gf = x.float(), g.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    gw = None
    if weight is not None:
        gw = (gf * xf * r).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
        gf = gf * weight.float()
    gx = r * (gf - xf * (r * r) * (gf * xf).mean(-1, keepdim=True))
    return gx.to(x.dtype), gw


def gemm_backward(a, b, g):
    """(dL/da, dL/db) of d = a @ b^T: g @ b and g^T @ a (bfloat16 / float16)."""
    if a.dtype == torch.float8_e4m3fn:
        raise ArgumentError("gemm: float8_e4m3fn inputs have no backward (fp8 training keeps "
                            "higher-precision master weights; differentiate a bf16 gemm)")
    return (g @ b).to(a.dtype), (g.transpose(-1, -2) @ a).to(b.dtype)


def attention_backward(q, k, v, causal: bool, scale, g):
    """(dL/dq, dL/dk, dL/dv) of attention, through torch's SDPA on the same inputs: the same
    function (scale None = 1/sqrt(D), causal = is_causal, GQA heads)."""
    gqa = bool(q.shape[1] != k.shape[1])    # a bool even for symbolic head counts (a guard)
    with torch.enable_grad():
        q2, k2, v2 = (t.detach().requires_grad_() for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(
            q2, k2, v2, is_causal=causal, scale=scale, enable_gqa=gqa)
        return torch.autograd.grad(o, (q2, k2, v2), g)
