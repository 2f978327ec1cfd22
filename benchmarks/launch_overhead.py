"""Host-side cost of one launch through ptxgen, with and without the generated fast launch.

Times N launches of an empty kernel with two tensor parameters and prints microseconds per
launch for: the bare cuda-bindings cuLaunchKernel with prepacked parameters (the baseline), a
pg.Kernel call on torch tensors through the generated fast launch (``runtime.own_launch_path``,
the default), the same call through the general path (a second kernel whose plan has the fast
launch turned off: ``LaunchPlan.fast = False``), a Launcher given raw pointers, and the argument
checks alone.  Then the two ratios that decide whether the fast launch stays: general / fast,
and the share of a launch the fast launch saves (keep it at >= 5%).  The GPU work is nil, so
this is the Python + driver submission cost.  Rounds are interleaved, so a drift of the host
falls on every variant alike.

``--fake-driver`` runs without a GPU: the driver is the stand-in of tests/support/fakecuda.py
with its launch made a no-op, and the tensors are torch-like stand-ins, so what is timed is
ptxgen's own Python per launch (checks, packing, dispatch).

    python benchmarks/launch_overhead.py [--n 10000] [--json out.json] [--fake-driver]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
try:  # torch first, as in an application: ptxgen then generates its torch fast path
    import torch
except ImportError:
    torch = None

import ptxgen as pg  # noqa: E402
from ptxgen.runtime import Launcher, cache, driver, has_gpu, synchronize  # noqa: E402

N = pg.var("N")
FAST = "pg.Kernel, torch tensors: generated fast launch"
GENERAL = "pg.Kernel, torch tensors: general path (fast launch off)"


def make_kernel():
    @pg.kernel(grid=(1,), block=(32,))
    def empty3(a: pg.Tensor((N,), "float32"), b: pg.Tensor((N,), "float32")):
        pass
    return empty3


def interleaved_us(variants: dict, n: int, sync=synchronize, rounds: int = 7):
    """Per variant, the microseconds per call of each of `rounds` timed rounds of n calls,
    after a warm-up round of each; the rounds take the variants in turn (round r starts at
    variant r), so a drift of the host (clocks, other tenants) falls on all of them alike."""
    names = list(variants)
    for fn in variants.values():
        fn(n // 10)
        sync()
    out = {k: [] for k in names}
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            variants[k](n)
            out[k].append((time.perf_counter() - t0) / n * 1e6)
            sync()
    return out


def fake_setup():
    """The stand-in driver, installed as ptxgen's, with torch-like tensors on cuda:0 and a
    fake torch module, so the fast launch is generated for them."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from support.fakecuda import FLOAT32, FakeDriver, FakeTorchTensor
    from ptxgen.runtime import args, launcher

    fake = FakeDriver(archs=[(9, 0)])
    fake.cuLaunchKernel = lambda *a: (0,)          # the driver's own cost taken out
    driver._drv, driver._init_error = fake, None
    launcher._torch_stream[:] = [None, None]
    args.torch_dt[FLOAT32] = "float32"
    x = FakeTorchTensor(fake.alloc(0), (1024,), 0)
    y = FakeTorchTensor(fake.alloc(0), (1024,), 0)
    fake_torch = type(sys)("torch")
    fake_torch.Tensor, fake_torch.float32, fake_torch.dtype = FakeTorchTensor, FLOAT32, \
        type(FLOAT32)
    fake_torch.cuda = type(sys)("torch.cuda")
    fake_torch.cuda.is_initialized = lambda: True
    fake_torch._C = type(sys)("torch._C")
    fake_torch._C._cuda_getDevice = lambda: 0
    fake_torch._C._cuda_getCurrentRawStream = lambda dev: 0
    sys.modules["torch"] = fake_torch
    return fake, x, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--json")
    ap.add_argument("--fake-driver", action="store_true",
                    help="no GPU: time ptxgen's Python per launch against a no-op driver")
    a = ap.parse_args()
    fake = None
    if a.fake_driver:
        fake, x, y = fake_setup()
        sync = (lambda: None)
    else:
        if not has_gpu():
            sys.exit("no CUDA GPU: nothing to measure (--fake-driver times the Python side)")
        if torch is None:
            sys.exit("needs torch: the generated fast launch is made for torch tensors")
        x, y = torch.zeros(1024, device="cuda"), torch.zeros(1024, device="cuda")
        sync = synchronize

    fast_k, general_k = make_kernel(), make_kernel()
    fast_k(x, y)                                      # build, load, generate the bind
    general_k(x, y)
    general_k._plan.fast = False                      # the general path only, from now on
    fast_k(x, y)                                      # the second launch makes the fast one
    if not fast_k._plan.fast:
        sys.exit("no fast launch was generated (no torch tensors?)")
    L0 = next(iter(fast_k._plan.launchers.values()))
    L = Launcher(L0.fn, fast_k.params, name="empty3")  # a standalone Launcher, same function
    L.packer.pack([0x7F00_0000_0000, 0x7F00_0000_1000, 1024])
    kp, h = L.packer.kernel_params, L0.fn.handle
    results = {}
    d = driver.drv()
    launch = d.cuLaunchKernel

    def bare(n):
        for _ in range(n):
            launch(h, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
    base = "no-op launch (the fake's)" if fake is not None else \
        "bare cuLaunchKernel, cuda-bindings (baseline)"
    results[base] = bare

    def fast(n):
        for _ in range(n):
            fast_k(x, y)
    results[FAST] = fast

    def general(n):
        for _ in range(n):
            general_k(x, y)
    results[GENERAL] = general

    ptr = x.data_ptr()

    def raw_pointers(n):
        for _ in range(n):
            L((ptr, ptr), {"N": 1024}, grid=(1,), block=(32,), stream=0)
    results["Launcher, raw pointers"] = raw_pointers
    bind = fast_k._plan.bind

    def bind_only(n):
        for _ in range(n):
            bind((x, y), {})
    results["argument checks alone"] = bind_only

    rounds = interleaved_us(results, a.n, sync)
    med = statistics.median
    times = {k: med(v) for k, v in rounds.items()}
    if fake is not None:
        where = "fake driver (no-op launch): ptxgen's Python per launch"
    else:
        where = driver.device_name(0)
    print(f"{where}, {a.n} launches per round, median of 7 interleaved rounds")
    b = times[base]
    for name, v in times.items():
        ratio = "" if fake is not None else f"   ({v / b:5.2f}x baseline)"
        print(f"  {name:60s} {v:7.2f} us/launch{ratio}")
    # medians of the per-round ratios (each round's pair timed back to back)
    general_over_fast = med(g / f for g, f in zip(rounds[GENERAL], rounds[FAST]))
    saved = 1 - 1 / general_over_fast
    print(f"general path / fast launch = {general_over_fast:.3f}x: the fast launch saves "
          f"{saved:.1%} of a launch ({'>=' if saved >= 0.05 else '<'} 5%: "
          f"{'keep it' if saved >= 0.05 else 'delete it'})")
    fast_over_base = None
    if fake is None:
        fast_over_base = med(f / c for f, c in zip(rounds[FAST], rounds[base]))
        print(f"fast launch / bare cuda-bindings cuLaunchKernel = {fast_over_base:.2f}x")
    retries = cache.stats().get("launch_retries", 0)
    print(f"  launches refused and made again in their own context (launch_retries): {retries}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": where, "n": a.n, "us_per_launch": times, "rounds_us": rounds,
                       "general_over_fast": general_over_fast, "fast_saves": saved,
                       "fast_over_bare": fast_over_base}, f, indent=1)


if __name__ == "__main__":
    main()
