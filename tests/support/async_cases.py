"""Kernels of the asynchronous-copy tests and their numpy references, shared by the CPU tests
(tests/test_async*.py, through tests/support/ptxsim.py) and the GPU tests (tests/gpu/test_async_gpu.py).

Each case is `(kernel, arrays, scalars, outputs, expected)`: `arrays` are the tensor arguments
(inputs random, outputs poisoned with 0xA5 bytes), `scalars` the scalar ones, `outputs` the
indices of the arrays to compare with `expected` bit for bit.  `run_sim(case)` runs one on the
simulator; the GPU tests copy the arrays to the device and launch the kernel.
"""
# no `from __future__ import annotations`: kernel annotations refer to local variables
import math

import numpy as np

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

NP = {"int8": np.int8, "uint8": np.uint8, "float8_e4m3fn": np.uint8, "float16": np.float16,
      "bfloat16": np.uint16, "float32": np.float32, "int32": np.int32, "uint32": np.uint32}
SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128}


def rand(rng, shape, dt):
    npdt = np.dtype(NP[dt])
    raw = rng.integers(0, 256, int(np.prod(shape)) * npdt.itemsize, dtype=np.uint8)
    return raw.view(npdt).reshape(shape)


def poison(shape, dt):
    npdt = np.dtype(NP[dt])
    return np.frombuffer(b"\xa5" * (int(np.prod(shape)) * npdt.itemsize), npdt).reshape(shape).copy()


def tile_layout(box, dt, mode):
    """The shared layout TMA fills for `box` (row-major, swizzled with the mode's pattern)."""
    if mode == "none":
        return None
    return ComposeLayout(Swizzle.mma(mode, pg.dtype(dt).bits), TileLayout(S[tuple(box)]))


def _window(gshape, starts, box):
    """(global slices, box slices) of the part of a box inside the tensor."""
    g, b = [], []
    for s, n, e in zip(starts, box, gshape):
        lo, hi = max(s, 0), min(s + n, e)
        lo, hi = (lo, hi) if lo < hi else (0, 0)
        g.append(slice(lo, hi))
        b.append(slice(lo - s, hi - s) if hi > lo else slice(0, 0))
    return tuple(g), tuple(b)


def _pool_tile(box, dt, mode):
    pool = pg.SMEMPool()
    t = pool.alloc(tuple(box), dt, align=1024, layout=tile_layout(box, dt, mode))
    bar = pool.alloc_mbarrier(1)
    pool.commit()
    return t, bar


def _init_barrier(tx, bar, count=1):
    with pg.if_(tx == 0):
        pg.ptx.mbarrier.init(bar, count)
        pg.ptx.fence.mbarrier_init()


# ---- TMA loads ------------------------------------------------------------------------------
def tma_load_kernel(dt, gshape, box, mode, scope="thread", name=None):
    nd = len(gshape)

    def k(A: pg.Tensor(gshape, dt), O: pg.Tensor(box, dt), s0: pg.int32, s1: pg.int32,
          s2: pg.int32):
        tx = pg.thread_id(128)
        T, bar = _pool_tile(box, dt, mode)
        _init_barrier(tx, bar)
        pg.cta_sync()
        st = (s0, s1, s2)[3 - nd:]
        region = A[tuple(slice(s, s + b) for s, b in zip(st, box))]
        if scope == "thread":
            with pg.if_(tx == 0):
                pg.tile.thread.copy_async(T, region, mbar=bar)
        elif scope == "warp":               # one warp: its lane 0 issues the one copy
            with pg.if_(pg.warp_id() == 0):
                pg.tile.warp.copy_async(T, region, mbar=bar)
        else:
            getattr(pg.tile, scope).copy_async(T, region, mbar=bar)
        pg.ptx.mbarrier.try_wait(bar, 0)
        pg.tile.cta.copy(O, T)       # read back through the (swizzled) layout

    k.__name__ = name or f"tma_load_{dt}_{mode}_{nd}d"
    return pg.kernel(k, grid=(1,), block=(128,))


def tma_load_case(rng, dt, gshape, box, mode, starts, scope="thread"):
    a = rand(rng, gshape, dt)
    o = poison(box, dt)
    want = np.zeros(box, NP[dt])
    g, b = _window(gshape, starts, box)
    want[b] = a[g]
    sc = [0] * (3 - len(starts)) + list(starts)
    return tma_load_kernel(dt, gshape, box, mode, scope), [a, o], sc, [1], [want]


