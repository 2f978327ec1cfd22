"""Trace + lower + emit time of every example kernel (median of N, CPU only), and the
cost of layout apply on a 3-level layout.  A tracked figure, not a timed test."""
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "examples"), os.path.join(HERE, "..")]

import ptxgen as pg  # noqa: E402


def time_kernel(fn_factory, reps=60):
    """Median of trace (the @pg.kernel call) and build (lower + emit) after one warm-up, so
    one-time costs (template compilation, imports) are not counted; also the fastest total,
    which on a noisy VM tracks the code's own cost better than the median."""
    fn_factory().ptx("sm_90a")
    trace, build = [], []
    lines = 0
    for _ in range(reps):
        t0 = time.perf_counter()
        k = fn_factory()
        t1 = time.perf_counter()
        text = k.ptx("sm_90a")
        t2 = time.perf_counter()
        trace.append(t1 - t0)
        build.append(t2 - t1)
        lines = text.count("\n")
    best = min(t + b for t, b in zip(trace, build))
    return statistics.median(trace) * 1e6, statistics.median(build) * 1e6, best * 1e6, lines


def factories():
    import importlib

    for mod in ("smem_demo", "dyn_arena", "phase_loop", "let_scalar", "add_one",
                "grid_stride_copy"):
        m = importlib.import_module(mod)
        for k in m.KERNELS:
            yield f"{mod}:{k.name}", (lambda k=k: pg.Kernel(k.fn, grid=k.ir.grid, block=k.ir.block,
                                                            name=k.name))
    from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

    def warp_copy():
        @pg.kernel(grid=(1,), block=(32,))
        def copy_32x32(A: pg.Tensor((32, 32), "float32"), B: pg.Tensor((32, 32), "float32")):
            pg.lane_id()
            sm = pg.alloc_shared((32, 32), "float32")
            pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])
            pg.cta_sync()
            pg.tile.warp.copy(B[0:32, 0:32], sm[0:32, 0:32])
        return copy_32x32
    yield "tile.warp.copy 32x32 f32", warp_copy

    def swz_copy():
        lay = ComposeLayout(Swizzle.mma(128, 16), TileLayout(S[(64, 64)]))

        @pg.kernel(grid=(1,), block=(128,))
        def copy_swizzled(A: pg.Tensor((64, 64), "float16"), B: pg.Tensor((64, 64), "float16")):
            pg.thread_id(128)
            sm = pg.alloc_shared((64, 64), "float16", layout=lay, align=1024)
            pg.tile.cta.copy(sm[0:64, 0:64], A[0:64, 0:64])
            pg.cta_sync()
            pg.tile.cta.copy(B[0:64, 0:64], sm[0:64, 0:64])
        return copy_swizzled
    yield "tile.cta.copy 64x64 f16 SW128", swz_copy


def main():
    warnings.simplefilter("ignore")
    print(f"{'kernel':<36} {'trace us':>9} {'emit us':>8} {'total us':>9} {'best us':>8} "
          f"{'PTX lines':>10} {'us/line':>8}")
    for name, f in factories():
        tr, bu, best, lines = time_kernel(f)
        print(f"{name:<36} {tr:>9.0f} {bu:>8.0f} {tr + bu:>9.0f} {best:>8.0f} {lines:>10} "
              f"{(tr + bu) / max(lines, 1):>8.2f}")
    from ptxgen.layout._bench import bench_apply

    print(f"layout apply, 3-level nested layout: {bench_apply():.2f} us/call")


if __name__ == "__main__":
    main()
