"""Decode-shaped GEMM on Hopper (sm_90a): D = A @ B^T with a small token count M.

    A (M, K) activations, B (N, K) weights, both row-major (K contiguous); D (M, N) row-major
    bfloat16 / float16 in, same dtype out;  float8_e4m3fn in, bfloat16 out (per-tensor scales)

Why a separate path: with M <= 256 the general kernel puts the tokens on wgmma's M side (64 rows
per warpgroup, mostly padding) and makes only N / BN output tiles, fewer than the 132 SMs, so
the weight stream, which is the whole cost, runs on a fraction of the machine.  Here:
  * A and B are swapped: each consumer warpgroup computes 64 weight rows x MN tokens with
    wgmma m64nMNk16 (MN = M rounded up to 8 up to 64, to 64 above; fp8 at most 192, so
    more tokens take equal tiles: round_mn), D^T tile in registers;
  * split-K: every (weight tile, token tile) is cut into S contiguous K ranges, S chosen so that
    the units fill whole rounds of the persistent grid (one CTA per SM); consecutive CTAs take
    the S splits of one tile, so a round's loads spread over K;
  * the reduction is deterministic: with S > 1 each unit stores its fp32 partial tile to a
    workspace W (S, M, N) with TMA, and a second kernel sums s = 0 .. S-1 in that fixed order
    (the same bits every run); with S = 1 the tile goes straight to D;
  * the weights are read once: their TMA loads carry L2 evict_first, the activations (read by
    every CTA) evict_last;
  * the stages are small (128 x BK weights + MN x BK tokens), so the ring is deep (up to 16).
The epilogue writes the accumulator transposed into shared memory (a permuted view of a
row-major (MC, 64) tile), then TMA-stores it into D (or W) rows m0.., columns n0..: the TMA
clips at the matrix edge, so any M, N work; K needs a row pitch that is a multiple of 16 bytes.

One token (bfloat16 / float16) takes the CUDA cores instead (make_gemv, GemvConfig): a warp per
weight row streams it in 16-byte vectors and keeps fp32 sums in registers, one lane reduction
at the end, no shared memory, workspace or second kernel.  With M = 1 the wgmma tile is 7/8
padding and the work is the weight stream alone.  At M = 1 it measured faster than the
split-K path on an H100 (by 8-9.5%) and on an H200 (by 2-3%); at M = 2, on an H100, it was
not (benchmarks/RESULTS.md).

    choose_config(M, N, K, dtype, sms)      the heuristic table (CONFIG_TABLE) -> Config or
                                            GemvConfig
    make_small_m(dtype, MN, STAGES, ctas, split)
                                            the kernel of a configuration (_small_m_kernel.py)
    make_gemv(dtype, tokens, U, W)          the CUDA-core kernel of a GemvConfig
    gemm_small_m(a, b, out=None, *, config=None, scale_a=None, scale_b=None)   torch tensors
"""


import functools
from typing import NamedTuple

from ptxgen.target import TMA_ALIGN

from ._gemm_sm90 import CTA_SMEM, ring_stages_fit
from ._small_m_kernel import (BW, ELEM_BYTES, FP8_MAX_MN, GEMV_DTYPES, GEMV_VEC, MAX_STAGES,
                              OUT_DTYPE, SMEM_BUDGET, ConfigError, GemmInputError, make_gemv,
                              make_reduce, make_small_m, valid_gemv, valid_mn)
from ._torch import sm_count


class Config(NamedTuple):
    """MN: wgmma N (token tile); STAGES: ring depth; splits: K ranges per output tile (with
    more than one, a second kernel sums their partials in split order)."""
    MN: int
    STAGES: int
    splits: int
    reason: str = ""


class GemvConfig(NamedTuple):
    """The CUDA-core kernel (make_gemv): U 16-byte vectors a lane per K chunk, W warps (weight
    rows) a CTA."""
    U: int = 8
    W: int = 4
    reason: str = ""


