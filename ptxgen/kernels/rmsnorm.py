"""RMSNorm over the last dimension of a (..., N) float32 / bfloat16 / float16 tensor.

    from ptxgen.kernels import rmsnorm
    y = rmsnorm(x, weight, eps=1e-6)    # x * rsqrt(mean(x^2, -1) + eps) * weight
    rmsnorm(x, None)                    # no weight (torch.nn.functional.rms_norm's weight=None)
    rmsnorm(x, weight, out=y)           # out: x's shape and dtype

    y[..., :] = x[..., :] * rsqrt(mean(x[..., :]^2) + eps) * weight

dtypes: float32, bfloat16, float16; weight (N,) of any of them (as torch's rms_norm: an fp32
weight beside bf16 activations, say) or None; float32 arithmetic, one rounding to x's dtype,
the output's.  Shapes: any (..., N); empty dimensions give an empty result; a 0-d x is
refused.
Also `torch.ops.ptxgen.rmsnorm(x, weight, eps)` (a torch custom op: torch.compile and CUDA
graphs).  Speed on the H200 (benchmarks/RESULTS-archive.md, session of 2026-12-02): bf16
8192 x 8192 at 1.50x torch's throughput (3806 GB/s).

One CTA per row.  Up to IN_REGISTERS elements a thread (32768 a row at 1024 threads) the row
lives in registers: a float32 tile of P >= N elements laid out
(R, T, V):(V, 1 @ tid, 1), so thread t holds R vectors of V consecutive elements (16-byte
loads when N is a multiple of the vector width; a row of other lengths is read element by
element, which is what its alignment allows).  x is read once and y written once:

    cast   xr <- x[i, 0:N]   (pad 0: a ragged row is a shorter memory operand)
    mul    sq <- xr * xr;    sum ss <- sq (lanes by shfl.sync.bfly, warps through shared)
    fma    ss <- ss * (1/N) + eps;   rsqrt ss <- ss      (thread scope: one register)
    mul    xr <- xr * ss[0];  cast wr <- weight;  mul xr <- xr * wr
    cast   y[i, 0:N] <- xr   (cvt.rn.bf16x2.f32 pairs, 16-byte stores)

A longer row would spill, so `chunked` reads it twice in chunks of 16 elements a thread: one
pass sums the squares, the second reads x again, scales it and writes y.

Kernels are built per (N, dtype, weighted) and cached (`make`).
"""
from functools import lru_cache

import ptxgen as pg
from ptxgen.layout import S, TileLayout, tid
from ptxgen.target import VECTOR_BITS

from ._checks import (ArgumentError, Meta, is_int, known_options, meta_of, numel, out_tensor,
                      real, same_device, shares_memory, tensor)
from ._torch import compiling, differentiable, empty_like, into, torch_ops, traced

M = pg.var("M")
DTYPES = ("float32", "bfloat16", "float16")
IN_REGISTERS = 32           # elements a thread of a register-resident row (more spill)
# The weight row is loaded before the reduction (overlapping it) while a thread holds at most
# this many elements of the row; past it the early weight's registers spill (ptxas) and the
# kernel measured slower than with the weight loaded after (benchmarks/RESULTS.md).
EARLY_WEIGHT_MAX = 16
VEC_BYTES = VECTOR_BITS // 8   # the rows' widest vector: their addresses' alignment


