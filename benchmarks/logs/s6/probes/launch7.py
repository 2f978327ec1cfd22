"""Is k(x, y) slower beside the Launcher paths of launch_overhead.py?  Runs the lean set
(base, ex, call) twice in one process: alone, then with the Launcher variants of
launch_overhead.py interleaved in the same rounds."""
import os, statistics, sys
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import torch
import launch_overhead as lo
from cuda.bindings import driver as cb
from ptxgen.runtime import Launcher, driver

k = lo.make_kernel(); x = torch.zeros(1024, device="cuda"); y = torch.zeros(1024, device="cuda")
for _ in range(3):
    k(x, y)
torch.cuda.synchronize()
L0 = next(iter(k._launchers.values()))
L0.packer.pack([x.data_ptr(), y.data_ptr(), 1024])
kp, h = L0.packer.kernel_params, L0.fn.handle
hb = cb.CUfunction(int(h)); lb = cb.cuLaunchKernel
d = driver.drv()
launch_ex, cfg_arg = driver.kernel_launch_ex(d)
cfg = cfg_arg((1, 1, 1, 32, 1, 1), 0, 0)
kpa = driver.kernel_launch(d)[1](kp)
L = Launcher(L0.fn, k.params, name="empty3")
ptr = x.data_ptr()
values, user, _ = k._bind((x, y), {})


def base(n):
    for _ in range(n): lb(hb, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
def ex(n):
    for _ in range(n): launch_ex(cfg, h, kpa, None)
def call(n):
    for _ in range(n): k(x, y)
def raw_pointers(n):
    for _ in range(n): L((ptr, ptr), {"N": 1024}, grid=(1,), block=(32,), stream=0)
def launcher_tensors(n):
    for _ in range(n): L((x, y), {}, grid=(1,), block=(32,))
def bound(n):
    for _ in range(n): L0.launch(values, user, k.ir.grid, k.ir.block)
def bound_own(n):
    for _ in range(n): L0.launch_own(values, user)


for label, v in (("lean", dict(base=base, ex=ex, call=call)),
                 ("with Launcher paths", dict(base=base, ex=ex, call=call, raw_pointers=raw_pointers,
                                              launcher_tensors=launcher_tensors, bound=bound,
                                              bound_own=bound_own)),
                 ("lean again", dict(base=base, ex=ex, call=call))):
    r = lo.interleaved_us(v, 20000, torch.cuda.synchronize, rounds=7)
    print(label)
    for name, tt in r.items():
        print(f"  {name:17s} median {statistics.median(tt):6.3f} us  per-round ratio to base "
              f"{statistics.median(a / b for a, b in zip(tt, r['base'])):.3f}")
