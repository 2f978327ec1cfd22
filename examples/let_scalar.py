"""Seed 000: `let` over a runtime scalar.  `half = n // 2` is an immutable binding:
its facts (here: non-negative because n is) reach every use."""
import numpy as np

import ptxgen as pg


@pg.kernel(grid=(1,), block=(256,))
def let_scalar(A: pg.Tensor((256,), "int32"), B: pg.Tensor((256,), "int32"), n: pg.int32):
    tx = pg.thread_id(256)
    half = pg.let(n // 2)
    with pg.if_(tx < half):
        B[tx] = A[tx] * 2 + half
    with pg.else_():
        B[tx] = A[tx] - half


KERNELS = [let_scalar]


def check(xp, rng):
    a = rng.integers(-1000, 1000, 256).astype(np.int32)
    out = []
    for n in (100, 301):
        B = xp.full(256, -7, dtype=np.int32)
        let_scalar(xp.asarray(a), B, n)
        half = n // 2
        want = np.where(np.arange(256) < half, a * 2 + half, a - half).astype(np.int32)
        out.append((f"let_scalar(n={n})", B, want))
    return out
