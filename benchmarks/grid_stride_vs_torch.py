"""Grid-stride vectorized copy (examples/grid_stride_copy.py) vs torch copy_ on the same
1 GiB float32 buffers, same run.  Prints GB/s (read + write) and the ratio."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))


def bench(fn, reps=30, warmup=5):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def main(gib=1.0):
    import torch

    import grid_stride_copy as g

    n = int(gib * (1 << 30)) // 4
    src = torch.randn(n, device="cuda", dtype=torch.float32)
    dst = torch.full((n,), float("nan"), device="cuda", dtype=torch.float32)
    k = g.grid_stride_copy
    k(src, dst)
    torch.cuda.synchronize()
    assert torch.equal(src.view(torch.int32), dst.view(torch.int32)), "copy is wrong"
    nbytes = 2 * n * 4
    t_torch = bench(lambda: dst.copy_(src))
    t_ptxgen = bench(lambda: k(src, dst))
    bw = lambda t: nbytes / t / 1e6   # GB/s
    print(f"grid_stride_copy {gib:.2f} GiB float32: ptxgen {bw(t_ptxgen):.0f} GB/s "
          f"({t_ptxgen:.3f} ms), torch copy_ {bw(t_torch):.0f} GB/s ({t_torch:.3f} ms), "
          f"ratio {t_torch / t_ptxgen:.3f}x  [{torch.cuda.get_device_name()}]")




def sweep(gib=1.0):
    """Tuning sweep: threads x vectors in flight x CTAs per SM, each against torch copy_."""
    import torch

    import grid_stride_copy as g

    n = int(gib * (1 << 30)) // 4
    src = torch.randn(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    nbytes = 2 * n * 4
    t_torch = bench(lambda: dst.copy_(src))
    print(f"torch copy_: {nbytes / t_torch / 1e6:.0f} GB/s")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    configs = [(t, u, c, None, None) for t, u, c in [(256, 4, 4), (256, 8, 4), (512, 4, 4),
                                                     (256, 4, 8), (1024, 4, 2), (256, 8, 8),
                                                     (128, 8, 8)]]
    configs += [(256, 4, 8, "nc", None), (256, 4, 8, ["nc", "L1::no_allocate"], "cs"),
                (256, 8, 8, ["nc", "L1::no_allocate", "L2::256B"], "cs"), (256, 4, 8, None, "cs")]
    for threads, unroll, per_sm, lh, sh in configs:
        k = g.make(threads, unroll, sms * per_sm, name=f"gsc_{threads}_{unroll}_{per_sm}",
                   load_hint=lh, store_hint=sh)
        dst.fill_(float("nan"))
        k(src, dst)
        torch.cuda.synchronize()
        ok = torch.equal(src.view(torch.int32), dst.view(torch.int32))
        t = bench(lambda: k(src, dst))
        print(f"threads={threads:4} unroll={unroll} ctas/SM={per_sm} load={lh} store={sh}: "
              f"{nbytes / t / 1e6:.0f} GB/s "
              f"ratio {t_torch / t:.3f}x {'ok' if ok else 'WRONG'}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["sweep"]:
        sweep(float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
    else:
        main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
