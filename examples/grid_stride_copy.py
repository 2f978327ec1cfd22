"""A grid-stride copy of a large 1-D tensor with 128-bit vectors.

Work is cut into chunks of THREADS*UNROLL float32x4 vectors; a CTA copies a whole chunk
(vector u*THREADS + tx of it, so each of its warp-wide accesses is 512 contiguous bytes) and
strides over chunks by the grid.  Each thread keeps UNROLL vectors in flight: loads into
registers first, then stores (a load after a store to another buffer could alias, and would
wait).  The float32x4 accesses are proven 16-byte aligned from the index facts (i * 4) and the
declared align=16.

By default the grid is a callable of N with one 4 KiB chunk (256 threads x 1 vector) per CTA:
on the H200 that beat every persistent grid (a few CTAs per SM looping) by 7-10% and larger
chunks (UNROLL 2-4) by 1-5% (benchmarks/RESULTS.md).  Pass ctas=<int> for a fixed, persistent
grid; the loop is correct for any grid."""
import numpy as np

import ptxgen as pg

N = pg.var("N")
THREADS = 256
UNROLL = 1


def make(threads=THREADS, unroll=UNROLL, ctas=None, name="grid_stride_copy", load_hint=None,
         store_hint=None):
    """The copy with its tuning knobs: threads per CTA, vectors in flight per thread, grid size
    (None: one chunk per CTA), and the cache hints of the main loop's loads and stores
    (e.g. ["nc", "L1::no_allocate"]; "cs")."""
    per_chunk = threads * unroll

    def one_chunk_per_cta(args):
        return (max(1, args["N"] // 4 // per_chunk),)

    grid = one_chunk_per_cta if ctas is None else (ctas,)
    return pg.kernel(block=(threads,), grid=grid, name=name)(
        _body(threads, unroll, ctas, load_hint, store_hint))


def _body(THREADS, UNROLL, CTAS, load_hint, store_hint):
    def grid_stride_copy(src: pg.Tensor((N,), "float32"), dst: pg.Tensor((N,), "float32")):
        _copy(src, dst, THREADS, UNROLL, CTAS, load_hint, store_hint)
    return grid_stride_copy


def _copy(src, dst, THREADS, UNROLL, CTAS, load_hint=None, store_hint=None):
    tx = pg.thread_id(THREADS)
    bx = pg.cta_id(CTAS)
    per_chunk = THREADS * UNROLL
    nvec = pg.let(N // 4)
    nchunks = pg.let(nvec // per_chunk)
    regs = pg.alloc_local((UNROLL * 4,), "float32")
    for chunk in pg.serial(bx, nchunks, pg.grid_dim()):
        first = pg.let(chunk * per_chunk + tx)
        for u in pg.unroll(UNROLL):
            regs.vstore([u * 4], src.vload([(first + u * THREADS) * 4], "float32x4",
                                           cache_hint=load_hint))
        for u in pg.unroll(UNROLL):
            dst.vstore([(first + u * THREADS) * 4], regs.vload([u * 4], "float32x4"),
                       cache_hint=store_hint)
    gtid = pg.let(bx * THREADS + tx)
    nthreads = pg.let(pg.grid_dim() * THREADS)
    for i in pg.serial(nchunks * per_chunk + gtid, nvec, nthreads):   # leftover vectors
        dst.vstore([i * 4], src.vload([i * 4], "float32x4"))
    for i in pg.serial(nvec * 4 + gtid, N, nthreads):                 # leftover elements
        dst[i] = src[i]


grid_stride_copy = make()
KERNELS = [grid_stride_copy]


def check(xp, rng):
    out = []
    for n in (1 << 20, (1 << 20) + 7, 12345, 3):
        a = rng.standard_normal(n).astype(np.float32)
        B = xp.full(n, np.nan, dtype=np.float32)
        grid_stride_copy(xp.asarray(a), B)
        out.append((f"grid_stride_copy(N={n})", B, a))
    persistent = make(ctas=7, name="grid_stride_copy_7ctas")     # several chunks per CTA
    a = rng.standard_normal((1 << 16) + 5).astype(np.float32)
    B = xp.full(a.size, np.nan, dtype=np.float32)
    persistent(xp.asarray(a), B)
    out.append(("grid_stride_copy(7 CTAs)", B, a))
    return out
