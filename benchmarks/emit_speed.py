"""Trace + lower + emit time of every example kernel, and the cost of layout apply on a
3-level layout.  A tracked figure, not a timed test.

Wall time on a shared VM drifts (2x within minutes here), so the kernels are timed
round-robin (every kernel sees the same machine phases), a calibration loop is timed in the
same rounds, and each kernel's Python bytecodes and Python calls per build are reported: those
counts are deterministic, so they are the figures to compare across runs and machines (same
Python).  A call costs about as much as five bytecodes here, so both matter.  The
larger examples check every element of their MMA operand layouts while tracing.

    python benchmarks/emit_speed.py --against /tmp/old [pairs rounds]

compares build+emit with another tree (a `git worktree` of an older commit), in processes
that alternate between the two trees in one session."""
import os
import statistics
import sys
import time
import warnings

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "examples"), os.path.join(HERE, "..")]

import ptxgen as pg  # noqa: E402
from emit_profile import profile  # noqa: E402  (sys.settrace opcode and call counts)

ARCH = "sm_90a"


def one_build(factory, arch=ARCH):
    """(trace seconds, lower+emit seconds, PTX text) of one fresh build."""
    t0 = time.perf_counter()
    k = factory()
    t1 = time.perf_counter()
    text = k.ptx(arch)
    return t1 - t0, time.perf_counter() - t1, text


def calibration():
    """(sum(range(1000)), one jinja render of a two-field template, averaged over 10): fixed
    amounts of interpreter work that tell a run on a fast machine from one on a slow or
    throttled one (DEVELOPERS.md quotes ~20 us per render for the reference machine)."""
    t0 = time.perf_counter()
    sum(range(1000))
    t1 = time.perf_counter()
    for _ in range(10):
        _JINJA.render(op="add.s32", ops="%r1, %r2, %r3")
    return t1 - t0, (time.perf_counter() - t1) / 10


_JINJA = jinja2.Template("{{ op }} {{ ops }};")


def time_all(named, rounds=60):
    """Round-robin: each round builds every kernel once, then times the calibration."""
    samples = {name: ([], []) for name, _, _ in named}
    calib = []
    lines = {}
    for name, f, arch in named:   # warm-up: template compilation, imports, layout caches
        lines[name] = one_build(f, arch)[2].count("\n")
    for _ in range(rounds):
        for name, f, arch in named:
            tr, bu, _ = one_build(f, arch)
            samples[name][0].append(tr)
            samples[name][1].append(bu)
        calib.append(calibration())
    return samples, lines, calib


def _retrace(k):
    return lambda: pg.Kernel(k.fn, grid=k._grid_fn or k.ir.grid, block=k.ir.block, name=k.name)


def larger_examples():
    """(label, factory, arch) of the other examples: MMA kernels whose build checks every
    element of their operand layouts, and the pool demo."""
    import importlib

    for mod, arch, pick in (("smem_pool_demo", "sm_90a", 0), ("wgmma_desc_check", "sm_90a", 0),
                            ("gemm_sm100", "sm_100a", 0)):
        k = importlib.import_module(mod).KERNELS[pick]
        yield f"{mod}:{k.name}", _retrace(k), arch


def factories():
    import importlib

    for mod in ("smem_demo", "dyn_arena", "phase_loop", "let_scalar", "add_one",
                "grid_stride_copy"):
        m = importlib.import_module(mod)
        names = [k.name for k in m.KERNELS]
        for n, k in enumerate(m.KERNELS):
            label = f"{mod}:{k.name}" + (f"#{n + 1}" if names.count(k.name) > 1 else "")
            yield label, _retrace(k)
    from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

    def warp_copy():
        @pg.kernel(grid=(1,), block=(32,))
        def copy_32x32(A: pg.Tensor((32, 32), "float32"), B: pg.Tensor((32, 32), "float32")):
            pg.lane_id()
            sm = pg.alloc_shared((32, 32), "float32")
            pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])
            pg.cta_sync()
            pg.tile.warp.copy(B[0:32, 0:32], sm[0:32, 0:32])
        return copy_32x32
    yield "tile.warp.copy 32x32 f32", warp_copy

    def swz_copy():
        lay = ComposeLayout(Swizzle.mma(128, 16), TileLayout(S[(64, 64)]))

        @pg.kernel(grid=(1,), block=(128,))
        def copy_swizzled(A: pg.Tensor((64, 64), "float16"), B: pg.Tensor((64, 64), "float16")):
            pg.thread_id(128)
            sm = pg.alloc_shared((64, 64), "float16", layout=lay, align=1024)
            pg.tile.cta.copy(sm[0:64, 0:64], A[0:64, 0:64])
            pg.cta_sync()
            pg.tile.cta.copy(B[0:64, 0:64], sm[0:64, 0:64])
        return copy_swizzled
    yield "tile.cta.copy 64x64 f16 SW128", swz_copy


