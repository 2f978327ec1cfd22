"""The hinted TMA ring on a small ragged tensor, for compute-sanitizer memcheck."""
import sys, os
sys.path.insert(0, os.getcwd())
import torch
from ptxgen.bench.async_kernels import tma_ring_kernel
for dt, tile, S, c in [("float32", (16, 32), 8, 4), ("float16", (16, 64), 4, 2)]:
    tdt = getattr(torch, dt)
    rows = 16 * 1000 + 7
    a = torch.randint(-30000, 30000, (rows, tile[1]), dtype=torch.int16 if dt == "float16" else torch.int32,
                      device="cuda").view(tdt)
    o = torch.full_like(a.view(torch.int16 if dt == "float16" else torch.int32), -1).view(tdt)
    k, _ = tma_ring_kernel(dt, tile, S, c, 4, name=f"mc_{dt}")
    k(a, o); torch.cuda.synchronize()
    print(dt, tile, "bit-exact" if torch.equal(a.view(torch.uint8), o.view(torch.uint8)) else "WRONG")
