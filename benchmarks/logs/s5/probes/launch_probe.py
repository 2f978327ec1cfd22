"""How much of a checked launch is Kernel.__call__'s frame: k(x, y) against k._fast((x, y))."""
import statistics, sys, os
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import torch
import launch_overhead as lo
from cuda.bindings import driver as cb
k = lo.make_kernel(); x = torch.zeros(1024, device="cuda"); y = torch.zeros(1024, device="cuda")
k(x, y); k(x, y); torch.cuda.synchronize()
L0 = next(iter(k._launchers.values()))
L0.packer.pack([x.data_ptr(), y.data_ptr(), 1024])
kp, h = L0.packer.kernel_params, L0.fn.handle
hb = cb.CUfunction(int(h)); lb = cb.cuLaunchKernel
fast = k._fast; xy = (x, y)
def base(n):
    for _ in range(n): lb(hb, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
def call(n):
    for _ in range(n): k(x, y)
def direct(n):
    for _ in range(n): fast(xy)
v = dict(base=base, call=call, direct=direct)
r = lo.interleaved_us(v, 20000, torch.cuda.synchronize, rounds=9)
for name, t in r.items():
    print(f"{name:8s} median {statistics.median(t):6.2f} us  per-round ratio to base "
          f"{statistics.median(a / b for a, b in zip(t, r['base'])):.3f}")
