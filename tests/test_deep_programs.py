"""Deep programs build (a 3,000-term expression made in a Python loop, 800
nested pg.if_s, their IR prints) and run correctly; one too deep even for ptxgen/deep.py is a
located error, never a RecursionError."""
import sys
from contextlib import ExitStack

import numpy as np
from support import ptxsim

import ptxgen as pg
from support.located import fails


def test_3000_term_float_sum():
    def k(A: pg.Tensor((32,), "float32"), B: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        acc = A[tx]
        for i in range(1, 3000):
            acc = acc + A[(tx + i) % 32]
        B[tx] = acc

    kk = pg.kernel(k, grid=(1,), block=(32,))
    assert "B[tx] = A[tx] + A[(tx + 1) % 32]" in str(kk.ir)
    a = (np.arange(32, dtype=np.float32) % 7) * np.float32(0.25)
    b = np.zeros(32, np.float32)
    ptxsim.run(kk, [a, b])
    want = a.copy()
    for i in range(1, 3000):
        want = want + a[(np.arange(32) + i) % 32]
    assert (b == want).all()


def test_3000_term_integer_index_and_value():
    def k(A: pg.Tensor((64,), "int32"), B: pg.Tensor((64,), "int32")):
        tx = pg.thread_id(32)
        idx = tx
        val = A[tx]
        for i in range(3000):
            idx = idx + (i % 3) - 1            # sums to 0 over each 3 terms
            val = val * 3 + i                   # wraps in int32, as the hardware does
        B[idx] = val

    kk = pg.kernel(k, grid=(1,), block=(32,))
    a, b = np.arange(64, dtype=np.int32) - 9, np.zeros(64, np.int32)
    ptxsim.run(kk, [a, b])
    want = a[:32].astype(np.int64)
    for i in range(3000):
        want = (want * 3 + i) % (1 << 32)
    assert (b[:32] == want.astype(np.uint32).view(np.int32)).all()


def _nested(depth, use_with_stack=True):
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        with ExitStack() as st:
            for i in range(depth):
                st.enter_context(pg.if_(tx < 32 - (i % 3)))    # at: nest
            A[tx] = tx + 1
    return k


def test_800_nested_ifs_build_print_and_run():
    kk = pg.kernel(_nested(800), grid=(1,), block=(32,))
    text = str(kk.ir)
    assert text.count("with pg.if_(") == 800
    a = np.zeros(32, np.int32)
    ptxsim.run(kk, [a])
    t = np.arange(32)
    assert (a == np.where(t < 30, t + 1, 0)).all()


def test_nested_ifs_by_recursion():
    def nest(d, tx, A):
        if d == 0:
            A[tx] = 1
            return
        with pg.if_(tx < 31):
            nest(d - 1, tx, A)

    def k(A: pg.Tensor((32,), "int32")):
        nest(800, pg.thread_id(32), A)

    assert ".entry" in pg.kernel(k, grid=(1,), block=(32,)).ptx("sm_90a")


def test_the_recursion_limit_is_restored():
    before = sys.getrecursionlimit()
    pg.kernel(_nested(900), grid=(1,), block=(32,)).ptx("sm_90a")
    assert sys.getrecursionlimit() == before


def test_too_deep_is_a_located_error():
    kk = pg.kernel(_nested(120_000), grid=(1,), block=(32,))   # emitting recurses per level
    fails(lambda: kk.ptx("sm_90a"), "nest", "the kernel nests too deeply for ptxgen (more than "
          "200000 Python frames); bind parts of long expressions with pg.let or flatten nested "
          "blocks", pg.TraceError)
