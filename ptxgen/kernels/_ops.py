"""The shipped kernels as torch custom ops in the namespace `ptxgen`.

Each wrapper is two ops: `ptxgen::<name>` (functional: allocates its result) and
`ptxgen::<name>_out` (writes `out`, declared mutated so functionalization keeps the write).
Their fake implementations run the wrapper's rules over the fake tensors' metadata and
allocate nothing on a device, so torch.compile traces them and a bad argument is refused at
trace time with the eager message; the real implementations are the eager wrappers (which
launch on torch's current stream, so CUDA-graph capture records them), run under no_grad: a
wrapper sends inputs that require grad to these ops, whose autograd formulas (_autograd.py)
make the backward, so the implementation itself must not do that again.  The _out ops have
no backward, as torch's out= variants have none.  The ops take the wrappers' kernel options
(gemm's BN / STAGES, the row kernels' per_thread / early_weight), so a tuned call runs the
same kernel inside torch.compile and under autograd.
"""
from typing import Optional

from . import _autograd, _torch
from ._checks import meta_of
from .attention import attention, attention_plan
from .gemm import gemm, gemm_plan
from .rmsnorm import make as rmsnorm_make
from .rmsnorm import rmsnorm, rmsnorm_plan
from .softmax import make as softmax_make
from .softmax import softmax, softmax_plan

_registered: list = []


def _m(t):
    return None if t is None else meta_of(t)


def _knobs(**knobs) -> dict:
    """The kernel options an op was given (None: the wrapper's default)."""
    return {k: v for k, v in knobs.items() if v is not None}


def _row_kernel(make, m, knobs: dict, **kernel):
    """A fake implementation's check of a row wrapper's kernel options `knobs`, given x's
    metadata `m` (which the rules have passed): the kernel they make for x's rows (built on
    the CPU and cached, `kernel` naming it as the wrapper's call does, so the real call finds
    it), or make's refusal naming the option.  A symbolic row length or option (dynamic
    shapes, a SymInt) is left to the real implementation, which gets plain values."""
    plain = all(type(v) in (int, bool) for v in (*m.shape, *knobs.values()))
    if knobs and plain and all(m.shape):
        make(m.shape[-1], m.dtype, **kernel, **knobs)


def _rmsnorm_kernel(m, wm, per_thread, early_weight):
    """_row_kernel for rmsnorm: the kernel of its weight's metadata `wm` (none, or its dtype)."""
    _row_kernel(rmsnorm_make, m, _knobs(per_thread=per_thread, early_weight=early_weight),
                weighted=wm is not None, weight_dtype=None if wm is None else wm.dtype)


