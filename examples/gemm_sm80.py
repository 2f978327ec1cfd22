"""GEMM with warp-level tensor cores (mma.sync, sm_80+): C = A @ B, fp32 (or int32) accumulators.

    A (M, K), B (K, N) row-major float16 / bfloat16 / int8;  C (M, N) float32 (int32 for int8),
    or float16 / bfloat16 (rounded from the fp32 accumulators).
    CTA tile BM x BN (128 x 128), K step BK (32), WM x WN warps (2 x 4), each owning a
    (BM/WM) x (BN/WN) block of C in registers; grid (N / BN, M / BM).

Per K step: the CTA copies its A and B tiles into shared memory (pg.tile.cta.copy: 128-bit
vectors, into tiles whose 16-byte chunks are swizzled by row, so the fragment loads below
hit eight different banks), then for each instruction K (16, or 32 for int8) every warp loads
its fragments with pg.tile.warp.copy -- ldmatrix.x4 for A, ldmatrix.x4.trans for B -- and
issues (BM/WM/16) x (BN/WN/8) mma.sync.  int8 B is copied transposed into an (N, K) tile
instead (ldmatrix moves bytes in 16-bit pairs, so it cannot transpose them; this copy is
byte by byte) and its fragments are non-trans ldmatrix.x4 of that tile.  The epilogue stores each warp's accumulators straight from registers.
No pipelining: it shows the primitives, it is not a tuned kernel.

    python examples/gemm_sm80.py       # registers / spills for each dtype on sm_80
"""
import numpy as np

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

ACC = {"float16": "float32", "bfloat16": "float32", "int8": "int32"}


