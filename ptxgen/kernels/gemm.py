"""A persistent, warp-specialized Hopper GEMM (sm_90a): D = A @ B^T, fp32 accumulation.

    from ptxgen.kernels import gemm
    d = gemm(a, b)                          # a (M, K) @ b (N, K)^T, as torch's a @ b.T
    y = gemm(x, w)                          # x (..., K): y (..., N), as F.linear(x, w)
    gemm(a8, b8, scale_a=sa, scale_b=sb)    # float8_e4m3fn in, bfloat16 out (torch._scaled_mm)
    gemm(a8, b8, scale_a=sa, scale_b=sb)    # sa (M, K/128), sb (N/128, K/128): block scales
    gemm(a, b, out=d)                       # out: (M, N) of the result's dtype

dtypes: bfloat16 / float16 in, the same dtype out; float8_e4m3fn in, bfloat16 out (scale_a,
scale_b: one-element float32 tensors, optional; or DeepSeek-style block scales, float32
scale_a (M, ceil(K/128)) and scale_b (ceil(N/128), ceil(K/128)), which take
gemm_blockscaled.py's kernel).  Shapes: a (M, K) or (..., K), b (N, K), any M, N, K >= 0
(a K whose rows are not a multiple of 16 bytes is zero-padded: TMA's pitch rule); empty
dimensions give an empty (or, for K = 0, a zero) result.  Also `torch.ops.ptxgen.gemm(a, b)`
(a torch custom op: torch.compile and CUDA graphs).  Needs an sm_90 GPU (the H200).
Speed on the H200 (benchmarks/RESULTS.md, twenty-second session): bf16 8192^3 at 681 TFLOP/s,
1.015x cuBLAS; fp8 (fp32-promoted, cuBLAS's accuracy) 0.996x torch._scaled_mm at 8192^3 and
1.022x at 4096x14336x4096; decode shapes (M <= 128, gemm_small_m.py) 0.955-1.110x cuBLAS.

The kernel (one CTA per SM, 384 threads, every CTA walks the output tiles t = cta, cta + G, ..):
    warpgroup 0     producer (40 registers): thread 0 waits until a ring stage is free and
                    issues two TMA loads (A 128 x BK, B BN x BK) that complete its full barrier
    warpgroups 1,2  consumers (232 registers): each owns 64 rows of the 128 x BN tile, waits
                    for a stage, multiplies it with wgmma m64nBNk16 (gemm_async) and keeps one
                    group in flight: the stage read by the previous group is released after
                    gemm_wait(1).  Epilogue: cast the accumulator to the output dtype into a
                    128B-swizzled shared tile (per 64 x 128 half), fence the async proxy, and
                    one thread stores it with TMA (clipped at the matrix edge).
Ring and tiles come from one SMEMPool: STAGES x (A 16 KiB + B 32 KiB) + 2 x 16 KiB epilogue.
BN may be any multiple of 16 from 64 to 256: the columns past the 64-wide store boxes go out
in a 32- and / or a 16-column box (64- / 32-byte swizzled tiles), so a tile width can be
chosen to fill the SMs' rounds (224-wide tiles make 128 of N = 14336 for 132 SMs).
Tiles are visited in groups of GROUP_M tile rows (the same B columns stay in L2).  A tile
at the edge is zero-filled by TMA on load and clipped on store, so any M, N work; K only
needs a row pitch that is a multiple of 16 bytes (TMA's rule).
"""
import functools
from typing import NamedTuple

import ptxgen as pg
from ptxgen.primitives.tcgen05 import canonical_layout
from ptxgen.target import TMA_ALIGN

from . import _torch
from ._gemm_sm90 import (BM, BN_STEP, CTA_SMEM, GROUP_M, check_cluster_pair,  # noqa: F401
                         consumer_end, cta_end, epilogue_tails, persistent_setup,
                         store_tile, wgmma_consumer)
from ._checks import (ArgumentError, Meta, is_int, meta_of, numel, out_shape, out_tensor,
                      same_device, shares_memory, tensor)
from ._torch import compiling, sm_count, traced
from .gemm_blockscaled import BK as BK_SCALE
from .gemm_blockscaled import SB_COLS, launch_default
from ._gemm_tiles import (WAVE_FILL, decode_columns, epilogue_boxes, fill, general_bn,
                          max_stages, tiles)
