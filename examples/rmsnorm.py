"""RMSNorm over the last dimension, from tile ops: a demo of ptxgen.kernels.rmsnorm (the
kernels and the torch wrapper live in the package; `help(ptxgen.kernels.rmsnorm)` tells how
they work).  Here: the float64 reference and the bfloat16 ulp measure run_all checks with.

    python examples/rmsnorm.py      # registers and spills of the example kernels
"""
import numpy as np

from ptxgen.kernels.rmsnorm import KERNELS, make, plan, rmsnorm  # noqa: F401


def bf16_bits(v):
    """float32 -> bfloat16 bits, round to nearest even (numpy has no bfloat16)."""
    b = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def reference(x, w, eps):
    """float64 RMSNorm of bfloat16 bits x (M, N) and w (N,)."""
    xv = bf16_values(x).astype(np.float64)
    r = xv / np.sqrt(np.mean(xv * xv, axis=1, keepdims=True) + eps)
    return r * bf16_values(w).astype(np.float64)


def bf16_ulps(got_bits, want):
    """|got - want| in bfloat16 ulps at want."""
    g = bf16_values(got_bits).astype(np.float64)
    e = np.floor(np.log2(np.maximum(np.abs(want), 2.0 ** -126)))
    return np.abs(g - want) / 2.0 ** (e - 7)


SHAPES = ((64, 8192), (1, 1000), (7, 1001), (3, 4096), (2, 24), (1, 1))


def check(xp, rng):
    """Against float64 numpy: within 1 bfloat16 ulp (float32 accumulation, one rounding)."""
    out = []
    for m, n in SHAPES:
        x = bf16_bits(rng.standard_normal((m, n)))
        w = bf16_bits(rng.uniform(0.5, 1.5, n))
        y = xp.asarray(np.full((m, n), 0xFFFF, np.uint16))          # poisoned (NaN)
        make(n)(xp.asarray(x), xp.asarray(w), y, 1e-6)
        err = bf16_ulps(xp.asnumpy(y), reference(x, w, 1e-6))
        out.append((f"rmsnorm(M={m}, N={n}) within 1 bf16 ulp (max {err.max():.2f})",
                    np.array([err.max() <= 1.0]), np.array([True])))
    return out


if __name__ == "__main__":
    for k in KERNELS + [make(8192, per_thread=p) for p in (8, 32)]:
        r = k.compile("sm_90a")
        print(f"{k.name}: {r.registers} registers, {r.spill_bytes} spill bytes")
