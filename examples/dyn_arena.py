"""Seed 000: the one shared.dyn arena with two views at element offsets 0 and 64."""
import numpy as np

import ptxgen as pg


@pg.kernel(grid=(1,), block=(64,))
def dyn_arena(A: pg.Tensor((64,), "float32"), B: pg.Tensor((64,), "float32"),
              C: pg.Tensor((64,), "float32")):
    tx = pg.thread_id(64)
    arena = pg.alloc_buffer((128,), "float32", scope="shared.dyn")    # the one arena
    As = pg.decl_buffer((64,), "float32", data=arena.data, scope="shared.dyn")                  # offset 0
    Bs = pg.decl_buffer((64,), "float32", data=arena.data, elem_offset=64, scope="shared.dyn")  # offset 64
    As[tx] = A[tx]
    Bs[tx] = B[tx]
    pg.cta_sync()
    C[tx] = As[tx] + Bs[tx]


KERNELS = [dyn_arena]


def check(xp, rng):
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    C = xp.full(64, np.nan, dtype=np.float32)
    dyn_arena(xp.asarray(a), xp.asarray(b), C)
    return [("dyn_arena", C, a + b)]
