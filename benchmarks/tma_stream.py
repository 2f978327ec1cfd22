"""The TMA ring streaming copy (ptxgen/bench/async_kernels.py: tma_ring) against torch copy_
on the same 1 GiB buffers, in the same run, for a few ring shapes; prints each ratio and the
best.  Every configuration is checked bit for bit (output poisoned with NaN bits first).

The ring: a persistent grid of c CTAs per SM, one thread each, S shared stages of one
R x C box; TMA loads run S/2 tiles ahead of the TMA stores that write the tiles back; L2
eviction hints on the loads and stores (evict_last / evict_first unless a row says none).
Timing: CUDA events around batches of back-to-back launches, torch's and the kernel's batches
alternating round by round (benchmarks/grid_stride_variants.py's `timeit`).

    python benchmarks/tma_stream.py [GiB]        # on an sm_90+ GPU
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

# (element dtype, box R x C, stages, CTAs per SM, hinted): 2-4 KiB boxes with several CTAs per
# SM measured best in sweeps of 38 shapes; hinted rows take the kernel's default L2 hints
# (evict_last loads, evict_first stores: the fifth session's, RESULTS-archive.md), the last row none
CONFIGS = [
    ("float32", (16, 32), 16, 2, True), ("float32", (16, 32), 8, 4, True),
    ("float32", (32, 32), 8, 3, True), ("float32", (16, 64), 8, 4, True),
    ("float32", (8, 64), 16, 4, True), ("float16", (16, 64), 8, 4, True),
    ("float32", (16, 32), 8, 4, False),
]


def main(gib=1.0):
    import torch

    from grid_stride_variants import timeit
    from ptxgen.bench.async_kernels import tma_ring_kernel

    if torch.cuda.get_device_capability()[0] < 9:
        print("the TMA ring needs an sm_90+ GPU")
        return 2
    nbytes = int(gib * (1 << 30)) // 4 * 4
    src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = []
    for dt, (R, C), stages, ctas, hinted in CONFIGS:
        eb = {"float32": 4, "float16": 2}[dt]
        tdt = {"float32": torch.float32, "float16": torch.float16}[dt]
        rows = nbytes // (C * eb)
        s2, d2 = src.view(tdt)[:rows * C].view(rows, C), dst.view(tdt)[:rows * C].view(rows, C)
        name = f"tma_ring_{dt}_{R}x{C}_s{stages}_c{ctas}"
        k, _ = (tma_ring_kernel(dt, (R, C), stages, ctas, sms, name=name + "_hints") if hinted
                else tma_ring_kernel(dt, (R, C), stages, ctas, sms, name=name, load_hint=None,
                                     store_hint=None))
        dst.fill_(-1)          # NaN bits in float32 / float16
        k(s2, d2)
        torch.cuda.synchronize()
        ok = torch.equal(src, dst)
        t = timeit({"torch": lambda: dst.copy_(src), "k": lambda: k(s2, d2)})
        moved = 2 * rows * C * eb
        gbs, tgbs = moved / t["k"] / 1e6, 2 * nbytes / t["torch"] / 1e6
        ratio = t["torch"] / t["k"] * (rows * C * eb / nbytes)
        label = f"{dt} {R}x{C} S{stages} c{ctas} " + ("L2 hints" if hinted else "no hints")
        results.append((ratio, label, gbs, tgbs, ok))
        print(f"{label:46s} {gbs:6.0f} GB/s  torch {tgbs:6.0f}  ratio {ratio:.3f}  "
              f"{'ok' if ok else 'WRONG'}", flush=True)
    good = [r for r in results if r[4]]
    if not good:
        print("every configuration copied wrongly")
        return 1
    best = max(good)
    print(f"BEST {best[1]}: {best[2]:.0f} GB/s vs torch copy_ {best[3]:.0f} GB/s = "
          f"{best[0]:.3f}x ({gib} GiB, {torch.cuda.get_device_name()}; goal >= 0.97x)")
    return 0 if len(good) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0))
