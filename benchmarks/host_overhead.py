"""Host cost of the shipped kernels' wrappers against torch's equivalent op, tiny inputs.

For each pair (ptxgen.kernels wrapper, torch op) on inputs small enough that the GPU work is
a few microseconds: softmax and rmsnorm over 1 x 1024 bfloat16, gemm 64 x 64 x 64 bfloat16
(a @ b.T against torch.matmul).  Each variant runs n calls back to back (results allocated
per call, as a model calls them) between two CUDA events on the current stream, after a
warm-up; the host timer brackets the same calls up to the end event's synchronize.  Prints,
per variant, the median over rounds of the end-to-end microseconds per call by the host timer
and by the events, and ptxgen / torch for each kernel: the goal is <= 1.1x.  Rounds
interleave the variants, so a drift of the host falls on all of them alike.  The custom ops
(torch.ops.ptxgen.*: the dispatcher's cost on top) are timed too, for information.

    python benchmarks/host_overhead.py [--n 2000] [--rounds 7] [--json out.json]
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


def variants(torch):
    """{kernel: {variant name: a no-argument function making one call}}."""
    from ptxgen.kernels import gemm, rmsnorm, softmax

    dev, bf = "cuda", torch.bfloat16
    torch.manual_seed(0)
    x = torch.randn(1, 1024, device=dev, dtype=bf)
    w = torch.rand(1024, device=dev, dtype=bf) + 0.5
    a = torch.randn(64, 64, device=dev, dtype=bf)
    b = torch.randn(64, 64, device=dev, dtype=bf)
    F = torch.nn.functional
    ops = torch.ops.ptxgen
    return {
        "softmax 1x1024": {"torch": lambda: torch.softmax(x, -1),
                           "ptxgen": lambda: softmax(x),
                           "torch.ops.ptxgen": lambda: ops.softmax(x)},
        "rmsnorm 1x1024": {"torch": lambda: F.rms_norm(x, (1024,), w, 1e-6),
                           "ptxgen": lambda: rmsnorm(x, w, 1e-6),
                           "torch.ops.ptxgen": lambda: ops.rmsnorm(x, w, 1e-6)},
        "gemm 64^3": {"torch": lambda: torch.matmul(a, b.T),
                      "ptxgen": lambda: gemm(a, b),
                      "torch.ops.ptxgen": lambda: ops.gemm(a, b)},
    }


def time_us(torch, fn, n: int) -> tuple:
    """(host us per call, event us per call) of n calls of fn."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    host = (time.perf_counter() - t0) * 1e6 / n
    return host, start.elapsed_time(end) * 1e3 / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="calls per timed round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("host_overhead: needs a CUDA GPU", file=sys.stderr)
        return 2
    table = variants(torch)
    results = {}
    for kernel, fns in table.items():
        names = list(fns)
        for name in names:                          # warm-up: builds, loads, plans, caches
            for _ in range(200):
                fns[name]()
        rows: dict = {name: [] for name in names}
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                rows[name].append(time_us(torch, fns[name], args.n))
        res = {name: {"host_us": statistics.median(h for h, _ in rows[name]),
                      "event_us": statistics.median(e for _, e in rows[name])}
               for name in names}
        results[kernel] = res
        base = res["torch"]
        print(f"{kernel}:")
        for name in names:
            v = res[name]
            print(f"  {name:18} host {v['host_us']:7.2f} us/call   events {v['event_us']:7.2f} "
                  f"us/call   vs torch {v['host_us'] / base['host_us']:.3f}x host, "
                  f"{v['event_us'] / base['event_us']:.3f}x events")
    print("ptxgen / torch (goal <= 1.1x): " + ", ".join(
        f"{k} {r['ptxgen']['host_us'] / r['torch']['host_us']:.3f}x" for k, r in results.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                       "n": args.n, "rounds": args.rounds, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
