"""Hardware proof of the descriptor builder on Hopper (sm_90a): wgmma m64nNk16 bf16.

The sm_90 wgmma shared-memory descriptor has the fields of the sm_100 tcgen05 one (ptx-reference
section 8: an sm_100 descriptor is the sm_90 one with bit 46 set), so multiplying random
matrices on an H200 with descriptors from `smem_descriptors` -- the builder gemm_async uses --
checks LBO, SBO, swizzle codes and the per-K-step start-address advance on real hardware.

    A (64, K) and B (N, K) bf16 in global memory, D = A @ B^T fp32 (64, N).
    1. every thread copies elements into shared tiles laid out by `canonical_layout(major,
       swizzle)` (plain stores; the ComposeLayout places them), plus a raw dump of both tiles
       so a wrong smem layout and a wrong descriptor can be told apart;
    2. fence.proxy.async + bar.sync; descriptors derived from the tiles' layouts;
    3. wgmma.fence; K/16 x wgmma.mma_async (scale-d 0 first); commit_group; wait_group 0;
    4. accumulator fragment -> D: register j of thread t (warp w, lane l) holds
       (16w + l/4 + 8*((j/2)%2),  8*(j/4) + 2*(l%4) + j%2).

    python examples/wgmma_desc_check.py     # assembles every case for sm_90a
"""
import numpy as np

import ptxgen as pg
from ptxgen.primitives import instr_desc as idesc
from ptxgen.primitives import mma_desc as md
from ptxgen.builder.tcgen05 import smem_descriptors
from ptxgen.primitives.tcgen05 import canonical_layout

M, K = 64, 64
SWIZZLES = ("none", "32B", "64B", "128B")


def fragment(t, j):
    """(row, col) of accumulator register j of warpgroup thread t (wgmma D, f32)."""
    w, lane = divmod(t, 32)
    return 16 * w + lane // 4 + 8 * ((j // 2) % 2), 8 * (j // 4) + 2 * (lane % 4) + j % 2


def make_check(N=64, swizzle="128B", a_major="K", b_major="K"):
    shape, types = idesc.wgmma_shape(N=N, dtype="bfloat16", a_major=a_major, b_major=b_major)
    LA = canonical_layout(M, K, "bfloat16", major=a_major, swizzle=swizzle)
    LB = canonical_layout(N, K, "bfloat16", major=b_major, swizzle=swizzle)
    opcode = f"wgmma.mma_async.sync.aligned.{shape}.{types}"
    tnsp = ("1" if a_major == "MN" else "0", "1" if b_major == "MN" else "0")

    def wgmma_check(A: pg.Tensor((M, K), "bfloat16"), B: pg.Tensor((N, K), "bfloat16"),
                    D: pg.Tensor((M, N), "float32"), dumpA: pg.Tensor((M * K,), "uint16"),
                    dumpB: pg.Tensor((N * K,), "uint16")):
        tx = pg.thread_id(128)
        As = pg.alloc_shared((M, K), "bfloat16", layout=LA, align=1024)
        Bs = pg.alloc_shared((N, K), "bfloat16", layout=LB, align=1024)
        for src, dst, rows in ((A, As, M), (B, Bs, N)):
            for i in pg.serial(rows * K // 128):
                e = pg.let(i * 128 + tx)
                dst[e // K, e % K] = src[e // K, e % K]
        pg.ptx.fence.proxy_async()          # generic-proxy smem writes -> the async proxy
        pg.cta_sync()
        for tile, dump, rows in ((As, dumpA, M), (Bs, dumpB, N)):
            raw = pg.decl_buffer((rows * K,), "uint16", data=tile.data)
            for i in pg.serial(rows * K // 128):
                dump[i * 128 + tx] = raw[i * 128 + tx]
        _, a_desc = smem_descriptors(As, arch="sm_90a", role="A")
        _, b_desc = smem_descriptors(Bs, arch="sm_90a", role="B")
        acc = pg.alloc_local((N // 2,), "float32")
        for j in pg.unroll(N // 2):
            acc[j] = 0.0
        regs = [acc[j] for j in range(N // 2)]
        no, yes = pg.local_scalar("bool"), pg.local_scalar("bool")   # scale-d predicates,
        pg.ptx["setp.ne.b32"](no, 0, 0)                               # as CUTLASS passes them
        pg.ptx["setp.eq.b32"](yes, 0, 0)
        pg.ptx["wgmma.fence.sync.aligned"]()
        for s in range(K // 16):                       # scale-d false first: D = A * B
            pg.ptx[opcode](regs, a_desc[s], b_desc[s], no if s == 0 else yes, "1", "1", *tnsp)
        pg.ptx["wgmma.commit_group.sync.aligned"]()
        pg.ptx["wgmma.wait_group.sync.aligned"]("0")
        w, lane = pg.let(tx // 32), pg.let(tx % 32)
        for j in pg.unroll(N // 2):
            D[16 * w + lane // 4 + 8 * ((j // 2) % 2), 8 * (j // 4) + 2 * (lane % 4) + j % 2] = \
                acc[j]

    wgmma_check.__name__ = f"wgmma_n{N}_{swizzle}_{a_major}{b_major}"
    return pg.kernel(wgmma_check, grid=(1,), block=(128,))


CASES = [(64, sw, mj, mj) for sw in SWIZZLES for mj in ("K", "MN")] + [(256, "128B", "K", "K"),
                                                                         (128, "64B", "K", "MN")]
_CACHE: dict = {}


def kernel_for(N, swizzle, a_major, b_major):
    key = (N, swizzle, a_major, b_major)
    if key not in _CACHE:
        _CACHE[key] = make_check(*key)
    return _CACHE[key]


# ---- host reference -------------------------------------------------------------------------
def bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (uint16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def expected_dump(bits: np.ndarray, major, swizzle) -> np.ndarray:
    """The tile's bytes as the descriptor expects them (canonical offsets), as uint16."""
    rows, k = bits.shape
    off = md.canonical_offset(major, swizzle, 16, rows, k)
    out = np.zeros(rows * k, dtype=np.uint16)
    for r in range(rows):
        for c in range(k):
            out[off(r, c) // 2] = bits[r, c]
    return out


def inputs(N, seed=0):
    rng = np.random.default_rng(seed)
    a = bf16_bits(rng.standard_normal((M, K), dtype=np.float32))
    b = bf16_bits(rng.standard_normal((N, K), dtype=np.float32))
    ref = bf16_value(a).astype(np.float64) @ bf16_value(b).astype(np.float64).T
    return a, b, ref.astype(np.float32)


KERNELS = [kernel_for(*c) for c in CASES[:2]]

if __name__ == "__main__":
    for case in CASES:
        res = kernel_for(*case).compile("sm_90a")
        print(f"{kernel_for(*case).name}: {res.registers} registers, {res.spill_bytes} spill bytes")
