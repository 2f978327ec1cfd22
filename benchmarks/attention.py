"""ptxgen.kernels.attention against torch SDPA's cuDNN and flash backends, same run.

TFLOP/s by the FlashAttention convention: 4 B H Sq Skv D (halved for causal), and the
percentage of the 989 TFLOP/s dense bf16 peak.  Median of timed runs (triton's do_bench)
after warm-up, on random data.

    python benchmarks/attention.py                 # H=16, B*S = 16k tokens, D 64..256
    python benchmarks/attention.py --quick         # D=128 at S=4k only
    python benchmarks/attention.py --dims 96,192   # those head dims only

D 96 runs the D = 128 kernel on TMA's zero fill past the rows' edge (the `narrow` form).
"""
import math
import sys

PEAK = 989.0


def _time(fn):
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def row(B, H, S, D, causal, dtype="bfloat16"):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from ptxgen.kernels.attention import attention
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dt) for _ in range(3))
    out = torch.empty_like(q)
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    res = {"ours": _time(lambda: attention(q, k, v, causal=causal, out=out))}
    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(be):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                res[name] = _time(lambda: F.scaled_dot_product_attention(q, k, v,
                                                                         is_causal=causal))
        except RuntimeError:
            res[name] = math.nan
    tf = {n: flops / t * 1e-9 for n, t in res.items()}
    return tf


def variants(S=4096, H=16):
    """Each schedule option of make_attention against cuDNN, same run (D, causal, BN,
    ping-pong); a correctness check against SDPA first."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from ptxgen.kernels.attention import LOG2E, make_attention
    B = max(1, 16384 // S)
    print(f"{'D':>4} {'causal':>6} {'BN':>4} {'pp':>3} | {'ours':>7} {'cudnn':>7} {'/cudnn':>6} "
          f"{'maxerr':>8}")
    for D, BNs in ((64, (128, 192)), (128, (128, 176)), (192, (96, 112)), (256, (64, 80))):
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        for causal in (False, True):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                t_lib = _time(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            flops = 4 * B * H * S * S * D / (2 if causal else 1)
            for BN in BNs:
                for pp in (True, False):
                    try:
                        kern = make_attention("bfloat16", D, causal, 1, BN=BN, pingpong=pp)
                        out = torch.full_like(q, float("nan"))
                        lse = torch.empty(B, H, S, device="cuda")
                        sl2 = LOG2E / math.sqrt(D)
                        kern(q, k, v, out, lse, sl2)
                        err = (out.float() - ref.float()).abs().max().item()
                        t = _time(lambda: kern(q, k, v, out, lse, sl2))
                    except Exception as e:       # a variant that does not build or fit
                        print(f"{D:>4} {str(causal):>6} {BN:>4} {pp:>3} | {type(e).__name__}: "
                              f"{str(e)[:80]}")
                        continue
                    print(f"{D:>4} {str(causal):>6} {BN:>4} {pp:>3} | {flops / t * 1e-9:7.1f} "
                          f"{flops / t_lib * 1e-9:7.1f} {t_lib / t:6.3f} {err:8.2e}", flush=True)


def main(argv):
    if "--variants" in argv:
        return variants()
    quick = "--quick" in argv
    dims = (64, 96, 128, 192, 256)
    if "--dims" in argv:
        dims = tuple(int(d) for d in argv[argv.index("--dims") + 1].split(","))
    configs = [(128, 4096)] if quick else [(D, S) for D in dims for S in (1024, 4096, 16384)]
    print(f"{'D':>4} {'S':>6} {'causal':>6} | {'ours':>7} {'cudnn':>7} {'flash':>7} | "
          f"{'/cudnn':>6} {'/flash':>6} {'%peak':>6}")
    for D, S in configs:
        for causal in (False, True):
            tf = row(max(1, 16384 // S), 16, S, D, causal)
            print(f"{D:>4} {S:>6} {str(causal):>6} | {tf['ours']:7.1f} {tf['cudnn']:7.1f} "
                  f"{tf['flash']:7.1f} | {tf['ours'] / tf['cudnn']:6.3f} "
                  f"{tf['ours'] / tf['flash']:6.3f} {100 * tf['ours'] / PEAK:6.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