def max_stages(MN) -> int:
    """The deepest ring a token tile allows: within SMEM_BUDGET and MAX_STAGES, and within the
    CTA's shared memory beside the epilogue's two chunks of min(MN, 64) x 64 fp32 (a split's
    partials; a stage: 128 weight rows + MN token rows of one 128-byte K span)."""
    stage = (BW + MN) * 128
    return min(MAX_STAGES, SMEM_BUDGET // stage, ring_stages_fit(stage, 2 * min(MN, 64) * 64 * 4))


def stages_for(MN, dtype) -> int:
    """As many ring stages as max_stages allows (at least 2)."""
    return max(2, max_stages(MN))


def round_mn(M, dtype="bfloat16") -> int:
    """The token tile for M tokens: M rounded up to 8 up to 64, to 64 up to 256; past what
    valid_mn allows the dtype (fp8: FP8_MAX_MN), the tokens split into equal tiles."""
    if M <= 64:
        return max(8, -(-M // 8) * 8)
    cap = FP8_MAX_MN if dtype.startswith("float8") else 256
    per_tile = -(-M // -(-M // cap))             # M over as few tiles as the cap allows
    return min(cap, -(-per_tile // 64) * 64)


def unit_tiles(M, N, MN) -> int:
    """The decode kernel's output tiles: BW weight rows x MN tokens each."""
    return -(-N // BW) * -(-M // MN)


LAUNCH_BYTES = 8 << 20      # the reduction's extra launch, as bytes streamed meanwhile


def best_splits(M, N, K, elem, MN, sms, max_splits=16, min_k_blocks=4) -> int:
    """The split count with the least modelled time: the bytes moved (weights once, the
    activations once per weight tile, and with S > 1 the fp32 workspace written and read
    back, plus LAUNCH_BYTES for the reduction's launch) over the fraction of the grid's
    rounds that units fill.  Keeps >= min_k_blocks K-blocks per split so the ring streams."""
    tiles = unit_tiles(M, N, MN)
    nk = -(-K // (128 // elem))
    base = N * K * elem + -(-N // BW) * M * K * elem + M * N * elem
    best, best_t = 1, None
    for s in range(1, max_splits + 1):
        if s > 1 and nk // s < min_k_blocks:
            break
        u = tiles * s
        fill = u / (-(-u // sms) * sms)
        t = (base + (2 * s * M * N * 4 + LAUNCH_BYTES if s > 1 else 0)) / fill
        if best_t is None or t < 0.98 * best_t:
            best, best_t = s, t
    return best


# The heuristic table: (rule name, applies(M, N, K, tiles, nk, sms, dtype), the reason).  The
# first row that applies decides: the CUDA-core kernel, or the wgmma kernel's split rule (its
# MN and STAGES always come from round_mn / stages_for).
CONFIG_TABLE = (
    ("gemv", lambda M, N, K, tiles, nk, sms, dt: M == 1
     and valid_gemv(dt, M, *GemvConfig()[:2], N, K)[0],
     "one token: the weight stream is the whole cost; a warp per weight row on the CUDA cores "
     "streams it with no padded wgmma tile, workspace or second kernel"),
    ("one-split", lambda M, N, K, tiles, nk, sms, dt: nk < 8,
     "K is under 8 K-blocks: splitting it leaves too little to pipeline per unit"),
    ("fills-machine", lambda M, N, K, tiles, nk, sms, dt: tiles >= 4 * sms,
     "at least 4 rounds of tiles: the last round's imbalance is small, no workspace needed"),
    ("split-k", lambda M, N, K, tiles, nk, sms, dt: True,
     "few tiles for the SMs (decode shapes): split K so every SM streams weights; the split "
     "count minimises bytes moved / grid fill (best_splits: the workspace costs bytes)"),
)


def choose_config(M, N, K, dtype="bfloat16", sms=132, skip=()):
    """The configuration the heuristic table gives for this shape (see CONFIG_TABLE), leaving
    out the rows named in `skip` (skip=("gemv",): the best wgmma configuration)."""
    MN = round_mn(M, dtype)
    tiles = unit_tiles(M, N, MN)
    nk = -(-K // (128 // ELEM_BYTES[dtype]))
    for name, applies, why in CONFIG_TABLE:
        if name not in skip and applies(M, N, K, tiles, nk, sms, dtype):
            if name == "gemv":
                return GemvConfig(reason=f"{name}: {why}")
            splits = (best_splits(M, N, K, ELEM_BYTES[dtype], MN, sms) if name == "split-k"
                      else 1)
            return Config(MN, stages_for(MN, dtype), splits, f"{name}: {why}")
    raise AssertionError("the last row always applies")


def check_config(cfg, dtype, K, M=1, N=1) -> None:
    """Raise ConfigError naming the rule a forced configuration breaks."""
    if isinstance(cfg, GemvConfig):
        ok, why = valid_gemv(dtype, M, cfg.U, cfg.W, N, K)
        if not ok:
            raise ConfigError(f"GemvConfig: {why}")
        return
    ok, why = valid_mn(cfg.MN, dtype)
    if not ok:
        raise ConfigError(f"config.{why}")
    if not isinstance(cfg.STAGES, int) or not 2 <= cfg.STAGES <= MAX_STAGES:
        raise ConfigError(f"config.STAGES = {cfg.STAGES!r}: 2 to {MAX_STAGES} ring stages")
    if cfg.STAGES > max_stages(cfg.MN):
        ring = cfg.STAGES * (BW + cfg.MN) * 128
        raise ConfigError(f"config.STAGES = {cfg.STAGES}: the ring needs {ring} bytes of shared "
                          f"memory, more than {SMEM_BUDGET} or than the {CTA_SMEM} a CTA has "
                          f"beside the epilogue; use at most {stages_for(cfg.MN, dtype)} "
                          f"stages for MN = {cfg.MN}")
    nk = -(-K // (128 // ELEM_BYTES[dtype]))
    if not isinstance(cfg.splits, int) or not 1 <= cfg.splits <= max(1, nk):
        raise ConfigError(f"config.splits = {cfg.splits!r}: 1 to {nk} (the K-blocks of "
                          f"{128 // ELEM_BYTES[dtype]} for K = {K}), so every split has work")


def dump(dtype: str = "bfloat16", MN: int = 16, STAGES: int | None = None, splits: int = 4,
         ctas: int = 132) -> list:
    """`ptxgen dump ptxgen.kernels.gemm_small_m [--kernel-args dtype=float8_e4m3fn,MN=32]`: the
    kernels of one token tile: D written directly, and the split partials into the workspace
    with their reduce kernel (`splits` ways); for 16-bit dtypes also the one-token CUDA-core
    kernel."""
    stages = stages_for(MN, dtype) if STAGES is None else STAGES
    return [make_small_m(dtype, MN, stages, ctas),
            make_small_m(dtype, MN, stages, ctas, split=True),
            make_reduce(OUT_DTYPE[dtype], splits, 8 * ctas)] + \
        ([make_gemv(dtype)] if dtype in GEMV_DTYPES else [])


kernel_for = functools.lru_cache(maxsize=None)(make_small_m)
gemv_for = functools.lru_cache(maxsize=None)(make_gemv)
reduce_for = functools.lru_cache(maxsize=None)(make_reduce)
_auto_config = functools.lru_cache(maxsize=4096)(choose_config)    # per call: a dict lookup


_NAMES = ("bfloat16", "float16", "float8_e4m3fn")


@functools.lru_cache(maxsize=None)
def _device_consts(device):
    """Per device: the SM count, the scale 1.0 and the unused 1 x 1 x 4 workspace."""
    import torch
    return (sm_count(device), torch.ones(1, dtype=torch.float32, device=device),
            torch.zeros((1, 1, 4), dtype=torch.float32, device=device))


def _scale(x, name, dev):
    import torch
    if x is None:
        return None
    if not isinstance(x, torch.Tensor) or x.numel() != 1 or x.dtype != torch.float32:
        raise GemmInputError(f"{name}: a float32 tensor of one element (a per-tensor scale), "
                             f"got {getattr(x, 'dtype', type(x).__name__)} of shape "
                             f"{tuple(getattr(x, 'shape', ()))}")
    if x.device != dev:
        raise GemmInputError(f"{name} is on {x.device}, a and b on {dev}: every argument on "
                             f"one CUDA device")
    return x.reshape(1)


def store_target(out):
    """What a kernel's TMA store writes for `out` (M, N): out itself, or, where its rows are
    not whole TMA units at aligned addresses, a tensor with N rounded up to a unit whose first
    N columns `store_back` copies into out."""
    N, unit = out.shape[1], TMA_ALIGN // out.element_size()
    return out if N % unit == 0 and out.data_ptr() % TMA_ALIGN == 0 else \
        out.new_empty((out.shape[0], -(-N // unit) * unit))


def store_back(d, out):
    """out, after copying store_target's padded tensor d into it (nothing when d is out)."""
    if d is not out:
        out.copy_(d[:, :out.shape[1]])
    return out


def cuda_tensors(op: str, *named) -> None:
    """Each (name, x): a torch tensor on a CUDA device, all on the first one's device; else
    the GemmInputError naming it."""
    import torch
    for name, x in named:
        if not isinstance(x, torch.Tensor):
            raise GemmInputError(f"{name}: a torch tensor, got {type(x).__name__}")
        if x.device.type != "cuda":
            raise GemmInputError(f"{name} is on {x.device}: {op} runs on a CUDA device; move "
                                 f"it with .cuda()")
        first, dev = named[0][0], named[0][1].device
        if x.device != dev:
            raise GemmInputError(f"{name} is on {x.device}, {first} on {dev}: every argument "
                                 f"on one CUDA device")


def gemm_small_m(a, b, out=None, *, config=None, scale_a=None, scale_b=None):
    """a (M, K) @ b (N, K)^T on torch CUDA tensors (row-major) through the decode path.
    bfloat16 / float16 give the same dtype; float8_e4m3fn gives bfloat16 times scale_a *
    scale_b (float32 one-element tensors), each K-step's partial sum promoted to fp32.
    config: a Config or GemvConfig to force (else choose_config's); a rule it breaks raises
    ConfigError."""
    import torch
    cuda_tensors("gemm_small_m", ("a", a), ("b", b))
    if a.dtype != b.dtype or str(a.dtype)[6:] not in _NAMES:
        raise GemmInputError(f"a and b: two bfloat16, float16 or float8_e4m3fn tensors of one "
                             f"dtype, got {a.dtype} and {b.dtype}")
    dt = str(a.dtype)[6:]
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise GemmInputError(f"a (M, K) @ b (N, K)^T: got {tuple(a.shape)} and "
                             f"{tuple(b.shape)}")
    if not (a.is_contiguous() and b.is_contiguous()):
        raise GemmInputError("a and b: row-major (contiguous); call .contiguous()")
    (M, K), N = a.shape, b.shape[0]
    if K * a.element_size() % TMA_ALIGN:
        raise GemmInputError(f"K = {K}: a row of {K * a.element_size()} bytes; TMA needs row "
                             f"pitches that are multiples of {TMA_ALIGN} bytes (pad K to a "
                             f"multiple of {TMA_ALIGN // a.element_size()})")
    fp8 = dt.startswith("float8")
    if not fp8 and (scale_a is not None or scale_b is not None):
        raise GemmInputError("scale_a / scale_b: only for float8_e4m3fn inputs")
    sa, sb = _scale(scale_a, "scale_a", a.device), _scale(scale_b, "scale_b", a.device)
    out_dtype = torch.bfloat16 if fp8 else a.dtype
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    elif (not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N)
          or out.dtype != out_dtype or not out.is_contiguous() or out.device != a.device):
        raise GemmInputError(f"out: a contiguous ({M}, {N}) {out_dtype} tensor on {a.device}")
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.zero_()
    if not isinstance(config, (Config, GemvConfig, type(None))):
        raise ConfigError(f"config: a gemm_small_m.Config(MN, STAGES, splits) or "
                          f"GemvConfig(U, W), got {type(config).__name__}")
    return decode_launch(M, N, K, dt, a.device, config)(a, b, out, sa, sb)


class DecodeLaunch:
    """The decode path for one (M, N, K, dtype, device, forced Config or None): the
    configuration and kernels chosen once, and each kernel's launch prepared
    (`Kernel.prepare`) on the first call, then given the new tensors' pointers.  Takes
    checked tensors: a (M, K) and b (N, K) row-major and 16-byte aligned, out (M, N)
    contiguous of the result dtype and 16-byte aligned, sa / sb one-element float32 (1,)
    tensors or None (1.0)."""

    def __init__(self, M, N, K, dt, device, config=None):
        sms, self.one, self.no_ws = _device_consts(device)
        cfg = _auto_config(M, N, K, dt, sms) if config is None else config
        check_config(cfg, dt, K, M, N)
        self.config, self.shape, self.out_dt = cfg, (M, N), OUT_DTYPE[dt]
        self.gemv = isinstance(cfg, GemvConfig)
        self.split = not self.gemv and cfg.splits > 1
        if self.gemv:
            self.kernel = gemv_for(dt, M, cfg.U, cfg.W)
        else:
            self.kernel = kernel_for(dt, cfg.MN, cfg.STAGES, sms, self.split,
                                     dt.startswith("float8"))
        self.reduce = reduce_for(self.out_dt, cfg.splits, 8 * sms, 256) if self.split else None
        self.main = self.sum = None         # the prepared launches, made by the first call

    def __call__(self, a, b, out, sa=None, sb=None):
        import torch
        if self.gemv:                       # rows as 16-byte vectors; any D (scalar stores)
            if self.main is None:
                (M, K), N = a.shape, b.shape[0]
                self.main = self.kernel.prepare(
                    a.view(M, K // GEMV_VEC, GEMV_VEC), b.view(N, K // GEMV_VEC, GEMV_VEC), out,
                    grid=(-(-N // self.config.W),))
            self.main(a.data_ptr(), b.data_ptr(), out.data_ptr())
            return out
        (M, N), sa, sb = self.shape, self.one if sa is None else sa, self.one if sb is None else sb
        ws, d = self.no_ws, out             # the main kernel's W and D
        if self.split:                      # fp32 partial tiles, summed in split order
            ws = torch.empty((self.config.splits, M, -(-N // 4) * 4), dtype=torch.float32,
                             device=a.device)
        else:
            d = store_target(out)
        if self.main is None:
            self.main = self.kernel.prepare(a, b, d, ws, sa, sb)
            if self.split:
                self.sum = self.reduce.prepare(ws, out)
        self.main(a.data_ptr(), b.data_ptr(), d.data_ptr(), ws.data_ptr(), sa.data_ptr(),
                  sb.data_ptr())
        if self.split:
            self.sum(ws.data_ptr(), out.data_ptr())
            return out
        return store_back(d, out)


decode_launch = functools.lru_cache(maxsize=1024)(DecodeLaunch)   # one per shape class
