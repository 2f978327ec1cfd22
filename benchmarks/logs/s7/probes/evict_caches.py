"""Is a fresh process's first build slow because of ptxgen's first-use work, or because
the build's code and data are not in the CPU caches?  Builds add_one 30 times (everything
warm), then times builds made right after copying 0-256 MiB (medians of 7).  Run from the
repository root with PYTHONPATH=$PWD."""
import sys, time, statistics
import ptxgen as pg
sys.path.insert(0, "examples")
import add_one
k = add_one.KERNELS[0]
def re_(k): return pg.Kernel(k.fn, grid=k._grid_fn or k.ir.grid, block=k.ir.block, name=k.name, dynamic_smem_bytes=k.ir.dynamic_smem_reserve, cluster=k.cluster)
def b(kk):
    t0 = time.perf_counter(); kk.ptx("sm_90a"); return (time.perf_counter() - t0) * 1e6
first = b(k)
for _ in range(30): b(re_(k))
junk = bytearray(256 << 20)
row = [f"first {first:.0f}"]
for mb in (0, 1, 4, 16, 64, 256):
    ts = []
    for _ in range(7):
        kk = re_(k)
        if mb: bytes(memoryview(junk)[:mb << 20])
        ts.append(b(kk))
    row.append(f"{mb}MiB {statistics.median(ts):.0f}")
print("  ".join(row))
