"""A TMA pipeline, global -> shared -> global, through a 4-stage ring (sm_90+).

`ring_copy(src, dst)` copies a (ROWS, 128) float16 tensor tile by tile.  Each CTA owns every
G-th tile.  Warp 0's lane 0 is the producer: it waits until a stage of the ring is free and
loads the next tile into it with a TMA load that completes the stage's full barrier.  Warp 1's
lane 0 is the consumer: it waits until the stage has landed, stores it with a TMA store, waits
until the store has read the stage (bulk group `.read`) and releases it.  The tensor maps are
encoded by the runtime at launch from the arguments; a last tile that runs past ROWS is
zero-filled on load and clipped on store, so any ROWS works.

    python examples/async_copy.py      # on a GPU: copies 1000 rows of random bits, compares
"""
import numpy as np

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

R, C = 64, 128           # a tile: 64 rows x 128 float16 = 16 KiB (two 128-byte swizzle spans)
STAGES = 4
G = 8                    # CTAs
ROWS = pg.var("ROWS")
SW = ComposeLayout(Swizzle.mma("128B", 16), TileLayout(S[(STAGES, R, 64)]))


@pg.kernel(grid=(G,), block=(64,))
def ring_copy(src: pg.Tensor((ROWS, C), "float16"), dst: pg.Tensor((ROWS, C), "float16")):
    tx = pg.thread_id(64)
    bx = pg.cta_id(G)
    pool = pg.SMEMPool()
    # two 64-column halves per stage: a 128B-swizzled TMA box is at most 128 bytes wide
    lo = pool.alloc((STAGES, R, 64), "float16", align=1024, layout=SW)
    hi = pool.alloc((STAGES, R, 64), "float16", align=1024, layout=SW)
    pipe = pg.Pipeline(pool, stages=STAGES, consumers=1, producer_arrivals=2)
    pool.commit()
    pipe.init()
    ntiles = pg.let((ROWS + R - 1) // R)
    mine = pg.let((ntiles - bx + G - 1) // G)          # tiles bx, bx + G, ...
    with pg.if_(tx == 0):                              # producer
        prod = pipe.producer()
        for i in pg.serial(mine):
            r0 = pg.let((bx + i * G) * R)
            s = prod.stage
            prod.acquire()
            pg.tile.thread.copy_async(lo[s:s + 1, 0:R, 0:64], src[r0:r0 + R, 0:64],
                                      mbar=prod.full)
            pg.tile.thread.copy_async(hi[s:s + 1, 0:R, 0:64], src[r0:r0 + R, 64:128],
                                      mbar=prod.full)
            prod.commit()
    with pg.if_(tx == 32):                             # consumer
        cons = pipe.consumer()
        for i in pg.serial(mine):
            r0 = pg.let((bx + i * G) * R)
            s = cons.stage
            cons.wait()
            pg.tile.thread.copy_async(dst[r0:r0 + R, 0:64], lo[s:s + 1, 0:R, 0:64])
            pg.tile.thread.copy_async(dst[r0:r0 + R, 64:128], hi[s:s + 1, 0:R, 0:64])
            pg.tile.thread.async_commit(kind="bulk")
            pg.tile.thread.async_wait(0, read=True, kind="bulk")   # the stage may be refilled
            cons.release()
        pg.tile.thread.async_wait(0, kind="bulk")                  # all writes done


KERNELS = [ring_copy]


def check(xp, rng, rows=1000):
    """[(label, device result, numpy expectation)]: a ragged number of rows, every bit
    pattern (NaN payloads included), the output poisoned first."""
    a = rng.integers(0, 2**16, size=(rows, C), dtype=np.int64).astype(np.uint16) \
        .view(np.float16)
    out = xp.asarray(np.full((rows, C), 0xA5A5, np.uint16).view(np.float16))
    from ptxgen.runtime import device_arch

    ring_copy.ptx(device_arch())
    ring_copy(xp.asarray(a), out)
    return [(f"ring_copy {rows} rows", out, a)]


if __name__ == "__main__":
    import os
    import sys

    from ptxgen.runtime import has_gpu

    if not has_gpu():
        print("no GPU: ring_copy PTX for sm_90a has", ring_copy.ptx("sm_90a").count("\n"), "lines")
        sys.exit(0)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "gpu"))
    from _xp import same_bits, xp

    bad = 0
    for label, got, want in check(xp, np.random.default_rng(0)):
        ok = same_bits(xp.asnumpy(got), want)
        bad += not ok
        print(f"{'ok   ' if ok else 'WRONG'} {label}")
    sys.exit(1 if bad else 0)