# ---- TMA stores and reduce-add --------------------------------------------------------------
def tma_store_kernel(dt, gshape, box, mode, reduce=None, scope="cta", name=None):
    nd = len(gshape)
    block = {"thread": 128, "warp": 32, "warpgroup": 128, "cta": 128}[scope]

    def k(Src: pg.Tensor(box, dt), B: pg.Tensor(gshape, dt), s0: pg.int32, s1: pg.int32,
          s2: pg.int32):
        tx = pg.thread_id(block)
        T, _ = _pool_tile(box, dt, mode)
        pg.tile.cta.copy(T, Src)     # plain stores into the (swizzled) tile
        st = (s0, s1, s2)[3 - nd:]
        region = B[tuple(slice(s, s + b) for s, b in zip(st, box))]
        kw = {"reduce": reduce} if reduce else {}
        if scope == "thread":
            pg.ptx.fence.proxy_async()    # each writer orders its stores before the barrier
            pg.cta_sync()
            with pg.if_(tx == 0):
                pg.tile.thread.copy_async(region, T, **kw)
                pg.tile.thread.async_commit()
                pg.tile.thread.async_wait(0)
        else:
            getattr(pg.tile, scope).copy_async(region, T, **kw)
            getattr(pg.tile, scope).async_commit()
            getattr(pg.tile, scope).async_wait(0)

    k.__name__ = name or f"tma_{'reduce' if reduce else 'store'}_{dt}_{mode}_{nd}d_{scope}"
    return pg.kernel(k, grid=(1,), block=(block,))


def tma_store_case(rng, dt, gshape, box, mode, starts, reduce=None, scope="cta"):
    src = rand(rng, box, dt) if reduce is None else _small(rng, box, dt)
    b0 = poison(gshape, dt) if reduce is None else _small(rng, gshape, dt)
    want = b0.copy()
    g, b = _window(gshape, starts, box)
    want[g] = src[b] if reduce is None else _sum(want[g], src[b], dt)
    sc = [0] * (3 - len(starts)) + list(starts)
    return (tma_store_kernel(dt, gshape, box, mode, reduce, scope), [src, b0], sc, [1], [want])


def _small(rng, shape, dt):
    """Operands whose sums are exact in every rounding (reduce-add is checked bit for bit)."""
    v = rng.integers(-64, 64, shape)
    if dt == "bfloat16":
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return v.astype(NP[dt])


def _sum(a, b, dt):
    if dt == "bfloat16":
        f = ((a.astype(np.uint32) << 16).view(np.float32) +
             (b.astype(np.uint32) << 16).view(np.float32))
        return (f.view(np.uint32) >> 16).astype(np.uint16)
    return (a + b).astype(NP[dt])


