"""Softmax over the last dimension of an (M, N) float16 / bfloat16 / float32 tensor, from
tile ops, float32 arithmetic.

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
second pass writes exp(x - m) / s.  Kernels are built per (N, dtype) and cached;
`softmax(x)` takes a torch tensor.
"""
from functools import lru_cache

import numpy as np

import ptxgen as pg
from ptxgen.layout import S, TileLayout, tid

M = pg.var("M")
LOG2E = 1.4426950408889634
INF = float("inf")
IN_REGISTERS = 32          # elements per thread of a register-resident row


def plan(n: int, bits: int, per_thread: int = 16):
    """(V, T, R): vector width (16-byte accesses when n allows), threads (about
    n / per_thread, 32..1024), vectors per thread."""
    V = next(v for v in (128 // bits, 4, 2, 1) if n % v == 0 and v <= 128 // bits)
    T = 32
    while T < 1024 and T * per_thread < n:
        T *= 2
    R = -(-n // (T * V))
    return V, T, R


@lru_cache(maxsize=None)
def make(n: int, dtype: str = "float32", per_thread: int = 16):
    """The kernel for rows of n elements: in registers when they fit (IN_REGISTERS
    elements per thread at most), else the online two-pass form in chunks."""
    bits = {"float16": 16, "bfloat16": 16, "float32": 32}[dtype]
    V, T, R = plan(n, bits, per_thread)
    if R * V <= IN_REGISTERS:
        return _in_registers(n, dtype, V, T, R)
    return _online(n, dtype, V, T, max(V, per_thread // V * V))


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
    full, tail = divmod(n, C)
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

        def update(c0, w):
            """Fold x[row, c0:c0+w] into (mt, st)."""
            t.cast(xc, x[row, c0:c0 + w], **({"pad": -INF} if w != C else {}))
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

        for c in pg.serial(full):
            update(c * C, C)
        if tail:
            update(full * C, tail)
        m_all, s_all = pg.alloc_local((1,), "float32"), pg.alloc_local((1,), "float32")
        t.max(m_all, mt)                                # combine the threads' (m_t, s_t)
        one.sub(nm, mt.local(), m_all[0])
        one.exp(nm, nm)
        one.mul(st.local(), st.local(), nm[0])
        t.sum(s_all, st)
        one.reciprocal(s_all, s_all)
        hi, lo = _neg_scaled(one, m_all)

        def write(c0, w):
            t.cast(xc, x[row, c0:c0 + w], **({"pad": -INF} if w != C else {}))
            t.fma(xc, xc, LOG2E, hi[0])
            t.add(xc, xc, lo[0])
            t.exp2(xc, xc)
            t.mul(xc, xc, s_all[0])
            t.cast(y[row, c0:c0 + w], xc)

        for c in pg.serial(full):
            write(c * C, C)
        if tail:
            write(full * C, tail)
    return softmax


_NAMES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32"}


def softmax(x, out=None, **knobs):
    """softmax(x, dim=-1) for a float16 / bfloat16 / float32 torch tensor; `knobs` go to
    make (per_thread=)."""
    name = _NAMES.get(str(x.dtype))
    if name is None:
        raise ValueError(f"softmax: x must be float16, bfloat16 or float32, got {x.dtype}")
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).contiguous()
    y = out.reshape(x2.shape) if out is not None else x2.new_empty(x2.shape)
    make(shape[-1], name, **knobs)(x2, y)
    return y.reshape(shape)


def reference(v):
    """float64 softmax of the rows of v."""
    v = np.asarray(v, np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_NP = {"float16": np.float16, "bfloat16": np.uint16, "float32": np.float32}


def to_dtype(v, dt):
    """float32 values -> an array of dt (bfloat16 as its bits, round to nearest even)."""
    if dt != "bfloat16":
        return np.asarray(v).astype(_NP[dt])
    b = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def values(a, dt):
    if dt == "bfloat16":
        return (np.asarray(a, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(a, np.float32)


def ulps(got, want, dt):
    """|got - want| in ulps of dt at want."""
    p, emin = {"float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126)}[dt]
    g = values(got, dt).astype(np.float64)
    e = np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** emin)))
    return np.abs(g - want) / 2.0 ** (e - (p - 1))


def bound(v, dt):
    """The stated error bound in ulps: 16-bit outputs 1 ulp (float32 arithmetic, one
    rounding); float32 outputs 6 + log2(N) + 2.5 |x - max| (ex2.approx: < 3 ulp, of an
    exponent rounded at |x - max| log2 e: up to 2.5 |x - max| ulp; the sum's tree: log2 N)."""
    if dt != "float32":
        return 1.0
    return 6 + np.log2(v.shape[1]) + 2.5 * np.abs(v - v.max(axis=1, keepdims=True))


KERNELS = [make(8192, "float32"), make(1000, "bfloat16"), make(50000, "float16")]
SHAPES = ((16, 8192, "float32"), (1, 1000, "bfloat16"), (5, 1001, "float16"),
          (3, 50000, "float16"), (2, 40001, "bfloat16"), (4, 24, "float32"), (1, 1, "float32"),
          (2, 65536, "float32"))


def check(xp, rng):
    out = []
    for m, n, dt in SHAPES:
        x = to_dtype((rng.standard_normal((m, n)) * 3).astype(np.float32), dt)
        y = xp.asarray(np.full((m, n), 0x7F, _NP[dt]))               # poisoned
        make(n, dt)(xp.asarray(x), y)
        v = values(x, dt).astype(np.float64)
        err = ulps(xp.asnumpy(y), reference(v), dt) / bound(v, dt)
        out.append((f"softmax(M={m}, N={n}, {dt}) within the bound (max {err.max():.2f} of it)",
                    np.array([err.max() <= 1.0]), np.array([True])))
    return out


if __name__ == "__main__":
    for k in KERNELS:
        r = k.compile("sm_90a")
        print(f"{k.name}: {r.registers} registers, {r.spill_bytes} spill bytes")
