"""examples/grid_stride_copy.py (its default: one 512-vector chunk per CTA, grid from N) vs
torch copy_ on the same float32 buffers, same run, at each size given (GiB).  Prints GB/s
(bytes read + written) and the ratio; `timeit` is benchmarks/grid_stride_variants.py's
(events around batches of launches, torch and ptxgen interleaved).

    python benchmarks/grid_stride_vs_torch.py [GiB ...]        (default: 1 4)
    python benchmarks/grid_stride_vs_torch.py sweep [GiB]      (benchmarks/grid_stride_variants.py)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def main(sizes=(1.0, 4.0)):
    import torch

    import grid_stride_copy as g
    from grid_stride_variants import timeit

    k = g.grid_stride_copy
    for gib in sizes:
        n = int(gib * (1 << 30)) // 4
        src = torch.randn(n, device="cuda", dtype=torch.float32)
        dst = torch.full((n,), float("nan"), device="cuda", dtype=torch.float32)
        k(src, dst)
        torch.cuda.synchronize()
        assert torch.equal(src.view(torch.int32), dst.view(torch.int32)), "copy is wrong"
        t = timeit({"torch": lambda: dst.copy_(src), "ptxgen": lambda: k(src, dst)})
        bw = lambda ms: 2 * n * 4 / ms / 1e6   # GB/s
        print(f"grid_stride_copy {gib:.2f} GiB float32: ptxgen {bw(t['ptxgen']):.0f} GB/s "
              f"({t['ptxgen']:.3f} ms), torch copy_ {bw(t['torch']):.0f} GB/s "
              f"({t['torch']:.3f} ms), ratio {t['torch'] / t['ptxgen']:.3f}x  "
              f"[{torch.cuda.get_device_name()}]", flush=True)
        del src, dst


if __name__ == "__main__":
    if sys.argv[1:2] == ["sweep"]:
        import grid_stride_variants
        grid_stride_variants.main(float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
    else:
        main(tuple(float(a) for a in sys.argv[1:]) or (1.0, 4.0))
