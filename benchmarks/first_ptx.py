"""First `k.ptx()` in a fresh process against a later build of the same kernel.

    python benchmarks/first_ptx.py [runs]

Each run is a new interpreter: it imports ptxgen, traces a kernel, times its first `ptx()`,
then traces and builds the same kernel again (fresh Kernel objects: only process-wide caches
carry over) and takes the median of 30 later builds.  `import ptxgen` loads the build
pipeline, so what the first build costs beyond a later one is first-use work (form texts
from the disk cache, their compiled format functions, first calls).  The runs share one bytecode
cache (PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE unset: what an installed package has)
and one PTXGEN_CACHE_DIR; a discarded run fills both first, so only the first line's
"empty form cache" run renders forms with jinja.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import ptxgen as pg
t_import = time.perf_counter() - t0
jinja_after_import = "jinja2" in sys.modules

def smem_demo():
    @pg.kernel(grid=(1,), block=(128,))
    def smem_demo(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        sm = pg.alloc_shared((128,), "float32")
        sm[tx] = A[tx]
        pg.cta_sync()
        B[tx] = sm[tx] * 2.0
    return smem_demo

def warp_copy():
    @pg.kernel(grid=(1,), block=(32,))
    def copy_32x32(A: pg.Tensor((32, 32), "float32"), B: pg.Tensor((32, 32), "float32")):
        pg.lane_id()
        sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])
        pg.cta_sync()
        pg.tile.warp.copy(B[0:32, 0:32], sm[0:32, 0:32])
    return copy_32x32

make = {"smem_demo": smem_demo, "warp_copy": warp_copy}[sys.argv[1]]
k = make()
t0 = time.perf_counter()
k.ptx("sm_90a")
first = time.perf_counter() - t0
jinja_after_first = "jinja2" in sys.modules
later = []
for _ in range(30):
    k = make()
    t0 = time.perf_counter()
    k.ptx("sm_90a")
    later.append(time.perf_counter() - t0)
later.sort()
print(json.dumps({"import": t_import, "first": first, "later": later[len(later) // 2],
                  "jinja_after_import": jinja_after_import,
                  "jinja_after_first": jinja_after_first}))
"""


def run(kernel, cache_dir, pyc_dir):
    env = dict(os.environ, PTXGEN_CACHE_DIR=cache_dir, PYTHONPYCACHEPREFIX=pyc_dir)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PTXGEN_DISK_CACHE", None)
    out = subprocess.run([sys.executable, "-c", CHILD, kernel],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def summary(rows):
    med = statistics.median
    ratios = [r["first"] / r["later"] for r in rows]
    return (f"first {med(r['first'] for r in rows) * 1e3:.2f} ms, later "
            f"{med(r['later'] for r in rows) * 1e3:.3f} ms, first/later median "
            f"{med(ratios):.1f}x (min {min(ratios):.1f}, max {max(ratios):.1f}); jinja2 after "
            f"import {any(r['jinja_after_import'] for r in rows)}, after the first ptx() "
            f"{any(r['jinja_after_first'] for r in rows)}")


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as pyc, tempfile.TemporaryDirectory() as scratch:
        run("warp_copy", scratch, pyc)          # bytecode for every module, then discarded
        for kernel in ("smem_demo", "warp_copy"):
            with tempfile.TemporaryDirectory() as d:
                cold = run(kernel, d, pyc)
                print(f"{kernel}, empty form cache: {summary([cold])}")
                warm = [run(kernel, d, pyc) for _ in range(runs)]
                print(f"{kernel}, warm form cache, {runs} runs: import ptxgen "
                      f"{statistics.median(r['import'] for r in warm) * 1e3:.0f} ms; "
                      f"{summary(warm)}")


if __name__ == "__main__":
    main()
