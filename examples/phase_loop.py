"""Seed 000: the `phase` loop, written with scalar sugar and with an explicit
one-element local buffer.  Both trace to the same IR and emit the same PTX."""
import numpy as np

import ptxgen as pg


@pg.kernel(grid=(1,), block=(32,), name="phase_loop")
def phase_scalar(A: pg.Tensor((32, 4), "float32"), B: pg.Tensor((32,), "float32")):
    tx = pg.thread_id(32)
    acc = pg.local_scalar("float32", 0.0)
    phase = pg.local_scalar("int32", 0)
    with pg.while_(phase < 4):
        acc += A[tx, phase]
        phase += 1
    B[tx] = acc


@pg.kernel(grid=(1,), block=(32,), name="phase_loop")
def phase_explicit(A: pg.Tensor((32, 4), "float32"), B: pg.Tensor((32,), "float32")):
    tx = pg.thread_id(32)
    acc = pg.alloc_local((1,), "float32")
    acc[0] = 0.0
    phase = pg.alloc_local((1,), "int32")
    phase[0] = 0
    with pg.while_(phase[0] < 4):
        acc[0] = acc[0] + A[tx, phase[0]]
        phase[0] = phase[0] + 1
    B[tx] = acc[0]


KERNELS = [phase_scalar, phase_explicit]


def check(xp, rng):
    a = rng.standard_normal((32, 4)).astype(np.float32)
    want = np.zeros(32, np.float32)
    for k in range(4):             # same order of float adds as the kernel
        want = want + a[:, k]
    out = []
    for k in KERNELS:
        B = xp.full(32, np.nan, dtype=np.float32)
        k(xp.asarray(a), B)
        out.append((k.fn.__name__, B, want))
    return out
