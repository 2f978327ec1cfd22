"""TFLOP/s of ptxgen.kernels.gemm against cuBLAS (torch.matmul, torch._scaled_mm) and a
Triton matmul, in the same run, for the shapes of issue #16; each result is checked against
the library's first.

    python benchmarks/gemm.py [--quick] [--json out.json]     # on an sm_90a GPU
    python benchmarks/gemm.py --issue30 [--json out.json]     # issue #30 (< 4 minutes): the
        GPU tests of the small-M / block-scaled paths, then the decode series, fp8 and
        block-scaled rows and the large bf16 shapes, a compact table last

Issue #30 timing: each contender's call is captured `batch` times into one CUDA graph (GPU time,
without the host launch cost) and the graphs replayed interleaved round by round, the median of
21 rounds kept; eager timing (back-to-back calls, host cost overlapping the GPU) is reported too.
Effective bandwidth = (A + B + D bytes) / time.

Timing: grid_stride_variants.timeit (CUDA events around back-to-back calls, the contenders
interleaved round by round, the median kept).  The Triton kernel is ours (the textbook tiled matmul with a
small autotuned config set, a @ b^T), as Triton 3 ships no matmul of its own.
"""
from __future__ import annotations

import argparse
import importlib
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


DECODE_NK = [(14336, 4096), (4096, 14336), (8192, 8192)]
DECODE_M = [1, 8, 16, 32, 64, 128, 256]


