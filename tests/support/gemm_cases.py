"""Kernels for the gemm_async (wgmma) tests, shared by the CPU (ptxsim) and GPU suites.

    A (M, K), B (N, K) row-major in global memory (storage dtype), D (M, N) = A @ B^T.
    1. every thread stores elements into shared tiles laid out by `canonical_layout(major,
       swizzle)` (plain stores: the layout places them), fence.proxy.async, bar.sync;
    2. A from shared (descriptor) or copied into `mma_a_fragment` registers;
    3. gemm_async over the K extent in `splits` calls (the first with accumulate=False),
       gemm_wait(0);
    4. pg.tile.warpgroup.copy(D, acc): no fragment index math anywhere.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import ptxgen as pg
from ptxgen.primitives.tcgen05 import canonical_layout

_STORE = {"bfloat16": np.uint16, "float16": np.uint16, "float32": np.float32,
          "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8}
_KSTEP = {"bfloat16": 16, "float16": 16, "float32": 8, "float8_e4m3fn": 32,
          "float8_e5m2": 32}


class Case(NamedTuple):
    N: int = 64
    ab: str = "bfloat16"
    d: str = "float32"
    a_major: str = "K"
    b_major: str = "K"
    swizzle: str = "128B"
    a_regs: bool = False
    M: int = 64
    ksteps: int = 4          # instruction K steps over the tile
    splits: int = 1          # gemm_async calls over K

    @property
    def K(self):
        return _KSTEP[self.ab] * self.ksteps

    @property
    def name(self):
        a = "regs" if self.a_regs else self.a_major
        return (f"m{self.M}n{self.N}k{self.K}_{self.ab}_{self.d}_{a}{self.b_major}_"
                f"{self.swizzle}_x{self.splits}")


def make_kernel(c: Case):
    M, N, K = c.M, c.N, c.K
    LA = canonical_layout(M, K, c.ab, major=c.a_major, swizzle=c.swizzle)
    LB = canonical_layout(N, K, c.ab, major=c.b_major, swizzle=c.swizzle)
    KS = K // c.splits

    def gemm_check(A: pg.Tensor((M, K), c.ab), B: pg.Tensor((N, K), c.ab),
                   D: pg.Tensor((M, N), c.d)):
        tx = pg.thread_id(128)
        As = pg.alloc_shared((M, K), c.ab, layout=LA, align=1024)
        Bs = pg.alloc_shared((N, K), c.ab, layout=LB, align=1024)
        for src, dst, rows in ((A, As, M), (B, Bs, N)):
            for i in pg.serial(rows * K // 128):
                e = pg.let(i * 128 + tx)
                dst[e // K, e % K] = src[e // K, e % K]
        pg.ptx.fence.proxy_async()          # generic-proxy smem writes -> the async proxy
        pg.cta_sync()
        acc = pg.tile.warpgroup.mma_accumulator((M, N), c.d)
        a = As
        if c.a_regs:
            a = pg.tile.warpgroup.mma_a_fragment((M, K), c.ab)
            pg.tile.warpgroup.copy(a, As)
        for s in range(c.splits):
            pg.tile.warpgroup.gemm_async(acc, a[0:M, s * KS:(s + 1) * KS],
                                         Bs[0:N, s * KS:(s + 1) * KS], accumulate=s > 0)
        pg.tile.warpgroup.gemm_wait(0)
        pg.tile.warpgroup.copy(D, acc)

    gemm_check.__name__ = "gemm_" + c.name
    return pg.kernel(gemm_check, grid=(1,), block=(128,))


_CACHE: dict = {}


def kernel_for(c: Case):
    if c not in _CACHE:
        _CACHE[c] = make_kernel(c)
    return _CACHE[c]


# ---- host data -----------------------------------------------------------------------------
def _fp8_bits(x: np.ndarray, kind: str) -> np.ndarray:
    """Exact float -> fp8 bits for values the format holds (the test data is chosen so)."""
    e, m = (4, 3) if kind == "float8_e4m3fn" else (5, 2)
    bias = (1 << (e - 1)) - 1
    out = np.zeros(x.shape, np.uint8)
    for idx, v in np.ndenumerate(x):
        s = 0x80 if v < 0 else 0
        a = abs(float(v))
        if a == 0:
            out[idx] = s
            continue
        ex = int(np.floor(np.log2(a)))
        if ex < 1 - bias:
            code, mant = 0, a / 2.0 ** (1 - bias) * (1 << m)
        else:
            code, mant = ex + bias, (a / 2.0 ** ex - 1) * (1 << m)
        assert mant == int(mant), f"{v} is not exact in {kind}"
        out[idx] = s | (code << m) | int(mant)
    return out


def encode(x: np.ndarray, dt: str) -> np.ndarray:
    """float values (exact in `dt`) -> the storage array of a `dt` tensor."""
    if dt == "bfloat16":
        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        assert not (u & 0xFFFF).any(), "bf16 test data must be exact"
        return (u >> 16).astype(np.uint16)
    if dt == "float16":
        return x.astype(np.float16).view(np.uint16)
    if dt == "float32":
        return x.astype(np.float32)
    return _fp8_bits(x, dt)


def decode_d(raw: np.ndarray, dt: str) -> np.ndarray:
    return raw.view(np.float16).astype(np.float32) if dt == "float16" else raw


def exact_inputs(c: Case, seed=0):
    """Small dyadic values whose products and sums every accumulator holds exactly, so any
    summation order gives numpy's bits: (A storage, B storage, reference D as float32)."""
    rng = np.random.default_rng(seed)
    # f16 D and fp8 A/B (whose wgmma accumulates with ~14 mantissa bits on Hopper): integers
    lo, den = (-2, 1) if c.d == "float16" or c.ab.startswith("float8") else (-8, 4)
    a = rng.integers(lo, -lo + 1, size=(c.M, c.K)) / den
    b = rng.integers(lo, -lo + 1, size=(c.N, c.K)) / den
    ref = (a @ b.T).astype(np.float32)
    return encode(a, c.ab), encode(b, c.ab), ref


