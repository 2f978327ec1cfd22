"""Seed 000: stage through static shared memory, cta_sync, read back doubled."""
import numpy as np

import ptxgen as pg


@pg.kernel(grid=(1,), block=(128,))
def smem_demo(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
    tx = pg.thread_id(128)
    sm = pg.alloc_shared((128,), "float32")
    sm[tx] = A[tx]
    pg.cta_sync()
    B[tx] = sm[tx] * 2.0


KERNELS = [smem_demo]


def check(xp, rng):
    a = rng.standard_normal(128).astype(np.float32)
    A, B = xp.asarray(a), xp.full(128, np.nan, dtype=np.float32)
    smem_demo(A, B)
    return [("smem_demo", B, a * np.float32(2.0))]
