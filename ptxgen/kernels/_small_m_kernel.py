"""The decode GEMM's kernels (gemm_small_m.py chooses the configuration and launches them):
make_small_m, the A/B-swapped persistent split-K GEMM, make_reduce, the fixed-order sum of
its split partials when they are not reduced inside the GEMM, and make_gemv, the CUDA-core
kernel for a single token or a few.  See gemm_small_m.py for the design."""
import ptxgen as pg
from ptxgen.layout import S, TileLayout, laneid
from ptxgen.primitives.tcgen05 import canonical_layout

from ._checks import ArgumentError
from ._gemm_sm90 import wgmma_consumer

BW = 128                   # weight rows per CTA tile: two consumer warpgroups x 64
SMEM_BUDGET = 200 * 1024   # ring bytes we allow ourselves (the epilogue tiles come on top)
MAX_STAGES = 16
OUT_DTYPE = {"bfloat16": "bfloat16", "float16": "float16", "float8_e4m3fn": "bfloat16"}
ELEM_BYTES = {d: pg.dtype(d).bits // 8 for d in OUT_DTYPE}   # of the dtype table


class GemmInputError(ArgumentError):
    """An argument of gemm_small_m or gemm_blockscaled that breaks a rule; the message names
    both.  An ArgumentError, so one except clause catches every wrapper's refusals."""


class ConfigError(GemmInputError):
    """A forced small-M configuration that the kernel's rules forbid."""


FP8_MAX_MN = 192   # fp8 keeps two 64 x MN fp32 tiles (the sum and each step's partial)


def valid_mn(MN, dtype="bfloat16") -> tuple:
    """(ok, reason) for a token tile width: wgmma's N is a multiple of 8 up to 256, and the
    epilogue moves 64-column chunks, so above 64 it is a multiple of 64; fp8's promotion
    keeps two fp32 tiles in the consumers' 232 registers, so it stops at FP8_MAX_MN."""
    if not isinstance(MN, int) or MN < 8 or MN > 256 or MN % 8:
        return False, f"MN = {MN!r}: wgmma N is a multiple of 8 from 8 to 256"
    if MN > 64 and MN % 64:
        return False, f"MN = {MN}: above 64 the epilogue's 64-token chunks need a multiple of 64"
    if MN > FP8_MAX_MN and str(dtype).startswith("float8"):
        return False, (f"MN = {MN}: float8 keeps two 64 x MN fp32 tiles (the sum and each "
                       f"K-step's partial) in 232 registers a thread, so at most {FP8_MAX_MN}")
    return True, ""


def make_small_m(dtype="bfloat16", MN=16, STAGES=8, ctas=132, split=False, scaled=None):
    """The kernel for one configuration; M, N, K and the split count S (W's first extent) are
    launch-time symbols.  split=False: D gets the tile (S must be 1); split=True: W (S, M, NW)
    gets each split's fp32 partial tile (D is not written: make_reduce sums W into it).
    Reducing inside this kernel (the last split of a tile sums the partials), launching the
    reduce kernel as a programmatic dependent launch, and loading several stages together
    were each built and measured no faster (benchmarks/RESULTS.md), so they went."""
    ok, why = valid_mn(MN, dtype)
    if not ok:
        raise ConfigError(why)
    if dtype not in OUT_DTYPE:
        raise ConfigError(f"dtype {dtype!r}: bfloat16, float16 or float8_e4m3fn")
    scaled = dtype.startswith("float8") if scaled is None else scaled
    promote = int(dtype.startswith("float8"))   # cuBLAS's default: each K-step's sum into fp32
    out_dt = OUT_DTYPE[dtype]
    BK = 128 // ELEM_BYTES[dtype]                 # one 128-byte swizzle span of K per stage
    MC = min(MN, 64)                         # tokens per epilogue chunk
    st_dt = "float32" if split else out_dt
    M, N, K = pg.var("M"), pg.var("N"), pg.var("K")
    ND, S, MW, NW = pg.var("ND"), pg.var("S"), pg.var("MW"), pg.var("NW")
    LW = canonical_layout(64, BK, dtype, stages=2 * STAGES)   # weights: [2 * stage + half]
    LX = canonical_layout(MN, BK, dtype, stages=STAGES)       # tokens

    def gemm(A: pg.Tensor((M, K), dtype), B: pg.Tensor((N, K), dtype),
             D: pg.Tensor((M, ND), out_dt), W: pg.Tensor((S, MW, NW), "float32"),
             SA: pg.Tensor((1,), "float32"), SB: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(384)
        cta = pg.cta_id(ctas)
        pool = pg.SMEMPool()
        Ws = pool.alloc((2 * STAGES, 64, BK), dtype, align=1024, layout=LW)
        Xs = pool.alloc((STAGES, MN, BK), dtype, align=1024, layout=LX)
        Cs = pool.alloc((2, MC, 64), st_dt, align=1024)
        pipe = pg.Pipeline(pool, stages=STAGES, consumers=2, producer_arrivals=3)
        pool.commit()
        pipe.init()
        CsT = Cs.permute(0, 2, 1)                       # (2, 64 weight rows, MC tokens)
        tiles_m = pg.let((M + MN - 1) // MN)
        tiles = pg.let((N + BW - 1) // BW * tiles_m)
        nk = pg.let((K + BK - 1) // BK)
        mine = pg.let((tiles * S - cta + ctas - 1) // ctas)

        def unit(i):
            """Weight row, token row, split, first K-block and K-block count of this CTA's
            i-th unit.  Consecutive CTAs take the splits of one tile, then the next tile
            (the token tiles of one weight tile follow each other: L2 reuse): a round's
            loads spread over K ranges instead of all reading one K range of every weight
            row (addresses a row pitch apart), which streamed slower
            (benchmarks/RESULTS.md)."""
            u = pg.let(cta + i * ctas)
            s = pg.let(u % S)
            r = pg.let(u // S)
            kb0 = pg.let(s * nk // S)
            return (pg.let(r // tiles_m * BW), pg.let(r % tiles_m * MN), s, kb0,
                    pg.let((s + 1) * nk // S - kb0))

        with pg.warpgroup_role(0):
            pg.setmaxnreg(40, "dec")
            with pg.if_(tx == 0):
                prod = pipe.producer()

                def load(s, k0, n0, m0, full):
                    for h in range(2):
                        pg.tile.thread.copy_async(Ws[2 * s + h:2 * s + h + 1, 0:64, 0:BK],
                                                  B[n0 + 64 * h:n0 + 64 * h + 64, k0:k0 + BK],
                                                  mbar=full, cache_hint="evict_first")
                    pg.tile.thread.copy_async(Xs[s:s + 1, 0:MN, 0:BK],
                                              A[m0:m0 + MN, k0:k0 + BK], mbar=full,
                                              cache_hint="evict_last")

                for i in pg.serial(mine):
                    n0, m0, _, kb0, cnt = unit(i)
                    for k in pg.serial(cnt):
                        k0 = pg.let((kb0 + k) * BK)
                        prod.acquire()
                        load(prod.stage, k0, n0, m0, prod.full)
                        prod.commit()

        with pg.warpgroup_role(range(1, 3)) as c:
            pg.setmaxnreg(232, "inc")
            acc, first_thread, mma_tile = wgmma_consumer(
                pipe, tx, MN, lambda s: Ws[2 * s + c, 0:64, 0:BK], lambda s: Xs[s, 0:MN, 0:BK],
                promote, (SA, SB) if scaled else None, each_step=True)
            for i in pg.serial(mine):
                n0, m0, sp, _, cnt = unit(i)
                mma_tile(cnt)
                w0 = pg.let(n0 + 64 * c)
                # the accumulator out through shared memory and TMA, MC tokens at a time:
                # into W's split sp, or into D (the TMA clips at its edges)
                for j in range(MN // MC):
                    with pg.if_(first_thread):
                        pg.tile.thread.async_wait(0, read=True, kind="bulk")
                    pg.named_barrier(4 + c, 128)
                    pg.tile.warpgroup.cast(CsT[c, 0:64, 0:MC], acc[0:64, j * MC:j * MC + MC])
                    pg.ptx.fence.proxy_async()
                    pg.named_barrier(4 + c, 128)
                    with pg.if_(first_thread):
                        t0 = m0 + j * MC
                        if split:
                            pg.tile.thread.copy_async(W[sp:sp + 1, t0:t0 + MC, w0:w0 + 64],
                                                      Cs[c:c + 1, 0:MC, 0:64])
                        else:
                            pg.tile.thread.copy_async(D[t0:t0 + MC, w0:w0 + 64],
                                                      Cs[c:c + 1, 0:MC, 0:64])
                        pg.tile.thread.async_commit(kind="bulk")
            with pg.if_(first_thread):
                pg.tile.thread.async_wait(0, kind="bulk")

    gemm.__name__ = (f"gemm_small_m_{dtype}_n{MN}_s{STAGES}" + ("_splitk" if split else "") +
                     ("_scaled" if scaled else ""))
    return pg.kernel(gemm, grid=(ctas,), block=(384,))


def make_reduce(out_dt="bfloat16", splits=2, ctas=1056, threads=256):
    """D[m, n] = sum over s = 0 .. splits-1, in that order, of W[s, m, n] (fp32), rounded once
    to out_dt: the fixed order makes split-K's result the same bits every run.  The split
    loop is unrolled so a thread's `splits` loads are in flight together (a serial loop
    waits for each: latency-bound); `ctas` fills the SMs (8 x 256 threads per SM)."""
    M, N, NW = pg.var("M"), pg.var("N"), pg.var("NW")

    def reduce(W: pg.Tensor((splits, M, NW), "float32"), D: pg.Tensor((M, N), out_dt)):
        tx = pg.thread_id(threads)
        b = pg.cta_id(ctas)
        for e in pg.serial(b * threads + tx, M * N, ctas * threads):
            m = pg.let(e // N)
            n = pg.let(e % N)
            parts = [pg.let(W[s, m, n]) for s in range(splits)]
            acc = parts[0]
            for p in parts[1:]:
                acc = pg.let(acc + p)
            D[m, n] = pg.cast(acc, out_dt)

    reduce.__name__ = f"gemm_small_m_reduce_{out_dt}_x{splits}"
    return pg.kernel(reduce, grid=(ctas,), block=(threads,))


GEMV_VEC = 8                 # 16-bit elements of one 16-byte load
GEMV_REGS = 192              # fp32 registers a lane may give to weights, activations and sums
GEMV_DTYPES = ("bfloat16", "float16")
GEMV_MAX_ELEMS = 2 ** 31      # N x K: the element index is int32 until scaled to bytes


def valid_gemv(dtype, tokens, U, W, N=1, K=1) -> tuple:
    """(ok, reason) for a CUDA-core GEMV shape: U 16-byte vectors a lane per K chunk, W warps
    a CTA (one weight row each).  A lane holds its U * 8 weights and, per token, U * 8
    activations and sums in fp32 registers, (2 * tokens + 1) * U * 8 in all: at most
    GEMV_REGS, and at most what a CTA of W warps leaves a thread (65536 / (32 * W)) less 32
    for addresses and counters (1024 threads get 64 registers: more spills).  The weights,
    b (N, K), stay within GEMV_MAX_ELEMS."""
    if dtype not in GEMV_DTYPES:
        return False, (f"dtype {dtype}: the CUDA-core GEMV takes {' or '.join(GEMV_DTYPES)} "
                       f"(float8 needs the wgmma path's promotion and scales)")
    if not isinstance(U, int) or not 1 <= U <= 8:
        return False, f"U = {U!r}: 1 to 8 16-byte vectors a lane per K chunk"
    if W not in (1, 2, 4, 8, 16, 32):
        return False, f"W = {W!r}: 1, 2, 4, 8, 16 or 32 warps a CTA"
    budget = min(GEMV_REGS, 65536 // (32 * W) - 32)
    if not isinstance(tokens, int) or tokens < 1 or (2 * tokens + 1) * U * GEMV_VEC > budget:
        return False, (f"{tokens} token(s) with U = {U}, W = {W}: a lane keeps (2 x tokens + "
                       f"1) x U x {GEMV_VEC} fp32 registers, at most {budget} with {W} warps "
                       f"a CTA; use fewer vectors or warps, or the wgmma path")
    if N * K > GEMV_MAX_ELEMS:
        return False, (f"b has {N} x {K} = {N * K} elements; the GEMV indexes them in 32-bit "
                       f"arithmetic, at most {GEMV_MAX_ELEMS} (use Config: the wgmma path's "
                       f"TMA coordinates have no such limit)")
    return True, ""


def make_gemv(dtype="bfloat16", tokens=1, U=8, W=4):
    """D (M, N) = A (M, K) @ B (N, K)^T for M = `tokens` on the CUDA cores, fp32 sums, one
    rounding.  A and B come as (rows, K / 8, 8) views, so every load is a 16-byte vector.
    Warp w of CTA c owns weight row n = c * W + w: per chunk of 32 * U vectors each lane
    loads U vectors of the row and of every token row (coalesced 512-byte runs), converts
    and FMAs into per-token sums; the K tail (fewer than 32 * U vectors) goes lane by lane
    into the first vector's sums; then one lane reduction per token.  The summation order
    is fixed, so the result is the same bits every run.  With one token the weight stream
    is the whole cost and no wgmma, workspace or second kernel is worth its setup."""
    ok, why = valid_gemv(dtype, tokens, U, W)
    if not ok:
        raise ConfigError(why)
    V, C = GEMV_VEC, 32 * U
    lay = TileLayout(S[(1, (U, 32), V):(1, (V, 1 @ laneid), 1)])   # (row, chunk vectors, 8)
    M, N, KV = pg.var("M"), pg.var("N"), pg.var("KV")

    def gemv(A: pg.Tensor((M, KV, V), dtype), B: pg.Tensor((N, KV, V), dtype),
             D: pg.Tensor((M, N), dtype)):
        tx = pg.thread_id(32 * W)
        lane = pg.lane_id()
        n = pg.let(pg.cta_id() * W + tx // 32)
        warp, one = pg.tile.warp, pg.tile.thread
        w = pg.alloc_local((1, C, V), "float32", layout=lay)
        xs = [pg.alloc_local((1, C, V), "float32", layout=lay) for _ in range(tokens)]
        sums = [pg.alloc_local((1, C, V), "float32", layout=lay) for _ in range(tokens)]
        tw = pg.alloc_local((V,), "float32")
        tt = pg.alloc_local((V,), "float32")
        with pg.if_(n < N):                       # warp-uniform: the whole warp or none
            for s in sums:
                warp.fill(s, 0.0)
            full = pg.let(KV // C)
            for kc in pg.serial(full):
                k0 = pg.let(kc * C)
                warp.cast(w, B[n:n + 1, k0:k0 + C, 0:V])
                for m in range(tokens):
                    warp.cast(xs[m], A[m:m + 1, k0:k0 + C, 0:V])
                    warp.fma(sums[m], w, xs[m], sums[m])
            for j in pg.serial((KV - full * C + 31) // 32):
                kv = pg.let(full * C + j * 32 + lane)
                with pg.if_(kv < KV):
                    one.cast(tw, B[n, kv, 0:V])
                    for m in range(tokens):
                        first = sums[m].local()[0:V]     # the lane's vector u = 0
                        one.cast(tt, A[m, kv, 0:V])
                        one.fma(first, tw, tt, first)
            for m in range(tokens):
                warp.sum(D[m, n:n + 1], sums[m], axis=(1, 2))

    gemv.__name__ = f"gemm_gemv_{dtype}_m{tokens}_u{U}_w{W}"
    return pg.kernel(gemv, grid=lambda a: (-(-a["N"] // W),), block=(32 * W,))
