"""Grid-stride copy variants on the H200, each against torch copy_ in the same run.

Work-distribution schemes for the same 128-bit copy (1-D float32, >= 1 GiB):
  thread  vector i of thread g at iteration k is g + k*chunk + u*nthreads (examples/grid_stride_copy)
  cta     each CTA copies a contiguous chunk of THREADS*UNROLL vectors (u*THREADS + tx), and
          strides over chunks by the grid (torch's per-block pattern, but persistent)
  oneshot the cta scheme with grid = number of chunks: one chunk per CTA (torch's launch shape)
Timing: CUDA events around a batch of back-to-back launches (host launch cost hidden), median
of the batches; torch and ptxgen alternate batches so clock drift hits both.

    python benchmarks/grid_stride_variants.py [GiB]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ptxgen as pg  # noqa: E402

N = pg.var("N")


def cta_chunk(threads, unroll, ctas, load_hint=None, store_hint=None, name="gs_cta"):
    def body(src: pg.Tensor((N,), "float32"), dst: pg.Tensor((N,), "float32")):
        tx = pg.thread_id(threads)
        bx = pg.cta_id(ctas)
        per = threads * unroll
        nvec = pg.let(N // 4)
        nchunks = pg.let(nvec // per)
        regs = pg.alloc_local((unroll * 4,), "float32")
        step = pg.grid_dim()
        for c in pg.serial(bx, nchunks, step):
            base = pg.let(c * per + tx)
            for u in pg.unroll(unroll):
                regs.vstore([u * 4], src.vload([(base + u * threads) * 4], "float32x4",
                                               cache_hint=load_hint))
            for u in pg.unroll(unroll):
                dst.vstore([(base + u * threads) * 4], regs.vload([u * 4], "float32x4"),
                           cache_hint=store_hint)
        gtid = pg.let(bx * threads + tx)
        nthreads = pg.let(pg.grid_dim() * threads)
        for i in pg.serial(nchunks * per + gtid, nvec, nthreads):
            dst.vstore([i * 4], src.vload([i * 4], "float32x4"))
        for i in pg.serial(nvec * 4 + gtid, N, nthreads):
            dst[i] = src[i]
    body.__name__ = name
    return pg.kernel(block=(threads,), grid=(ctas,), name=name)(body)


def timeit(fns, batch=10, rounds=15):
    import torch
    out = {k: [] for k in fns}
    for f in fns.values():
        f(); f()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for k, f in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(batch):
                f()
            e.record()
            e.synchronize()
            out[k].append(s.elapsed_time(e) / batch)
    return {k: float(np.median(v)) for k, v in out.items()}


def main(gib=1.0):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    import grid_stride_copy as g

    n = int(gib * (1 << 30)) // 4
    src = torch.randn(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    nbytes = 2 * n * 4
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    NC = ["nc", "L1::no_allocate"]
    variants = {}
    for t, u, c in [(256, 4, 8), (256, 8, 4), (128, 8, 8)]:
        variants[f"thread t{t} u{u} c{c}"] = (g.make(t, u, sms * c, name=f"th_{t}_{u}_{c}"), None)
    variants["thread t256 u4 c8 nc/cs"] = (g.make(256, 4, sms * 8, name="th_nc", load_hint=NC,
                                                  store_hint="cs"), None)
    for t, u, c in [(256, 4, 8), (256, 8, 4), (128, 4, 16), (512, 4, 4), (256, 2, 8),
                    (128, 8, 8), (1024, 2, 2)]:
        variants[f"cta t{t} u{u} c{c}"] = (cta_chunk(t, u, sms * c, name=f"cta_{t}_{u}_{c}"), None)
    variants["cta t256 u4 c8 nc"] = (cta_chunk(256, 4, sms * 8, NC, None, name="cta_nc"), None)
    variants["cta t256 u4 c8 nc/cs"] = (cta_chunk(256, 4, sms * 8, NC, "cs", name="cta_nccs"),
                                        None)
    for t, u in [(128, 4), (256, 4), (128, 8), (256, 2)]:
        grid = (n // 4 + t * u - 1) // (t * u)
        variants[f"oneshot t{t} u{u}"] = (cta_chunk(t, u, grid, name=f"one_{t}_{u}"), None)
    results = []
    for label, (k, grid) in variants.items():
        dst.fill_(float("nan"))
        kw = {"grid": grid} if grid else {}
        k(src, dst, **kw)
        torch.cuda.synchronize()
        ok = torch.equal(src.view(torch.int32), dst.view(torch.int32))
        t = timeit({"torch": lambda: dst.copy_(src), "k": lambda: k(src, dst, **kw)})
        results.append((t["torch"] / t["k"], label, nbytes / t["k"] / 1e6,
                        nbytes / t["torch"] / 1e6, ok))
        print(f"{label:28s} {nbytes / t['k'] / 1e6:6.0f} GB/s  torch {nbytes / t['torch'] / 1e6:6.0f}"
              f"  ratio {t['torch'] / t['k']:.3f}  {'ok' if ok else 'WRONG'}", flush=True)
    best = max(results)
    print(f"BEST {best[1]}: {best[2]:.0f} GB/s vs torch {best[3]:.0f} GB/s = {best[0]:.3f}x "
          f"({gib} GiB float32, {torch.cuda.get_device_name()})")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