from .gemm_small_m import decode_launch, store_back, store_target

_IN = {"bfloat16": "bfloat16", "float16": "float16", "float8_e4m3fn": "bfloat16"}


def make_gemm(dtype="bfloat16", BN=256, STAGES=4, ctas=132, scaled=False, promote=0,
              pingpong=False, overlap=False, cluster=1):
    """The kernel for one configuration; M, N, K are launch-time symbols.  `promote` = P > 0
    (fp8): wgmma accumulates P K-steps (of 128) into a partial tile, which is then added to
    the fp32 accumulator, because Hopper's fp8 wgmma keeps only ~14 mantissa bits of its
    running sum; P = 1 is what cuBLAS does unless use_fast_accum (measured: the same error
    against fp64).  Two 64 x BN fp32 tiles fit the 232 registers for BN <= 192.  `pingpong`:
    the two consumers take turns to issue their wgmmas (wgmma_consumer), so one's additions
    overlap the other's MMAs; the same results.  `overlap` (promote = 1): two partial tiles,
    so a warpgroup adds one while its next wgmma runs; three tiles fit for BN <= 128.
    `cluster` = 2: clusters of two CTAs take 256 x BN tiles (128 rows each) and multicast
    the B tile they share, so each CTA streams half of B from L2 (ctas must be even)."""
    if dtype not in _IN:
        raise ValueError(f"make_gemm: dtype {dtype!r}; it takes {', '.join(_IN)}")
    if not is_int(STAGES) or not 1 <= STAGES <= 8:
        raise ValueError(f"make_gemm: STAGES = {STAGES!r}: 1 to 8 ring stages")
    out_dt = _IN[dtype]
    if not is_int(BN) or BN % BN_STEP or not 64 <= BN <= 256:
        raise ValueError(f"BN = {BN!r}: a multiple of {BN_STEP} from 64 to 256 (64-column store "
                         f"boxes, then 32- and 16-column ones)")
    if promote and BN > 192:
        raise ValueError(f"promote={promote} keeps two 64 x BN fp32 tiles: BN <= 192 fits the "
                         f"consumers' 232 registers, BN = {BN} does not")
    check_cluster_pair(cluster, ctas)
    if overlap and (promote != 1 or pingpong or BN > 128):
        raise ValueError(f"overlap keeps three 64 x BN fp32 tiles of promote=1 without "
                         f"pingpong: BN <= 128 fits the consumers' 232 registers (got "
                         f"promote={promote}, pingpong={pingpong}, BN={BN})")
    elem = pg.dtype(dtype).bits // 8
    BK = 128 // elem                          # one 128-byte swizzle span of K per stage
    M, N, K = pg.var("M"), pg.var("N"), pg.var("K")
    ND = pg.var("ND")                         # D's row length: N, or N padded to 8 (TMA pitch)
    LA = canonical_layout(64, BK, dtype, stages=2 * STAGES)   # [2 * stage + half]
    LB = canonical_layout(BN, BK, dtype, stages=STAGES)
    boxes = BN // 64                          # 64-column TMA store boxes per warpgroup
    CB = epilogue_boxes(BN)                   # boxes per epilogue pass (shared: CB x 8 KiB)
    LC = canonical_layout(64, 64, out_dt, stages=2 * CB)
    LT = tuple((w, canonical_layout(64, w, out_dt, swizzle=f"{2 * w}B", stages=2))
               for w in epilogue_tails(BN))   # the tail boxes' tiles (16-bit: 2w-byte rows)

    def gemm(A: pg.Tensor((M, K), dtype), B: pg.Tensor((N, K), dtype),
             D: pg.Tensor((M, ND), out_dt), SA: pg.Tensor((1,), pg.float32),
             SB: pg.Tensor((1,), pg.float32)):
        tx, As, Bs, Cs, Ts, pipe, mine, nk, tile_origin = persistent_setup(
            A, B, out_dt, BN, BK, CB, STAGES, ctas, LA, LB, LC, cluster, LT=LT)
        with pg.warpgroup_role(range(1, 3)) as c:
            pg.setmaxnreg(232, "inc")
            acc, first_thread, mma_tile = wgmma_consumer(
                pipe, tx, BN, lambda s: As[2 * s + c, 0:64, 0:BK], lambda s: Bs[s, 0:BN, 0:BK],
                promote, (SA, SB) if scaled else None, pingpong_rank=c if pingpong else None,
                overlap=overlap)
            for i in pg.serial(mine):
                m0, n0 = tile_origin(i)
                mma_tile(nk)
                store_tile(D, Cs, acc, c, m0, n0, boxes, CB, first_thread, Ts)
            consumer_end(c, pingpong, first_thread)
        cta_end(cluster)

    name = (f"gemm_sm90_{dtype}_n{BN}_s{STAGES}" + ("_scaled" if scaled else "") +
            (f"_p{promote}" if promote else "") + ("_pp" if pingpong else "") +
            ("_ov" if overlap else "") + (f"_c{cluster}" if cluster > 1 else ""))
    gemm.__name__ = name
    return pg.kernel(gemm, grid=(ctas,), block=(384,),
                     cluster=(cluster, 1, 1) if cluster > 1 else None)


