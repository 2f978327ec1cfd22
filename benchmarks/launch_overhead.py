"""Host-side cost of one launch through ptxgen, against bare cuLaunchKernel, in one run.

Times N launches of an empty kernel with 3 parameters (two tensors and the shape symbol) and
prints microseconds per launch for: the bare cuda-bindings call with prepacked parameters (the
baseline), the bare call through the binding ptxgen launches with (its ctypes one by default,
the pointer arguments made beforehand; and its bare cuLaunchKernelEx with a config made once,
which a pg.Kernel's own launch uses), a Launcher given raw pointers, a Launcher and a
pg.Kernel given torch (or cupy) tensors with every check, and the argument checks alone; then
the checked pg.Kernel launch as a multiple of the baseline (and of the bare call through
ptxgen's binding).  The GPU work is nil, so this is the Python + driver submission cost.

``--fake-driver`` runs without a GPU: the driver is the stand-in of tests/_fakecuda.py with its
launch and context query made no-ops, and the tensors are torch-like stand-ins, so what is
timed is ptxgen's own Python per launch (checks, packing, dispatch).

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
from ptxgen.runtime import Launcher, driver, has_gpu, synchronize  # noqa: E402

N = pg.var("N")


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


def gpu_tensors():
    """Two 1024-float device arrays (torch, else cupy) and a label, or (None, None, '')."""
    if torch is not None:
        return (torch.zeros(1024, device="cuda"), torch.zeros(1024, device="cuda"),
                "torch tensors")
    try:
        import cupy as cp
    except ImportError:
        return None, None, ""
    return cp.zeros(1024, cp.float32), cp.zeros(1024, cp.float32), "cupy arrays"


def fake_setup():
    """The stand-in driver, installed as ptxgen's, with torch-like tensors on cuda:0."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from _fakecuda import FLOAT32, FakeDriver, FakeTorchTensor
    from ptxgen.runtime import args, launcher

    fake = FakeDriver(archs=[(9, 0)])
    driver._drv, driver._init_error = fake, None
    launcher._torch_stream[:] = [None, None]
    args._torch_dt[FLOAT32] = "float32"
    x = FakeTorchTensor(fake.alloc(0), (1024,), 0)
    y = FakeTorchTensor(fake.alloc(0), (1024,), 0)
    return fake, x, y, lambda binder: binder.specialize(FakeTorchTensor, {"float32": [FLOAT32]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--json")
    ap.add_argument("--fake-driver", action="store_true",
                    help="no GPU: time ptxgen's Python per launch against a no-op driver")
    a = ap.parse_args()
    fake = None
    if a.fake_driver:
        fake, x, y, specialize = fake_setup()
        label, sync = "torch-like stand-ins", (lambda: None)
    else:
        if not has_gpu():
            sys.exit("no CUDA GPU: nothing to measure (--fake-driver times the Python side)")
        x, y, label = gpu_tensors()
        sync = synchronize

    k = make_kernel()
    if x is not None:
        k(x, y)                                       # build, load, generate the bind
    else:                                             # no array library: raw pointers only
        with driver.context_scope(driver.primary_context(0)):   # device 0's: stays current
            buf = int(driver.check(driver.drv().cuMemAlloc(8192), "cuMemAlloc"))
        k(buf, buf + 4096, N=1024)
    L0 = next(iter(k._launchers.values()))
    if fake is not None:                              # the driver's own cost taken out
        here = (0, fake.ctx_of(0))
        fake.cuLaunchKernel = lambda *args: 0        # a Launcher's launch returns the CUresult
        fake.cuCtxGetCurrent = lambda: here          # asked only when a launch fails
        L0._launch, L0._current_ctx = fake.cuLaunchKernel, fake.cuCtxGetCurrent
        k._bind = specialize(k._binder)
        k._fast, k._fast_targets = None, {}          # the fast launch made for the stand-ins
        k(x, y)
    L = Launcher(L0.fn, k.params, name="empty3")      # a standalone Launcher, same function
    if fake is not None:
        L._launch, L._current_ctx = fake.cuLaunchKernel, fake.cuCtxGetCurrent
        L._bind = specialize(L.binder)
    d = driver.drv()
    results = {}

    L.packer.pack([0x7F00_0000_0000, 0x7F00_0000_1000, 1024])
    kp, h, launch = L.packer.kernel_params, L0.fn.handle, L._launch
    backend = "fake" if fake is not None else driver.backend()
    base = own = None
    if fake is None:
        try:
            from cuda.bindings import driver as cb
        except ImportError:
            cb = None
        if cb is not None:
            hb, launch_b = cb.CUfunction(int(h)), cb.cuLaunchKernel

            def bare_bindings(n):
                for _ in range(n):
                    launch_b(hb, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
            results["bare cuLaunchKernel, cuda-bindings (baseline)"] = base = bare_bindings
    if backend != "bindings":
        raw, pointer_arg, extra = (launch, None, 0) if fake is not None else \
            driver.kernel_launch(d)
        kpa = kp if pointer_arg is None else pointer_arg(kp)
        s0 = 0 if pointer_arg is None else None

        def bare_own(n):
            for _ in range(n):
                raw(h, 1, 1, 1, 32, 1, 1, 0, s0, kpa, extra)
        name = "no-op launch (the fake's)" if fake is not None else \
            f"bare cuLaunchKernel, ptxgen's {backend} binding"
        results[name] = own = bare_own
        ex = driver.kernel_launch_ex(d) if fake is None else None
        if ex is not None:               # what a pg.Kernel's own launch calls
            launch_ex, cfg = ex[0], ex[1]((1, 1, 1, 32, 1, 1), 0, 0)

            def bare_ex(n):
                for _ in range(n):
                    launch_ex(cfg, h, kpa, None)
            results["bare cuLaunchKernelEx, ctypes, config made once"] = bare_ex
    if base is None:
        base = own

    ptr = x.data_ptr() if hasattr(x, "data_ptr") else (x.data.ptr if x is not None else buf)

    def raw_pointers(n):
        for _ in range(n):
            L((ptr, ptr), {"N": 1024}, grid=(1,), block=(32,), stream=0)
    results["Launcher, raw pointers"] = raw_pointers

    headline = None
    if x is not None:
        def launcher_tensors(n):
            for _ in range(n):
                L((x, y), {}, grid=(1,), block=(32,))
        results[f"Launcher, {label} (checked)"] = launcher_tensors

        def kernel_tensors(n):
            for _ in range(n):
                k(x, y)
        headline = f"pg.Kernel, {label} (checked, current stream)"
        results[headline] = kernel_tensors

        bind = k._bind

        def bind_only(n):
            for _ in range(n):
                bind((x, y), {})
        results[f"argument checks alone, {label}"] = bind_only

        values, user, _ = bind((x, y), {})
        grid, block = k.ir.grid, k.ir.block

        def bound(n):
            for _ in range(n):
                L0.launch(values, user, grid, block)
        results["launch of bound arguments (Launcher.launch: dims, stream, pack, launch)"] = bound

        def bound_own(n):
            for _ in range(n):
                L0.launch_own(values, user)
        results["launch of bound arguments, no options (Launcher.launch_own: a pg.Kernel's)"] = bound_own
        pk = L0.packer

        def pack_only(n):
            for _ in range(n):
                pk.struct.pack_into(pk.buffer, 0, *values)
        results["  of which packing the parameters (struct.pack_into)"] = pack_only

    rounds = interleaved_us(results, a.n, sync)
    med = statistics.median
    times = {k: med(v) for k, v in rounds.items()}
    base_name = next(k for k, v in results.items() if v is base)
    own_name = next((k for k, v in results.items() if v is own), None)
    if fake is not None:
        where = "fake driver (no-op launch): ptxgen's Python per launch"
    else:
        where = d.cuDeviceGetName(64, d.cuDeviceGet(0)[1])[1].split(b"\0")[0].decode()
    print(f"{where}, {a.n} launches per round, median of 7 interleaved rounds")
    b = times[base_name]
    for name, v in times.items():
        ratio = "" if fake is not None else f"   ({v / b:5.2f}x baseline)"
        print(f"  {name:76s} {v:7.2f} us/launch{ratio}")
    ratio = ratio_own = None
    if headline is not None:
        v = times[headline]
        # the headline ratio: the median of the per-round ratios (each round's pair adjacent)
        ratio = med(x / y for x, y in zip(rounds[headline], rounds[base_name]))
        if fake is not None:
            print(f"checked pg.Kernel launch: {v - b:.2f} us of Python above the no-op launch")
        else:
            print(f"checked pg.Kernel launch (driver binding: {backend}) / bare cuda-bindings "
                  f"cuLaunchKernel = {ratio:.2f}x (median of per-round ratios; medians {v:.2f} "
                  f"vs {b:.2f} us; target <= 1.5x)")
            if own_name is not None and own_name != base_name:
                ratio_own = med(x / y for x, y in zip(rounds[headline], rounds[own_name]))
                print(f"  and / the bare call through the {backend} binding = {ratio_own:.2f}x "
                      f"({times[own_name]:.2f} us)")
    from ptxgen.runtime import cache
    retries = cache.stats().get("launch_retries", 0)
    print(f"  launches refused and made again in their own context (launch_retries): {retries}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": where, "n": a.n, "backend": backend, "us_per_launch": times,
                       "rounds_us": rounds, "ratio": ratio, "ratio_vs_own_binding": ratio_own},
                      f, indent=1)


if __name__ == "__main__":
    main()
