"""Seed 000: B[i, j] = A[i, j] + 1 over 4x8; B declared four ways.  Only B's metadata
changes, and so only B's index arithmetic: i*8+j, j*4+i, i*8+j+64, i*16+j."""
import numpy as np

import ptxgen as pg
from ptxgen.layout import S, TileLayout

B_DECLS = {
    "row_major": dict(shape=(4, 8)),
    "col_major": dict(shape=(4, 8), layout=TileLayout(S[(4, 8):(1, 4)])),
    "shifted": dict(shape=(4, 8), elem_offset=64),
    "row_stride_16": dict(shape=(4, 8), layout=TileLayout(S[(4, 8):(16, 1)])),
}
# storage each B declaration needs, and where B[i, j] lands in it
STORAGE = {"row_major": 32, "col_major": 32, "shifted": 96, "row_stride_16": 64}


def make(kind):
    decl = B_DECLS[kind]

    @pg.kernel(grid=(1,), block=(4, 8), name=f"add_one_{kind}")
    def add_one(A: pg.Tensor((4, 8), "float32"),
                B: pg.Tensor(decl["shape"], "float32", layout=decl.get("layout"),
                             elem_offset=decl.get("elem_offset", 0))):
        i = pg.thread_id(4, "x")
        j = pg.thread_id(8, "y")
        B[i, j] = A[i, j] + 1.0
    return add_one


KERNELS = [make(k) for k in B_DECLS]


def expected_index(kind, i, j):
    return {"row_major": i * 8 + j, "col_major": j * 4 + i, "shifted": i * 8 + j + 64,
            "row_stride_16": i * 16 + j}[kind]


def check(xp, rng):
    out = []
    a = rng.standard_normal((4, 8)).astype(np.float32)
    for kind, k in zip(B_DECLS, KERNELS):
        storage = np.full(STORAGE[kind], np.nan, np.float32)
        want = storage.copy()
        for i in range(4):
            for j in range(8):
                want[expected_index(kind, i, j)] = a[i, j] + np.float32(1)
        B = xp.asarray(storage)
        k(xp.asarray(a), xp.ptr(B))     # B's storage is larger than its (4, 8) view: raw pointer
        out.append((k.name, B, want))
    return out
