"""Dynamic shared memory on Hopper: a ~100 KB SMEMPool and a plain shared.dyn arena.

`pool_copy`: each CTA carves 100 KB of the arena into four tiles (one of them 2-D) and an
mbarrier, stages its 100 KB of input there, meets at the mbarrier (phase 0), and writes every
tile back reversed, so each thread reads words other threads wrote.  Then it rewinds the pool
(`move_base_to`) so a float16 tile reuses the bytes of two finished tiles, and does a second
round-trip through the same mbarrier (phase 1).  Output must equal the reversed input bit for
bit.

`arena_copy(nbytes)`: the hand-made form, one `scope="shared.dyn"` arena of 64 KB or 200 KB
(above 48 KB the runtime raises the kernel's dynamic shared memory limit).

    python examples/smem_pool_demo.py     # runs on the current GPU (torch or cupy) and compares
                                          # bit for bit; without a GPU prints the resources
"""
import numpy as np

import ptxgen as pg
from ptxgen.alloc import SMEMPool

G = 4                  # CTAs
T = 256                # threads per CTA
WORDS = 8192           # int32 words per 32 KiB tile
TAIL = 1024            # int32 words of the 4 KiB tile
N_IN = 3 * WORDS + TAIL
HALVES = 16384         # float16 elements of the reused 32 KiB tile


@pg.kernel(grid=(G,), block=(T,))
def pool_copy(A: pg.Tensor((G, N_IN), "int32"), H: pg.Tensor((G, HALVES), "float16"),
              OutA: pg.Tensor((G, N_IN), "int32"), OutH: pg.Tensor((G, HALVES), "float16")):
    bx = pg.cta_id(G)
    tx = pg.thread_id(T)
    pool = SMEMPool()
    bar = pool.alloc_mbarrier(1)
    X0 = pool.alloc((WORDS,), "int32", align=128)
    X1 = pool.alloc((64, 128), "int32", align=128)        # 2-D tile
    X2 = pool.alloc((WORDS,), "int32", align=128)
    W = pool.alloc((TAIL,), "int32")
    end = pool.offset
    pool.move_base_to(X1)                                 # phase 2 reuses X1 and X2
    Y = pool.alloc((128, 128), "float16", align=128)
    pool.move_base_to(end)
    pool.commit()

    with pg.if_(tx == 0):
        pg.ptx.mbarrier.init(bar, T)                      # every thread arrives once per phase
    pg.cta_sync()

    # phase 0: stage 100 KB, meet at the mbarrier, write back reversed
    for i in pg.serial(WORDS // T):
        j = pg.let(tx + i * T)
        X0[j] = A[bx, j]
        X1[j // 128, j % 128] = A[bx, WORDS + j]
        X2[j] = A[bx, 2 * WORDS + j]
    for i in pg.serial(TAIL // T):
        j = pg.let(tx + i * T)
        W[j] = A[bx, 3 * WORDS + j]
    pg.ptx.mbarrier.arrive(bar)
    pg.ptx.mbarrier.try_wait(bar, 0)
    for i in pg.serial(WORDS // T):
        j = pg.let(tx + i * T)
        r = pg.let(WORDS - 1 - j)
        OutA[bx, j] = X0[r]
        OutA[bx, WORDS + j] = X1[r // 128, r % 128]
        OutA[bx, 2 * WORDS + j] = X2[r]
    for i in pg.serial(TAIL // T):
        j = pg.let(tx + i * T)
        OutA[bx, 3 * WORDS + j] = W[TAIL - 1 - j]
    pg.cta_sync()                                         # X1/X2 reads done before Y overwrites

    # phase 1: the float16 tile over the same bytes, same mbarrier, parity 1
    for i in pg.serial(HALVES // T):
        j = pg.let(tx + i * T)
        Y[j // 128, j % 128] = H[bx, j]
    pg.ptx.mbarrier.arrive(bar)
    pg.ptx.mbarrier.try_wait(bar, 1)
    for i in pg.serial(HALVES // T):
        j = pg.let(tx + i * T)
        r = pg.let(HALVES - 1 - j)
        OutH[bx, j] = Y[r // 128, r % 128]


def pool_copy_expected(a: np.ndarray, h: np.ndarray):
    """Host reference of pool_copy (int32 words and float16 bit patterns)."""
    out = np.concatenate([a[:, k * WORDS:(k + 1) * WORDS][:, ::-1] for k in range(3)] +
                         [a[:, 3 * WORDS:][:, ::-1]], axis=1)
    return out, h[:, ::-1]


def arena_copy(nbytes: int):
    """A kernel staging `nbytes` per CTA in one hand-declared shared.dyn arena."""
    n = nbytes // 4
    if n % T:
        raise ValueError(f"nbytes must be a multiple of {4 * T}")

    def arena_copy_kernel(A: pg.Tensor((G, n), "int32"), B: pg.Tensor((G, n), "int32")):
        bx = pg.cta_id(G)
        tx = pg.thread_id(T)
        arena = pg.alloc_buffer((n,), "int32", scope="shared.dyn")
        for i in pg.serial(n // T):
            j = pg.let(tx + i * T)
            arena[j] = A[bx, j]
        pg.cta_sync()
        for i in pg.serial(n // T):
            j = pg.let(tx + i * T)
            B[bx, j] = arena[n - 1 - j]

    return pg.kernel(arena_copy_kernel, grid=(G,), block=(T,),
                     name=f"arena_copy_{nbytes // 1024}k")


KERNELS = [pool_copy, arena_copy(64 * 1024), arena_copy(200 * 1024)]


def _launch(k, *args):
    """Build the PTX first: Kernel.__call__ holds the kernel's (non-reentrant) lock while it
    builds, so a first launch without a cached build would wait on itself."""
    from ptxgen.runtime import device_arch

    k.ptx(device_arch())
    k(*args)


def _poisoned(xp, shape, dt):
    """A device array of 0xFF bytes, so an element the kernel never wrote cannot match."""
    n = int(np.prod(shape)) * np.dtype(dt).itemsize
    return xp.asarray(np.full(n, 0xFF, np.uint8).view(dt).reshape(shape))


def check(xp, rng):
    """[(label, device result, numpy expectation)] for every kernel here (bit-exact)."""
    a = rng.integers(-2**31, 2**31, size=(G, N_IN), dtype=np.int64).astype(np.int32)
    h = rng.integers(0, 2**16, size=(G, HALVES), dtype=np.int64).astype(np.uint16) \
        .view(np.float16)                       # every bit pattern, NaN payloads included
    out_a, out_h = _poisoned(xp, (G, N_IN), np.int32), _poisoned(xp, (G, HALVES), np.float16)
    _launch(pool_copy, xp.asarray(a), xp.asarray(h), out_a, out_h)
    want_a, want_h = pool_copy_expected(a, h)
    results = [("pool_copy int32 tiles (phase 0)", out_a, want_a),
               ("pool_copy float16 reused tile (phase 1)", out_h, want_h)]
    for k in KERNELS[1:]:
        n = k.ir.params[0].buffer.shape[1]
        x = rng.integers(-2**31, 2**31, size=(G, n), dtype=np.int64).astype(np.int32)
        y = _poisoned(xp, (G, n), np.int32)
        _launch(k, xp.asarray(x), y)
        results.append((k.name, y, x[:, ::-1]))
    return results


if __name__ == "__main__":
    import os
    import sys

    from ptxgen.runtime import has_gpu

    print("pool_copy:", pool_copy.resources["memory"])
    if not has_gpu():
        print("no GPU: pool_copy PTX for sm_90a has", pool_copy.ptx("sm_90a").count("\n"),
              "lines")
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
