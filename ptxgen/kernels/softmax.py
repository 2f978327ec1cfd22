"""Softmax over the last dimension of a (..., N) float16 / bfloat16 / float32 tensor.

    from ptxgen.kernels import softmax
    y = softmax(x)                 # torch.softmax(x, dim=-1); x (..., N) on a CUDA device
    softmax(x, out=y)              # out: x's shape and dtype (non-contiguous: written by a copy)
    softmax(x, dim=0)              # another dim: moved last and back (two extra copies)
    softmax(x, dtype=torch.float32)  # as torch's dtype=: x cast first

dtypes: float16, bfloat16, float32 in, the same out; float32 arithmetic throughout.
Shapes: any (..., N), N >= 0 (empty dimensions give an empty result); a 0-d x is refused.
Also `torch.ops.ptxgen.softmax(x)` (a torch custom op: torch.compile and CUDA graphs).
Speed on the H200 (benchmarks/RESULTS-archive.md, session of 2026-12-02): 8192 x 8192 at 3.64x
(bf16), 3.66x (f16) and 2.09x (f32) the throughput of torch.softmax.

One CTA per row.  Rows that fit (up to 32 elements per thread) live in registers, so x is
read once and y written once (one pass over memory):

    cast  xr <- x[i, 0:N]                    (pad -inf for a ragged row)
    max   m <- xr                            (lanes: shfl.sync.bfly, warps: shared)
    fma   xr <- xr * log2(e) + hi;  add xr <- xr + lo;  exp2 xr <- xr
          (ex2.approx with the scale folded in; -m log2(e) = hi + lo exactly, so the
          exponent's error is that of (x - m) log2(e), not of m's size)
    sum   s <- xr;  reciprocal s <- s;  mul xr <- xr * s[0];  cast y[i, 0:N] <- xr

Longer rows use the online softmax (Milakov & Gimelshein): one pass over chunks keeps each
thread's running max m_t and sum s_t (s_t rescaled by 2^((m_old - m_new) log2 e) when the
max grows), the threads' (m_t, s_t) are combined once (cta max, rescale, cta sum), and a
second pass writes exp(x - m) / s.  Kernels are built per (N, dtype) and cached (`make`).
"""
from functools import lru_cache

import ptxgen as pg
from ptxgen.layout import S, TileLayout, tid

from ._checks import (ArgumentError, Meta, known_options, meta_of, numel, out_tensor,
                      reduced_dim, shares_memory, tensor)
from ._torch import compiling, differentiable, empty_like, into, torch_ops, traced
from .rmsnorm import IN_REGISTERS, VEC_BYTES, chunk, over_chunks
from .rmsnorm import plan as row_plan

M = pg.var("M")
LOG2E = 1.4426950408889634
INF = float("inf")


@lru_cache(maxsize=None)
def make(n: int, dtype: str = "float32", per_thread: int = 16):
    """The kernel for rows of n elements: in registers when they fit (IN_REGISTERS
    elements per thread at most), else the online two-pass form in chunks."""
    if dtype not in DTYPES:
        raise ArgumentError(f"softmax.make: dtype {dtype!r}; it takes {', '.join(DTYPES)}")
    V, T, R = row_plan(n, per_thread, bits=pg.dtype(dtype).bits, op="softmax")
    if R * V <= IN_REGISTERS:
        return _in_registers(n, dtype, V, T, R)
    return _online(n, dtype, V, T, chunk(V, per_thread))


def _neg_scaled(one, m):
    """(hi, lo) registers with hi + lo = -m * log2(e) exactly (float32 log2(e))."""
    hi, nh, lo = (pg.alloc_local((1,), "float32") for _ in range(3))
    one.mul(hi, m, -LOG2E)
    one.mul(nh, m, LOG2E)                 # -hi
    one.fma(lo, m, -LOG2E, nh[0])         # the rounding error of hi, exact in the fma
    return hi, lo


