"""Tile-math kernels with their inputs and expected outputs, run by the simulator tests
(tests/test_tile_math.py, test_tile_reduce.py) and by the GPU tests (tests/gpu/): one
definition, two executions.

A case is (kernel, arrays, checks): `arrays` are every tensor argument in order (outputs
poisoned with 0xA5 bytes), a check is (label, array index, expected, bound): bound None is
bit-exact, ("ulp", k, dt) allows k ulps of dt, ("abs", eps) an absolute error.
"""


from dataclasses import dataclass, field

import numpy as np

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout, laneid, tid
import tilemath_ref as R

BLOCK = {"thread": 1, "warp": 32, "warpgroup": 128, "cta": 96}


@dataclass
class Case:
    name: str
    kernel: object
    arrays: list
    checks: list = field(default_factory=list)
    arch: str = "sm_90a"


def poison(shape, dt):
    return np.full(int(np.prod(shape)) * np.dtype(R.NP[dt]).itemsize, 0xA5,
                   np.uint8).view(R.NP[dt]).reshape(shape)


def check(case, results):
    """Yield (label, ok, detail) per check of `case` on its output arrays."""
    for label, idx, want, bound in case.checks:
        got = results[idx[0]][idx[1]] if isinstance(idx, tuple) else results[idx]
        if callable(want):
            want = want()
        if bound is None:
            ok = np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
            bad = np.flatnonzero(np.ascontiguousarray(got).view(np.uint8) !=
                                 np.ascontiguousarray(want).view(np.uint8)) if not ok else []
            yield label, ok, (f"{len(bad)} bytes differ, first at byte {bad[0]}" if not ok else "")
        elif bound[0] == "ulp":
            err = R.ulp_error(got, want, bound[2])
            ok = bool(np.all(err <= bound[1]))
            yield label, ok, f"max {float(np.max(err)):.2f} ulp (bound {np.max(bound[1]):.3g})"
        else:
            g = np.asarray(R.values(got, bound[2]) if len(bound) > 2 else got, np.float64)
            err = np.abs(g - np.asarray(want, np.float64))
            ok = bool(np.all(err <= bound[1]))
            yield label, ok, f"max abs error {float(np.max(err)):.3g} (bound {bound[1]:.3g})"


# ---- elementwise: every op of one dtype, global operands at offsets ---------------------------
ARITH = ("add", "sub", "mul", "max", "min", "fma", "select", "fill", "zero", "memset")
FLOAT = ("fdiv", "sqrt", "reciprocal", "exp", "exp2", "log2", "rsqrt", "silu")


def ops_case(dt, scope="warp", n=64, off=8, rng=None, arch="sm_90a"):
    """Each applicable op of dt writes its own row of OUT; sources A, B, C are regions at
    element offset `off` (8: vector-aligned, 3: scalar accesses)."""
    rng = rng or np.random.default_rng(0)
    ops = list(ARITH) + ([o for o in FLOAT if not (dt == "float64" and o in
                          ("exp", "exp2", "log2", "silu"))] if dt in R.FLOATS else [])
    T = BLOCK[scope]
    L = n + off
    nops = len(ops)

    @pg.kernel(grid=(1,), block=(T,), name=f"ops_{dt}_{scope}_{off}")
    def k(A: pg.Tensor((L,), dt), B: pg.Tensor((L,), dt), C: pg.Tensor((L,), dt),
          P: pg.Tensor((L,), dt), OUT: pg.Tensor((nops, n), dt)):
        if T > 1:
            pg.thread_id(T)
        t = getattr(pg.tile, scope)
        a, b, c, p = (X[off:off + n] for X in (A, B, C, P))
        for i, op in enumerate(ops):
            o = OUT[i, 0:n]
            if op in ("add", "sub", "mul", "max", "min", "fdiv"):
                getattr(t, op)(o, a, b)
            elif op == "fma":
                t.fma(o, a, b, c)
            elif op == "select":
                t.select(o, p, a, b)
            elif op == "fill":
                t.fill(o, 3 if dt in R.INTS else 1.25)
            elif op == "zero":
                t.zero(o)
            elif op == "memset":
                t.memset(o, 0x5A)
            else:
                getattr(t, op)(o, p if op in ("sqrt", "log2", "rsqrt") else a)

    gen = R.small_ints if dt in R.INTS else R.random
    a, b, c = (gen(rng, dt, (L,)) for _ in range(3))
    p = R.random(rng, dt, (L,), "positive") if dt in R.FLOATS else gen(rng, dt, (L,))
    if dt in R.INTS:
        p[::3] = 0                      # select: nonzero is true
    out = poison((nops, n), dt)
    case = Case(k.name, k, [a, b, c, p, out], arch=arch)
    sl = slice(off, off + n)
    A_, B_, C_, P_ = a[sl], b[sl], c[sl], p[sl]
    for i, op in enumerate(ops):
        case.checks.append((f"{op}[{dt}, {scope}, off {off}]", (4, i),
                            _expect(op, dt, A_, B_, C_, P_, n), _bound(op, dt, A_)))
    return case


def _expect(op, dt, A, B, C, P, n):
    if op in ("add", "sub", "mul", "max", "min", "fdiv"):
        return lambda: R.binary(op, A, dt, B, dt, dt)
    if op == "fma":
        return lambda: R.fma(A, B, C, dt)
    if op == "select":
        cond = R.values(P, dt) != 0
        return lambda: np.where(cond, A, B)
    if op == "fill":
        return lambda: R.to_bits(np.full(n, 3 if dt in R.INTS else 1.25), dt) if dt in R.INTS \
            else R.to_bits(np.full(n, 1.25, np.float32), dt)
    if op == "zero":
        return lambda: np.zeros(n, R.NP[dt])
    if op == "memset":
        return lambda: np.full(n * np.dtype(R.NP[dt]).itemsize, 0x5A, np.uint8).view(R.NP[dt])
    if op in ("sqrt", "reciprocal"):
        return lambda: R.unary_exact(op, P if op == "sqrt" else A, dt, dt)
    return lambda: R.unary_approx(op, P if op in ("log2", "rsqrt") else A, dt)


def _bound(op, dt, A):
    """None (bit-exact) or the stated bound of an approximation."""
    if op not in ("exp", "exp2", "log2", "rsqrt", "silu"):
        return None
    if dt in ("float16", "bfloat16"):
        return ("ulp", 1, dt)           # float32 error far below a 16-bit ulp: one rounding
    x = np.abs(np.asarray(R.values(A, dt), np.float64))
    if op in ("exp", "silu"):           # ex2 of a rounded x * log2(e): ~|x| ulp more
        return ("ulp", 3 + 1.5 * x, dt)
    if op == "exp2":
        return ("ulp", 3, dt)
    if op == "log2":
        return ("abs", 2.0 ** -21, dt)
    return ("ulp", 3, dt)               # rsqrt.approx.f32: 2^-22.9 relative
