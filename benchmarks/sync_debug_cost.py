"""The cost of sync debug mode (pg.debug(sync=True)) on the GEMM and the TMA ring: each
kernel timed with the mode off and on (CUDA events, median of 20 after 3 warm-ups).

    python benchmarks/sync_debug_cost.py        # on a GPU; prints one line per kernel

The mode adds a %globaltimer read per wait try and per while_ iteration and a compare; the
numbers go to benchmarks/RESULTS.md.
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "examples"), ROOT]


def _time(fn, reps=20):
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return sorted(out)[len(out) // 2]


def main():
    import torch

    import async_copy
    import gemm_sm90
    import ptxgen as pg

    a = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    src = torch.randn(1 << 16, 128, device="cuda").to(torch.float16)
    dst = torch.empty_like(src)
    cases = [("gemm_sm90 8192^3 bf16", lambda: gemm_sm90.gemm(a, b)),
             ("ring_copy 65536 x 128 f16", lambda: async_copy.ring_copy(src, dst))]
    for label, fn in cases:
        pg.debug(sync=False)
        off = _time(fn)
        pg.debug(sync=True)
        on = _time(fn)     # every launch synchronizes in this mode: the time includes it
        pg.debug(sync=False)
        print(f"{label}: off {off:.3f} ms, sync debug {on:.3f} ms ({(on / off - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
