"""The general Hopper GEMM's tile arithmetic, and the path choice it feeds: the shared memory
a BN-wide tile's epilogue takes (so the ring depth it leaves), the BN whose tiles keep the
SMs' rounds fullest, and the work an SM does on the decode path, against which gemm() weighs
the general kernel for 129-256 tokens.  Integer rules of shapes, checked on the CPU.
"""
from ._gemm_sm90 import BM, BN_STEP, EPILOGUE_ALIGN, epilogue_tails, ring_stages_fit
from .gemm_small_m import choose_config, unit_tiles

RING_MIN = 4        # the ring depth the epilogue's tiles leave room for
WAVE_FILL = 0.9     # below this share of their rounds of SMs, tiles fill them poorly


def _epilogue_bytes(BN: int, CB: int) -> int:
    """Shared memory of the epilogue tiles: two consumers' CB 64 x 64 boxes and their tail
    boxes (16-bit; each tail tile EPILOGUE_ALIGN-byte aligned, as persistent_setup places it)."""
    tails = sum(-(-2 * 64 * w * 2 // EPILOGUE_ALIGN) * EPILOGUE_ALIGN for w in epilogue_tails(BN))
    return 2 * CB * 64 * 64 * 2 + tails


def epilogue_boxes(BN: int) -> int:
    """64 x 64 output boxes a consumer stages per epilogue pass: all of its whole boxes up to
    3 (else 2), or 1 where those would leave room for fewer than RING_MIN ring stages."""
    boxes = BN // 64
    CB = boxes if boxes <= 3 else 2
    fits = ring_stages_fit((BM + BN) * 128, _epilogue_bytes(BN, CB)) >= RING_MIN
    return CB if fits else 1


def max_stages(BN: int) -> int:
    """The deepest ring a BN-wide tile fits in a CTA's shared memory beside its epilogue
    tiles (a stage: 128 rows of A and BN of B, 128 bytes each)."""
    return ring_stages_fit((BM + BN) * 128, _epilogue_bytes(BN, epilogue_boxes(BN)))


def tiles(M: int, N: int, BN: int) -> int:
    """The general kernel's output tiles (BM x BN) of an M x N result."""
    return -(-M // BM) * -(-N // BN)


def fill(n_tiles: int, sms: int) -> float:
    """The share of its rounds of SMs a grid of n_tiles tiles keeps busy (wave quantization);
    no tiles (an empty result) leave nothing idle."""
    return n_tiles / (-(-n_tiles // sms) * sms) if n_tiles else 1.0


def general_bn(M: int, N: int, promote: bool, sms: int) -> int:
    """The general kernel's tile width: 256 where 256-wide tiles fill the SMs (bf16 / fp16, fp8
    with fast_accum), else 128.  Where that width's tiles fill under WAVE_FILL of their
    rounds, the multiple of BN_STEP from 128 to 256 (only 128 for promoted fp8, whose overlapped
    partial tiles need it) with the least rounds x width, the time a CTA's rounds take: at
    M = 256, N = 14336, 224-wide tiles make 128 for 132 SMs where 256-wide ones made 112."""
    BN = 256 if not promote and tiles(M, N, 256) >= sms else 128
    if fill(tiles(M, N, BN), sms) >= WAVE_FILL:
        return BN
    return min(range(128, (128 if promote else 256) + 1, BN_STEP),
               key=lambda w: (-(-tiles(M, N, w) // sms) * w, -w))


def decode_columns(M: int, N: int, K: int, dtype: str, sms: int) -> float:
    """The columns (x K) an SM computes on the decode path: its rounds of units times each
    unit's tokens over the splits.  Both paths' CTAs are 128 weight rows wide (BW = BM), so
    this against the general kernel's rounds x BN compares their work."""
    cfg = choose_config(M, N, K, dtype, sms)
    units = unit_tiles(M, N, cfg.MN) * cfg.splits
    return -(-units // sms) * cfg.MN / cfg.splits
