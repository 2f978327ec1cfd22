"""Where a checked launch's time goes on this host, interleaved against the baseline.

base: cuda-bindings cuLaunchKernel, prepacked; ex: bare ctypes cuLaunchKernelEx, config made
once; call: k(x, y); fast: k._fast((x, y)); noop: the generated function with a no-op
launch (its Python alone); checks: the check lines alone; stream: torch's raw current
stream; acc_*: one torch accessor; ex_pydll: the same bare cuLaunchKernelEx through a
PyDLL (GIL kept), to size the GIL release."""
import ctypes, os, statistics, sys
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import torch
import launch_overhead as lo
from cuda.bindings import driver as cb
from ptxgen.runtime import driver
from ptxgen.runtime.launch_source import compiled

k = lo.make_kernel(); x = torch.zeros(1024, device="cuda"); y = torch.zeros(1024, device="cuda")
for _ in range(3):
    k(x, y)
torch.cuda.synchronize()
L0 = next(iter(k._launchers.values()))
L0.packer.pack([x.data_ptr(), y.data_ptr(), 1024])
kp, h = L0.packer.kernel_params, L0.fn.handle
hb = cb.CUfunction(int(h)); lb = cb.cuLaunchKernel
fast = k._fast; xy = (x, y)
print("fast path:", fast is not None, "launch_ex:", getattr(fast, "launch_ex", None))
d = driver.drv()
launch_ex, cfg_arg = driver.kernel_launch_ex(d)
cfg = cfg_arg((1, 1, 1, 32, 1, 1), 0, 0)
_, pointer_arg, _ = driver.kernel_launch(d)
kpa = pointer_arg(kp)
hp = ctypes.c_void_p(int(h))
py = ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx

# the generated function with the launch a no-op
g = dict(fast.__globals__)
t = dict(g["targets"])
dev = next(iter(t))
L, sa, tls, launch, handle, extra = t[dev]
t[dev] = (L, sa, tls, (lambda *a: 0), handle, extra)
g["targets"] = t
noop = compiled(fast.source, "launch_own_fast", g, "noop")
src = fast.source
checks_src = src[:src.index("    t = targets.get(dev)")] + "    return True\n"
checks = compiled(checks_src, "launch_own_fast", dict(fast.__globals__), "checks")
raw = torch._C._cuda_getCurrentRawStream
T, D = torch.Tensor, torch.float32


def base(n):
    for _ in range(n): lb(hb, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
def ex(n):
    for _ in range(n): launch_ex(cfg, h, kpa, None)
def ex_pydll(n):
    for _ in range(n): py(cfg, h, kpa, None)
def call(n):
    for _ in range(n): k(x, y)
def fastf(n):
    for _ in range(n): fast(xy)
def noopf(n):
    for _ in range(n): noop(xy)
def checksf(n):
    for _ in range(n): checks(xy)
def stream(n):
    for _ in range(n): raw(0)
def acc_shape(n):
    for _ in range(n): (s,) = x.shape
def acc_ptr(n):
    for _ in range(n): x.data_ptr()
def acc_dev(n):
    for _ in range(n): x.get_device()
def acc_contig(n):
    for _ in range(n): x.is_contiguous()
def acc_dtype(n):
    for _ in range(n): x.__class__ is not T or x.dtype is not D
def empty(n):
    for _ in range(n): pass


v = dict(base=base, ex=ex, ex_pydll=ex_pydll, call=call, fast=fastf, noop=noopf,
         checks=checksf, stream=stream, acc_shape=acc_shape, acc_ptr=acc_ptr, acc_dev=acc_dev,
         acc_contig=acc_contig, acc_dtype=acc_dtype, empty=empty)
r = lo.interleaved_us(v, 20000, torch.cuda.synchronize, rounds=9)
for name, tt in r.items():
    print(f"{name:10s} median {statistics.median(tt):6.3f} us  min {min(tt):6.3f}  "
          f"per-round ratio to base {statistics.median(a / b for a, b in zip(tt, r['base'])):.3f}")
