"""Which neighbour slows k(x, y) down in launch_overhead.py's rounds?  In one process: the
lean set (base, ex, call), then the lean set with each Launcher variant of
launch_overhead.py in turn, then with all of them, then lean again; the garbage collector's
time per variant is recorded (gc.callbacks) to see whether collections explain it."""
import gc, os, statistics, sys, time
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



GC = {"cur": None, "t0": 0.0, "spent": {}, "count": {}}


def on_gc(phase, info):
    if phase == "start":
        GC["t0"] = time.perf_counter()
    elif GC["cur"] is not None:
        k_ = (GC["cur"], info["generation"])
        GC["spent"][k_] = GC["spent"].get(k_, 0.0) + time.perf_counter() - GC["t0"]
        GC["count"][k_] = GC["count"].get(k_, 0) + 1


gc.callbacks.append(on_gc)


def tagged(name, fn):
    def run(n):
        GC["cur"] = name
        try:
            fn(n)
        finally:
            GC["cur"] = None
    return run


lean = dict(base=base, ex=ex, call=call)
others = dict(raw_pointers=raw_pointers, launcher_tensors=launcher_tensors, bound=bound,
              bound_own=bound_own)
phases = [("lean", lean)] + [(f"lean + {n}", {**lean, n: f}) for n, f in others.items()] + \
         [("lean + all four", {**lean, **others}), ("lean again", lean)]
for label, v in phases:
    GC["spent"].clear(); GC["count"].clear()
    r = lo.interleaved_us({n: tagged(n, f) for n, f in v.items()}, 10000,
                          torch.cuda.synchronize, rounds=7)
    ratio = statistics.median(a / b for a, b in zip(r["call"], r["base"]))
    gcs = ", ".join(f"{n}/gen{g}: {c} in {GC['spent'][(n, g)] * 1e3:.1f} ms"
                    for (n, g), c in sorted(GC["count"].items()))
    print(f"{label:28s} call/base {ratio:.3f}  base {statistics.median(r['base']):.3f} us  "
          f"call {statistics.median(r['call']):.3f} us  gc: {gcs or 'none'}", flush=True)
