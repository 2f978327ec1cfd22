"""The in-line bounds test of loads and stores (emit/debug.known_in_bounds): constant and
fact-bounded indices are settled without the exact proof, without raising; anything else is
left to the exact check (tests/test_reliability_bounds.py)."""
import math
import sys

import ptxgen as pg
from ptxgen.emit import memory


def _exceptions_in(fn, build):
    """(calls of the function `fn`, the exceptions raised inside it) while `build()` ran."""
    code, seen, calls = fn.__code__, [], []

    def tracer(frame, event, arg):
        if frame.f_code is not code:
            return None
        calls.append(1)

        def local(frame, event, arg):
            if event == "exception":
                seen.append(arg[0])
            return local
        return local

    sys.settrace(tracer)
    try:
        build()
    finally:
        sys.settrace(None)
    return len(calls), seen


def test_constant_and_bounded_indices_raise_nothing():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((64, 8), "float32"), B: pg.Tensor((64,), "float32")):
        lane = pg.lane_id()
        for n in range(16):
            B[n] = A[n, 3] + 1.0
        B[lane] = A[lane, 7]

    out = []
    raised = _exceptions_in(memory.MemoryEmitter.known_in_bounds,
                            lambda: out.append(k.ptx("sm_90a")))
    assert raised == (34, []) and "ld.global.f32" in out[0]   # 17 loads, 17 stores


def test_known_in_bounds_verdicts():
    fn = memory.MemoryEmitter.known_in_bounds
    from ptxgen.analysis.simplify import Analyzer
    from ptxgen.emit.debug import BoundsChecks
    from ptxgen.ir import Buffer, Const, Var
    from ptxgen.dtypes import dtype as as_dtype

    class E(BoundsChecks):     # the fields the test reads
        an = Analyzer()
        _exts = {}

    FLOAT32, INT32 = as_dtype("float32"), as_dtype("int32")
    buf = Buffer("A", (4, 8), FLOAT32, "global")
    E._exts[buf.uid] = (4, 8)
    i, j = Var("i", INT32), Var("j", INT32)
    E.an.bind_range(i, 0, 3)
    e = E()
    c = lambda v: Const(v, INT32)   # noqa: E731
    assert fn(e, buf, (c(3), c(7)), 1, None) is True
    assert fn(e, buf, (c(3), c(4)), 4, None) is True        # lanes 4..7
    assert fn(e, buf, (c(3), c(5)), 4, None) is False       # lane 8 is past the end
    assert fn(e, buf, (i, c(0)), 1, None) is True
    assert fn(e, buf, (c(0), j), 1, None) is False          # j has no facts
    assert fn(e, buf, (c(-1), c(0)), 1, None) is False
    assert fn(e, buf, (i + 1, c(0)), 1, None) is False      # i + 1 reaches 4, past the end
    assert fn(e, buf, (c(0), i * 2 + 1), 1, None) is True   # compound: 1..7
    assert fn(e, buf, (c(0), i * 2 + 1), 2, None) is False  # its vector's lane 8 is not


def test_known_in_bounds_of_a_symbolic_extent_reads_only_the_lower_bound():
    fn = memory.MemoryEmitter.known_in_bounds
    from ptxgen.analysis.simplify import Analyzer
    from ptxgen.emit.debug import BoundsChecks
    from ptxgen.ir import Buffer, Const, Var
    from ptxgen.dtypes import dtype as as_dtype

    class E(BoundsChecks):
        an = Analyzer()
        _exts = {}

    INT32 = as_dtype("int32")
    n, i = Var("n", INT32), Var("i", INT32)
    buf = Buffer("A", (n, 8), as_dtype("float32"), "global")
    E._exts[buf.uid] = (math.inf, 8)
    E.an.bind_range(i, 0, 1 << 20)
    c = lambda v: Const(v, INT32)   # noqa: E731
    assert fn(E(), buf, (i, c(7)), 1, None) is True
    assert fn(E(), buf, (n, c(7)), 1, None) is False       # n has no facts: its lower bound
    assert fn(E(), buf, (c(-1), c(0)), 1, None) is False
