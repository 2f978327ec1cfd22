"""TFLOP/s of ptxgen.kernels.gemm against cuBLAS (torch.matmul, torch._scaled_mm) and a
Triton matmul, in the same run, for the shapes of issue #16; each result is checked against
the library's first.

    python benchmarks/gemm.py [--quick] [--json out.json]     # on an sm_90a GPU

Timing: grid_stride_variants.timeit (CUDA events around back-to-back calls, the contenders
interleaved round by round, the median kept).  The Triton kernel is ours (the textbook tiled matmul with a
small autotuned config set, a @ b^T), as Triton 3 ships no matmul of its own.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096), (128, 14336, 4096),
          (16, 4096, 4096)]


def triton_matmul():
    """a (M, K) @ b (N, K)^T in Triton, or None where Triton is missing."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    configs = [triton.Config({"BM": bm, "BN": bn, "BK": bk, "G": 8}, num_stages=s, num_warps=w)
               for bm, bn, bk, s, w in ((128, 256, 64, 3, 8), (128, 128, 64, 4, 4),
                                        (128, 128, 64, 4, 8), (64, 128, 64, 4, 4),
                                        (16, 128, 128, 4, 4))]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               G: tl.constexpr):
        pid = tl.program_id(0)
        tm, tn = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (G * tn)
        first = group * G
        rows = min(tm - first, G)
        pm = first + (pid % (G * tn)) % rows
        pn = (pid % (G * tn)) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            kk = k * BK + rk
            x = tl.load(a + rm[:, None] * K + kk[None, :],
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            y = tl.load(b + rn[None, :] * K + kk[:, None],
                        mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
            acc = tl.dot(x, y, acc)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(x, y, out):
        M, K = x.shape
        N = y.shape[0]
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa
        kernel[grid](x, y, out, M, N, K)
        return out

    return run



def rel_err(x, ref):
    return ((x.double() - ref.double()).abs().max() / (ref.double().abs().max() + 1e-30)).item()


def main(argv=None):
    import torch

    from ptxgen.kernels import gemm
    from grid_stride_variants import timeit

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="8192^3 bf16 and fp8 only")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    tri = triton_matmul()
    torch.manual_seed(0)
    rows = []
    jobs = [("bfloat16", s) for s in (SHAPES[:1] if args.quick else SHAPES)]
    jobs += [("float16", SHAPES[0])] if not args.quick else []
    jobs += [("float8_e4m3fn", SHAPES[0])]
    for dt_name, (M, N, K) in jobs:
        dt = getattr(torch, dt_name)
        a = torch.randn(M, K, device="cuda").to(dt)
        b = torch.randn(N, K, device="cuda").to(dt)
        if dt_name.startswith("float8"):
            sa = torch.tensor([1.0], device="cuda")
            sb = torch.tensor([1.0], device="cuda")
            out = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
            bt = b.t()
            fns = {"cublas": lambda: torch._scaled_mm(a, bt, sa, sb, out_dtype=torch.bfloat16),
                   "ptxgen": lambda: gemm(a, b, out, scale_a=sa, scale_b=sb),
                   "ptxgen_bn192": lambda: gemm(a, b, out, scale_a=sa, scale_b=sb, BN=192),
                   "cublas_fast": lambda: torch._scaled_mm(a, bt, sa, sb,
                                                           out_dtype=torch.bfloat16,
                                                           use_fast_accum=True),
                   "ptxgen_fast": lambda: gemm(a, b, out, scale_a=sa, scale_b=sb,
                                               fast_accum=True)}
        else:
            out = torch.empty(M, N, dtype=dt, device="cuda")
            tout = torch.empty(M, N, dtype=dt, device="cuda")
            fns = {"cublas": lambda: torch.matmul(a, b.T), "ptxgen": lambda: gemm(a, b, out)}
            if tri is not None:
                fns["triton"] = lambda: tri(a, b, tout)
        lib = fns["cublas"]()
        errs = {n: rel_err(f(), lib) for n, f in fns.items() if not n.startswith("cublas")}
        reps = max(3, min(200, int(2e11 / (2 * M * N * K))))
        ms = timeit(fns, batch=reps, rounds=7)
        tf = {n: 2 * M * N * K / (t * 1e-3) / 1e12 for n, t in ms.items()}
        row = dict(dtype=dt_name, M=M, N=N, K=K, tflops=tf, err_vs_cublas=errs,
                   ratio=tf["ptxgen"] / tf["cublas"])
        if "ptxgen_fast" in tf:
            row["ratio_fast"] = tf["ptxgen_fast"] / tf["cublas_fast"]
        rows.append(row)
        others = "  ".join(f"{n} {v:7.1f}" for n, v in tf.items())
        print(f"{dt_name:14} {M:5}x{N:5}x{K:5}  TFLOP/s: {others}   ptxgen/cublas "
              f"{row['ratio']:.3f}" + (f" (fast accum {row['ratio_fast']:.3f})" if "ratio_fast" in row
                                else "") + "   max rel diff vs cublas "
              + " ".join(f"{n} {e:.2g}" for n, e in errs.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
