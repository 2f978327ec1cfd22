"""Asynchronous copy kernels for `ptxgen bench copy`: a TMA ring and a cp.async stream.

  g2s2g   tma_ring: a persistent grid; in each CTA one thread runs a ring of S shared stages:
          TMA loads run L = S/2 tiles ahead (each completes its stage's mbarrier), every tile
          that lands is written back by a TMA store (bulk group), and a stage is refilled once
          the store that read it has (`wait_group.read`), so S - L stores stay in flight.
          Ragged ends are clipped by TMA itself (any ROWS).  sm_90+.
  g2s2g   cp_async: each scope instance copies whole tiles, cp.async global -> shared
          (commit / wait), then vec_auto shared -> global, like vec_auto's stream.  sm_80+.

Both are checked bit-exact and timed against torch copy_ by the sweep (sweep.py);
benchmarks/tma_stream.py times tma_ring configurations at 1 GiB.
"""
# no `from __future__ import annotations`: kernel annotations refer to local variables
from .copy_kernels import (SCOPE_THREADS, THREADS, bench_kernel, group_sync, tile_kernel,
                           launch_geometry, kernel_name, tile_loop)
from .sweep import CopyConfig, SkipReason, register_copy_bench

SMEM_BUDGET = 200 * 1024      # bytes of stages per SM the ring aims at (of 227 KiB)


