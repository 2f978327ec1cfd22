"""Issue #15's ring experiments: variants of the TMA G->S->G ring at 1 GiB against torch
copy_ in the same run (benchmarks/grid_stride_variants.timeit), each checked bit for bit.

  ring  ptxgen.bench.async_kernels.tma_ring_kernel (one thread, loads L tiles ahead), with
        the tensor maps' L2 promotion forced (PROMO: None = the runtime's choice)
  ws    a loader thread and a storer thread with full/empty mbarriers (release D stores late)
  bulk  the single-thread ring over 1-D chunks with cp.async.bulk (no tensor map)
  np    not persistent: CTA b copies tiles b*T .. b*T+T-1 through its ring
  hA    TMA loads into the ring, every thread writes each landed tile back (st.global)
  hB    every thread loads a tile (ld.global / st.shared), thread 0 stores it with TMA
  cpa   cp.async loads by every thread L tiles ahead, TMA stores by thread 0
  batch one thread loads all S stages, then stores all S, waits until they are read

CASES is the list each run times (the third and fourth sessions' lists and figures are in
benchmarks/RESULTS.md; their logs were not kept).

    python benchmarks/tma_ring_variants.py [case index ...]   # on an sm_90+ GPU
    python benchmarks/tma_ring_variants.py --build            # CPU: build every case
"""
import sys, os, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), HERE]
import ptxgen as pg
from ptxgen.bench.async_kernels import ring_schedule, tma_ring_kernel
import ptxgen.runtime.tensormap as tm

_orig = tm.encode_args
PROMO = {"v": None}
def _patched(*a, **k):
    r = _orig(*a, **k)
    if PROMO["v"]:
        r["l2Promotion"] = PROMO["v"]
    return r
tm.encode_args = _patched


