"""Does the driver launch faster from one packed parameter buffer (extra=) than from the
kernelParams pointer array?  Interleaved rounds against the cuda-bindings baseline."""
import ctypes, statistics, sys, os
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import torch
import launch_overhead as lo
from ptxgen.runtime import driver
from cuda.bindings import driver as cb
k = lo.make_kernel(); x = torch.zeros(1024, device="cuda"); y = torch.zeros(1024, device="cuda")
k(x, y); torch.cuda.synchronize()
L0 = next(iter(k._launchers.values()))
d = driver.drv()
L0.packer.pack([x.data_ptr(), y.data_ptr(), 1024])
kp, h = L0.packer.kernel_params, L0.fn.handle
raw, pointer_arg, extra0 = driver.kernel_launch(d)
kpa = pointer_arg(kp)
launch_ex, mkcfg = driver.kernel_launch_ex(d)
cfg = mkcfg((1, 1, 1, 32, 1, 1), 0, 0)
size = ctypes.c_size_t(L0.packer.struct.size)
ex = (ctypes.c_void_p * 5)(1, ctypes.addressof(L0.packer.buffer), 2, ctypes.addressof(size), 0)
exa = pointer_arg(ctypes.addressof(ex))
hb = cb.CUfunction(int(h)); lb = cb.cuLaunchKernel
def base(n):
    for _ in range(n): lb(hb, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
def ex_kp(n):
    for _ in range(n): launch_ex(cfg, h, kpa, None)
def ex_extra(n):
    for _ in range(n): launch_ex(cfg, h, None, exa)
def k_extra(n):
    for _ in range(n): raw(h, 1, 1, 1, 32, 1, 1, 0, None, None, exa)
def k_kp(n):
    for _ in range(n): raw(h, 1, 1, 1, 32, 1, 1, 0, None, kpa, extra0)
def full(n):
    for _ in range(n): k(x, y)
v = dict(base=base, ex_kp=ex_kp, ex_extra=ex_extra, k_kp=k_kp, k_extra=k_extra, full=full)
for f in v.values(): f(100)
torch.cuda.synchronize()
r = lo.interleaved_us(v, 20000, torch.cuda.synchronize, rounds=9)
for name, t in r.items():
    print(f"{name:10s} median {statistics.median(t):6.2f} us  per-round ratio to base "
          f"{statistics.median(a / b for a, b in zip(t, r['base'])):.3f}")