kernel_for = functools.lru_cache(maxsize=None)(make_gemm)     # one kernel per configuration


KERNELS = [make_gemm()]           # what run_all dumps (bf16, BN 256, 4 stages, 132 CTAs)


def dump(dtype: str = "bfloat16", BN: int = 256, STAGES: int = 4, ctas: int = 132,
         scaled: bool = False, promote: int = 0, pingpong: bool = False,
         overlap: bool = False, cluster: int = 1) -> list:
    """`ptxgen dump ptxgen.kernels.gemm --kernel-args dtype=float8_e4m3fn,BN=192,scaled=True,
    promote=1`: the kernel of that configuration."""
    return [kernel_for(dtype, BN, STAGES, ctas, scaled, promote, pingpong, overlap, cluster)]


DTYPES = ("bfloat16", "float16", "float8_e4m3fn")


class GemmPlan(NamedTuple):
    """What the rules decided for one call's metadata: sizes, dtypes, whether out is written
    in place, K padded to TMA's 16-byte pitch (or K), and the knobs the paths read."""
    M: int
    N: int
    K: int
    dtype: str
    out_dtype: str
    direct: bool
    K_pad: int
    fast_accum: bool
    BN: int | None
    STAGES: int | None
    block_scaled: bool = False    # scale_a (M, KB), scale_b (NB, KB): gemm_blockscaled's kernel


