import sys, os, time, timeit, cProfile, pstats
sys.path.insert(0, os.getcwd())
import torch
from ptxgen.runtime import *
from ptxgen.runtime import driver, args as A
from benchmarks.launch_overhead import EMPTY3, PARAMS
mod = Module.load(cubin=compile_ptx(EMPTY3, device_arch(), name="empty3").cubin, name="empty3")
fn = mod.function("empty3"); L = Launcher(fn, PARAMS, name="empty3")
x = torch.zeros(1024, device="cuda"); y = torch.zeros(1024, device="cuda")
def t(label, f, n=20000):
    f()
    dt = timeit.timeit(f, number=n) / n * 1e6
    print(f"{label:40s} {dt:7.3f} us")
def nop(): pass
t("python nop call", nop)
t("x.data_ptr()", x.data_ptr); t("x.is_cuda", lambda: x.is_cuda); t("x.dtype", lambda: x.dtype)
t("tuple(x.shape)", lambda: tuple(x.shape)); t("x.get_device()", x.get_device)
t("_from_torch", lambda: A._from_torch(x, False))
t("bind", lambda: L.binder.bind((x, y), {}))
t("bind raw kw", lambda: L.binder.bind((0, 0), {"N": 1024}))
t("stream_handle(None)", lambda: stream_handle(None))
t("torch.cuda.is_initialized", torch.cuda.is_initialized)
t("_getCurrentRawStream", lambda: torch._C._cuda_getCurrentRawStream(0))
d = driver.drv(); kp = L.packer.kernel_params; h = fn.handle
def bare100():
    for _ in range(100): d.cuLaunchKernel(h, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
    d.cuCtxSynchronize()
t("bare launch (100 then sync) /100", bare100, 200)
def full100():
    for _ in range(100): L((x, y), {}, grid=(1,), block=(32,))
    d.cuCtxSynchronize()
t("full launch (100 then sync) /100", full100, 200)
pr = cProfile.Profile(); pr.enable()
for _ in range(20000): L((x, y), {}, grid=(1,), block=(32,))
pr.disable(); d.cuCtxSynchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(15)
import ctypes
lib = ctypes.CDLL("libcuda.so.1")
cl = lib.cuLaunchKernel
cl.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
cl.restype = ctypes.c_int
fh = int(h)
def ct100():
    for _ in range(100): cl(fh, 1, 1, 1, 32, 1, 1, 0, 0, kp, None)
    d.cuCtxSynchronize()
t("ctypes launch (100 then sync) /100", ct100, 200)
def ct1():
    cl(fh, 1, 1, 1, 32, 1, 1, 0, 0, kp, None)
def b1():
    d.cuLaunchKernel(h, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
for name, f in [("ctypes", ct1), ("bindings", b1)]:
    d.cuCtxSynchronize()
    t0 = time.perf_counter()
    for _ in range(500): f()
    print(name, "500 launches, us each:", (time.perf_counter() - t0) / 500 * 1e6)
    d.cuCtxSynchronize()
