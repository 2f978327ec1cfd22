"""One GPU check of test_runtime_multi_gpu.py's two-thread test as amended in this session:
its accumulate kernel, its random data and its reference (reps float32 additions in launch
order) with both threads on cuda:0, so the reference math is proven before a 2-GPU run."""
import os, sys, threading
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "tests", "gpu")]
import numpy as np
import torch
from test_runtime_multi_gpu import bits, make_accumulate

k = make_accumulate()
n, reps = 1 << 16, 300
host = {d: np.random.default_rng(d).standard_normal(n).astype(np.float32) for d in (0, 1)}
xs = {d: torch.from_numpy(host[d]).to("cuda:0") for d in (0, 1)}
outs = {d: torch.zeros(n, dtype=torch.float32, device="cuda:0") for d in (0, 1)}
torch.cuda.synchronize()
start = threading.Barrier(2)


def work(d):
    start.wait()
    for _ in range(reps):
        k(outs[d], xs[d])


threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
[t.start() for t in threads]
[t.join() for t in threads]
for d in (0, 1):
    want = np.zeros(n, np.float32)
    for _ in range(reps):
        want += host[d]
    got = bits(outs[d])
    print(f"thread {d}: bit-exact vs sequential float32 reference: "
          f"{np.array_equal(got, want.view(np.uint32))}; vs x * reps (the old reference): "
          f"{np.array_equal(got, (host[d] * np.float32(reps)).view(np.uint32))}")
