"""Cold start: what a fresh process pays before its first ptxgen kernel result, part by part.

Each measurement is a new Python process (subprocess) that, like an application, imports
torch first and makes its CUDA tensors, then imports ptxgen, traces a kernel, builds its PTX,
and launches it: first launch (disk cache or nvJitLink, module load, the launch, a sync) and
a later one.  Two cache states: empty (a new PTXGEN_CACHE_DIR) and warm (one a previous
process filled).  Without torch or a GPU only the CPU parts run: import, trace, build and
emit, and the offline compile (nvJitLink or the disk cache), so it runs on any machine.

Every child shares one bytecode cache (PYTHONPYCACHEPREFIX in a temporary directory, with
PYTHONDONTWRITEBYTECODE unset), filled by a first child whose times are discarded: an
installed package has its .pyc files, while a sandbox that sets PYTHONDONTWRITEBYTECODE=1
would otherwise recompile every module from source in every process.

    python benchmarks/cold_start.py [--runs 3] [--json out.json] [--cpu]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The child: one cold process.  Times go to stdout as JSON, in the order they happen.
CHILD = r'''
import json, sys, time
t_start = time.perf_counter()
parts, info = [], {}

def mark(name, t0):
    parts.append((name, (time.perf_counter() - t0) * 1e3))

use_gpu = sys.argv[1] == "gpu"
if use_gpu:
    t = time.perf_counter()
    import torch
    mark("import torch", t)
    t = time.perf_counter()
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()
    mark("torch CUDA init + first tensors", t)
    major, minor = torch.cuda.get_device_capability()
    info["device"] = torch.cuda.get_device_name()
    info["torch"] = torch.__version__
t = time.perf_counter()
import ptxgen as pg
mark("import ptxgen", t)
info["cuda_modules_after_import"] = sorted(m for m in sys.modules if m.startswith("cuda"))
info["driver_binding"] = None
t = time.perf_counter()
N = pg.var("N")

@pg.kernel(grid=lambda a: ((a["N"] + 255) // 256,), block=(256,))
def affine(out: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32"), a: pg.float32):
    i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
    with pg.if_(i < N):
        out[i] = x[i] * a + 1.0
mark("trace (@pg.kernel)", t)
if use_gpu:
    from ptxgen.runtime.driver import arch_for
    arch = arch_for(major, minor)
else:
    arch = "sm_90a"
info["arch"] = arch
t = time.perf_counter()
affine.ptx(arch)
mark("first build + emit (k.ptx())", t)
from ptxgen.runtime import stats
if use_gpu:
    before = set(sys.modules)
    t = time.perf_counter()
    affine(out, x, 2.0)
    torch.cuda.synchronize()
    mark("first launch (cubin: nvJitLink or disk; module load; sync)", t)
    new = {m.split(".")[0] if not m.startswith(("cuda.", "ptxgen.")) else ".".join(m.split(".")[:2])
           for m in set(sys.modules) - before}
    info["imported_by_first_launch"] = sorted(new)
    t = time.perf_counter()
    affine(out, x, 3.0)
    torch.cuda.synchronize()
    mark("second launch (+ sync)", t)
    n = 1000
    t = time.perf_counter()
    for _ in range(n):
        affine(out, x, 3.0)
    parts.append(("later launch, per launch (1000, no sync)",
                  (time.perf_counter() - t) * 1e3 / n))
    torch.cuda.synchronize()
    assert torch.equal(out, x * 3.0 + 1.0)
else:
    t = time.perf_counter()
    affine.compile(arch)
    mark("offline compile (cubin: nvJitLink or disk)", t)
    t = time.perf_counter()
    affine.compile(arch)
    mark("compile again (memory cache)", t)
parts.append(("total, process start to here", (time.perf_counter() - t_start) * 1e3))
info["stats"] = {k: v for k, v in stats().items() if v}
print(json.dumps({"parts": parts, "info": info}))
'''


# What `from cuda.bindings import driver` costs a process that has imported torch (part of
# every first launch), timed alone in a process of its own.
CUDA_IMPORT = r'''
import sys, time
import torch
t = time.perf_counter()
import cuda.pathfinder
t1 = time.perf_counter()
from cuda.bindings import driver
t2 = time.perf_counter()
print((t1 - t) * 1e3, (t2 - t1) * 1e3)
'''


def gpu_available() -> tuple[bool, str]:
    """(True, "") when torch imports and sees a GPU, in a throwaway process (this one must
    stay cold for nothing, but asking torch here would cost its import anyway)."""
    p = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return False, "torch is not importable"
    if p.stdout.strip() != "True":
        return False, "torch sees no CUDA GPU"
    return True, ""


def run_child(mode: str, cache_dir: str, pyc_dir: str) -> dict:
    env = dict(os.environ, PTXGEN_CACHE_DIR=cache_dir, PYTHONPYCACHEPREFIX=pyc_dir,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PTXGEN_DISK_CACHE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                       env=env, cwd=tempfile.gettempdir())
    wall = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        sys.exit(f"child process failed:\n{p.stderr}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["parts"].append(("process wall time (incl. interpreter start/exit)", wall))
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="processes per cache state (median)")
    ap.add_argument("--json")
    ap.add_argument("--cpu", action="store_true", help="CPU parts only, even with a GPU")
    a = ap.parse_args()
    ok, why = (False, "--cpu") if a.cpu else gpu_available()
    mode = "gpu" if ok else "cpu"
    results = {}
    with tempfile.TemporaryDirectory(prefix="ptxgen-cold-") as tmp:
        pyc = os.path.join(tmp, "pycache")
        run_child(mode, os.path.join(tmp, "discarded"), pyc)   # writes the bytecode cache
        runs = {"empty cache": [], "warm cache": []}
        for i in range(a.runs):
            d = os.path.join(tmp, f"run{i}")
            runs["empty cache"].append(run_child(mode, d, pyc))   # fills d
            runs["warm cache"].append(run_child(mode, d, pyc))    # reads it
        for state, rs in runs.items():
            names = [n for n, _ in rs[0]["parts"]]
            results[state] = {n: statistics.median(dict(r["parts"])[n] for r in rs)
                              for n in names}
        info = runs["warm cache"][0]["info"]
        stats = {s: rs[0]["info"]["stats"] for s, rs in runs.items()}
        cuda_import = []
        if ok:
            env = dict(os.environ, PYTHONPYCACHEPREFIX=pyc)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
            for _ in range(a.runs):
                p = subprocess.run([sys.executable, "-c", CUDA_IMPORT], capture_output=True,
                                   text=True, env=env, check=True)
                cuda_import.append(tuple(map(float, p.stdout.split())))

    where = f"{info['device']} ({info['arch']}), torch {info['torch']}" if ok else \
        f"CPU only ({why}): PTX for {info['arch']}, compiled offline"
    print(f"cold start: {where}; each column: median of {a.runs} fresh processes sharing a "
          f"warmed bytecode cache (PYTHONPYCACHEPREFIX; as an installed package has .pyc files)")
    names = list(results["empty cache"])
    w = max(map(len, names))
    print(f"  {'part':{w}s}  {'empty cache':>12s}  {'warm cache':>12s}")
    for n in names:
        unit = "us" if n.startswith("later launch") else "ms"
        scale = 1e3 if unit == "us" else 1
        e, m = results["empty cache"][n] * scale, results["warm cache"][n] * scale
        print(f"  {n:{w}s}  {e:9.2f} {unit}  {m:9.2f} {unit}")
    for s, st in stats.items():
        print(f"  runtime counters, {s}: {st}")
    mods = info["cuda_modules_after_import"]
    print(f"  cuda.* modules loaded by `import ptxgen`: {mods or 'none'}")
    if ok:
        print(f"  imported by the first launch (warm cache): "
              f"{', '.join(info['imported_by_first_launch'])}")
        pf = statistics.median(c[0] for c in cuda_import)
        dr = statistics.median(c[1] for c in cuda_import)
        print(f"  cuda-bindings, timed alone after `import torch` (median of {a.runs} "
              f"processes): import cuda.pathfinder {pf:.1f} ms, then cuda.bindings.driver "
              f"{dr:.1f} ms")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"where": where, "ms": results, "stats": stats}, f, indent=1)


if __name__ == "__main__":
    main()