def fill_splits(M, N, K, MN, sms):
    """The split count that best fills whole grid rounds, ignoring the workspace's bytes (what
    the heuristic trades against): the alternative the decode rows time."""
    from ptxgen.kernels.gemm_small_m import BW
    tiles, nk = -(-N // BW) * -(-M // MN), -(-K // 64)
    fills = [(u / (-(-u // sms) * sms), -s) for s in range(1, 17) if nk // s >= 4
             for u in [tiles * s]]
    return -max(fills)[1] if fills else 1


def graph_timeit(fns: dict, batch=20, rounds=21) -> dict:
    """Median ms per call of each launcher from CUDA-graph replays of `batch` calls, the
    contenders interleaved round by round; a launcher whose capture fails is left out."""
    import numpy as np
    import torch

    graphs = {}
    for k, f in fns.items():
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                f()
                f()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(batch):
                    f()
            g.replay()
            graphs[k] = g
        except Exception as e:                     # noqa: BLE001 (reported, timed eagerly)
            print(f"  graph capture of {k} failed ({type(e).__name__}: {e})", flush=True)
    torch.cuda.synchronize()
    out = {k: [] for k in graphs}
    for _ in range(rounds):
        for k, g in graphs.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            out[k].append(s.elapsed_time(e) / batch)
    return {k: float(np.median(v)) for k, v in out.items()}


def _row(label, dt_name, M, N, K, fns, ref_name, elem, out_elem, check=None):
    """Time `fns` (graph and eager), print one line; the row's dict."""
    from grid_stride_variants import timeit

    flops = 2 * M * N * K
    nbytes = (M * K + N * K) * elem + M * N * out_elem
    batch = max(3, min(50, int(2e10 / flops)))
    g = graph_timeit(fns, batch=batch, rounds=21)
    e = timeit(fns, batch=batch, rounds=21)
    res = dict(label=label, dtype=dt_name, M=M, N=N, K=K, graph_ms=g, eager_ms=e,
               err_vs_ref=check or {})
    parts = []
    for n in fns:
        t = g.get(n, e.get(n))
        if t is None:
            continue
        parts.append(f"{n} {t * 1e3:8.1f}us {flops / t / 1e9:7.1f}TF {nbytes / t / 1e9:5.2f}TB/s")
    base = g.get(ref_name)
    res["ratio_graph"] = {n: base / t for n, t in g.items()} if base else {}
    base_e = e.get(ref_name)
    res["ratio_eager"] = {n: base_e / t for n, t in e.items()} if base_e else {}
    res["tbps"] = {n: nbytes / t / 1e9 for n, t in {**e, **g}.items()}
    errs = " ".join(f"{n} {v:.2g}" for n, v in (check or {}).items())
    print(f"{label:12} {dt_name:9} {M:5}x{N:5}x{K:5}  " + " | ".join(parts) +
          (f"   max rel err vs fp64: {errs}" if errs else ""), flush=True)
    return res


def _decode_row(torch, S, gemm, M, N, K, b, sms):
    bf = torch.bfloat16
    a = torch.randn(M, K, device="cuda").to(bf)
    out = torch.empty(M, N, dtype=bf, device="cuda")
    out2 = torch.empty(M, N, dtype=bf, device="cuda")
    cfg = S.choose_config(M, N, K, "bfloat16", sms)
    gemv = isinstance(cfg, S.GemvConfig)
    if gemv:              # the alternative: the wgmma kernel the table gives without its row
        alt = S.choose_config(M, N, K, "bfloat16", sms, skip=("gemv",))
    else:
        alt = cfg._replace(splits=1 if cfg.splits > 1 else fill_splits(M, N, K, cfg.MN, sms))
    fns = {"cublas": lambda: torch.matmul(a, b.T),
           "small_m": lambda: S.gemm_small_m(a, b, out),
           f"small_m_{'wgmma_' if gemv else ''}s{alt.splits}":
               lambda: S.gemm_small_m(a, b, out2, config=alt),
           "gemm_sm90": lambda: gemm(a, b, out2)}
    lib = fns["cublas"]()
    ref = a.double() @ b.double().T
    err = {"cublas": rel_err(lib, ref), "small_m": rel_err(fns["small_m"](), ref)}
    r = _row(f"decode {'gemv' if gemv else f's{cfg.splits}'}", "bfloat16", M, N, K, fns,
             "cublas", 2, 2, err)
    r["config"] = cfg._asdict()
    return r


def _guarded(rows, label, fn):
    """Run one row's setup and timing; an error is printed and the series goes on (the lead's
    GPU time is short: one broken contender must not cost the rest of the run)."""
    import traceback
    try:
        rows.append(fn())
    except Exception:                              # noqa: BLE001 (printed, run continues)
        print(f"{label}: FAILED\n{traceback.format_exc()}", flush=True)


def issue30(args):
    import torch

    from gemm_sm90 import gemm
    from ptxgen.kernels import gemm_small_m as S
    from ptxgen.kernels.gemm_blockscaled import gemm_blockscaled

    if not args.no_tests:
        import pytest
        rc = pytest.main(["-q", "-x", os.path.join(HERE, "..", "tests", "gpu",
                                                   "test_gemm_small_m_gpu.py")])
        print(f"GPU tests: exit code {int(rc)}", flush=True)
    torch.manual_seed(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    bf = torch.bfloat16
    want = set(args.only.split(",")) if args.only else {"decode", "fp8", "blockscaled", "large"}
    for N, K in DECODE_NK if "decode" in want else ():
        b = torch.randn(N, K, device="cuda").to(bf)
        for M in DECODE_M:
            _guarded(rows, f"decode {M}x{N}x{K}", lambda: _decode_row(torch, S, gemm, M, N, K,
                                                                      b, sms))
    f8 = torch.float8_e4m3fn
    one = torch.tensor([1.0], device="cuda")
    def fp8_row(M, N, K):
        a = torch.randn(M, K, device="cuda").to(f8)
        b = torch.randn(N, K, device="cuda").to(f8)
        bt = b.t()
        out = torch.empty(M, N, dtype=bf, device="cuda")
        fns = {"scaled_mm": lambda: torch._scaled_mm(a, bt, one, one, out_dtype=bf),
               "gemm_sm90": lambda: gemm(a, b, out, scale_a=one, scale_b=one)}
        if M <= 256:
            fns["small_m"] = lambda: S.gemm_small_m(a, b, out, scale_a=one, scale_b=one)
        else:     # the default (BN 128, overlapped promotion) against the other schedules:
            # BN 192 with one partial tile (the previous default), and with the consumers
            # taking turns (ping-pong); clusters of two CTAs sharing B by multicast
            G = importlib.import_module("ptxgen.kernels.gemm")
            k192 = G.kernel_for("float8_e4m3fn", 192, 4, sms, True, 1)
            kpp = G.kernel_for("float8_e4m3fn", 192, 4, sms, True, 1, True)
            kc2 = G.kernel_for("float8_e4m3fn", 192, 4, sms - sms % 2, True, 1, False, False, 2)
            koc = G.kernel_for("float8_e4m3fn", 128, 5, sms - sms % 2, True, 1, False, True, 2)
            for v, kv in (("n192", k192), ("pp", kpp), ("c2", kc2), ("ov_c2", koc)):
                o = torch.empty(M, N, dtype=bf, device="cuda")
                fns["gemm_sm90_" + v] = lambda kv=kv, o=o: (kv(a, b, o, one, one), o)[1]
        lib = fns["scaled_mm"]()
        ref = a.double() @ b.double().T
        err = {"scaled_mm": rel_err(lib, ref), "gemm_sm90": rel_err(fns["gemm_sm90"](), ref)}
        for v in ("gemm_sm90_n192", "gemm_sm90_pp", "gemm_sm90_c2", "gemm_sm90_ov_c2"):
            if v in fns:
                err[v] = rel_err(fns[v](), ref)
        return _row("fp8", "fp8", M, N, K, fns, "scaled_mm", 1, 2, err)

    def blockscaled_row(M, N, K):
        a = torch.randn(M, K, device="cuda").to(f8)
        b = torch.randn(N, K, device="cuda").to(f8)
        bt = b.t()
        sa = torch.rand(M, K // 128, device="cuda") + 0.5
        sb = torch.rand(N // 128, K // 128, device="cuda") + 0.5
        out = torch.empty(M, N, dtype=bf, device="cuda")
        BS = importlib.import_module("ptxgen.kernels.gemm_blockscaled")
        kpp = BS.kernel_for(5, sms, True)          # the consumers taking turns (ping-pong)
        kov = BS.kernel_for(5, sms, False, True)   # two partial tiles (overlap)
        koc = BS.kernel_for(5, sms - sms % 2, False, True, 2)   # and clusters sharing B
        kr = BS.kernel_for(5, sms, False, False, 1, "ring")      # scales in the TMA ring
        kro = BS.kernel_for(5, sms, False, True, 1, "ring")
        k192 = BS.kernel_for(4, sms, False, False, 1, "global", 192)   # 128 x 192 tiles
        k192r = BS.kernel_for(4, sms, False, False, 1, "ring", 192)
        ca, cb = BS.column_major_scales(sa), BS.column_major_scales(sb)   # read in place
        out2, out3 = (torch.empty(M, N, dtype=bf, device="cuda") for _ in range(2))
        fns = {"scaled_mm": lambda: torch._scaled_mm(a, bt, one, one, out_dtype=bf),
               "blockscaled": lambda: gemm_blockscaled(a, b, sa, sb, out),
               "blockscaled_colmajor": lambda: gemm_blockscaled(a, b, ca, cb, out2),
               "blockscaled_gemm": lambda: gemm(a, b, out3, scale_a=sa, scale_b=sb)}
        for v, kv in (("pp", kpp), ("ov", kov), ("ov_c2", koc)):
            o = torch.empty(M, N, dtype=bf, device="cuda")
            fns["blockscaled_" + v] = lambda kv=kv, o=o: (kv(a, b, o, sa, sb), o)[1]
        o = torch.empty(M, N, dtype=bf, device="cuda")
        fns["blockscaled_n192"] = lambda o=o: (k192(a, b, o, sa, sb), o)[1]
        for v, kv in (("ring", kr), ("ring_ov", kro), ("ring_n192", k192r)):   # the
            # transposition of the scales timed with each call
            o = torch.empty(M, N, dtype=bf, device="cuda")
            fns["blockscaled_" + v] = \
                lambda kv=kv, o=o: (kv(a, b, o, *BS.ring_scales(sa, sb)), o)[1]
        want = fns["blockscaled"]().view(torch.int16)
        for v in ("colmajor", "gemm", "pp", "ov", "ov_c2", "ring", "ring_ov", "n192",
                  "ring_n192"):
            same = torch.equal(want, fns["blockscaled_" + v]().view(torch.int16))
            print(f"blockscaled {M}x{N}x{K}: {v} gives the same bits: {same}", flush=True)
        return _row("blockscaled", "fp8", M, N, K, fns, "scaled_mm", 1, 2)

    def large_row(M, N, K):
        a = torch.randn(M, K, device="cuda").to(bf)
        b = torch.randn(N, K, device="cuda").to(bf)
        out = torch.empty(M, N, dtype=bf, device="cuda")
        fns = {"cublas": lambda: torch.matmul(a, b.T), "gemm_sm90": lambda: gemm(a, b, out)}
        return _row("large", "bfloat16", M, N, K, fns, "cublas", 2, 2)

    series = {"fp8": ([(8192, 8192, 8192), (4096, 14336, 4096), (128, 14336, 4096)], fp8_row),
              "blockscaled": ([(8192, 8192, 8192), (4096, 14336, 4096)], blockscaled_row),
              "large": ([(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096)],
                        large_row)}
    for name, (shapes, make_row) in series.items():
        for M, N, K in shapes if name in want else ():
            _guarded(rows, f"{name} {M}x{N}x{K}", lambda: make_row(M, N, K))
    print("\nratio = library time / contender time (> 1: faster than the library); graph "
          "timing (GPU only), eager in brackets; TB/s = (A + B + D) bytes / graph time")
    print(f"{'row':12} {'shape':19} {'contender':14} {'ratio':>6} {'(eager)':>8} {'TB/s':>6}")
    for r in rows:
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        for n in r["tbps"]:
            q, qe = r["ratio_graph"].get(n), r["ratio_eager"].get(n)
            print(f"{r['label']:12} {shape:19} {n:14} "
                  f"{'-' if q is None else f'{q:.3f}':>6} "
                  f"{'' if qe is None else f'({qe:.3f})':>8} {r['tbps'][n]:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    if "--issue30" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--issue30", action="store_true")
        ap.add_argument("--no-tests", action="store_true", help="skip the GPU tests first")
        ap.add_argument("--only", help="comma-separated series: decode, fp8, blockscaled, large")
        ap.add_argument("--json")
        issue30(ap.parse_args())
    else:
        main()
