"""Kernels shipped with ptxgen, each a wrapper over cached @pg.kernel builds that takes torch
CUDA tensors and checks them as strictly as torch does:

    from ptxgen.kernels import gemm, rmsnorm, softmax, attention
    gemm(a, b, out=None)                      # a @ b.T; bf16/f16, fp8 e4m3 (scale_a=, scale_b=)
    rmsnorm(x, weight, eps=1e-6, out=None)    # over the last dim of any (..., N) tensor
    softmax(x, out=None, *, dim=-1, dtype=None)  # any dim (moved last); dtype= as torch
    attention(q, k, v, *, causal=False, scale=None, out=None, return_lse=False)

Where torch is installed, importing this package registers every kernel as a torch custom op
(torch.ops.ptxgen.gemm, .rmsnorm, .softmax, .attention, with fake implementations), which
torch.compile(fullgraph=True) keeps in its graph and CUDA graphs capture; the wrappers
themselves become those ops inside torch.compile.  Without torch the package still imports,
and each module's kernels build and dump PTX (`ptxgen dump ptxgen.kernels.softmax`).
Every refusal is an ArgumentError (a PtxgenError and a ValueError) naming the argument.
Training works through the ops: an input that requires grad under grad mode sends the call
to its torch op, whose backward is written in torch ops (_autograd.py: softmax and rmsnorm
from their saved tensors, the GEMM's two matmuls, attention through torch's SDPA backward);
the forward is still the kernel.  fp8 GEMM and the out= forms have no backward.
"""
import importlib

from ._checks import ArgumentError
from .gemm import gemm
from .rmsnorm import rmsnorm
from .softmax import softmax
from .attention import attention
from . import _ops

_ops.register()

# help(gemm) tells what the module tells: dtypes, shapes, speed
for _f in (gemm, rmsnorm, softmax, attention):
    _f.__doc__ = f"{_f.__doc__}\n\nptxgen.kernels.{_f.__name__}:\n{importlib.import_module(_f.__module__).__doc__}"
del _f

__all__ = ["gemm", "rmsnorm", "softmax", "attention", "ArgumentError"]