def make_gemm(M, N, K, dtype="float16", out=None, BM=128, BN=128, BK=32, WM=2, WN=4,
              name=None):
    """The kernel for fixed (M, N, K) (multiples of BM, BN, BK)."""
    acc = ACC[dtype]
    out = out or acc
    shape = "m16n8k32" if dtype == "int8" else "m16n8k16"
    KI = 32 if dtype == "int8" else 16
    TM, TN = BM // WM, BN // WN
    assert M % BM == 0 and N % BN == 0 and K % BK == 0 and BK % KI == 0
    assert TM % 16 == 0 and TN % 8 == 0, "each warp needs whole 16 x 8 instruction tiles"
    bits = 8 if dtype == "int8" else 16
    a_smem = _swizzled((BM, BK), bits)
    b_shape = (BN, BK) if dtype == "int8" else (BK, BN)
    b_smem = _swizzled(b_shape, bits)

    def gemm(A: pg.Tensor((M, K), dtype), B: pg.Tensor((K, N), dtype), C: pg.Tensor((M, N), out)):
        pg.thread_id(32 * WM * WN)
        bn = pg.cta_id(N // BN, "x")
        bm = pg.cta_id(M // BM, "y")
        warp = pg.warp_id()
        wm, wn = pg.let(warp // WN), pg.let(warp % WN)
        As = pg.alloc_shared((BM, BK), dtype, layout=a_smem, align=1024)
        Bs = pg.alloc_shared(b_shape, dtype, layout=b_smem, align=1024)
        Bkn = Bs.permute(1, 0) if dtype == "int8" else Bs          # B as (K, N) either way
        a = pg.alloc_local((TM, KI), dtype, layout=pg.mma_sync_layout("A", shape, tile=(TM, KI)))
        b = pg.alloc_local((KI, TN), dtype, layout=pg.mma_sync_layout("B", shape, tile=(KI, TN)))
        c = pg.alloc_local((TM, TN), acc, layout=pg.mma_sync_layout("C", shape, tile=(TM, TN)))
        for kt in pg.serial(K // BK):
            pg.tile.cta.copy(As, A[bm * BM:bm * BM + BM, kt * BK:kt * BK + BK])
            pg.tile.cta.copy(Bkn, B[kt * BK:kt * BK + BK, bn * BN:bn * BN + BN])
            pg.cta_sync()
            for ks in range(BK // KI):                 # unrolled while tracing
                pg.tile.warp.copy(a, As[wm * TM:wm * TM + TM, ks * KI:ks * KI + KI])
                pg.tile.warp.copy(b, Bkn[ks * KI:ks * KI + KI, wn * TN:wn * TN + TN])
                if ks == 0:
                    pg.tile.warp.gemm(c, a, b, accumulate=kt > 0)
                else:
                    pg.tile.warp.gemm(c, a, b)
            pg.cta_sync()
        res = c
        if out != acc:                                   # round the accumulators, then store
            res = pg.alloc_local((TM, TN), out, layout=c.layout)
            src, dst = c.local(), res.local()
            for j in pg.unroll(TM * TN // 32):
                dst[j] = pg.cast(src[j], out)
        row, col = pg.let(bm * BM + wm * TM), pg.let(bn * BN + wn * TN)
        pg.tile.warp.copy(C[row:row + TM, col:col + TN], res)

    gemm.__name__ = name or f"gemm_sm80_{dtype}_{out}_{M}x{N}x{K}"
    return pg.kernel(gemm, grid=(N // BN, M // BM), block=(32 * WM * WN,))


def _swizzled(shape, bits):
    """A shared tile whose 16-byte chunks are XORed with the row number (mod 8, or with its
    row pair for 64-byte rows), so 8 consecutive rows at one column -- what one 8x8 ldmatrix
    reads -- land in 8 different banks."""
    rows, cols = shape
    row_bytes = cols * bits // 8
    chunk = (128 // bits).bit_length() - 1          # log2(elements per 16 bytes)
    if row_bytes >= 128:
        return ComposeLayout(Swizzle(3, chunk, cols.bit_length() - 1 - chunk),
                             TileLayout(S[(rows, cols)]))
    if row_bytes == 64:
        return ComposeLayout(Swizzle.mma(64, bits), TileLayout(S[(rows, cols)]))
    return None


_KERNELS: dict = {}


def gemm(a, b, out=None):
    """C = a @ b on CUDA torch tensors: a (M, K), b (K, N) float16 / bfloat16 / int8, M and N
    multiples of 128, K of 32.  Returns float32 (int32 for int8) unless `out` (an (M, N)
    float32 / float16 / bfloat16 tensor) is given."""
    import torch

    dt = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.int8: "int8"}[a.dtype]
    M, K = a.shape
    N = b.shape[1]
    if b.dtype != a.dtype or b.shape[0] != K:
        raise ValueError(f"gemm: a {tuple(a.shape)} {a.dtype} @ b {tuple(b.shape)} {b.dtype}")
    if out is None:
        out = torch.empty((M, N), dtype=torch.int32 if dt == "int8" else torch.float32,
                          device=a.device)
    odt = str(out.dtype).replace("torch.", "")
    key = (M, N, K, dt, odt)
    if key not in _KERNELS:
        _KERNELS[key] = make_gemm(M, N, K, dt, odt)
    _KERNELS[key](a.contiguous(), b.contiguous(), out)
    return out


KERNELS = [make_gemm(256, 256, 128, "float16"), make_gemm(256, 256, 128, "bfloat16", "bfloat16"),
           make_gemm(256, 256, 128, "int8")]


def small_ints(rng, shape, dt):
    """Integer-valued inputs (|x| <= 4): every fp32 partial sum is exact, so a result can be
    compared bit for bit with numpy whatever order the tensor cores add in."""
    x = rng.integers(-4, 5, shape)
    if dt == "bfloat16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(np.float16 if dt == "float16" else np.int8)


def _as_f64(x, dt):
    if dt == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _as_out(want, odt):
    """Exact integer results (|x| < 2^24) in the output dtype's bits, rounded to nearest even
    as the kernel's cvt.rn does."""
    if odt == "int32":
        return want.astype(np.int32)
    if odt == "bfloat16":
        b = want.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return want.astype(np.float16 if odt == "float16" else np.float32)


def check(xp, rng):
    out = []
    for k in KERNELS:
        (M, K), dt = k.ir.params[0].buffer.shape, k.ir.params[0].buffer.dtype.name
        (_, N), odt = k.ir.params[2].buffer.shape, k.ir.params[2].buffer.dtype.name
        a, b = small_ints(rng, (M, K), dt), small_ints(rng, (K, N), dt)
        want = _as_out(_as_f64(a, dt) @ _as_f64(b, dt), odt)
        C = xp.asarray(np.frombuffer(b"\xa5" * want.nbytes, want.dtype).reshape(M, N))  # poison
        k(xp.asarray(a), xp.asarray(b), C)
        out.append((k.name, C, want))
    return out


if __name__ == "__main__":
    for k in KERNELS:
        res = k.compile("sm_80")
        print(f"{k.name}: {res.registers} registers, {res.shared_bytes} B shared, "
              f"{res.spill_bytes} spill bytes")