def _in_registers(n, dtype, V, T, R):
    P = R * T * V
    lay = TileLayout(S[(R, T, V):(V, 1 @ tid, 1)])

    @pg.kernel(grid=lambda a: (a["M"],), block=(T,), name=f"softmax_{dtype}_{n}_t{T}")
    def softmax(x: pg.Tensor((M, n), dtype), y: pg.Tensor((M, n), dtype)):
        pg.thread_id(T)
        row = pg.cta_id()
        t, one = pg.tile.cta, pg.tile.thread
        xr = pg.alloc_local((P,), "float32", layout=lay)
        m = pg.alloc_local((1,), "float32")
        s = pg.alloc_local((1,), "float32")
        t.cast(xr, x[row, 0:n], **({"pad": -INF} if P != n else {}))
        t.max(m, xr)
        hi, lo = _neg_scaled(one, m)
        t.fma(xr, xr, LOG2E, hi[0])
        t.add(xr, xr, lo[0])
        t.exp2(xr, xr)
        t.sum(s, xr)
        one.reciprocal(s, s)
        t.mul(xr, xr, s[0])
        t.cast(y[row, 0:n], xr)
    return softmax


def _online(n, dtype, V, T, E=16):
    """Chunks of C = T * E elements (E per thread, V-vectors), then the ragged tail chunk."""
    C = T * E
    lay = TileLayout(S[(E // V, T, V):(V, 1 @ tid, 1)])
    per_thread = TileLayout(S[(T,):(1 @ tid,)])

    @pg.kernel(grid=lambda a: (a["M"],), block=(T,), name=f"softmax_online_{dtype}_{n}_t{T}")
    def softmax(x: pg.Tensor((M, n), dtype), y: pg.Tensor((M, n), dtype)):
        pg.thread_id(T)
        row = pg.cta_id()
        t, one = pg.tile.cta, pg.tile.thread
        xc = pg.alloc_local((C,), "float32", layout=lay)
        mine = xc.local()                               # this thread's E registers
        mt = pg.alloc_local((T,), "float32", layout=per_thread)   # running max, per thread
        st = pg.alloc_local((T,), "float32", layout=per_thread)   # running sum, per thread
        cm, nm, cs = (pg.alloc_local((1,), "float32") for _ in range(3))
        one.fill(mt.local(), -INF)
        one.zero(st.local())

        def update(c0, w, pad):
            """Fold x[row, c0:c0+w] into (mt, st)."""
            t.cast(xc, x[row, c0:c0 + w], **pad)
            one.max(cm, mine)
            one.max(cm, cm, mt.local())                 # the new running max
            one.sub(nm, mt.local(), cm)                 # st *= 2^((m_old - m_new) log2 e)
            one.exp(nm, nm)
            one.mul(st.local(), st.local(), nm[0])
            hi, lo = _neg_scaled(one, cm)
            one.fma(mine, mine, LOG2E, hi[0])
            one.add(mine, mine, lo[0])
            one.exp2(mine, mine)
            one.sum(cs, mine)
            one.add(st.local(), st.local(), cs[0])
            one.fill(mt.local(), cm[0])

        over_chunks(n, C, update, -INF)
        m_all, s_all = pg.alloc_local((1,), "float32"), pg.alloc_local((1,), "float32")
        t.max(m_all, mt)                                # combine the threads' (m_t, s_t)
        one.sub(nm, mt.local(), m_all[0])
        one.exp(nm, nm)
        one.mul(st.local(), st.local(), nm[0])
        t.sum(s_all, st)
        one.reciprocal(s_all, s_all)
        hi, lo = _neg_scaled(one, m_all)

        def write(c0, w, pad):
            t.cast(xc, x[row, c0:c0 + w], **pad)
            t.fma(xc, xc, LOG2E, hi[0])
            t.add(xc, xc, lo[0])
            t.exp2(xc, xc)
            t.mul(xc, xc, s_all[0])
            t.cast(y[row, c0:c0 + w], xc)

        over_chunks(n, C, write, -INF)
    return softmax


DTYPES = ("float16", "bfloat16", "float32")
KERNELS = [make(8192, "float32"), make(1000, "bfloat16"), make(50000, "float16")]


def dump(n: int = 8192, dtype: str = "float32", per_thread: int = 16) -> list:
    """`ptxgen dump ptxgen.kernels.softmax --kernel-args n=4096,dtype=bfloat16`: the kernel
    of that configuration."""
    return [make(n, dtype, per_thread)]


def softmax_plan(x: Meta, out: Meta | None = None) -> tuple:
    """(rows, N, out written in place) for x (..., N), or the ArgumentError naming the
    argument; the rules of `softmax`, over metadata only."""
    tensor("softmax", "x", x, dtypes=DTYPES)
    direct = out is None or out_tensor("softmax", out, x.shape, x.dtype, x.device)
    rows = numel(x.shape[:-1])
    if rows >= 2 ** 31:
        raise ArgumentError(f"softmax: x has {rows} rows; a launch takes fewer than 2^31 "
                            f"(split x)")
    return rows, x.shape[-1], direct


_PLANS: dict = {}


def _plan(x, out, key):
    """softmax_plan of the tensors, with the kernel, whether x is already (rows, N) and a slot
    for its prepared launch, memoized under their metadata."""
    m = meta_of(x) if hasattr(x, "is_contiguous") else x
    om = None if out is None else meta_of(out) if hasattr(out, "is_contiguous") else out
    rows, n, direct = softmax_plan(m, om)
    plan = [make(n, m.dtype) if rows and n else None, rows, n, direct,
            len(m.shape) == 2 and m.contiguous, (rows,), None]
    if key is not None:
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def softmax(x, out=None, *, dim=-1, dtype=None, **knobs):
    """torch.softmax(x, dim, dtype=dtype) of a float16 / bfloat16 / float32 CUDA tensor, into
    `out` when given (checked: the result's shape, dtype and device).  `dtype`, as torch's:
    x is cast to it first.  The kernels work over the last dimension; another `dim` is moved
    there and back (two copies).  `knobs` go to `make` (per_thread=).  Inside torch.compile
    it is torch.ops.ptxgen.softmax."""
    if dtype is not None and hasattr(x, "is_contiguous") and dtype != x.dtype:
        if str(dtype).rpartition(".")[2] not in DTYPES:
            raise ArgumentError(f"softmax: dtype {dtype}; it takes {', '.join(DTYPES)}")
        x = x.to(dtype)
    if dim != -1 and hasattr(x, "is_contiguous") and x.dim():   # (the rules refuse the rest)
        d = reduced_dim("softmax", tuple(x.shape), dim)
        if d != x.dim() - 1:
            return _softmax_along(x, out, d, knobs)
    if knobs:
        known_options("softmax", knobs, ("per_thread",))
    if compiling():
        return traced("softmax", (x,), out, **knobs)
    try:           # the plan's key: everything the rules read (devices by index: -1 = CPU)
        key = (x.shape, x.dtype, x.get_device(), x.is_contiguous(), None if out is None else
               (out.shape, out.dtype, out.get_device(), out.is_contiguous()))
    except AttributeError:          # not a tensor: the rules name the argument
        key = None
    plan = _PLANS.get(key) if key is not None and not knobs else None
    if plan is None:
        plan = _plan(x, out, key if not knobs else None)
    k, rows, n, direct, flat, grid, run = plan   # grid: the kernels' own (M,), made once
    if x.requires_grad and differentiable("softmax", out):   # autograd records the op
        return torch_ops().softmax(x, **knobs)
    if out is not None and (out.data_ptr() % VEC_BYTES or shares_memory(out, (x,), in_place=x)):
        direct = False            # vector stores need aligned rows; x must stay unwritten
    y = out if direct and out is not None else empty_like(x) if flat else x.new_empty(x.shape)
    if k is not None:
        xp = x.data_ptr()
        if flat and not knobs and not xp % VEC_BYTES:   # (rows, N), row-major, aligned
            if run is None:     # the launch for tensors of this plan's metadata, made once
                run = plan[6] = k.prepare(x, y, grid=grid)
            run(xp, y.data_ptr())
        else:
            if knobs:
                k = make(n, str(x.dtype)[6:], **knobs)
            if xp % VEC_BYTES:                      # a view at an odd offset
                x = x.contiguous().clone()
            k(x.contiguous().view(rows, n), y.view(rows, n), grid=grid)
    return y if out is None else into(out, y)


def _softmax_along(x, out, d, knobs):
    """softmax over dimension d (not the last): over the last of x.movedim(d, -1), moved
    back into a contiguous result (or `out`, checked as the result of x)."""
    if out is not None:
        softmax_plan(meta_of(x), meta_of(out) if hasattr(out, "is_contiguous") else out)
        if x.requires_grad:
            differentiable("softmax", out)          # refuses out= under autograd
    y = softmax(x.movedim(d, -1), **knobs).movedim(-1, d)
    if out is None:
        return y.contiguous()
    out.copy_(y)
    return out
