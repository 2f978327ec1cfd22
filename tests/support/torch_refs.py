"""torch references shared by the CPU and GPU tests of ptxgen.kernels (import after
pytest.importorskip("torch"))."""
import torch


def rms_ref(x, w, eps):
    """RMSNorm in fp32, in x's dtype: x * rsqrt(mean(x^2, -1) + eps) (* w)."""
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return (y if w is None else y * w.float()).to(x.dtype)


def blockscaled_ref(a, b, sa, sb):
    """(a * scale_a) @ (b * scale_b)^T in float64, each scale over its 128-wide K block (and
    scale_b's over 128 rows of b)."""
    K, N = a.shape[1], b.shape[0]
    ea = sa.double().repeat_interleave(128, 1)[:, :K]
    eb = sb.double().repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
    return (a.double() * ea) @ (b.double() * eb).T


def grads(f, *inputs, g):
    """The gradients of sum(f(*inputs) * g), in fp32, with respect to fresh leaf copies of
    the inputs."""
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    (f(*leaves).float() * g).sum().backward()
    return [t.grad for t in leaves]
