"""ptxgen.kernels.attention against torch SDPA's cuDNN and flash backends, same run.

TFLOP/s by the FlashAttention convention: 4 B H Sq Skv D (halved for causal), and the
percentage of the 989 TFLOP/s dense bf16 peak.  Median of timed runs (triton's do_bench)
after warm-up, on random data.

    python benchmarks/attention.py                 # H=16, B*S = 16k tokens, D 64/128/256
    python benchmarks/attention.py --quick         # D=128 at S=4k only
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


def main(argv):
    quick = "--quick" in argv
    configs = [(128, 4096)] if quick else [(D, S) for D in (64, 128, 256)
                                           for S in (1024, 4096, 16384)]
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