def d_storage(c: Case):
    return np.float16 if c.d == "float16" else np.float32


# ---- a warp-specialized kernel: one producer warpgroup, two wgmma consumers ------------------
def make_warpspec_kernel(N=64, K=64, ab="bfloat16"):
    """Warpgroup 0 (40 registers) stores A (128, K) and B (N, K) into shared tiles; after a
    CTA barrier warpgroups 1 and 2 (232 registers) each multiply their 64-row half of A:
    D[c] = A[64c:64c+64] @ B^T, copied out with pg.tile.warpgroup.copy."""
    LA = canonical_layout(64, K, ab, stages=2)
    LB = canonical_layout(N, K, ab)

    def warpspec(A: pg.Tensor((128, K), ab), B: pg.Tensor((N, K), ab),
                 D: pg.Tensor((2, 64, N), "float32")):
        tx = pg.thread_id(384)
        As = pg.alloc_shared((2, 64, K), ab, layout=LA, align=1024)
        Bs = pg.alloc_shared((N, K), ab, layout=LB, align=1024)
        with pg.warpgroup_role(0):
            pg.setmaxnreg(40, "dec")
            for i in pg.serial(128 * K // 128):
                e = pg.let(i * 128 + tx)
                As[e // (64 * K), e // K % 64, e % K] = A[e // K, e % K]
            for i in pg.serial(N * K // 128):
                e = pg.let(i * 128 + tx)
                Bs[e // K, e % K] = B[e // K, e % K]
            pg.ptx.fence.proxy_async()
        pg.cta_sync()
        with pg.warpgroup_role(range(1, 3)) as c:
            pg.setmaxnreg(232, "inc")
            acc = pg.tile.warpgroup.mma_accumulator((64, N), "float32")
            pg.tile.warpgroup.gemm_async(acc, As[c, 0:64, 0:K], Bs, accumulate=False)
            pg.tile.warpgroup.gemm_wait(0)
            pg.tile.warpgroup.copy(D[c, 0:64, 0:N], acc)

    return pg.kernel(warpspec, grid=(1,), block=(384,))