def register() -> bool:
    """Register the ops once, where torch is installed; True when they are registered."""
    torch = _torch.torch
    if torch is None:
        return False
    if _registered:
        return True
    Tensor = torch.Tensor
    op, lib, no_grad = torch.library.custom_op, "ptxgen::", torch.no_grad

    @op(lib + "softmax", mutates_args=())
    def softmax_op(x: Tensor, per_thread: Optional[int] = None) -> Tensor:
        with no_grad():
            return softmax(x, **_knobs(per_thread=per_thread))

    @softmax_op.register_fake
    def _(x, per_thread=None):
        m = meta_of(x)
        softmax_plan(m)
        _row_kernel(softmax_make, m, _knobs(per_thread=per_thread))
        return x.new_empty(x.shape)

    @op(lib + "softmax_out", mutates_args=("out",))
    def softmax_out(x: Tensor, out: Tensor, per_thread: Optional[int] = None) -> None:
        softmax(x, out=out, **_knobs(per_thread=per_thread))

    @softmax_out.register_fake
    def _(x, out, per_thread=None):
        m = meta_of(x)
        softmax_plan(m, meta_of(out))
        _row_kernel(softmax_make, m, _knobs(per_thread=per_thread))

    @op(lib + "rmsnorm", mutates_args=())
    def rmsnorm_op(x: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6,
                   per_thread: Optional[int] = None,
                   early_weight: Optional[bool] = None) -> Tensor:
        with no_grad():
            return rmsnorm(x, weight, eps,
                           **_knobs(per_thread=per_thread, early_weight=early_weight))

    @rmsnorm_op.register_fake
    def _(x, weight=None, eps=1e-6, per_thread=None, early_weight=None):
        m, wm = meta_of(x), _m(weight)
        rmsnorm_plan(m, wm)
        _rmsnorm_kernel(m, wm, per_thread, early_weight)
        return x.new_empty(x.shape)

    @op(lib + "rmsnorm_out", mutates_args=("out",))
    def rmsnorm_out(x: Tensor, weight: Optional[Tensor], out: Tensor, eps: float = 1e-6,
                    per_thread: Optional[int] = None,
                    early_weight: Optional[bool] = None) -> None:
        rmsnorm(x, weight, eps, out=out,
                **_knobs(per_thread=per_thread, early_weight=early_weight))

    @rmsnorm_out.register_fake
    def _(x, weight, out, eps=1e-6, per_thread=None, early_weight=None):
        m, wm = meta_of(x), _m(weight)
        rmsnorm_plan(m, wm, meta_of(out))
        _rmsnorm_kernel(m, wm, per_thread, early_weight)

    @op(lib + "gemm", mutates_args=())
    def gemm_op(a: Tensor, b: Tensor, scale_a: Optional[Tensor] = None,
                scale_b: Optional[Tensor] = None, fast_accum: bool = False,
                BN: Optional[int] = None, STAGES: Optional[int] = None) -> Tensor:
        with no_grad():
            return gemm(a, b, scale_a=scale_a, scale_b=scale_b, fast_accum=fast_accum, BN=BN,
                        STAGES=STAGES)

    @gemm_op.register_fake
    def _(a, b, scale_a=None, scale_b=None, fast_accum=False, BN=None, STAGES=None):
        p = gemm_plan(meta_of(a), meta_of(b), _m(scale_a), _m(scale_b), None, fast_accum,
                      BN, STAGES)
        return a.new_empty((p.M, p.N), dtype=torch.bfloat16 if p.out_dtype != p.dtype
                           else a.dtype)

    @op(lib + "gemm_out", mutates_args=("out",))
    def gemm_out(a: Tensor, b: Tensor, out: Tensor, scale_a: Optional[Tensor] = None,
                 scale_b: Optional[Tensor] = None, fast_accum: bool = False,
                 BN: Optional[int] = None, STAGES: Optional[int] = None) -> None:
        gemm(a, b, out, scale_a=scale_a, scale_b=scale_b, fast_accum=fast_accum, BN=BN,
             STAGES=STAGES)

    @gemm_out.register_fake
    def _(a, b, out, scale_a=None, scale_b=None, fast_accum=False, BN=None, STAGES=None):
        gemm_plan(meta_of(a), meta_of(b), _m(scale_a), _m(scale_b), meta_of(out), fast_accum,
                  BN, STAGES)

    @op(lib + "attention", mutates_args=())
    def attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool = False,
                     scale: Optional[float] = None) -> tuple[Tensor, Tensor]:
        with no_grad():
            return attention(q, k, v, causal=causal, scale=scale, return_lse=True)

    @attention_op.register_fake
    def _(q, k, v, causal=False, scale=None):
        B, Hq, _, Sq, _, _, _ = attention_plan(meta_of(q), meta_of(k), meta_of(v))
        return q.new_empty(q.shape), q.new_empty((B, Hq, Sq), dtype=torch.float32)

    @op(lib + "attention_out", mutates_args=("out",))
    def attention_out(q: Tensor, k: Tensor, v: Tensor, out: Tensor, causal: bool = False,
                      scale: Optional[float] = None) -> Tensor:
        return attention(q, k, v, causal=causal, scale=scale, out=out, return_lse=True)[1]

    @attention_out.register_fake
    def _(q, k, v, out, causal=False, scale=None):
        B, Hq, _, Sq, _, _, _ = attention_plan(meta_of(q), meta_of(k), meta_of(v),
                                               meta_of(out))
        return q.new_empty((B, Hq, Sq), dtype=torch.float32)

    _register_autograd(softmax_op, rmsnorm_op, gemm_op, attention_op)
    _registered.extend([softmax_op, softmax_out, rmsnorm_op, rmsnorm_out, gemm_op, gemm_out,
                        attention_op, attention_out])
    return True


def _register_autograd(softmax_op, rmsnorm_op, gemm_op, attention_op) -> None:
    """The functional ops' backward formulas (_autograd.py) and what each saves."""
    def save_output(ctx, inputs, output):
        ctx.save_for_backward(output)

    softmax_op.register_autograd(                      # (per_thread: no gradient)
        lambda ctx, g: (_autograd.softmax_backward(ctx.saved_tensors[0], g), None),
        setup_context=save_output)

    def save_rmsnorm(ctx, inputs, output):
        x, weight, eps = inputs[:3]
        ctx.save_for_backward(x, weight)
        ctx.eps = eps

    def rmsnorm_grads(ctx, g):                         # (eps and the knobs: no gradient)
        x, weight = ctx.saved_tensors
        return (*_autograd.rmsnorm_backward(x, weight, ctx.eps, g), None, None, None)

    rmsnorm_op.register_autograd(rmsnorm_grads, setup_context=save_rmsnorm)

    def save_operands(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], inputs[1])

    def gemm_grads(ctx, g):
        return (*_autograd.gemm_backward(*ctx.saved_tensors, g), None, None, None, None, None)

    gemm_op.register_autograd(gemm_grads, setup_context=save_operands)

    def save_attention(ctx, inputs, output):
        q, k, v, causal, scale = inputs
        ctx.save_for_backward(q, k, v)
        ctx.causal, ctx.scale = causal, scale
        ctx.mark_non_differentiable(output[1])          # lse: an output to read, not to train

    def attention_grads(ctx, g, g_lse):
        return (*_autograd.attention_backward(*ctx.saved_tensors, ctx.causal, ctx.scale, g),
                None, None)

    attention_op.register_autograd(attention_grads, setup_context=save_attention)
