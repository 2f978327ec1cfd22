"""The best ring shape at several sizes: is the gap a fixed cost (ramp-up/drain) or a rate?"""
import sys, os
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import torch
from grid_stride_variants import timeit
from ptxgen.bench.async_kernels import tma_ring_kernel
for gib in (0.25, 1, 4):
    nbytes = int(gib * (1 << 30))
    src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    rows = nbytes // 128
    a, b = src.view(torch.float32).view(rows, 32), dst.view(torch.float32).view(rows, 32)
    k, _ = tma_ring_kernel("float32", (16, 32), 8, 4, 132, name=f"r{int(gib*4)}", load_hint=os.environ.get("LH"), store_hint=os.environ.get("SH"))
    dst.fill_(-1); k(a, b); torch.cuda.synchronize(); ok = torch.equal(src, dst)
    t = timeit({"torch": lambda: dst.copy_(src), "k": lambda: k(a, b)})
    print(f"{gib} GiB: ring {t['k']*1e3:.1f} us, torch {t['torch']*1e3:.1f} us, ratio "
          f"{t['torch']/t['k']:.3f}, diff {(t['k']-t['torch'])*1e3:.1f} us {'ok' if ok else 'WRONG'}", flush=True)
    del src, dst, a, b; torch.cuda.empty_cache()
