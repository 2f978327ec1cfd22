"""The persistent, warp-specialized Hopper GEMM (sm_90a): a demo of ptxgen.kernels.gemm (the
kernel factory and the torch wrapper live in the package; `help(ptxgen.kernels.gemm)` tells
how the kernel works).  Here: the bit-exact check run_all runs and the accuracy comparison
with cuBLAS.

    python examples/gemm_sm90.py           # PTX resources; on an H200 also checks a few shapes
"""
from ptxgen.kernels.gemm import (BM, GROUP_M, KERNELS, gemm, kernel_for,  # noqa: F401
                                 make_gemm)


def _bf16_bits(x):
    """float64 values -> bfloat16 bits, round to nearest even (what cvt.rn.bf16x2.f32 does)."""
    import numpy as np
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def check(xp, rng, shapes=((300, 203, 160), (2000, 1500, 64), (1, 1, 16))):
    """[(label, device bits, numpy bits)] for run_all: small integers, whose products and sums
    fp32 holds exactly, so the result is numpy's rounded once to the output dtype, bit for
    bit; outputs poisoned with NaN first.  Ragged M, N, K; N = 203 takes the padded-D path,
    2000 x 1500 gives some CTAs two tiles."""
    import numpy as np
    try:
        import torch
    except ImportError:
        return []
    res = []
    for dt in (torch.bfloat16, torch.float16, torch.float8_e4m3fn):
        for M, N, K in shapes:
            a = rng.integers(-2, 3, size=(M, K)).astype(np.float64)
            b = rng.integers(-2, 3, size=(N, K)).astype(np.float64)
            ta = torch.tensor(a, dtype=torch.float32, device="cuda").to(dt)
            tb = torch.tensor(b, dtype=torch.float32, device="cuda").to(dt)
            ref = a @ b.T
            kw = {}
            if dt == torch.float8_e4m3fn:
                kw = dict(scale_a=torch.tensor([0.5], device="cuda"),
                          scale_b=torch.tensor([0.125], device="cuda"))
                ref = ref * 0.0625
            od = torch.bfloat16 if dt == torch.float8_e4m3fn else dt
            out = torch.full((M, N), float("nan"), dtype=od, device="cuda")
            gemm(ta, tb, out, **kw)
            want = (ref.astype(np.float16).view(np.uint16) if od == torch.float16
                    else _bf16_bits(ref))
            got = out.view(torch.int16).cpu().numpy().view(np.uint16)
            res.append((f"gemm_sm90 {str(dt)[6:]} {M}x{N}x{K}", got, want))
    return res


def accuracy(shapes=((256, 256, 256), (300, 203, 144), (1, 1, 16), (1000, 777, 1040),
                     (2000, 3000, 528), (4096, 4096, 4096))):
    """Random normal data, each dtype and shape: max |error| / max |reference| against fp64,
    ours and the library's (torch.matmul / torch._scaled_mm); [(label, ours, library's)]."""
    import torch
    torch.manual_seed(0)
    rows = []
    for dt in (torch.bfloat16, torch.float16, torch.float8_e4m3fn):
        for M, N, K in shapes:
            a = torch.randn(M, K, device="cuda").to(dt)
            b = torch.randn(N, K, device="cuda").to(dt)
            if dt == torch.float8_e4m3fn:
                sa = torch.tensor([0.5], device="cuda")
                sb = torch.tensor([2.0 ** -3], device="cuda")
                pa = torch.zeros(-(-M // 16) * 16, K, dtype=dt, device="cuda")
                pb = torch.zeros(-(-N // 16) * 16, K, dtype=dt, device="cuda")
                pa[:M], pb[:N] = a, b               # _scaled_mm takes multiples of 16 only
                lib = torch._scaled_mm(pa, pb.t(), sa, sb, out_dtype=torch.bfloat16)[:M, :N]
                ref = (a.double() @ b.double().T) * (0.5 * 2.0 ** -3)
                out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
                gemm(a, b, out, scale_a=sa, scale_b=sb)
            else:
                lib = a @ b.T
                ref = a.double() @ b.double().T
                out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
                gemm(a, b, out)
            scale = ref.abs().max().item() or 1.0
            err = ((out.double() - ref).abs().max() / scale).item()
            lib_err = ((lib.double() - ref).abs().max() / scale).item()
            rows.append((f"{str(dt)[6:]} {M}x{N}x{K}", err, lib_err))
    return rows


if __name__ == "__main__":
    import sys

    import numpy as np

    from ptxgen.runtime import has_gpu

    for dt in ("bfloat16", "float8_e4m3fn"):
        r = make_gemm(dt, scaled=dt.startswith("float8")).compile("sm_90a")
        print(f"{dt}: {r.registers} registers/thread, {r.spill_bytes} spill bytes, "
              f"{r.resources['smem_bytes']} shared bytes")
    if has_gpu():
        bad = 0
        for label, got, want in check(None, np.random.default_rng(0)):
            ok = got.tobytes() == want.tobytes()
            bad += not ok
            print(f"{'ok   ' if ok else 'WRONG'} {label} (bit-exact)")
        for label, err, lib in accuracy():
            ok = err == err and err <= 1.25 * lib + 1e-6
            bad += not ok
            print(f"{'ok   ' if ok else 'WRONG'} {label}: max rel err {err:.3g} (cuBLAS {lib:.3g})")
        sys.exit(1 if bad else 0)