def plan(n: int, per_thread: int = 16, bits: int = 16, op: str = "rmsnorm"):
    """(V, T, R) of a row kernel (rmsnorm's and softmax's): vector width (16-byte accesses
    when n allows), threads (about n / per_thread, 32..1024), vectors per thread.  Past
    IN_REGISTERS elements a thread (R * V) the row is read in chunks of `chunk(V, per_thread)`
    elements a thread instead."""
    for name, v in (("n", n), ("per_thread", per_thread)):
        if not is_int(v) or v < 1:
            raise ArgumentError(f"{op}: {name} = {v!r}: a positive int (n elements a row, "
                                f"about per_thread of them a thread)")
    widest = VECTOR_BITS // bits
    V = next(v for v in (widest, 4, 2, 1) if n % v == 0 and v <= widest)
    T = 32
    while T < 1024 and T * per_thread < n:
        T *= 2
    return V, T, -(-n // (T * V))


def chunk(V: int, per_thread: int) -> int:
    """Elements a thread of one chunk of a row past the registers: about per_thread, whole
    V-vectors, at most IN_REGISTERS (a larger chunk spills as a larger row would)."""
    return max(V, min(per_thread, IN_REGISTERS) // V * V)


@lru_cache(maxsize=None)
def make(n: int, dtype: str = "bfloat16", per_thread: int = 16, early_weight: bool | None = None,
         weighted: bool = True, weight_dtype: str | None = None):
    """The kernel for rows of n elements: in registers when they fit (IN_REGISTERS elements a
    thread), else in chunks (`chunked`).  `per_thread` sets the block size (n / per_thread
    threads); `early_weight` loads the weight row before the reduction (overlapping it;
    None: while a thread holds at most EARLY_WEIGHT_MAX elements; True on a chunked row is
    refused); `weighted=False`: no weight parameter (y = x * rsqrt(mean(x^2) + eps));
    `weight_dtype`: the weight's, when not x's."""
    wdt = weight_dtype or dtype
    for d in (dtype, wdt):
        if d not in DTYPES:
            raise ArgumentError(f"rmsnorm.make: dtype {d!r}; it takes {', '.join(DTYPES)}")
    if early_weight not in (None, True, False):
        raise ArgumentError(f"rmsnorm: early_weight must be True, False or None, got "
                            f"{early_weight!r}")
    V, T, R = plan(n, per_thread, bits=pg.dtype(dtype).bits)
    if R * V > IN_REGISTERS:
        if early_weight:     # the weight chunk is read beside x's in the second pass only
            raise ArgumentError(
                f"rmsnorm: early_weight=True keeps the weight row in registers, but a row of "
                f"{n} elements at per_thread={per_thread} holds {R * V} elements a thread, "
                f"more than IN_REGISTERS = {IN_REGISTERS}, so it is read in chunks; leave "
                f"early_weight unset")
        return chunked(n, dtype, V, T, chunk(V, per_thread), weighted, weight_dtype)
    P = R * T * V
    if early_weight is None:
        early_weight = R * V <= EARLY_WEIGHT_MAX
    lay = TileLayout(S[(R, T, V):(V, 1 @ tid, 1)])

    def body(x, weight, y, eps):
        pg.thread_id(T)
        row = pg.cta_id()
        t = pg.tile.cta
        xr = pg.alloc_local((P,), "float32", layout=lay)
        sq = pg.alloc_local((P,), "float32", layout=lay)
        ss = pg.alloc_local((1,), "float32")
        wr = pg.alloc_local((P,), "float32", layout=lay) if weight is not None else None
        pad = {"pad": 0.0} if P != n else {}
        t.cast(xr, x[row, 0:n], **pad)
        if early_weight and weight is not None:
            t.cast(wr, weight[0:n], **pad)
        t.mul(sq, xr, xr)
        t.sum(ss, sq)
        pg.tile.thread.fma(ss, ss, 1.0 / n, eps)
        pg.tile.thread.rsqrt(ss, ss)
        t.mul(xr, xr, ss[0])
        if weight is not None:
            if not early_weight:
                t.cast(wr, weight[0:n], **pad)
            t.mul(xr, xr, wr)
        t.cast(y[row, 0:n], xr)

    name = f"rmsnorm_{dtype}_{n}_t{T}{'_late' if weighted and not early_weight else ''}"
    return _kernel(body, name, n, dtype, wdt, weighted, T)


def over_chunks(n: int, C: int, step, pad_value: float) -> None:
    """Trace step(c0, width, pad) over a row of n elements in chunks of C: the full chunks in
    a serial loop, then the ragged tail with pad = {"pad": pad_value} (what the tile op puts
    in the lanes past the row's end)."""
    full, tail = divmod(n, C)
    for c in pg.serial(full):
        step(c * C, C, {})
    if tail:
        step(full * C, tail, {"pad": pad_value})


def chunked(n: int, dtype: str, V: int, T: int, E: int, weighted: bool = True,
            weight_dtype: str | None = None):
    """Rows too long for registers, in chunks of C = T * E elements (E a thread, V-vectors)
    and a ragged tail chunk: one pass sums the squares, a second reads x again, scales it,
    multiplies the weight in and writes y."""
    wdt = weight_dtype or dtype
    C = T * E
    lay = TileLayout(S[(E // V, T, V):(V, 1 @ tid, 1)])
    per_thread = TileLayout(S[(T,):(1 @ tid,)])

    def body(x, weight, y, eps):
        pg.thread_id(T)
        row = pg.cta_id()
        t, one = pg.tile.cta, pg.tile.thread
        xc = pg.alloc_local((C,), "float32", layout=lay)
        mine = xc.local()                                   # this thread's E registers
        acc = pg.alloc_local((T,), "float32", layout=per_thread)    # its sum of squares
        cs, ss = pg.alloc_local((1,), "float32"), pg.alloc_local((1,), "float32")
        wc = pg.alloc_local((C,), "float32", layout=lay) if weight is not None else None
        one.zero(acc.local())

        def fold(c0, w, pad):
            t.cast(xc, x[row, c0:c0 + w], **pad)
            one.mul(mine, mine, mine)
            one.sum(cs, mine)
            one.add(acc.local(), acc.local(), cs[0])

        def write(c0, w, pad):
            t.cast(xc, x[row, c0:c0 + w], **pad)
            t.mul(xc, xc, ss[0])
            if weight is not None:
                t.cast(wc, weight[c0:c0 + w], **pad)
                t.mul(xc, xc, wc)
            t.cast(y[row, c0:c0 + w], xc)

        over_chunks(n, C, fold, 0.0)
        t.sum(ss, acc)                                      # the row's mean square
        one.fma(ss, ss, 1.0 / n, eps)
        one.rsqrt(ss, ss)
        over_chunks(n, C, write, 0.0)

    return _kernel(body, f"rmsnorm_chunked_{dtype}_{n}_t{T}_e{E}", n, dtype, wdt, weighted, T)


def _kernel(body, name, n, dtype, wdt, weighted, T):
    """The kernel of `body` with the parameters its form takes."""
    if weighted:
        def rmsnorm(x: pg.Tensor((M, n), dtype), weight: pg.Tensor((n,), wdt),
                    y: pg.Tensor((M, n), dtype), eps: pg.float32):
            body(x, weight, y, eps)
    else:
        def rmsnorm(x: pg.Tensor((M, n), dtype), y: pg.Tensor((M, n), dtype),
                    eps: pg.float32):
            body(x, None, y, eps)
    name += ("" if wdt == dtype else f"_w{wdt}") + ("" if weighted else "_noweight")
    return pg.kernel(rmsnorm, grid=lambda a: (a["M"],), block=(T,), name=name)


KERNELS = [make(8192), make(1000), make(1001)]


def dump(n: int = 8192, dtype: str = "bfloat16", per_thread: int = 16,
         early_weight: bool | None = None, weighted: bool = True) -> list:
    """`ptxgen dump ptxgen.kernels.rmsnorm --kernel-args n=4096,dtype=float32`: the kernel of
    that configuration."""
    return [make(n, dtype, per_thread, early_weight, weighted)]


def rmsnorm_plan(x: Meta, weight: Meta | None = None, out: Meta | None = None) -> tuple:
    """(rows, N, out written in place) for x (..., N) and weight (N,) or None, or the
    ArgumentError naming the argument; the rules of `rmsnorm`, over metadata only."""
    tensor("rmsnorm", "x", x, dtypes=DTYPES)
    n = x.shape[-1]
    if weight is not None:
        tensor("rmsnorm", "weight", weight, dtypes=DTYPES)
        same_device("rmsnorm", ("x", x), ("weight", weight))
        if tuple(weight.shape) != (n,):
            raise ArgumentError(f"rmsnorm: weight must be ({n},) like x's last dimension, "
                                f"got {weight.shape}")
    direct = out is None or out_tensor("rmsnorm", out, x.shape, x.dtype, x.device)
    rows = numel(x.shape[:-1])
    if rows >= 2 ** 31:
        raise ArgumentError(f"rmsnorm: x has {rows} rows; a launch takes fewer than 2^31 "
                            f"(split x)")
    return rows, n, direct


_PLANS: dict = {}


def _meta(t):
    return meta_of(t) if hasattr(t, "is_contiguous") else t


def _plan(x, weight, out, key):
    """rmsnorm_plan of the tensors, with the kernel, whether x is already (rows, N) and a slot
    for its prepared launch, memoized under their metadata."""
    m, wm = _meta(x), None if weight is None else _meta(weight)
    rows, n, direct = rmsnorm_plan(m, wm, None if out is None else _meta(out))
    wdt = None if wm is None else wm.dtype
    plan = [make(n, m.dtype, weighted=weight is not None, weight_dtype=wdt) if rows and n
            else None, rows, n, direct, len(m.shape) == 2 and m.contiguous, (rows,), None]
    if key is not None:
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def rmsnorm(x, weight=None, eps=1e-6, out=None, **knobs):
    """RMSNorm over the last dimension of x (..., N) float32 / bfloat16 / float16 on a CUDA
    device, times weight (N,) of any of those dtypes (or none), in x's dtype as torch gives
    it, into `out` when given (checked: x's shape, dtype and device).  `knobs` go to `make`
    (per_thread=, early_weight=).  Inside torch.compile it is torch.ops.ptxgen.rmsnorm."""
    if knobs:
        known_options("rmsnorm", knobs, ("per_thread", "early_weight"))
    if compiling():
        return traced("rmsnorm", (x, weight), out, eps=eps, **knobs)
    eps = real("rmsnorm", "eps", eps)
    try:           # the plan's key: everything the rules read (devices by index: -1 = CPU)
        key = (x.shape, x.dtype, x.get_device(), x.is_contiguous(),
               None if weight is None else (weight.shape, weight.dtype, weight.get_device(),
                                            weight.is_contiguous()),
               None if out is None else (out.shape, out.dtype, out.get_device(),
                                         out.is_contiguous()))
    except AttributeError:          # not a tensor: the rules name the argument
        key = None
    plan = _PLANS.get(key) if key is not None and not knobs else None
    if plan is None:
        plan = _plan(x, weight, out, key if not knobs else None)
    k, rows, n, direct, flat, grid, run = plan   # grid: the kernels' own (M,), made once
    if (x.requires_grad or weight is not None and weight.requires_grad) and \
            differentiable("rmsnorm", out):            # autograd records the op
        return torch_ops().rmsnorm(x, weight, eps, **knobs)
    if out is not None and (out.data_ptr() % VEC_BYTES or
                            shares_memory(out, (x, weight), in_place=x)):
        direct = False            # vector stores need aligned rows; the inputs stay unwritten
    y = out if direct and out is not None else empty_like(x) if flat else x.new_empty(x.shape)
    if k is not None:
        xp, wp = x.data_ptr(), 0 if weight is None else weight.data_ptr()
        if flat and not knobs and not (xp | wp) % VEC_BYTES and (weight is None or key[4][3]):
            if run is None:     # the launch for tensors of this plan's metadata, made once
                run = plan[6] = k.prepare(x, *(() if weight is None else (weight,)), y,
                                          eps, grid=grid)
            if weight is None:
                run(xp, y.data_ptr(), eps)
            else:
                run(xp, wp, y.data_ptr(), eps)
            return y if out is None else into(out, y)
        if knobs:
            k = make(n, str(x.dtype)[6:], weighted=weight is not None,
                     weight_dtype=None if weight is None else str(weight.dtype)[6:], **knobs)
        if xp % VEC_BYTES:                          # a view at an odd offset
            x = x.contiguous().clone()
        x, y2 = x.contiguous().view(rows, n), y.view(rows, n)
        if weight is None:
            k(x, y2, eps, grid=grid)
        else:
            if wp % VEC_BYTES or not weight.is_contiguous():
                weight = weight.contiguous().clone()
            k(x, weight, y2, eps, grid=grid)
    return y if out is None else into(out, y)

