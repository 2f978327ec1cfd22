"""Softmax over the last dimension, from tile ops: a demo of ptxgen.kernels.softmax (the
kernels and the torch wrapper live in the package; `help(ptxgen.kernels.softmax)` tells how
they work).  Here: the float64 reference and the error bound run_all checks them against.

    python examples/softmax.py      # registers and spills of the example kernels
"""
import numpy as np

from ptxgen.kernels.softmax import KERNELS, _online, make, softmax  # noqa: F401


def reference(v):
    """float64 softmax of the rows of v."""
    v = np.asarray(v, np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_NP = {"float16": np.float16, "bfloat16": np.uint16, "float32": np.float32}


def to_dtype(v, dt):
    """float32 values -> an array of dt (bfloat16 as its bits, round to nearest even)."""
    if dt != "bfloat16":
        return np.asarray(v).astype(_NP[dt])
    b = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def values(a, dt):
    if dt == "bfloat16":
        return (np.asarray(a, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(a, np.float32)


def ulps(got, want, dt):
    """|got - want| in ulps of dt at want."""
    p, emin = {"float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126)}[dt]
    g = values(got, dt).astype(np.float64)
    e = np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** emin)))
    return np.abs(g - want) / 2.0 ** (e - (p - 1))


def bound(v, dt):
    """The stated error bound in ulps: 16-bit outputs 1 ulp (float32 arithmetic, one
    rounding); float32 outputs 6 + log2(N) + 2.5 |x - max| (ex2.approx: < 3 ulp, of an
    exponent rounded at |x - max| log2 e: up to 2.5 |x - max| ulp; the sum's tree: log2 N)."""
    if dt != "float32":
        return 1.0
    return 6 + np.log2(v.shape[1]) + 2.5 * np.abs(v - v.max(axis=1, keepdims=True))


SHAPES = ((16, 8192, "float32"), (1, 1000, "bfloat16"), (5, 1001, "float16"),
          (3, 50000, "float16"), (2, 40001, "bfloat16"), (4, 24, "float32"), (1, 1, "float32"),
          (2, 65536, "float32"))


def check(xp, rng):
    out = []
    for m, n, dt in SHAPES:
        x = to_dtype((rng.standard_normal((m, n)) * 3).astype(np.float32), dt)
        y = xp.asarray(np.full((m, n), 0x7F, _NP[dt]))               # poisoned
        make(n, dt)(xp.asarray(x), y)
        v = values(x, dt).astype(np.float64)
        err = ulps(xp.asnumpy(y), reference(v), dt) / bound(v, dt)
        out.append((f"softmax(M={m}, N={n}, {dt}) within the bound (max {err.max():.2f} of it)",
                    np.array([err.max() <= 1.0]), np.array([True])))
    return out


if __name__ == "__main__":
    for k in KERNELS:
        r = k.compile("sm_90a")
        print(f"{k.name}: {r.registers} registers, {r.spill_bytes} spill bytes")
