"""The seeds' pool example on Blackwell: A and B tiles, an MMA operand, a TMEM slot, 512 TMEM
columns, alloc and dealloc.  Assembles for sm_100a; sm_90a has no tcgen05 and is rejected.

    python examples/pool_sm100.py            # prints the PTX for sm_100a
"""
import ptxgen as pg
from ptxgen.alloc import SMEMPool, TMEMPool

BM, BN, BK = 128, 256, 64


@pg.kernel(grid=(1,), block=(128,))
def pool_sm100(A: pg.Tensor((BM, BK), "float16"), Out: pg.Tensor((1,), "uint32")):
    tx = pg.thread_id(128)
    pool = SMEMPool()
    As = pool.alloc((BM, BK), "float16", align=128)
    Bs = pool.alloc((BK, BN), "float16", align=128)
    Cs = pool.alloc_tcgen05_mma_AB((BM, BN), "float16")     # 512-B rows -> 128B swizzle
    bars = pool.alloc_mbarrier(1)
    tmem_addr = pool.alloc((1,), "uint32")
    pool.commit()

    tmem = TMEMPool(pool, total_cols=512, cta_group=1, tmem_addr=tmem_addr)
    acc = tmem.alloc((128, 512), "float32")                  # layout D: lane = row
    tmem.commit()                                            # warp 0 issues tcgen05.alloc

    for i in pg.serial(BK):
        As[tx, i] = A[tx, i]
    with pg.if_(tx == 0):
        pg.ptx.mbarrier.init(bars, 1)
        Out[0] = tmem.base                                   # the TMEM address, for inspection
    pg.ptx.fence.proxy_async()
    pg.cta_sync()
    Bs[0, tx] = As[tx, 0]
    Cs[tx, 0] = As[tx, 1]
    tmem.dealloc()                                           # warp 0 issues tcgen05.dealloc


if __name__ == "__main__":
    print(pool_sm100.ptx("sm_100a"))