# ---- bulk copies ----------------------------------------------------------------------------
def bulk_kernel(dt, N, n):
    eb = pg.dtype(dt).bits // 8

    def k(A: pg.Tensor((N,), dt), B: pg.Tensor((N,), dt), o: pg.int32):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((n,), dt, align=128)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        _init_barrier(tx, bar)
        pg.cta_sync()
        base = pg.let(o * (16 // eb))
        with pg.if_(tx == 0):
            pg.tile.thread.copy_async(T, A[base:base + n], mbar=bar, dispatch="bulk")
        pg.ptx.mbarrier.try_wait(bar, 0)
        pg.tile.cta.copy_async(B[base:base + n], T, dispatch="bulk")
        pg.tile.cta.async_commit()
        pg.tile.cta.async_wait(0)

    k.__name__ = f"bulk_{dt}_{n}"
    return pg.kernel(k, grid=(1,), block=(128,))


def bulk_case(rng, dt, N, n, o):
    a, b = rand(rng, (N,), dt), poison((N,), dt)
    base = o * (16 // (pg.dtype(dt).bits // 8))
    want = b.copy()
    want[base:base + n] = a[base:base + n]
    return bulk_kernel(dt, N, n), [a, b], [o], [1], [want]


# ---- cp.async ---------------------------------------------------------------------------------
def cp_async_kernel(dt, gshape, rows, cols, scope, use_mbar=False):
    """rows x cols of A (row stride gshape[1]) into a shared tile by cp.async, then out."""
    block = {"thread": 32, "warp": 32, "warpgroup": 128, "cta": 256}[scope]

    def k(A: pg.Tensor(gshape, dt), O: pg.Tensor((rows, cols), dt), r0: pg.int32):
        tx = pg.thread_id(block)
        T = pg.alloc_shared((rows, cols), dt, align=16)
        bar = pg.alloc_shared((1,), "uint64", align=8)
        if use_mbar:
            _init_barrier(tx, bar)
            pg.cta_sync()
        src = A[r0:r0 + rows, 0:cols]
        if scope == "thread":
            with pg.if_(tx == 0):
                if use_mbar:
                    pg.tile.thread.copy_async(T, src, mbar=bar, dispatch="cp_async")
                else:
                    pg.tile.thread.copy_async(T, src, dispatch="cp_async")
                    pg.tile.thread.async_commit()
                    pg.tile.thread.async_wait(0)
            if use_mbar:
                pg.ptx.mbarrier.try_wait(bar, 0)
            pg.cta_sync()
        else:
            getattr(pg.tile, scope).copy_async(T, src, dispatch="cp_async")
            getattr(pg.tile, scope).async_commit()
            getattr(pg.tile, scope).async_wait(0)
        pg.tile.cta.copy(O, T)

    k.__name__ = f"cp_async_{dt}_{scope}_{cols}{'_mbar' if use_mbar else ''}"
    return pg.kernel(k, grid=(1,), block=(block,))


def cp_async_case(rng, dt, gshape, rows, cols, scope, r0=0, use_mbar=False):
    a = rand(rng, gshape, dt)
    o = poison((rows, cols), dt)
    want = a[r0:r0 + rows, 0:cols].copy()
    return cp_async_kernel(dt, gshape, rows, cols, scope, use_mbar), [a, o], [r0], [1], [want]


# ---- clusters: multicast and distributed shared memory --------------------------------------
def multicast_kernel(n, dt="float16", rows=16, cols=64, mode="128B", how="cluster", clusters=2):
    grid = n * clusters
    mask = (1 << n) - 1

    def k(A: pg.Tensor((clusters * rows, cols), dt), O: pg.Tensor((grid, rows, cols), dt)):
        tx = pg.thread_id(128)
        bx = pg.cta_id(grid)
        rank = pg.cta_rank_in_cluster()
        cid = pg.cluster_id()
        T, bar = _pool_tile((rows, cols), dt, mode)
        _init_barrier(tx, bar)
        pg.cluster_sync()           # every CTA's barrier is initialised before any copy lands
        r0 = pg.let(cid * rows)
        if how == "cluster":        # rank 0 loads the tile into every CTA of the mask
            pg.tile.cluster.copy_async(T, A[r0:r0 + rows, 0:cols], mbar=bar, multicast=mask)
        else:                       # each CTA loads its slice of rows into every CTA
            rs = rows // n
            with pg.if_(tx == 0):
                pg.tile.thread.copy_async(T[rank * rs:rank * rs + rs, 0:cols],
                                          A[r0 + rank * rs:r0 + rank * rs + rs, 0:cols],
                                          mbar=bar, multicast=mask)
        pg.ptx.mbarrier.try_wait(bar, 0)
        pg.tile.cta.copy(O[bx:bx + 1, 0:rows, 0:cols], T)
        pg.cluster_sync()           # no CTA leaves while a peer may still write into it

    k.__name__ = f"multicast_{how}_{n}"
    return pg.kernel(k, grid=(grid,), block=(128,), cluster=(n, 1, 1))


def multicast_case(rng, n, how="cluster", dt="float16", rows=16, cols=64, mode="128B"):
    clusters = 2
    a = rand(rng, (clusters * rows, cols), dt)
    o = poison((n * clusters, rows, cols), dt)
    want = np.stack([a[(c // n) * rows:(c // n + 1) * rows] for c in range(n * clusters)])
    return (multicast_kernel(n, dt, rows, cols, mode, how, clusters), [a, o], [], [1], [want])


def dsmem_kernel(n, clusters=2):
    grid = n * clusters

    def k(A: pg.Tensor((grid, 128), "int32"), O: pg.Tensor((grid, 128), "int32")):
        tx = pg.thread_id(128)
        bx = pg.cta_id(grid)
        rank = pg.cta_rank_in_cluster()
        sm = pg.alloc_shared((128,), "int32")
        peer = pg.cluster_view(sm, (rank + 1) % n)
        peer[tx] = A[bx, tx] + rank * 1000
        pg.cluster_sync()
        O[bx, tx] = sm[tx]

    k.__name__ = f"dsmem_{n}"
    return pg.kernel(k, grid=(grid,), block=(128,), cluster=(n, 1, 1))


def dsmem_case(rng, n):
    grid = 2 * n
    a = rng.integers(-2**20, 2**20, (grid, 128)).astype(np.int32)
    o = poison((grid, 128), "int32")
    want = np.empty_like(a)
    for c in range(grid):
        base, r = c - c % n, c % n
        src = base + (r - 1) % n
        want[c] = a[src] + ((r - 1) % n) * 1000
    return dsmem_kernel(n), [a, o], [], [1], [want]


# ---- running ----------------------------------------------------------------------------------
def run_sim(case):
    from . import ptxsim

    k, arrays, scalars, outs, want = case
    arrays = [x.copy() for x in arrays]
    ptxsim.run(k, arrays, scalars)
    for i, w in zip(outs, want):
        got = arrays[i]
        assert got.tobytes() == w.tobytes(), (
            f"{k.name}: {int(np.sum(got.view(np.uint8) != w.view(np.uint8)))} bytes differ")


def nbytes(shape, dt) -> int:
    return math.prod(shape) * pg.dtype(dt).bits // 8
