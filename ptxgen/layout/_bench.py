"""Micro-benchmark for `TileLayout.apply` (called by benchmarks/emit_speed.py).

apply runs once per emitted memory access, so its cost bounds emission speed; the plan is
cached per (layout, shape), and this measures the steady state."""
from __future__ import annotations

import time

from ._spec import S
from ._tile import TileLayout


def bench_apply(n: int = 20000, repeat: int = 3) -> float:
    """Best-of-`repeat` microseconds per `apply` call on a 3-level nested layout."""
    lay = TileLayout(S[(((2, 2), 4), (8, (2, 4))):(((4096, 128), 1024), (8, (4, 1)))] + 32)
    shape = (16, 64)
    coords = [(i % 16, (i * 7) % 64) for i in range(256)]
    apply = lay.apply
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for k in range(n):
            i, j = coords[k & 255]
            apply(i, j, shape=shape)
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


if __name__ == "__main__":
    print(f"TileLayout.apply: {bench_apply():.2f} us/call")
