"""rmsnorm and softmax (ptxgen.kernels) against torch's own kernels, in the same run.

    python benchmarks/norm_softmax.py [--quick] [--json out.json]

Per shape and dtype: every knob setting of our kernel (block size via per_thread; for
rmsnorm also loading the weight before or after the reduction) and torch's kernels
(torch.nn.functional.rms_norm when torch has it and the float32 formula; torch.softmax),
each the median of `ptxgen.bench.do_bench` runs (CUDA events, L2 flushed before each run).
Bandwidth = bytes read + written (x, y and the weight row) / time; `vs torch` is torch's best
time over ours (>= 1.0: at least as fast); `ulp` is the largest difference from torch's
output in ulps of the dtype (both round float32 math once: 0-2 expected).
"""
import argparse
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

RMS_SHAPES = [(8192, 8192), (4096, 4096), (16384, 1024), (2048, 16384), (8192, 1000),
              (1, 8192), (2048, 32768), (1024, 65536), (512, 131072), (1024, 100003)]
SM_SHAPES = [(8192, 8192), (4096, 16384), (32768, 1024), (8192, 1000), (1024, 50257),
             (256, 131072)]


def ulps(a, b):
    """Largest |a - b| in ulps of a's dtype at b (torch tensors; NaN == NaN)."""
    import torch
    fi = torch.finfo(a.dtype)
    x, y = a.double(), b.double()
    unit = torch.exp2(torch.floor(torch.log2(y.abs().clamp(min=fi.tiny)))) * fi.eps
    d = (x - y).abs() / unit
    return float(torch.where(torch.isnan(x) & torch.isnan(y), torch.zeros_like(d), d).max())


def bench(fn):
    from ptxgen.bench import do_bench
    return do_bench(fn, warmup_ms=25, rep_ms=200)["median_ms"]


def row(op, dt, shape, variant, ms, nbytes, best_torch, err):
    gbs = nbytes / (ms * 1e-3) / 1e9
    r = {"op": op, "dtype": dt, "shape": f"{shape[0]}x{shape[1]}", "variant": variant,
         "ms": ms, "GB/s": gbs}
    if best_torch is not None:
        r["vs torch"] = best_torch / ms
    if err is not None:
        r["ulp"] = err
    return r


def run_rmsnorm(shapes, results):
    import torch
    RMS = importlib.import_module("ptxgen.kernels.rmsnorm")   # the module, not the wrapper
    F = torch.nn.functional
    eps = 1e-6
    for m, n in shapes:
        x = torch.randn(m, n, device="cuda").to(torch.bfloat16)
        w = (torch.rand(n, device="cuda") + 0.5).to(torch.bfloat16)
        nbytes = 2 * m * n * 2 + n * 2
        torch_fns = {}
        if hasattr(F, "rms_norm"):
            torch_fns["torch F.rms_norm"] = lambda: F.rms_norm(x, (n,), w, eps)
        torch_fns["torch float32 formula"] = lambda: (
            x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
            * w.float()).to(torch.bfloat16)
        times = {k: bench(f) for k, f in torch_fns.items()}
        best = min(times.values())
        want = torch_fns["torch float32 formula"]()
        for k, ms in times.items():
            results.append(row("rmsnorm", "bfloat16", (m, n), k, ms, nbytes, best, None))
        variants = [("ptxgen default", {})]
        for pt in (8, 16, 32):
            for early in (True, False):
                chunked = RMS.make(n, "bfloat16", pt, False).name.startswith("rmsnorm_chunked")
                if chunked and early:
                    continue                 # a chunked row reads the weight in one place
                label = "chunks" if chunked else "" if early else "late w"
                variants.append((f"ptxgen per_thread={pt} {label}",
                                 {"per_thread": pt, "early_weight": early}))
        for label, knobs in variants:
            y = torch.empty_like(x)
            f = lambda y=y, knobs=knobs: RMS.rmsnorm(x, w, eps, out=y, **knobs)   # noqa: E731
            f()
            results.append(row("rmsnorm", "bfloat16", (m, n), label.rstrip(), bench(f), nbytes,
                               best, ulps(y, want)))
        _print_block(results, "rmsnorm", (m, n))


def run_softmax(shapes, dtypes, results):
    import torch
    SM = importlib.import_module("ptxgen.kernels.softmax")
    for m, n in shapes:
        for dt in dtypes:
            tdt = getattr(torch, dt)
            x = (torch.randn(m, n, device="cuda") * 3).to(tdt)
            nbytes = 2 * m * n * x.element_size()
            best = bench(lambda: torch.softmax(x, dim=-1))
            want = torch.softmax(x, dim=-1)
            results.append(row("softmax", dt, (m, n), "torch.softmax", best, nbytes, best, None))
            for pt in (8, 16, 32):
                y = torch.empty_like(x)
                f = lambda y=y, pt=pt: SM.softmax(x, out=y, per_thread=pt)   # noqa: E731
                f()
                results.append(row("softmax", dt, (m, n), f"ptxgen per_thread={pt}", bench(f),
                                   nbytes, best, ulps(y, want)))
            _print_block(results, "softmax", (m, n), dt)


def _print_block(results, op, shape, dt=None):
    key = f"{shape[0]}x{shape[1]}"
    rows = [r for r in results if r["op"] == op and r["shape"] == key and
            (dt is None or r["dtype"] == dt)]
    ours = [r for r in rows if r["variant"].startswith("ptxgen")]
    best = max(ours, key=lambda r: r["GB/s"]) if ours else None
    print(f"\n{op} {rows[0]['dtype']} {key}")
    for r in rows:
        mark = "->" if r is best else "  "
        extra = f"  {r['vs torch']:.2f}x torch" if "vs torch" in r else ""
        err = f"  max {r['ulp']:.1f} ulp vs torch" if "ulp" in r else ""
        print(f" {mark} {r['variant']:<34} {r['ms'] * 1e3:9.1f} us {r['GB/s']:8.0f} GB/s"
              f"{extra}{err}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the (8192, 8192) shapes")
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--only", choices=("rmsnorm", "softmax"))
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("needs a CUDA GPU (and torch)")
        return 1
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    results = []
    if args.only != "softmax":
        run_rmsnorm(RMS_SHAPES[:1] if args.quick else RMS_SHAPES, results)
    if args.only != "rmsnorm":
        run_softmax(SM_SHAPES[:1] if args.quick else SM_SHAPES,
                    ("float32", "float16", "bfloat16"), results)
    print("\nsummary: best ptxgen kernel vs torch's best, per op / dtype / shape")
    keys = sorted({(r["op"], r["dtype"], r["shape"]) for r in results})
    for op, dt, shape in keys:
        ours = [r for r in results if (r["op"], r["dtype"], r["shape"]) == (op, dt, shape)
                and r["variant"].startswith("ptxgen")]
        if ours:
            b = max(ours, key=lambda r: r["GB/s"])
            print(f"  {op:8} {dt:9} {shape:>12}  {b['GB/s']:7.0f} GB/s  {b['vs torch']:.2f}x "
                  f"torch  ({b['variant']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
