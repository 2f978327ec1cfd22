"""bf16 GEMM on Blackwell (sm_100a): D = A @ B^T, fp32 accumulation in TMEM, bf16 out.

    A (M, K) bf16, K contiguous      B (N, K) bf16, K contiguous      D (M, N) bf16
    CTA tile 128 x 256 (or 128 x 128), K step 64, grid (N / BN, M / 128), 128 threads.

Pipeline (STAGES-deep ring of 128B-swizzled A/B tiles from one SMEMPool):
    warp 0, lane 0   producer: wait empty[s] -> expect_tx(full[s]) -> two TMA box loads
    warp 1, lane 0   MMA:      wait full[s]  -> gemm_async (tcgen05.mma x 4) -> commit empty[s]
                               after the last K step: commit done
    all 4 warps      epilogue: wait done -> tcgen05.ld 32x32b.x32 (8 chunks) -> cvt bf16x2
                               -> 128-bit stores of this thread's row
The tensor maps (CUtensorMap, 128 B each) live in global memory; `make_tensor_map` builds
them on the host.  Assembles for sm_100a with no spills; sm_90a / sm_120a are rejected
(no tcgen05).  Running it needs a Blackwell GPU (not available here: assembly only).

    python examples/gemm_sm100.py          # registers / smem / spills for both tiles
"""
import struct

import ptxgen as pg
import ptxgen.primitives.tcgen05  # noqa: F401  (pg.ptx.tma.*, pg.tile.*.gemm_async, ...)
from ptxgen.alloc import SMEMPool, TMEMPool
from ptxgen.primitives.tmem_layout import register_layout

BM, BK = 128, 64


def make_gemm(M=2048, N=2048, K=2048, BN=256, STAGES=4, name=None):
    """The kernel for fixed (M, N, K); BN in {128, 256}."""
    assert M % BM == 0 and N % BN == 0 and K % BK == 0 and BN in (128, 256)
    KT = K // BK
    stage_bytes = (BM + BN) * BK * 2
    CH = 32                                            # columns per tcgen05.ld chunk

    def gemm(A_map: pg.Tensor((128,), "uint8", align=64),
             B_map: pg.Tensor((128,), "uint8", align=64),
             D: pg.Tensor((M, N), "bfloat16")):
        tx = pg.thread_id(128)
        bn = pg.cta_id(N // BN, "x")
        bm = pg.cta_id(M // BM, "y")
        warp = pg.warp_id()
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((STAGES, BM, BK), "bfloat16")   # 128B swizzle, 1 KiB aligned
        Bs = pool.alloc_tcgen05_mma_AB((STAGES, BN, BK), "bfloat16")
        full = pool.alloc_mbarrier(STAGES)
        empty = pool.alloc_mbarrier(STAGES)
        done = pool.alloc_mbarrier(1)
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=BN, tmem_addr=slot)
        acc = tmem.alloc((BM, BN), "float32")                          # layout D: lane = row

        with pg.if_(tx == 0):
            for s in pg.unroll(STAGES):
                pg.ptx.mbarrier.init(full[s], 1)
                pg.ptx.mbarrier.init(empty[s], 1)
            pg.ptx.mbarrier.init(done, 1)
            pg.ptx.fence.mbarrier_init()
        tmem.commit()                 # tcgen05.alloc by warp 0; its bar.sync publishes the inits

        a_map = pg.ptx.tma.map_address(A_map)
        b_map = pg.ptx.tma.map_address(B_map)
        with pg.if_(tx == 0):                                           # TMA producer
            for kt in pg.serial(KT):
                s = pg.let(kt % STAGES)
                pg.ptx.mbarrier.try_wait(empty[s], ((kt // STAGES) & 1) ^ 1)
                pg.ptx.mbarrier.arrive_expect_tx(full[s], stage_bytes)
                pg.ptx.tma.load(As[s, 0:BM, 0:BK], a_map, (kt * BK, bm * BM), full[s])
                pg.ptx.tma.load(Bs[s, 0:BN, 0:BK], b_map, (kt * BK, bn * BN), full[s])
        with pg.if_(warp == 1):                                         # MMA issuer
            for kt in pg.serial(KT):
                s = pg.let(kt % STAGES)
                pg.ptx.mbarrier.try_wait(full[s], (kt // STAGES) & 1)
                pg.tile.warp.gemm_async(acc, As[s, 0:BM, 0:BK], Bs[s, 0:BN, 0:BK],
                                        accumulate=kt > 0)
                pg.tile.warp.mma_commit(empty[s])      # frees stage s once these MMAs finish
            pg.tile.warp.mma_commit(done)

        pg.ptx.mbarrier.try_wait(done, 0)
        pg.cta_sync()                 # reconverge every warp before the .sync.aligned loads
        regs = pg.alloc_local((BM, CH), "float32", layout=register_layout("32x32b", BM, CH))
        packed = pg.alloc_local((CH // 2,), "uint32")
        Dw = pg.decl_buffer((M, N // 2), "uint32", data=D.data)   # bf16 pairs as words
        row = pg.let(bm * BM + tx)
        for c in pg.serial(BN // CH):
            pg.tile.cta.tmem_load(regs, acc[0:BM, c * CH:c * CH + CH])
            r = regs.local()
            for j in pg.unroll(CH // 2):              # d.hi = r[2j+1], d.lo = r[2j]
                pg.ptx["cvt.rn.bf16x2.f32"](packed[j], r[2 * j + 1], r[2 * j])
            col = pg.let(bn * (BN // 2) + c * (CH // 2))
            pg.tile.thread.copy(Dw[row, col:col + CH // 2], packed[0:CH // 2])
        tmem.dealloc()

    gemm.__name__ = name or f"gemm_sm100_{BM}x{BN}"
    return pg.kernel(gemm, grid=(N // BN, M // BM), block=(128,))


gemm_sm100 = make_gemm(BN=256)
gemm_sm100_128 = make_gemm(BN=128, name="gemm_sm100_128x128")
KERNELS = [gemm_sm100, gemm_sm100_128]


# ---- host side (needs a Blackwell GPU to run; not exercised here) ---------------------------
def make_tensor_map(ptr, rows, cols, box_rows, box_cols=BK):
    """128 bytes of a CUtensorMap for a row-major (rows, cols) bf16 tensor at `ptr`, box
    (box_rows, box_cols) with 128B swizzle (the layout of alloc_tcgen05_mma_AB tiles)."""
    from cuda.bindings import driver as cu

    err, tmap = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr,
        [cols, rows], [cols * 2], [box_cols, box_rows], [1, 1],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled: {err}")
    return struct.pack("<16Q", *[int(x) for x in tmap.opaque])


def run(kernel, A, B, D, BN=256):
    """Launch on device arrays A (M, K), B (N, K), D (M, N) (bf16 storage, e.g. torch)."""
    import torch

    M, K = A.shape
    N = B.shape[0]
    maps = [torch.frombuffer(bytearray(make_tensor_map(t.data_ptr(), r, K, br)),
                             dtype=torch.uint8).cuda()
            for t, r, br in ((A, M, BM), (B, N, BN))]
    kernel(maps[0].data_ptr(), maps[1].data_ptr(), D.data_ptr())
    return D


if __name__ == "__main__":
    for k in KERNELS:
        res = k.compile("sm_100a")
        print(f"{k.name}: {res.registers} registers, {k.resources['smem_bytes']} B shared, "
              f"{k.resources['tmem_cols']} TMEM columns, {res.spill_bytes} spill bytes")
