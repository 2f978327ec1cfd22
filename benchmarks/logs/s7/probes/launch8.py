"""Does the driver take a launch's parameters faster as one buffer (extra:
CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE) than as kernelParams (an array of pointers)?

base: cuda-bindings cuLaunchKernel, prepacked (the baseline); ex_kp: bare ctypes
cuLaunchKernelEx with kernelParams (what a pg.Kernel's own launch calls); ex_buf: the same
with the extra buffer form; raw_kp / raw_buf: bare ctypes cuLaunchKernel, both forms;
call: k(x, y).  Interleaved rounds, medians, per-round ratios to base."""
import ctypes, os, statistics, sys
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import torch
import launch_overhead as lo
from cuda.bindings import driver as cb
from ptxgen.runtime import driver

k = lo.make_kernel(); x = torch.zeros(1024, device="cuda"); y = torch.zeros(1024, device="cuda")
for _ in range(3):
    k(x, y)
torch.cuda.synchronize()
L0 = next(iter(k._launchers.values()))
pk = L0.packer
pk.pack([x.data_ptr(), y.data_ptr(), 1024])
kp, h = pk.kernel_params, L0.fn.handle
hb = cb.CUfunction(int(h)); lb = cb.cuLaunchKernel
d = driver.drv()
launch_ex, cfg_arg = driver.kernel_launch_ex(d)
cfg = cfg_arg((1, 1, 1, 32, 1, 1), 0, 0)
raw, pointer_arg, _ = driver.kernel_launch(d)
kpa = pointer_arg(kp)
size = ctypes.c_size_t(pk.struct.size)
extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(pk.buffer), 2, ctypes.addressof(size), 0)
ea = pointer_arg(ctypes.addressof(extra))
s0 = pointer_arg(0) if False else None
print("param bytes", pk.struct.size)
# both forms must launch: check return codes once
print("ex_kp rc", launch_ex(cfg, h, kpa, None), "ex_buf rc", launch_ex(cfg, h, None, ea),
      "raw_buf rc", raw(h, 1, 1, 1, 32, 1, 1, 0, None, None, ea))
torch.cuda.synchronize()


def base(n):
    for _ in range(n): lb(hb, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
def ex_kp(n):
    for _ in range(n): launch_ex(cfg, h, kpa, None)
def ex_buf(n):
    for _ in range(n): launch_ex(cfg, h, None, ea)
def raw_kp(n):
    for _ in range(n): raw(h, 1, 1, 1, 32, 1, 1, 0, None, kpa, None)
def raw_buf(n):
    for _ in range(n): raw(h, 1, 1, 1, 32, 1, 1, 0, None, None, ea)
def call(n):
    for _ in range(n): k(x, y)


v = dict(base=base, ex_kp=ex_kp, ex_buf=ex_buf, raw_kp=raw_kp, raw_buf=raw_buf, call=call)
r = lo.interleaved_us(v, 20000, torch.cuda.synchronize, rounds=9)
for name, tt in r.items():
    print(f"{name:8s} median {statistics.median(tt):6.3f} us  min {min(tt):6.3f}  "
          f"per-round ratio to base {statistics.median(a / b for a, b in zip(tt, r['base'])):.3f}")