def report(named, rounds):
    samples, lines, calib = time_all(named, rounds)
    med = statistics.median
    print(f"{'kernel':<36} {'trace us':>8} {'emit us':>8} {'total us':>9} {'best us':>8} "
          f"{'PTX lines':>9} {'us/line':>8} {'py ops':>8} {'ops/line':>8} {'py calls':>8}")
    for name, f, arch in named:
        trace, build = samples[name]
        tr, bu = med(trace) * 1e6, med(build) * 1e6
        totals = [t + b for t, b in zip(trace, build)]
        total, best = med(totals) * 1e6, min(totals) * 1e6   # median of whole builds
        ops, calls = profile(f, arch)
        ops, calls = sum(ops.values()), sum(calls.values())
        n = max(lines[name], 1)
        print(f"{name:<36} {tr:>8.0f} {bu:>8.0f} {total:>9.0f} {best:>8.0f} {n:>9} "
              f"{total / n:>8.2f} {ops:>8} {ops / n:>8.0f} {calls:>8}")
    loop, render = [c[0] for c in calib], [c[1] for c in calib]
    print(f"calibration in the same rounds: sum(range(1000)) median {med(loop) * 1e6:.1f} us "
          f"(best {min(loop) * 1e6:.1f}), one jinja render median {med(render) * 1e6:.1f} us "
          f"(best {min(render) * 1e6:.1f})")


def unrolled_1000():
    """A 1,000-statement unrolled body: register loads and stores at constant indices, the
    shape whose per-access bounds check the exact out-of-bounds test made slower."""
    @pg.kernel(grid=(1,), block=(32,))
    def unrolled(A: pg.Tensor((1024,), "float32"), B: pg.Tensor((1024,), "float32")):
        pg.lane_id()
        for n in range(1000):
            B[n] = A[n] + 1.0
    return unrolled


_CHILD = """
import json, os, statistics, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [os.path.join({tree!r}, "examples"), {tree!r}, os.path.join({tree!r}, "benchmarks")]
sys.argv = ["emit_speed"]
import emit_speed
import ptxgen as pg
{unrolled}
named = [(n, f, emit_speed.ARCH) for n, f in emit_speed.factories()]
named += list(emit_speed.larger_examples()) + [("unrolled 1000", unrolled_1000, emit_speed.ARCH)]
for _, f, arch in named:
    f().ptx(arch)
out = {{n: [] for n, _, _ in named}}
for _ in range({rounds}):
    for n, f, arch in named:
        t0 = time.perf_counter()
        f().ptx(arch)
        out[n].append(time.perf_counter() - t0)
print(json.dumps({{n: [statistics.median(v), min(v)] for n, v in out.items()}}))
"""


def compare(old_tree, pairs=8, rounds=5):
    """Build+emit (trace included) of every example here against `old_tree`'s, in fresh
    processes that alternate old, new, old, new, ... in the same session, so both trees see
    the same machine phases.  Per kernel: the median over the processes of each process's
    median build, and the best build of all (on a shared machine the best is the steadier
    figure: other load only ever adds time)."""
    import inspect
    import json
    import subprocess

    here = os.path.join(HERE, "..")
    unrolled = inspect.getsource(unrolled_1000)     # the same kernel, traced by each tree
    times = {"old": {}, "new": {}}
    for _ in range(pairs):
        for label, tree in (("old", old_tree), ("new", here)):
            code = _CHILD.format(tree=os.path.abspath(tree), rounds=rounds, unrolled=unrolled)
            res = subprocess.run([sys.executable, "-c", code], cwd=tree, check=True,
                                 capture_output=True, text=True)
            for n, t in json.loads(res.stdout.splitlines()[-1]).items():
                times[label].setdefault(n, []).append(t)
    med = statistics.median
    ratios, best = [], []
    print(f"{'kernel':<40} {'old us':>8} {'new us':>8} {'new/old':>8} {'old best':>9} "
          f"{'new best':>9} {'new/old':>8}")
    for n in times["new"]:
        if n not in times["old"]:
            continue
        o, w = (med([t[0] for t in times[k][n]]) * 1e6 for k in ("old", "new"))
        bo, bw = (min(t[1] for t in times[k][n]) * 1e6 for k in ("old", "new"))
        if n != "unrolled 1000":
            ratios.append(w / o)
            best.append(bw / bo)
        print(f"{n:<40} {o:>8.0f} {w:>8.0f} {w / o:>8.3f} {bo:>9.0f} {bw:>9.0f} {bw / bo:>8.3f}")
    print(f"median new/old over the {len(ratios)} examples: {med(ratios):.3f} (medians), "
          f"{med(best):.3f} (best builds); {pairs} processes per tree, alternating, "
          f"{rounds} builds each")


def bench_apply(n: int = 20000, repeat: int = 3) -> float:
    """Best-of-`repeat` microseconds per `TileLayout.apply` call on a 3-level nested layout.

    apply runs once per emitted memory access, so its cost bounds emission speed; the plan is
    cached per (layout, shape), and this measures the steady state."""
    from ptxgen.layout import S, TileLayout

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


def main():
    warnings.simplefilter("ignore")
    if len(sys.argv) > 2 and sys.argv[1] == "--against":
        return compare(sys.argv[2], *map(int, sys.argv[3:]))
    print(f"Seed examples and tile copies ({ARCH}), 60 rounds:")
    report([(name, f, ARCH) for name, f in factories()], 60)
    print("\nLarger examples, 10 rounds:")
    report(list(larger_examples()), 10)
    print(f"\nlayout apply, 3-level nested layout: {bench_apply():.2f} us/call")


if __name__ == "__main__":
    main()
