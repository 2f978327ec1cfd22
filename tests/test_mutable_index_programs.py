"""Random one-thread programs whose indices are local scalars that change between accesses:
reads, read-modify-writes and index updates, in one scope, in branches and in loops, on a
global and a shared array.  ptxsim's results must equal a Python model of the same program
step by step, so an address the emitter reuses after its index changed (or a load it reuses
after a store) shows up as a wrong element."""
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen as pg
from support import ptxsim

L = 8          # elements of each array; every index is kept in [0, L)
OUT = 24       # the log of values read

OPS = st.one_of(
    st.tuples(st.just("read"), st.sampled_from("gs"), st.integers(0, 1)),
    st.tuples(st.just("bump"), st.integers(0, 1), st.integers(1, L - 1)),
    st.tuples(st.just("add"), st.sampled_from("gs"), st.integers(0, 1), st.integers(1, 9)),
    st.tuples(st.just("copy"), st.integers(0, 1), st.integers(0, 1)),
)
BLOCK = st.recursive(st.lists(OPS, min_size=1, max_size=4),
                     lambda inner: st.lists(st.one_of(
                         OPS, st.tuples(st.just("loop"), st.integers(1, 3), inner),
                         st.tuples(st.just("if"), st.integers(0, 1), inner)),
                         min_size=1, max_size=4), max_leaves=12)


def _trace(prog, G, S, O, i, n):
    """Trace prog into the kernel: i = the two index scalars, n = the log position."""
    for op in prog:
        if op[0] == "read":
            _, arr, w = op
            with pg.if_(n < OUT):
                O[n] = (G if arr == "g" else S)[i[w]]
            n.set(n + 1)
        elif op[0] == "bump":
            _, w, c = op
            i[w].set((i[w] + c) % L)
        elif op[0] == "add":
            _, arr, w, v = op
            a = G if arr == "g" else S
            a[i[w]] = a[i[w]] + v
        elif op[0] == "copy":
            _, dst, src = op
            i[dst].set(i[src])
        elif op[0] == "loop":
            for _ in pg.serial(op[1]):
                _trace(op[2], G, S, O, i, n)
        else:                                   # ("if", w, body): only when i[w] is odd
            with pg.if_(i[op[1]] % 2 == 1):
                _trace(op[2], G, S, O, i, n)


def _model(prog, g, s, log, i):
    for op in prog:
        if op[0] == "read":
            log.append(int((g if op[1] == "g" else s)[i[op[2]]]))
        elif op[0] == "bump":
            i[op[1]] = (i[op[1]] + op[2]) % L
        elif op[0] == "add":
            a = g if op[1] == "g" else s
            a[i[op[2]]] += op[3]
        elif op[0] == "copy":
            i[op[1]] = i[op[2]]
        elif op[0] == "loop":
            for _ in range(op[1]):
                _model(op[2], g, s, log, i)
        elif i[op[1]] % 2 == 1:
            _model(op[2], g, s, log, i)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=BLOCK, start=st.tuples(st.integers(0, L - 1), st.integers(0, L - 1)))
def test_programs_with_moving_indices_match_the_model(prog, start):
    @pg.kernel(grid=(1,), block=(1,))
    def k(G: pg.Tensor((L,), "int32"), O: pg.Tensor((OUT,), "int32"),
          SO: pg.Tensor((L,), "int32")):
        S = pg.alloc_shared((L,), "int32")
        for j in range(L):
            S[j] = 100 * (j + 1)
        i = [pg.local_scalar("int32", v) for v in start]
        n = pg.local_scalar("int32", 0)
        _trace(prog, G, S, O, i, n)
        for j in range(L):
            SO[j] = S[j]

    g = np.arange(L, dtype=np.int32) * 10
    s = [100 * (j + 1) for j in range(L)]
    log, want_g = [], [int(v) for v in g]
    _model(prog, want_g, s, log, list(start))
    o, so = np.full(OUT, -1, np.int32), np.full(L, -1, np.int32)
    ptxsim.run(k, [g, o, so])
    want_o = (log + [-1] * OUT)[:OUT]
    assert (o.tolist(), g.tolist(), so.tolist()) == (want_o, want_g, s)
