"""The emitter computes an address once per scope and reuses it, but only when its index is
pure (variables, special registers, constants).  An index that reads a local scalar or memory
can change between two accesses, so each access computes its own address: a reused one read
the element the index named before (a Pipeline stage index after advance() did exactly that)."""
import numpy as np

import ptxgen as pg
from support.ptxsim import run


def _body_lines(k, what):
    return [ln.strip() for ln in k.ptx("sm_90a").splitlines()
            if what in ln and not ln.lstrip().startswith("//")]


def local_index_kernel():
    """O = X[1], X[3], X[3], X[4]: the local scalar index moves between the reads."""
    @pg.kernel(grid=(1,), block=(1,))
    def k(X: pg.Tensor((8,), "int32"), O: pg.Tensor((4,), "int32")):
        i = pg.local_scalar("int32", 1)
        O[0] = X[i]
        i.set(i + 2)
        O[1] = X[i]                 # same scope, new index
        for j in pg.serial(2):      # a child scope, and a change on every iteration
            O[2 + j] = X[i]
            i.set(i + 1)
    return k


def memory_index_kernel():
    """O = s[I], s[I + 3] (s = X in shared memory); I ends 3 higher."""
    @pg.kernel(grid=(1,), block=(8,))
    def k(X: pg.Tensor((8,), "int32"), I: pg.Tensor((1,), "int32"),
          O: pg.Tensor((2,), "int32")):
        tx = pg.thread_id(8)
        s = pg.alloc_shared((8,), "int32")
        s[tx] = X[tx]
        pg.cta_sync()
        with pg.if_(tx == 0):
            O[0] = s[I[0]]
            I[0] = I[0] + 3
            O[1] = s[I[0]]
    return k


def test_a_local_scalar_index_is_read_again_after_it_changes():
    x = np.arange(8, dtype=np.int32) * 10
    o = np.full(4, -1, np.int32)
    run(local_index_kernel(), [x, o])
    assert o.tolist() == [10, 30, 30, 40]


def test_a_shared_memory_index_read_from_memory_is_read_again():
    x = np.arange(8, dtype=np.int32) * 10
    i, o = np.array([2], np.int32), np.full(2, -1, np.int32)
    run(memory_index_kernel(), [x, i, o])
    assert (o.tolist(), i.tolist()) == ([20, 50], [5])


def test_a_pure_index_still_shares_its_address():
    """X[j] in two statements of one loop body: one 64-bit scale of j, one address register,
    loaded twice (a load is never reused: the store between may have changed X)."""
    @pg.kernel(grid=(1,), block=(1,))
    def k(X: pg.Tensor((8,), "int32"), O: pg.Tensor((8,), "int32"),
          P: pg.Tensor((8,), "int32")):
        for j in pg.serial(8):
            O[j] = X[j]
            P[j] = X[j] * 2
    assert len(_body_lines(k, "mul.wide.s32")) == 1
    loads = _body_lines(k, "ld.global")
    assert len(loads) == 2 and loads[0].split("[")[1] == loads[1].split("[")[1]
