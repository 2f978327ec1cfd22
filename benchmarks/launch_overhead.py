"""Host-side cost of one launch through ptxgen's Launcher, against bare cuLaunchKernel.

Times N launches of an empty kernel with 3 parameters (two tensors and an int) and prints
microseconds per launch for: the bare cuda-bindings call with prepacked parameters (the
baseline), the Launcher given raw pointers, and the Launcher given torch (or cupy) tensors
with its full checks.  The GPU work is nil, so this is the Python + driver submission cost.

    python benchmarks/launch_overhead.py [--n 10000] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen.runtime import (Launcher, Module, ParamSpec, compile_ptx, device_arch,  # noqa: E402
                            has_gpu, synchronize)
from ptxgen.runtime import driver  # noqa: E402

EMPTY3 = """.version 7.0
.target sm_80
.address_size 64
.visible .entry empty3(.param .u64 a, .param .u64 b, .param .s32 n)
{
    ret;
}
"""
PARAMS = [ParamSpec("a", "tensor", "float32", ".u64", ("N",)),
          ParamSpec("b", "tensor", "float32", ".u64", ("N",)),
          ParamSpec("N", "symbol", "int32", ".s32")]


def per_launch_us(fn, n: int) -> float:
    """Median of 5 timed rounds of n calls each, after a warm-up round; µs per call."""
    fn(n // 10)
    synchronize()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(n)
        rounds.append((time.perf_counter() - t0) / n * 1e6)
        synchronize()
    return sorted(rounds)[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not has_gpu():
        sys.exit("no CUDA GPU: nothing to measure")
    mod = Module.load(cubin=compile_ptx(EMPTY3, device_arch(), name="empty3").cubin,
                      name="empty3")
    fn = mod.function("empty3")
    L = Launcher(fn, PARAMS, name="empty3")
    d = driver.drv()
    results = {}

    # baseline: the bare binding call, parameters packed once
    L.packer.pack([0, 0, 1024])
    kp, h = L.packer.kernel_params, fn.handle

    def bare(n):
        launch = d.cuLaunchKernel
        for _ in range(n):
            launch(h, 1, 1, 1, 32, 1, 1, 0, 0, kp, 0)
    results["bare cuLaunchKernel (baseline)"] = per_launch_us(bare, a.n)

    ptr = 0
    try:
        import torch
        x = torch.zeros(1024, device="cuda")
        y = torch.zeros(1024, device="cuda")
        ptr = x.data_ptr()
        label = "torch tensors"
    except ImportError:
        try:
            import cupy as cp
            x, y = cp.zeros(1024, cp.float32), cp.zeros(1024, cp.float32)
            ptr = x.data.ptr
            label = "cupy arrays"
        except ImportError:
            x = y = None
    if ptr == 0:
        ptr = int(d.cuMemAlloc(8192)[1])

    def raw(n):
        for _ in range(n):
            L((ptr, ptr), {"N": 1024}, grid=(1,), block=(32,), stream=0)
    results["Launcher, raw pointers"] = per_launch_us(raw, a.n)

    if x is not None:
        def tensors(n):
            for _ in range(n):
                L((x, y), {}, grid=(1,), block=(32,))
        results[f"Launcher, {label} (checked, current stream)"] = per_launch_us(tensors, a.n)

        def bind_only(n):
            for _ in range(n):
                L.binder.bind((x, y), {})
        results[f"argument checks alone, {label}"] = per_launch_us(bind_only, a.n)

    base = results["bare cuLaunchKernel (baseline)"]
    gpu = d.cuDeviceGetName(64, d.cuDeviceGet(0)[1])[1].split(b"\0")[0].decode()
    print(f"{gpu}, {a.n} launches per round, median of 5 rounds")
    for k, v in results.items():
        print(f"  {k:50s} {v:7.2f} us/launch   ({v / base:4.2f}x baseline)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": gpu, "n": a.n, "us_per_launch": results}, f, indent=1)


if __name__ == "__main__":
    main()