def ring_shape(dtype: str, tile, stages=None, ctas_per_sm=None):
    """(stages, CTAs per SM) for a tile: 4-8 stages and enough CTAs that about 128 KiB per SM
    is in flight; SkipReason when a tile is no TMA box."""
    from ..dtypes import dtype as _dtype
    from ..target import TMA_ALIGN, TMA_MAX_BOX

    R, C = tile
    eb = _dtype(dtype).bits // 8
    nbytes = R * C * eb
    if R > TMA_MAX_BOX or C > TMA_MAX_BOX or C * eb % TMA_ALIGN:
        return SkipReason(f"a TMA box holds at most {TMA_MAX_BOX} x {TMA_MAX_BOX} elements with "
                          f"rows of a multiple of {TMA_ALIGN} bytes; {R}x{C} {dtype} is not one")
    if stages is None:
        fit = max(2, min(8, SMEM_BUDGET // nbytes))
        stages = 1 << (fit.bit_length() - 1)            # a power of two: the ring's index
    if stages * nbytes > SMEM_BUDGET + 27 * 1024:
        return SkipReason(f"{stages} stages of {nbytes} B do not fit in shared memory")
    ctas = ctas_per_sm or max(1, min(8, (128 * 1024) // (stages * nbytes),
                                     SMEM_BUDGET // (stages * nbytes)))
    return stages, ctas


def tma_ring_kernel(dtype: str, tile, stages: int = 8, ctas_per_sm: int = 1, nsm: int = 132,
                    ahead: int | None = None, name=None, load_hint="evict_last",
                    store_hint="evict_first"):
    """The TMA ring streaming kernel (module docstring) for (ROWS, C) tensors of `dtype`;
    `load_hint` / `store_hint`: copy_async cache_hint= of the loads / stores (None: none).

    The default hints are the best of the hint table in benchmarks/RESULTS.md: loads marked
    evict_last and stores evict_first beat no hints, the load hint doing most of it, and hints
    that keep the written lines instead lose.  Our reading, not measured inside the L2: when
    the L2 needs room it then takes the written lines first, so they drain to DRAM in the
    order they were written."""
    import ptxgen as pg

    R, C = tile
    S = stages
    L = ahead or max(1, S // 2)
    if not 1 <= L < S or S & (S - 1):
        raise ValueError(f"stages={S} must be a power of two above ahead={L}")
    grid, ctas, ROWS = launch_geometry(pg, ctas_per_sm, nsm)

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tx = pg.thread_id(32)
        pool = pg.SMEMPool()
        ring = pool.alloc((S, R, C), dtype, align=1024)
        full = pool.alloc_mbarrier(S)
        pool.commit()
        G = pg.grid_dim()
        bx = pg.cta_id()
        ntiles = pg.let((ROWS + (R - 1)) // R)
        mine = pg.let((ntiles - bx + G - 1) // G)       # tiles bx, bx + G, ...

        def load(i, stage):
            r0 = pg.let((bx + i * G) * R)
            pg.tile.thread.copy_async(ring[stage:stage + 1, 0:R, 0:C], src[r0:r0 + R, 0:C],
                                      mbar=full[stage], cache_hint=load_hint)

        def store(i, stage):
            r0 = pg.let((bx + i * G) * R)
            pg.tile.thread.copy_async(dst[r0:r0 + R, 0:C], ring[stage:stage + 1, 0:R, 0:C],
                                      cache_hint=store_hint)
        with pg.if_(tx == 0):
            ring_schedule(full, S, L, mine, load, store)

    k = tile_kernel(body, name or f"tma_ring_{dtype}_{R}x{C}_s{S}", R, 1, grid or (nsm,), block=32)
    return k, ctas


def ring_schedule(full, S: int, L: int, count, load, store):
    """The ring of tma_ring_kernel, for the one thread that runs it: initialise the S full
    barriers, put the first L of `count` tiles in flight, then per tile wait for it, store it
    (one bulk group) and refill its stage with tile i + L once the store S - L groups back has
    read it; wait for every write at the end.  `load(i, stage)` issues tile i's copy into
    `stage` (one arrival on full[stage]), `store(i, stage)` its write back; S is a power of
    two (the stage index and phase come from the tile index by masks)."""
    import ptxgen as pg

    for s in range(S):
        pg.ptx.mbarrier.init(full[s], 1)
    pg.ptx.fence.mbarrier_init()
    for i in range(L):                          # the first L tiles in flight
        with pg.if_(count > i):
            load(i, i)
    for i in pg.serial(count):
        s = pg.let(i & (S - 1))
        pg.ptx.mbarrier.try_wait(full[s], (i >> (S.bit_length() - 1)) & 1)
        store(i, s)
        pg.tile.thread.async_commit(kind="bulk")
        # stage (i + L) % S last held tile i + L - S: its store is S - L groups back
        pg.tile.thread.async_wait(S - L, read=True, kind="bulk")
        with pg.if_(i + L < count):
            load(i + L, (i + L) & (S - 1))
    pg.tile.thread.async_wait(0, kind="bulk")   # every write done before exit


def cp_async_stream_kernel(dtype: str, scope: str, tile, ctas_per_sm=None, nsm=132, name=None):
    """g2s by cp.async (commit / wait), s2g by vec_auto: each scope instance its own slot."""
    import ptxgen as pg

    R, C = tile
    groups = THREADS // SCOPE_THREADS[scope]
    grid, ctas, ROWS = launch_geometry(pg, ctas_per_sm, nsm)

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        pg.thread_id(THREADS)
        sc = getattr(pg.tile, scope)
        sm = pg.alloc_shared((groups, R, C), dtype, align=128)
        g, first, tiles = tile_loop(pg, scope, groups, R, ROWS, ctas)
        for t in tiles:
            with pg.if_(t != first):
                group_sync(pg, scope, g)
            sc.copy_async(sm[g:g + 1, 0:R, 0:C], src[t * R:t * R + R, 0:C], dispatch="cp_async")
            sc.async_commit(kind="cp_async")
            sc.async_wait(0, kind="cp_async")             # and the scope's barrier
            sc.copy(dst[t * R:t * R + R, 0:C], sm[g:g + 1, 0:R, 0:C])

    return tile_kernel(body, name or f"cp_async_{dtype}_{scope}_{R}x{C}", R, groups, grid), ctas


def _sm_count() -> int:
    """The device's SM count (132, an H100/H200's, where no GPU answers: PTX dumps)."""
    from ..errors import CudaError
    from ..runtime import driver

    try:
        return driver.device_attribute("MULTIPROCESSOR_COUNT")
    except CudaError:
        return 132


def _build_ring(cfg: CopyConfig):
    if cfg.scope != "cta":
        return SkipReason("the TMA ring is one thread per CTA; scope cta only")
    shape = ring_shape(cfg.dtype, cfg.tile)
    if isinstance(shape, SkipReason):
        return shape
    stages, ctas = shape
    nsm = _sm_count()
    return bench_kernel(cfg, lambda: tma_ring_kernel(cfg.dtype, cfg.tile, stages, ctas, nsm,
                                                     name=kernel_name(cfg)), check_split=False)


def _build_cp_async(cfg: CopyConfig):
    return bench_kernel(cfg, lambda: cp_async_stream_kernel(cfg.dtype, cfg.scope, cfg.tile,
                                                            name=kernel_name(cfg)))


register_copy_bench("tma_ring", _build_ring, path="g2s2g", replace=True)
register_copy_bench("cp_async", _build_cp_async, path="g2s2g", replace=True)