def gemm_plan(a: Meta, b: Meta, scale_a: Meta | None = None, scale_b: Meta | None = None,
              out: Meta | None = None, fast_accum: bool = False, BN=None, STAGES=None):
    """The GemmPlan of a (M, K) @ b (N, K)^T, or the ArgumentError naming the argument; the
    rules of `gemm`, over metadata only."""
    tensor("gemm", "a", a, dtypes=DTYPES, dim=2)
    tensor("gemm", "b", b, dtypes=DTYPES, dim=2)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is not None:
            tensor("gemm", name, s, dtypes=("float32",), min_dim=0)
    same_device("gemm", ("a", a), ("b", b), scale_a and ("scale_a", scale_a),
                scale_b and ("scale_b", scale_b))
    if a.dtype != b.dtype:
        raise ArgumentError(f"gemm: a is {a.dtype} but b is {b.dtype}; give both one dtype")
    if a.shape[1] != b.shape[1]:
        raise ArgumentError(f"gemm computes a (M, K) @ b (N, K)^T: b has K = {b.shape[1]}, a "
                            f"has K = {a.shape[1]} (got {a.shape} and {b.shape})")
    scaled = a.dtype.startswith("float8")
    (M, K), N = a.shape, b.shape[0]
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is not None and not scaled:
            raise ArgumentError(f"gemm: {name} scales float8_e4m3fn inputs; a and b are "
                                f"{a.dtype} (drop {name})")
    block = scaled and _block_scales(scale_a, scale_b, M, N, K)
    if block and (fast_accum or BN is not None or STAGES is not None):
        raise ArgumentError("gemm: block scales are applied per 128-wide K step in fp32 by "
                            "gemm_blockscaled's kernel, which takes no fast_accum, BN or "
                            "STAGES (drop them; make_blockscaled builds other configurations)")
    if BN is not None and (not is_int(BN) or BN % BN_STEP or not 64 <= BN <= 256 or
                           scaled and not fast_accum and BN > 192):
        raise ArgumentError(f"gemm: BN = {BN!r}: a multiple of {BN_STEP} from 64 to 256 (192 "
                            f"for float8 without fast_accum: two fp32 tiles must fit the "
                            f"registers)")
    if STAGES is not None and (not is_int(STAGES) or not 1 <= STAGES <= 8):
        raise ArgumentError(f"gemm: STAGES = {STAGES!r}: 1 to 8 ring stages")
    out_dtype = "bfloat16" if scaled else a.dtype
    direct = out is None or out_tensor("gemm", out, (M, N), out_dtype, a.device)
    es = pg.dtype(a.dtype).bits // 8           # bytes per element
    K_pad = -(-K * es // TMA_ALIGN) * TMA_ALIGN // es     # TMA's row pitch rule
    return GemmPlan(M, N, K, a.dtype, out_dtype, direct, K_pad, bool(fast_accum), BN, STAGES,
                    block)


def _block_scales(scale_a: Meta | None, scale_b: Meta | None, M: int, N: int, K: int) -> bool:
    """Whether fp8 scales are DeepSeek-style block scales: scale_a (M, KB) per row of a and
    128-wide K block, scale_b (NB, KB) per 128 x 128 block of b (KB = ceil(K / 128), NB =
    ceil(N / 128)), both given.  Scales of one element are per-tensor (where such a shape is
    also the block shape, M = 1 and N, K <= 128, the two readings are the same product)."""
    scales = {"scale_a": scale_a, "scale_b": scale_b}
    blocks = [name for name, s in scales.items() if s is not None and numel(s.shape) != 1]
    if not blocks:
        return False
    KB, NB = -(-K // BK_SCALE), -(-N // SB_COLS)
    want = {"scale_a": ((M, KB), "row of a"), "scale_b": ((NB, KB), "128 rows of b")}
    for name in blocks + [n for n in want if n not in blocks]:   # a malformed block first
        s, (shape, per) = scales[name], want[name]
        if s is not None and tuple(s.shape) == shape:
            continue
        rule = f"block scales are {shape}: one per {per} and 128-wide K block"
        if name in blocks:
            raise ArgumentError(f"gemm: {name} has shape {tuple(s.shape)}; a per-tensor scale "
                                f"holds one element, and {rule}")
        given = "none" if s is None else "a per-tensor scale"
        raise ArgumentError(f"gemm: {name} is {given} but {blocks[0]} holds block scales; "
                            f"{name}'s {rule}")
    return True


# ---- paths: the first whose predicate accepts a plan computes it --------------------------
_PATHS: list = []        # (name, accepts(plan, device) -> (ok, reason), prepare, run)


def path(name: str, accepts, prepare=None):
    """Register a gemm path.  `accepts(plan, device)` returns (ok, reason); `prepare(plan,
    device)` makes what the path needs for every call of that plan (its kernel: chosen once,
    memoized with the plan); the decorated `run(plan, prepared, a, b, scale_a, scale_b, out)`
    computes into out (contiguous, the result's shape and dtype) and returns it.  Paths
    registered earlier are asked first."""
    def register(run):
        _PATHS.append((name, accepts, prepare, run))
        return run
    return register


def _choose(plan: GemmPlan, device) -> tuple:
    """(name, run, prepared) of the first path that accepts the plan."""
    reasons = []
    for name, accepts, prepare, run in _PATHS:
        ok, why = accepts(plan, device)
        if ok:
            return name, run, prepare(plan, device) if prepare else None
        reasons.append(f"{name}: {why}")
    raise ArgumentError("gemm: no path takes this call: " + "; ".join(reasons))


_ONES: dict = {}


def _unit_scale(device: int):
    """The scale 1.0 on CUDA device `device`, made once per device (not a fill kernel per call);
    one made while a CUDA graph is being captured belongs to that graph and is not kept."""
    t = _ONES.get(device)
    if t is None:
        torch = _torch.torch
        t = torch.ones(1, dtype=torch.float32, device=device)
        if not torch.cuda.is_current_stream_capturing():
            _ONES[device] = t
    return t


def _general_bn(plan: GemmPlan, sms: int) -> int:
    """The general kernel's tile width: the forced one, else general_bn's for the shape."""
    if plan.BN is not None:
        return plan.BN
    return general_bn(plan.M, plan.N, plan.dtype.startswith("float8") and not plan.fast_accum,
                      sms)


def _sm90_kernel(plan: GemmPlan, device):
    """The persistent kernel of a plan: bf16 / fp16 BN 256, or 128 when wide tiles would leave
    SMs idle (small M * N); promoted fp8 BN 128 with two partial tiles overlapped (each
    K-step's wgmma runs while the last one's tile is promoted), which measured faster than
    BN 192 on every shape tried (benchmarks/RESULTS.md).  One CTA per SM."""
    sms = sm_count(device)
    scaled = plan.dtype.startswith("float8")
    promote = 1 if scaled and not plan.fast_accum else 0
    BN = _general_bn(plan, sms)
    STAGES = plan.STAGES or min(4 if BN >= 192 else 5, max_stages(BN))
    if STAGES > max_stages(BN):
        raise ArgumentError(f"gemm: STAGES = {STAGES} with BN = {BN}: the ring ({STAGES} x "
                            f"{(BM + BN) * 128} bytes) and the epilogue tiles need more than "
                            f"the {CTA_SMEM} bytes of shared memory a CTA has; use at most "
                            f"{max_stages(BN)} stages for BN = {BN}")
    overlap = promote == 1 and BN <= 128
    return kernel_for(plan.dtype, BN, STAGES, sms, scaled, promote, False, overlap)


def _padded_k(t, K_pad):
    """t (R, K) copied into zeros (R, K_pad): the extra K columns add nothing to a @ b^T."""
    torch = _torch.torch
    es = t.element_size()
    z = torch.zeros((t.shape[0], K_pad * es), dtype=torch.uint8, device=t.device)
    z.view(t.dtype)[:, :t.shape[1]].copy_(t)
    return z.view(t.dtype)


def _tma_operands(plan: GemmPlan, a, b):
    """a and b as TMA reads them: fresh zero-padded, aligned copies where K breaks the
    16-byte row pitch (plan.K_pad), else tma_ready's."""
    if plan.K_pad != plan.K:
        return _padded_k(a, plan.K_pad), _padded_k(b, plan.K_pad)
    return _torch.tma_ready(a), _torch.tma_ready(b)


def _blockscaled_accepts(plan: GemmPlan, device):
    """Every plan with block scales, and only those: registered first, so the paths after it
    see per-tensor (or no) scales alone."""
    if not plan.block_scaled:
        return False, "no block scales (scale_a (M, K/128) and scale_b (N/128, K/128))"
    return True, ""


@path("blockscaled", _blockscaled_accepts)
def _run_blockscaled(plan: GemmPlan, prepared, a, b, scale_a, scale_b, out):
    """Block scales applied per 128-wide K step in fp32 (gemm_blockscaled.py); the scales
    ride in the TMA ring, transposed (or read in place from column_major_scales' layout)."""
    a, b = _tma_operands(plan, a, b)   # zero K columns add nothing, and keep K's blocks
    return launch_default(a, b, scale_a, scale_b, out)


SMALL_M = 128    # up to here the decode path beats the general kernel on every measured
                 # (N, K) of benchmarks/RESULTS.md's decode series
SMALL_M_MAX = 256   # up to here it does where the general kernel's tiles fill its rounds
                    # poorly (below WAVE_FILL) or give an SM more columns (decode_columns)


def _small_m_accepts(plan: GemmPlan, device):
    """The rules on the plan alone first; the general kernel's wave fill and its work per SM
    against the decode path's (which ask the device's SM count) only for a plan that passes
    them."""
    if plan.M > SMALL_M_MAX:
        return False, f"M = {plan.M} > {SMALL_M_MAX}: the general kernel's tiles fill the SMs"
    if plan.fast_accum:
        return False, "fast_accum: the decode path always promotes fp8 partial sums"
    if plan.BN or plan.STAGES:
        return False, "BN / STAGES name the general kernel's tiles"
    row_bytes = plan.N * pg.dtype(plan.out_dtype).bits // 8      # the output's TMA rows
    if plan.K_pad != plan.K or row_bytes % TMA_ALIGN:
        return False, f"K or N breaks TMA's {TMA_ALIGN}-byte row pitch (the general path pads)"
    if plan.M > SMALL_M:
        sms = sm_count(device)
        BN = _general_bn(plan, sms)
        n_tiles = tiles(plan.M, plan.N, BN)
        if not n_tiles:
            return False, "an empty result: no tiles for either path"
        rounds, share = -(-n_tiles // sms), fill(n_tiles, sms)
        decode = decode_columns(plan.M, plan.N, plan.K, plan.dtype, sms)
        if share >= WAVE_FILL and rounds * BN <= decode:
            return False, (f"M = {plan.M} > {SMALL_M} and the general kernel's {n_tiles} tiles "
                           f"of {BN} columns fill {share:.0%} of {rounds} round(s) of {sms} "
                           f"SMs, {rounds * BN} columns an SM where the decode path's take "
                           f"{decode:g}")
    return True, ""


def _decode_launch(plan: GemmPlan, device):
    return decode_launch(plan.M, plan.N, plan.K, plan.dtype, device)


@path("small_m", _small_m_accepts, prepare=_decode_launch)
def _run_small_m(plan: GemmPlan, launch, a, b, scale_a, scale_b, out):
    """A / B swapped so the tokens sit on wgmma's N, split-K over the SMs (gemm_small_m.py)."""
    a, b = _torch.tma_ready(a), _torch.tma_ready(b)
    d = out if out.data_ptr() % TMA_ALIGN == 0 else out.new_empty(out.shape)   # split-K's sum too
    launch(a, b, d, None if scale_a is None else scale_a.reshape(1),
           None if scale_b is None else scale_b.reshape(1))
    if d is not out:
        out.copy_(d)
    return out


def _sm90_accepts(plan: GemmPlan, device):
    """Every plan the paths registered before it leave (block scales are taken first)."""
    return True, ""


@path("sm90", _sm90_accepts, prepare=_sm90_kernel)
def _run_sm90(plan: GemmPlan, kernel, a, b, scale_a, scale_b, out):
    """The persistent wgmma kernel: any M, N, K (the plan pads K); D rows padded to 8."""
    a, b = _tma_operands(plan, a, b)
    d = store_target(out)
    one = _unit_scale(a.get_device()) if scale_a is None or scale_b is None else None
    kernel(a, b, d, one if scale_a is None else scale_a.reshape(1),
           one if scale_b is None else scale_b.reshape(1))
    return store_back(d, out)


_PLANS: dict = {}


def _meta(t):
    return None if t is None else meta_of(t) if hasattr(t, "is_contiguous") else t


def _plan(a, b, scale_a, scale_b, out, fast_accum, BN, STAGES, key):
    """gemm_plan of the tensors, the result's template (`result_like`) and the path chosen for
    them, memoized under their metadata."""
    p = gemm_plan(_meta(a), _meta(b), _meta(scale_a), _meta(scale_b), _meta(out),
                  fast_accum, BN, STAGES)
    _, run, prepared = _choose(p, a.device)
    torch = _torch.torch
    dtype = torch.bfloat16 if p.out_dtype != p.dtype else a.dtype
    entry = (p, _torch.result_like((p.M, p.N), dtype, a.device), run, prepared)
    if key is not None:
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        _PLANS[key] = entry
    return entry


def gemm(a, b, out=None, *, scale_a=None, scale_b=None, fast_accum=False, BN=None,
         STAGES=None):
    """a (M, K) @ b (N, K)^T on CUDA tensors (a (..., K) gives (..., N), as a @ b.T).
    bfloat16 / float16 give the same dtype; float8_e4m3fn gives bfloat16, times scale_a *
    scale_b (float32 tensors of one element, as torch._scaled_mm takes them), accumulated as
    exactly as cuBLAS's default (each K-step's partial sum promoted to fp32, on 128 x 128
    tiles whose promotion overlaps the next K-step's wgmma) unless `fast_accum` (wgmma's own
    fp8 accumulation, 128 x 256 tiles: cuBLAS's use_fast_accum=True).  Block scales (scale_a
    (M, ceil(K/128)), scale_b (ceil(N/128), ceil(K/128))) go to the block-scaled kernel
    (gemm_blockscaled.py), which takes no fast_accum, BN or STAGES.  `out` (checked: (M, N),
    the result's dtype, a's device) is written and returned.  BN: 256 (128 for promoted fp8),
    or 128 when wide tiles would leave SMs idle (small M * N); where those fill under 90% of
    their rounds of SMs, the multiple of 16 with the least rounds x BN (_general_bn); a
    forced BN (a multiple of 16 from 64 to 256) / STAGES is checked against the rules.
    M <= 128 takes the decode path of gemm_small_m.py (without fast_accum or forced tiles),
    and so does M <= 256 where the general kernel's tiles would fill under 90% of their
    rounds of SMs or give an SM more columns to compute than the decode path's units.
    Inside torch.compile it is torch.ops.ptxgen.gemm."""
    if compiling():
        if _leading(a):
            return _gemm_leading(a, b, out, scale_a, scale_b, fast_accum, BN, STAGES)
        return traced("gemm", (a, b), out, scale_a=scale_a, scale_b=scale_b,
                      fast_accum=fast_accum, BN=BN, STAGES=STAGES)
    try:           # the plan's key: everything the rules read (devices by index: -1 = CPU)
        key = (a.shape, a.dtype, a.get_device(), a.is_contiguous(),
               b.shape, b.dtype, b.get_device(), b.is_contiguous(),
               None if out is None else (out.shape, out.dtype, out.get_device(),
                                         out.is_contiguous()),
               None if scale_a is None else (scale_a.shape, scale_a.dtype,
                                             scale_a.get_device()),
               None if scale_b is None else (scale_b.shape, scale_b.dtype,
                                             scale_b.get_device()),
               fast_accum, BN, STAGES)
    except AttributeError:          # not a tensor: the rules name the argument
        key = None
    entry = _PLANS.get(key) if key is not None else None
    if entry is None:
        if _leading(a):            # (the plans are of 2-D a: this one flattens it first)
            return _gemm_leading(a, b, out, scale_a, scale_b, fast_accum, BN, STAGES)
        entry = _plan(a, b, scale_a, scale_b, out, fast_accum, BN, STAGES, key)
    p, like, run, prepared = entry
    if (a.requires_grad or b.requires_grad) and _torch.differentiable("gemm", out):
        return _torch.torch_ops().gemm(a, b, scale_a, scale_b, fast_accum, BN, STAGES)
    direct = p.direct and out is not None and not shares_memory(out, (a, b, scale_a, scale_b))
    res = out if direct else _torch.empty_like(like)
    if p.M and p.N:
        if p.K == 0:
            res.zero_()
        else:
            run(p, prepared, a, b, scale_a, scale_b, res)
    if out is not None and not direct:
        out.copy_(res)
        return out
    return res


def _leading(a) -> bool:
    """Whether `a` is a tensor with other than two dimensions, (..., K)."""
    return hasattr(a, "dim") and a.dim() != 2


def _gemm_leading(a, b, out, scale_a, scale_b, fast_accum, BN, STAGES):
    """a (..., K) @ b (N, K)^T as torch's `a @ b.T` (and F.linear) give it, (..., N): the
    2-D gemm of a's rows, a.reshape(M, K) (a view where a's strides allow).  Block scales of
    such an a are (..., ceil(K/128)) and flatten with it.  `out`, checked as (..., N), is
    written through its (M, N) view, or through a copy where it is not contiguous."""
    if not a.dim():
        raise ArgumentError("gemm: a is a 0-d tensor; it needs at least 1 dimension (shape "
                            "(..., K))")
    lead, K = tuple(a.shape[:-1]), a.shape[-1]
    M = numel(lead)
    if scale_a is not None and hasattr(scale_a, "dim") and scale_a.dim() == a.dim() and \
            scale_a.numel() != 1 and tuple(scale_a.shape[:-1]) == lead:
        scale_a = scale_a.reshape(M, scale_a.shape[-1])
    flat, aside = out, False       # (an out that is no tensor: the 2-D rules refuse it)
    if hasattr(out, "dim") and hasattr(b, "dim") and b.dim() == 2:
        shape = (*lead, b.shape[0])
        out_shape("gemm", out, shape)
        aside = not out.is_contiguous()     # (as the 2-D gemm would write such an out)
        flat = out.new_empty((M, shape[-1])) if aside else out.view(M, shape[-1])
    d = gemm(a.reshape(M, K), b, flat, scale_a=scale_a, scale_b=scale_b,
             fast_accum=fast_accum, BN=BN, STAGES=STAGES)
    if out is None:
        return d.view(*lead, d.shape[-1])
    if aside:
        out.copy_(d.view(out.shape))
    return out
