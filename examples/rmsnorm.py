"""RMSNorm over the rows of an (M, N) bfloat16 tensor, float32 accumulation, from tile ops.

    y[i, :] = x[i, :] * rsqrt(mean(x[i, :]^2) + eps) * weight

One CTA per row.  The row lives in registers: a float32 tile of P >= N elements laid out
(R, T, V):(V, 1 @ tid, 1), so thread t holds R vectors of V consecutive elements (16-byte
loads of 8 bf16 when N is a multiple of 8; a row of other lengths is read element by
element, which is what its alignment allows).  x is read once and y written once:

    cast   xr <- x[i, 0:N]   (pad 0: a ragged row is a shorter memory operand)
    mul    sq <- xr * xr;    sum ss <- sq (lanes by shfl.sync.bfly, warps through shared)
    fma    ss <- ss * (1/N) + eps;   rsqrt ss <- ss      (thread scope: one register)
    mul    xr <- xr * ss[0];  cast wr <- weight;  mul xr <- xr * wr
    cast   y[i, 0:N] <- xr   (cvt.rn.bf16x2.f32 pairs, 16-byte stores)

Kernels are built per (N, dtype) and cached; `rmsnorm(x, weight, eps)` takes torch tensors.
"""
from functools import lru_cache

import numpy as np

import ptxgen as pg
from ptxgen.layout import S, TileLayout, tid

M = pg.var("M")


def plan(n: int, per_thread: int = 16, max_per_thread: int = 64):
    """(V, T, R): vector width, threads (about n / per_thread, 32..1024), vectors per thread."""
    V = next(v for v in (8, 4, 2, 1) if n % v == 0)
    T = 32
    while T < 1024 and T * per_thread < n:
        T *= 2
    R = -(-n // (T * V))
    if R * V > max_per_thread:
        raise ValueError(f"rows of {n} elements do not fit in registers ({R * V} per thread)")
    return V, T, R


@lru_cache(maxsize=None)
def make(n: int, dtype: str = "bfloat16", per_thread: int = 16, early_weight: bool = True):
    """The kernel for rows of n elements; `per_thread` sets the block size (n / per_thread
    threads), `early_weight` loads the weight row before the reduction (overlapping it)."""
    V, T, R = plan(n, per_thread)
    P = R * T * V
    lay = TileLayout(S[(R, T, V):(V, 1 @ tid, 1)])

    @pg.kernel(grid=lambda a: (a["M"],), block=(T,),
               name=f"rmsnorm_{dtype}_{n}_t{T}{'' if early_weight else '_late'}")
    def rmsnorm(x: pg.Tensor((M, n), dtype), weight: pg.Tensor((n,), dtype),
                y: pg.Tensor((M, n), dtype), eps: pg.float32):
        pg.thread_id(T)
        row = pg.cta_id()
        t = pg.tile.cta
        xr = pg.alloc_local((P,), "float32", layout=lay)
        sq = pg.alloc_local((P,), "float32", layout=lay)
        ss = pg.alloc_local((1,), "float32")
        wr = pg.alloc_local((P,), "float32", layout=lay)
        pad = {"pad": 0.0} if P != n else {}
        t.cast(xr, x[row, 0:n], **pad)
        if early_weight:
            t.cast(wr, weight[0:n], **pad)
        t.mul(sq, xr, xr)
        t.sum(ss, sq)
        pg.tile.thread.fma(ss, ss, 1.0 / n, eps)
        pg.tile.thread.rsqrt(ss, ss)
        t.mul(xr, xr, ss[0])
        if not early_weight:
            t.cast(wr, weight[0:n], **pad)
        t.mul(xr, xr, wr)
        t.cast(y[row, 0:n], xr)
    return rmsnorm


def rmsnorm(x, weight, eps=1e-6, out=None, **knobs):
    """RMSNorm of each row of x (M, N) bfloat16 (or float16) with weight (N,); `knobs` go to
    make (per_thread=, early_weight=)."""
    if x.dim() != 2 or weight.shape != (x.shape[1],) or x.dtype != weight.dtype:
        raise ValueError(f"rmsnorm: x must be (M, N) and weight (N,) of x's dtype; got "
                         f"{tuple(x.shape)} {x.dtype} and {tuple(weight.shape)} {weight.dtype}")
    name = {"torch.bfloat16": "bfloat16", "torch.float16": "float16"}.get(str(x.dtype))
    if name is None:
        raise ValueError(f"rmsnorm: x must be bfloat16 or float16, got {x.dtype}")
    x = x.contiguous()
    y = out if out is not None else x.new_empty(x.shape)
    make(x.shape[1], name, **knobs)(x, weight.contiguous(), y, float(eps))
    return y


def bf16_bits(v):
    """float32 -> bfloat16 bits, round to nearest even (numpy has no bfloat16)."""
    b = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def reference(x, w, eps):
    """float64 RMSNorm of bfloat16 bits x (M, N) and w (N,)."""
    xv = bf16_values(x).astype(np.float64)
    r = xv / np.sqrt(np.mean(xv * xv, axis=1, keepdims=True) + eps)
    return r * bf16_values(w).astype(np.float64)


def bf16_ulps(got_bits, want):
    """|got - want| in bfloat16 ulps at want."""
    g = bf16_values(got_bits).astype(np.float64)
    e = np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -126)))
    return np.abs(g - want) / 2.0 ** (e - 7)


KERNELS = [make(8192), make(1000), make(1001)]
SHAPES = ((64, 8192), (1, 1000), (7, 1001), (3, 4096), (2, 24), (1, 1))


def check(xp, rng):
    """Against float64 numpy: within 1 bfloat16 ulp (float32 accumulation, one rounding)."""
    out = []
    for m, n in SHAPES:
        x = bf16_bits(rng.standard_normal((m, n)))
        w = bf16_bits(rng.uniform(0.5, 1.5, n))
        y = xp.asarray(np.full((m, n), 0xFFFF, np.uint16))          # poisoned (NaN)
        make(n)(xp.asarray(x), xp.asarray(w), y, 1e-6)
        err = bf16_ulps(xp.asnumpy(y), reference(x, w, 1e-6))
        out.append((f"rmsnorm(M={m}, N={n}) within 1 bf16 ulp (max {err.max():.2f})",
                    np.array([err.max() <= 1.0]), np.array([True])))
    return out


if __name__ == "__main__":
    for k in KERNELS + [make(8192, per_thread=p) for p in (8, 32)]:
        r = k.compile("sm_90a")
        print(f"{k.name}: {r.registers} registers, {r.spill_bytes} spill bytes")