def ws_ring(R, C, S, ctas_per_sm, D=0, nsm=132, name="ws", order="stride", dtype="float32"):
    """Loader thread (warp 0) and storer thread (warp 1), full/empty barriers."""
    G0 = nsm * ctas_per_sm
    ROWS = pg.var("ROWS")
    lg = S.bit_length() - 1

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tid = pg.thread_id(64)
        pool = pg.SMEMPool()
        ring = pool.alloc((S, R, C), dtype, align=1024)
        full = pool.alloc_mbarrier(S)
        empty = pool.alloc_mbarrier(S)
        pool.commit()
        G = pg.grid_dim()
        bx = pg.cta_id()
        ntiles = pg.let((ROWS + (R - 1)) // R)
        if order == "stride":               # tiles bx, bx + G, ...
            mine = pg.let((ntiles - bx + G - 1) // G)

            def tile(i):
                return (bx + i * G) * R
        else:                               # one contiguous run of tiles per CTA
            per = pg.let((ntiles + G - 1) // G)
            t0 = pg.let(bx * per)
            mine = pg.let(pg.select(ntiles - t0 < per, pg.select(ntiles > t0, ntiles - t0, 0),
                                    per))

            def tile(i):
                return (t0 + i) * R
        with pg.if_(tid == 0):
            for s in range(S):
                pg.ptx.mbarrier.init(full[s], 1)
                pg.ptx.mbarrier.init(empty[s], 1)
            pg.ptx.fence.mbarrier_init()
        pg.cta_sync()
        with pg.if_(tid == 0):
            for i in pg.serial(mine):
                s = pg.let(i & (S - 1))
                pg.ptx.mbarrier.try_wait(empty[s], ((i >> lg) & 1) ^ 1)
                r0 = pg.let(tile(i))
                pg.tile.thread.copy_async(ring[s:s + 1, 0:R, 0:C], src[r0:r0 + R, 0:C], mbar=full[s])
        with pg.if_(tid == 32):
            for i in pg.serial(mine):
                s = pg.let(i & (S - 1))
                pg.ptx.mbarrier.try_wait(full[s], (i >> lg) & 1)
                r0 = pg.let(tile(i))
                pg.tile.thread.copy_async(dst[r0:r0 + R, 0:C], ring[s:s + 1, 0:R, 0:C])
                pg.tile.thread.async_commit(kind="bulk")
                pg.tile.thread.async_wait(D, read=True, kind="bulk")
                if D == 0:
                    pg.ptx.mbarrier.arrive(empty[s])
                else:
                    with pg.if_(i >= D):
                        pg.ptx.mbarrier.arrive(empty[(i - D) & (S - 1)])
            pg.tile.thread.async_wait(0, kind="bulk")

    body.__name__ = name
    return pg.kernel(grid=(G0,), block=(64,), name=name)(body)


def bulk_ring(CH, S, ctas_per_sm, nsm=132, name="bulk", dtype="float32", prefetch=0,
              tensor=False):
    """tma_ring's single-thread ring over 1-D chunks of CH elements with cp.async.bulk (or
    with 1-D TMA boxes: `tensor`); `prefetch` P: each load also asks L2 for the chunk P tiles
    further on (cp.async.bulk.prefetch.L2), more DRAM reads in flight than shared memory
    holds."""
    N = pg.var("N")

    def body(src: pg.Tensor((N,), dtype), dst: pg.Tensor((N,), dtype)):
        tx = pg.thread_id(32)
        pool = pg.SMEMPool()
        ring = pool.alloc((S, CH), dtype, align=1024)
        full = pool.alloc_mbarrier(S)
        pool.commit()
        G, bx = pg.grid_dim(), pg.cta_id()
        mine = pg.let((N // CH - bx + G - 1) // G)

        def load(i, stage):
            e0 = pg.let((bx + i * G) * CH)
            if prefetch:
                with pg.if_(i + prefetch < mine):
                    pg.ptx["cp.async.bulk.prefetch.L2.global"](
                        src.ptr_to([e0 + prefetch * G * CH]), CH * (pg.dtype(dtype).bits // 8))
            pg.tile.thread.copy_async(ring[stage:stage + 1, 0:CH], src[e0:e0 + CH],
                                      mbar=full[stage], dispatch="tma" if tensor else "bulk")

        def store(i, stage):
            e0 = pg.let((bx + i * G) * CH)
            pg.tile.thread.copy_async(dst[e0:e0 + CH], ring[stage:stage + 1, 0:CH], dispatch="bulk")
        with pg.if_(tx == 0):
            ring_schedule(full, S, S // 2, mine, load, store)

    body.__name__ = name
    return pg.kernel(grid=(nsm * ctas_per_sm,), block=(32,), name=name)(body)


def np_ring(R, C, S, T, name="np", dtype="float32", L=None):
    """Non-persistent: CTA bx copies tiles bx*T .. bx*T+T-1 through an S-stage ring."""
    ROWS = pg.var("ROWS")

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tx = pg.thread_id(32)
        pool = pg.SMEMPool()
        ring = pool.alloc((S, R, C), dtype, align=1024)
        full = pool.alloc_mbarrier(S)
        pool.commit()
        ntiles = pg.let((ROWS + (R - 1)) // R)
        t0 = pg.let(pg.cta_id() * T)
        mine = pg.let(pg.select(ntiles - t0 < T, ntiles - t0, T))

        def load(i, stage):
            r0 = pg.let((t0 + i) * R)
            pg.tile.thread.copy_async(ring[stage:stage + 1, 0:R, 0:C], src[r0:r0 + R, 0:C],
                                      mbar=full[stage])

        def store(i, stage):
            r0 = pg.let((t0 + i) * R)
            pg.tile.thread.copy_async(dst[r0:r0 + R, 0:C], ring[stage:stage + 1, 0:R, 0:C])
        with pg.if_(tx == 0):
            ring_schedule(full, S, L or S // 2, mine, load, store)

    body.__name__ = name
    return pg.kernel(grid=lambda a: (-(-a["ROWS"] // (R * T)),), block=(32,), name=name)(body)


def _share(S, R, C, dtype, ROWS, bars=()):
    """The fourth session's variants' prologue: a pool with the ring of S (R, C) stages and an
    mbarrier array per entry of `bars` (its size), then this CTA's grid-stride share of the
    ROWS // R whole tiles: (ring, [barrier arrays], G, bx, mine)."""
    pool = pg.SMEMPool()
    ring = pool.alloc((S, R, C), dtype, align=1024)
    arrays = [pool.alloc_mbarrier(n) for n in bars]
    pool.commit()
    G, bx = pg.grid_dim(), pg.cta_id()
    ntiles = pg.let(ROWS // R)
    return ring, arrays, G, bx, pg.let((ntiles - bx + G - 1) // G)


def tma_load_thread_store(R, C, S, L, c, threads=128, nsm=132, name="hA", dtype="float32"):
    """TMA loads L tiles ahead into an S-stage ring (thread 0 issues); all threads write each
    landed tile back with vector stores, then arrive on its empty barrier."""
    ROWS = pg.var("ROWS")
    lg = S.bit_length() - 1
    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tid = pg.thread_id(threads)
        ring, (full, empty), G, bx, mine = _share(S, R, C, dtype, ROWS, (S, S))
        with pg.if_(tid == 0):
            for s in range(S):
                pg.ptx.mbarrier.init(full[s], 1)
                pg.ptx.mbarrier.init(empty[s], threads)
            pg.ptx.fence.mbarrier_init()
        pg.cta_sync()
        def load(i, stage):
            r0 = pg.let((bx + i * G) * R)
            pg.tile.thread.copy_async(ring[stage:stage + 1, 0:R, 0:C], src[r0:r0 + R, 0:C], mbar=full[stage])
        with pg.if_(tid == 0):
            for i in range(L):
                with pg.if_(mine > i):
                    load(i, i)
        for i in pg.serial(mine):
            s = pg.let(i & (S - 1))
            pg.ptx.mbarrier.try_wait(full[s], (i >> lg) & 1)
            r0 = pg.let((bx + i * G) * R)
            pg.tile.cta.copy(dst[r0:r0 + R, 0:C], ring[s:s + 1, 0:R, 0:C])
            pg.ptx.mbarrier.arrive(empty[s])
            with pg.if_(tid == 0):
                with pg.if_(i + L < mine):
                    j = pg.let(i + L)
                    sj = pg.let(j & (S - 1))
                    with pg.if_(j >= S):
                        pg.ptx.mbarrier.try_wait(empty[sj], ((j >> lg) - 1) & 1)
                    load(j, sj)
    body.__name__ = name
    return pg.kernel(grid=(nsm * c,), block=(threads,), name=name)(body)

def thread_load_tma_store(R, C, S, c, threads=256, nsm=132, name="hB", dtype="float32"):
    """Threads load a tile into stage i % S (vector ld.global / st.shared), fence, barrier;
    thread 0 stores it with TMA; a stage is reused once its store has read it."""
    ROWS = pg.var("ROWS")
    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tid = pg.thread_id(threads)
        ring, _, G, bx, mine = _share(S, R, C, dtype, ROWS)
        for i in pg.serial(mine):
            s = pg.let(i & (S - 1))
            r0 = pg.let((bx + i * G) * R)
            with pg.if_(tid == 0):
                pg.tile.thread.async_wait(S - 1, read=True, kind="bulk")
            pg.cta_sync()
            pg.tile.cta.copy(ring[s:s + 1, 0:R, 0:C], src[r0:r0 + R, 0:C])
            pg.ptx.fence.proxy_async()
            pg.cta_sync()
            with pg.if_(tid == 0):
                pg.tile.thread.copy_async(dst[r0:r0 + R, 0:C], ring[s:s + 1, 0:R, 0:C])
                pg.tile.thread.async_commit(kind="bulk")
        with pg.if_(tid == 0):
            pg.tile.thread.async_wait(0, kind="bulk")
    body.__name__ = name
    return pg.kernel(grid=(nsm * c,), block=(threads,), name=name)(body)

def batch_ring(R, C, S, c, nsm=132, name="batch", dtype="float32"):
    """One thread: load S tiles (all stages), then store all S, wait until read, repeat."""
    ROWS = pg.var("ROWS")
    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tx = pg.thread_id(32)
        ring, (full,), G, bx, mine = _share(S, R, C, dtype, ROWS, (S + 1,))
        with pg.if_(tx == 0):
            for s in range(S + 1):
                pg.ptx.mbarrier.init(full[s], 1)
            pg.ptx.fence.mbarrier_init()
            for b in pg.serial(mine // S):
                for s in range(S):
                    r0 = pg.let((bx + (b * S + s) * G) * R)
                    pg.tile.thread.copy_async(ring[s:s + 1, 0:R, 0:C], src[r0:r0 + R, 0:C], mbar=full[s])
                for s in range(S):
                    pg.ptx.mbarrier.try_wait(full[s], b & 1)
                    r0 = pg.let((bx + (b * S + s) * G) * R)
                    pg.tile.thread.copy_async(dst[r0:r0 + R, 0:C], ring[s:s + 1, 0:R, 0:C])
                    pg.tile.thread.async_commit(kind="bulk")
                pg.tile.thread.async_wait(0, read=True, kind="bulk")
            done = pg.let(mine // S * S)
            for k in pg.serial(mine - done):     # the last tiles one at a time
                r0 = pg.let((bx + (done + k) * G) * R)
                pg.tile.thread.copy_async(ring[0:1, 0:R, 0:C], src[r0:r0 + R, 0:C], mbar=full[S])
                pg.ptx.mbarrier.try_wait(full[S], k & 1)
                pg.tile.thread.copy_async(dst[r0:r0 + R, 0:C], ring[0:1, 0:R, 0:C])
                pg.tile.thread.async_commit(kind="bulk")
                pg.tile.thread.async_wait(0, read=True, kind="bulk")
            pg.tile.thread.async_wait(0, kind="bulk")
    body.__name__ = name
    return pg.kernel(grid=(nsm * c,), block=(32,), name=name)(body)

def cpasync_tma_store(R, C, S, L, c, threads=128, nsm=132, name="cpa", dtype="float32"):
    """cp.async loads by every thread, L tiles ahead in an S-stage ring; thread 0 writes each
    landed tile back with a TMA store and frees its stage once the store has read it."""
    ROWS = pg.var("ROWS")
    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tid = pg.thread_id(threads)
        ring, _, G, bx, mine = _share(S, R, C, dtype, ROWS)
        def load(i, stage):
            r0 = pg.let((bx + i * G) * R)
            pg.tile.cta.copy_async(ring[stage:stage + 1, 0:R, 0:C], src[r0:r0 + R, 0:C], dispatch="cp_async")
        for j in range(L):
            with pg.if_(mine > j):
                load(j, j)
            pg.ptx["cp.async.commit_group"]()
        for i in pg.serial(mine):
            s = pg.let(i & (S - 1))
            pg.ptx["cp.async.wait_group"](L - 1)
            pg.ptx.fence.proxy_async()
            pg.cta_sync()
            with pg.if_(tid == 0):
                r0 = pg.let((bx + i * G) * R)
                pg.tile.thread.copy_async(dst[r0:r0 + R, 0:C], ring[s:s + 1, 0:R, 0:C])
                pg.tile.thread.async_commit(kind="bulk")
                pg.tile.thread.async_wait(S - L, read=True, kind="bulk")
            pg.cta_sync()
            with pg.if_(i + L < mine):
                load(i + L, (i + L) & (S - 1))
            pg.ptx["cp.async.commit_group"]()
        with pg.if_(tid == 0):
            pg.tile.thread.async_wait(0, kind="bulk")
    body.__name__ = name
    return pg.kernel(grid=(nsm * c,), block=(threads,), name=name)(body)

def npr(R, C, S, T, L=None):
    CASES.append((f"np {R}x{C} S{S} T{T} L{L}", None, lambda n: np_ring(R, C, S, T, name=n, L=L), C))


CASES = []
def ring(R, C, S, c, promo=None, L=None, nsm=132, lh=None, sh=None):
    label = f"ring {R}x{C} S{S} c{c} L{L} promo {promo}" + (f" on {nsm} SMs" if nsm != 132 else "")
    label += f" hints {lh}/{sh}" if lh or sh else ""
    CASES.append((label, promo,
                  lambda n: tma_ring_kernel("float32", (R, C), S, c, nsm, ahead=L, name=n,
                                            load_hint=lh, store_hint=sh)[0], C))
def ws(R, C, S, c, D=0, promo=None, order="stride"):
    CASES.append((f"ws {R}x{C} S{S} c{c} D{D} {order} promo {promo}", promo,
                  lambda n: ws_ring(R, C, S, c, D, name=n, order=order), C))

def hA(R, C, S, L, c, t=128):
    CASES.append((f"tmaload+st {R}x{C} S{S} L{L} c{c} t{t}", None,
                  lambda n: tma_load_thread_store(R, C, S, L, c, t, name=n), C))
def hB(R, C, S, c, t=256):
    CASES.append((f"ld/st.shared+tmastore {R}x{C} S{S} c{c} t{t}", None,
                  lambda n: thread_load_tma_store(R, C, S, c, t, name=n), C))
def cpa(R, C, S, L, c, t=128):
    CASES.append((f"cp.async+tmastore {R}x{C} S{S} L{L} c{c} t{t}", None,
                  lambda n: cpasync_tma_store(R, C, S, L, c, t, name=n), C))
def bulk(CH, S, c, P=0, tensor=False):
    CASES.append((f"{'tma1d' if tensor else 'bulk'} {CH*4}B S{S} c{c} prefetch {P}", None,
                  lambda n: bulk_ring(CH, S, c, name=n, prefetch=P, tensor=tensor), None))
def batch(R, C, S, c):
    CASES.append((f"batch {R}x{C} S{S} c{c}", None, lambda n: batch_ring(R, C, S, c, name=n), C))

# the fourth session's list (its first call timed hA/hB beside the ring)
ring(16, 32, 8, 4)
cpa(64, 32, 8, 5, 2)
cpa(32, 32, 8, 5, 4)
cpa(64, 64, 4, 2, 2, 256)
batch(16, 32, 8, 4)
batch(16, 32, 16, 4)
batch(32, 32, 16, 3)
batch(64, 32, 8, 3)
bulk(512, 8, 4)
bulk(512, 8, 4, 8)
bulk(512, 8, 4, 16)
bulk(512, 8, 4, 32)
bulk(256, 16, 4, 32, tensor=True)
bulk(1024, 8, 3, 16)
ring(16, 32, 8, 4)
# its second list (cases 15-): the ring on fewer SMs' worth of CTAs (less DRAM contention?)
for nsm in (96, 112, 120, 128):
    ring(16, 32, 8, 4, nsm=nsm)
ring(16, 32, 8, 5, nsm=120)
ring(16, 32, 8, 3, L=3)
ring(16, 32, 8, 4)
# the fifth session's (cases 22-): L2 eviction hints that keep written lines in L2 longer
# (stores evict_last), so the DRAM may drain them in longer runs between reads
ring(16, 32, 8, 4, lh="evict_first", sh="evict_last")
ring(16, 32, 8, 4, sh="evict_last")
ring(16, 32, 8, 4, lh="evict_first")
ring(16, 32, 8, 4, lh="evict_last", sh="evict_first")
ring(16, 32, 8, 4)
# its second call (cases 27-): around case 25, the one above 0.97x
ring(16, 32, 8, 4, lh="evict_last", sh="evict_first")
ring(16, 32, 8, 4, lh="evict_last")
ring(16, 32, 8, 4, sh="evict_first")
ring(16, 32, 8, 4, lh="evict_normal", sh="evict_first")
ring(16, 32, 16, 2, lh="evict_last", sh="evict_first")
ring(8, 64, 16, 4, lh="evict_last", sh="evict_first")
ring(32, 32, 8, 3, lh="evict_last", sh="evict_first")
ring(16, 64, 8, 4, lh="evict_last", sh="evict_first")
ring(16, 32, 8, 4, lh="evict_last", sh="evict_first")
# its last call (cases 36-): around 16x32 S16 c2, the best hinted shape
for S, c, L in ((16, 2, None), (16, 3, None), (32, 1, None), (16, 2, 12), (16, 2, 4), (32, 2, None)):
    ring(16, 32, S, c, L=L, lh="evict_last", sh="evict_first")
ring(8, 32, 32, 2, lh="evict_last", sh="evict_first")

if __name__ == "__main__":
    if "--build" in sys.argv:          # CPU: build + assemble all
        for i, (label, promo, mk, C) in enumerate(CASES):
            t = time.perf_counter()
            k = mk(f"k{i}")
            ptx = k.ptx("sm_90a")
            print(label, len(ptx.splitlines()), "lines", f"{(time.perf_counter()-t)*1e3:.1f} ms")
        sys.exit(0)
    import torch
    from grid_stride_variants import timeit
    nbytes = 1 << 30
    src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    res = []
    only = [a for a in sys.argv[1:] if not a.startswith("-")]
    for i, (label, promo, mk, C) in enumerate(CASES):
        if only and str(i) not in only:
            continue
        PROMO["v"] = promo
        try:
            k = mk(f"k{i}")
            if C is None:
                a, b = src.view(torch.float32), dst.view(torch.float32)
            else:
                rows = nbytes // (C * 4)
                a, b = src.view(torch.float32).view(rows, C), dst.view(torch.float32).view(rows, C)
            dst.fill_(-1); k(a, b); torch.cuda.synchronize(); ok = torch.equal(src, dst)
        except Exception as e:
            print(f"{label}: FAIL {type(e).__name__}: {str(e)[:300]}", flush=True); continue
        t = timeit({"torch": lambda: dst.copy_(src), "k": lambda: k(a, b)})
        r = t["torch"] / t["k"]
        res.append((r, label, ok))
        print(f"{i:2d} {label:45s} {2*nbytes/t['k']/1e6:6.0f} GB/s torch {2*nbytes/t['torch']/1e6:6.0f}"
              f"  ratio {r:.3f} {'ok' if ok else 'WRONG'}", flush=True)
    res.sort(reverse=True)
    print("TOP", res[:5])
