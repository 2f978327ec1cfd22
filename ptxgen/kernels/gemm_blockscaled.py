"""Block-scaled fp8 GEMM on Hopper (sm_90a), DeepSeek-style: D = (A * scale_a) @ (B * scale_b)^T.

    A (M, K), B (N, K) float8_e4m3fn row-major;  D (M, N) bfloat16 row-major
    scale_a (M, ceil(K/128)) float32:            one scale per row and 128-wide K block
    scale_b (ceil(N/128), ceil(K/128)) float32:  one scale per 128 x 128 block of B

D[m, n] = sum over K blocks kb of scale_a[m, kb] * scale_b[n // 128, kb] * (A[m, kb] . B[n, kb]).
The structure is ptxgen/kernels/gemm.py's persistent warp-specialized kernel (a TMA producer
warpgroup, two consumer warpgroups of 64 rows, 128 x 128 tiles so that a tile's columns share
one scale_b block; 128 x 192 tiles take two), with BK = 128: one K-step is one scale
block.  Each step's wgmma sum goes into a fresh fp32 tile `part` (Hopper's fp8 wgmma keeps
~14 mantissa bits of its running sum, so it is never carried across steps), then the
consumers promote it in fp32 on the CUDA cores: acc += part * (scale_a[row] * scale_b).
A thread of the wgmma accumulator fragment holds two rows (16 * warp + lane / 4 and 8
below) and, per 8 columns j, registers 4j + 2h + e of row h; the next step's scales are
loaded from global (L2) while this step multiplies, so their latency hides behind the next
wgmma, or (scales="ring") they ride in the TMA ring with A and B and are read from shared
memory.  Two other schedules of the same sums (`make_blockscaled(pingpong=True)` /
`(overlap=True)`) keep the tensor cores busy while the CUDA cores promote: the consumers
taking turns, or two partial tiles per consumer.

    make_blockscaled(STAGES, ctas, pingpong, overlap, cluster, scales, BN)
                                                        the kernel
    ring_scales(scale_a, scale_b)                       a scales="ring" kernel's scale operands
    column_major_scales(x)                              scales laid out to be read in place
    gemm_blockscaled(a, b, scale_a, scale_b, out=None)  torch tensors: DEFAULT_CONFIG's kernel

`ptxgen.kernels.gemm(a, b, scale_a=, scale_b=)` launches the same kernel for block-shaped
scales, with gemm's plan cache, K padding and torch op (torch.ops.ptxgen.gemm).

Speed (benchmarks/RESULTS.md), of per-tensor torch._scaled_mm's time at 8192^3 /
4096x14336x4096 in benchmarks/gemm.py's rows: on the H200 (twenty-second session)
gemm_blockscaled 0.837x / 0.837x with contiguous scales (transposed on each call) and
0.848x / 0.854x with column-major ones; on an H100 (twentieth session) the kernel alone
0.897x / 0.877x.
"""
import functools

import ptxgen as pg
from ptxgen.primitives.tcgen05 import canonical_layout
from ptxgen.target import TMA_ALIGN

from ._gemm_sm90 import (BM, check_cluster_pair, consumer_end, cta_end, issue_wgmma,
                         overlapped_k_steps, persistent_setup, pingpong_start, store_tile)
from ._torch import compiling, sm_count, traced
from .gemm_small_m import GemmInputError, cuda_tensors, store_back, store_target

BK = 128                          # fp8 bytes = one 128-byte swizzle span = one scale block
SB_COLS = 128                     # the columns of B one scale_b value covers
SCALE_ROW_UNIT = TMA_ALIGN // 4   # fp32 scales per row-pitch unit of TMA


class _RingScales:
    """scales="ring": the scales of a stage's K block ride in the TMA ring with A and B (the
    way DeepGEMM feeds them), so the consumers read them from shared memory after the
    stage's barrier instead of waiting on L2 loads.  Per stage, the producer loads the 128
    scale_a values of the tile's rows, contiguous in SAT (scale_a transposed: (KB, M padded
    to SCALE_ROW_UNIT), see ring_scales), and one or two TMA units of SBT (scale_b
    transposed, (KB, NB padded to SCALE_ROW_UNIT)) from the unit of block nb on, which hold
    the tile's column block nb (and nb + 1)."""
    arrivals = 2

    def __init__(self, SAT, SBT, stages, blocks):
        self.SAT, self.SBT, self.stages, self.blocks = SAT, SBT, stages, blocks

    def alloc(self, pool):
        self.SAs = pool.alloc((self.stages, 1, BM), "float32", align=128, name="SA_ring")
        # SCALE_ROW_UNIT (or two) used of 32 per stage: a TMA destination starts on a 128-byte
        # boundary
        self.SBs = pool.alloc((self.stages, 1, 32), "float32", align=128, name="SB_ring")

    def load(self, s, m0, n0, k, mbar):
        # the whole TMA units that hold column blocks nb (and nb + 1)
        U = SCALE_ROW_UNIT
        nb4, w = pg.let(n0 // SB_COLS // U * U), U * self.blocks
        pg.tile.thread.copy_async(self.SAs[s:s + 1, 0:1, 0:BM], self.SAT[k:k + 1, m0:m0 + BM],
                                  mbar=mbar)
        pg.tile.thread.copy_async(self.SBs[s:s + 1, 0:1, 0:w], self.SBT[k:k + 1, nb4:nb4 + w],
                                  mbar=mbar)

    def factors(self, s, c, row, nb):
        """The scales of consumer c's rows `row` and row + 8 times scale_b of column block
        nb (and of nb + 1), in stage s's K block: (f0, f1) per block."""
        sa = [self.SAs[s, 0, 64 * c + row + 8 * h] for h in range(2)]
        return [[pg.let(sa[h] * self.SBs[s, 0, nb % SCALE_ROW_UNIT + b]) for h in range(2)]
                for b in range(self.blocks)]


def make_blockscaled(STAGES=5, ctas=132, pingpong=False, overlap=False, cluster=1,
                     scales="global", BN=128):
    """The kernel; M, N, K are launch-time symbols (KB = ceil(K / 128), NB = ceil(N / 128)).
    Three schedules of the same sums, in the same order (so the same bits):
    default: each step's wgmma, then its promotion, in turn;
    pingpong: the two consumers take turns to issue their wgmmas, so one's scaled additions
    overlap the other's MMAs;
    overlap: two partial tiles; step k + 1's wgmma is issued before step k's tile is promoted,
    so a warpgroup's own promotion runs beside its next MMA (64 more registers a thread).
    cluster = 2: clusters of two CTAs share their B tile by multicast (gemm.make_gemm).
    scales: "global": each consumer thread loads the next K-step's scales from L2 while this
    step multiplies (the kernel takes scale_a (M, KB) and scale_b (NB, KB)); "ring": they ride
    in the TMA ring (_RingScales; the kernel takes ring_scales' transposed copies).
    BN: the tile's columns, 64, 128 or 192.  A 192-wide tile (n0 a multiple of 64) spans two
    scale_b blocks, the first 128 or 64 of its columns in block n0 // 128: the promotion
    takes each 8-column group's own factor (two code paths on n0 % 128); its two fp32 tiles
    fill the consumers' registers, so no overlap, and the ring holds at most 4 stages."""
    if scales not in ("global", "ring"):
        raise ValueError(f"make_blockscaled: scales={scales!r}: \"global\" or \"ring\"")
    if BN not in (64, 128, 192):
        raise ValueError(f"make_blockscaled: BN={BN!r}: 64, 128 or 192 columns")
    if overlap and BN > 128:
        raise ValueError(f"make_blockscaled: overlap keeps three 64 x BN fp32 tiles: BN <= 128 "
                         f"fits the consumers' 232 registers, BN = {BN} does not")
    blocks = 2 if BN > SB_COLS else 1          # scale_b blocks a tile's columns touch
    if pingpong and overlap:
        raise ValueError("make_blockscaled: pingpong and overlap are two schedules; pick one")
    check_cluster_pair(cluster, ctas)
    dtype, out_dt = "float8_e4m3fn", "bfloat16"
    M, N, K = pg.var("M"), pg.var("N"), pg.var("K")
    ND, KB, NB = pg.var("ND"), pg.var("KB"), pg.var("NB")
    ring = scales == "ring"
    MP, NBP = pg.var("MP"), pg.var("NBP")    # ring: M and NB padded to SCALE_ROW_UNIT
    sa_shape, sb_shape = ((KB, MP), (KB, NBP)) if ring else ((M, KB), (NB, KB))
    LA = canonical_layout(64, BK, dtype, stages=2 * STAGES)
    LB = canonical_layout(BN, BK, dtype, stages=STAGES)
    CB = BN // 64
    LC = canonical_layout(64, 64, out_dt, stages=2 * CB)

    def gemm(A: pg.Tensor((M, K), dtype), B: pg.Tensor((N, K), dtype),
             D: pg.Tensor((M, ND), out_dt), SA: pg.Tensor(sa_shape, "float32"),
             SB: pg.Tensor(sb_shape, "float32")):
        extra = _RingScales(SA, SB, STAGES, blocks) if ring else None
        tx, As, Bs, Cs, _, pipe, mine, nk, tile_origin = persistent_setup(
            A, B, out_dt, BN, BK, CB, STAGES, ctas, LA, LB, LC, cluster, extra)
        with pg.warpgroup_role(range(1, 3)) as c:
            pg.setmaxnreg(232, "inc")
            cons = pipe.consumer(scope="warpgroup")
            done = pipe.consumer(scope="warpgroup") if overlap else cons   # releases
            wg = pg.tile.warpgroup
            acc = wg.mma_accumulator((64, BN), "float32")
            part = wg.mma_accumulator((64, BN), "float32")
            part2 = wg.mma_accumulator((64, BN), "float32") if overlap else None
            first_thread = tx % 128 == 0
            t = tx % 128
            row = pg.let(16 * (t // 32) + t % 32 // 4)   # this thread's rows: row, row + 8
            av, pv = acc.local(), part.local()   # register 4j + 2h + e: row h, column pair j
            pv2 = part2.local() if overlap else None

            # global: the next step's scale_a (rows h = 0, 1) and scale_b (blocks b)
            nxt = None if ring else [pg.local_scalar("float32") for _ in range(2 + blocks)]
            if pingpong:
                pingpong_start(c)

            def issue(part):
                """Start the next ring stage's wgmma into `part`."""
                issue_wgmma(cons, part, lambda s: As[2 * s + c, 0:64, 0:BK],
                            lambda s: Bs[s, 0:BN, 0:BK], rank=c if pingpong else None)
                if overlap:
                    cons.advance()

            def promote(pv, fs, lo_groups):
                """acc += pv * (scale_a[row] * scale_b), rows h = 0, 1 (pv: a partial tile's
                registers); fs[b][h]: the factor of scale_b block b, which 8-column groups
                j >= lo_groups take."""
                for j in range(BN // 8):
                    for h in range(2):
                        q, f = 4 * j + 2 * h, fs[int(j >= lo_groups)][h]
                        pg.tile.thread.fma(av[q:q + 2], pv[q:q + 2], f, av[q:q + 2])

            def promote_tile(pv, fs, n0):
                if blocks == 1:
                    promote(pv, fs, BN // 8)
                else:       # block n0 // 128 holds the first 128 - n0 % 128 columns
                    with pg.if_(n0 % SB_COLS == 0):
                        promote(pv, fs, SB_COLS // 8)
                    with pg.else_():
                        promote(pv, fs, (SB_COLS - 64) // 8)

            for i in pg.serial(mine):
                m0, n0 = tile_origin(i)
                if not ring:    # the rows whose scale_a this thread loads; past M: any valid
                    r0 = pg.let(pg.min(m0 + 64 * c + row, M - 1))
                    r1 = pg.let(pg.min(m0 + 64 * c + row + 8, M - 1))
                nb = pg.let(n0 // SB_COLS)
                wg.zero(acc)

                def load_scales(k):
                    if not ring:
                        sbs = [SB[nb, k]] + ([SB[pg.min(nb + 1, NB - 1), k]] if blocks > 1
                                             else [])
                        for v, x in zip(nxt, [SA[r0, k], SA[r1, k]] + sbs):
                            v.set(x)

                def step(k, p, next_p=None, own=False):
                    """K-step k: its wgmma into the partial tile p if `own` (else it is in
                    flight; with overlap the next step's goes into next_p), then its scales,
                    the next step's scale loads (in flight until the next step needs them)
                    and p (k's product) promoted into acc.  The scales come after the wgmma
                    issue: before it, ptxas builds the overlapped schedule's wgmma
                    descriptors in vector registers (R2UR per operand) instead of on the
                    uniform datapath (sm_90a SASS, benchmarks/RESULTS.md)."""
                    if own:
                        issue(p)
                    if next_p is not None:
                        issue(next_p)
                    if ring:     # k's stage (held until done releases it), read under the MMA
                        factor = extra.factors(done.stage, c, row, nb)
                    wg.gemm_wait(0 if next_p is None else 1)   # groups finish in order: k's
                    if not ring:
                        factor = [[pg.let(nxt[h] * nxt[2 + b]) for h in range(2)]
                              for b in range(blocks)]
                        load_scales(pg.min(k + 1, nk - 1))
                    done.release()
                    promote_tile(pv if p is part else pv2, factor, n0)

                load_scales(0)
                if not overlap:
                    for k in pg.serial(nk):
                        step(k, part, own=True)
                else:
                    overlapped_k_steps(nk, issue, step, part, part2)
                store_tile(D, Cs, acc, c, m0, n0, CB, CB, first_thread)
            consumer_end(c, pingpong, first_thread)
        cta_end(cluster)

    gemm.__name__ = (f"gemm_blockscaled_fp8_s{STAGES}" + ("_pp" if pingpong else "")
                     + ("_ov" if overlap else "") + (f"_c{cluster}" if cluster > 1 else "")
                     + ("_ring" if ring else "") + (f"_n{BN}" if BN != 128 else ""))
    return pg.kernel(gemm, grid=(ctas,), block=(384,),
                     cluster=(cluster, 1, 1) if cluster > 1 else None)


kernel_for = functools.lru_cache(maxsize=None)(make_blockscaled)

# gemm_blockscaled's kernel (STAGES, pingpong, overlap, cluster, scales, BN; ctas: the SMs):
# 128 x 192 tiles with the scales in the TMA ring, the fastest schedule measured
# (benchmarks/RESULTS-archive.md, seventeenth session)
DEFAULT_CONFIG = (4, False, False, 1, "ring", 192)


def dump(STAGES: int = DEFAULT_CONFIG[0], ctas: int = 132, pingpong: bool = DEFAULT_CONFIG[1],
         overlap: bool = DEFAULT_CONFIG[2], cluster: int = DEFAULT_CONFIG[3],
         scales: str = DEFAULT_CONFIG[4], BN: int = DEFAULT_CONFIG[5]) -> list:
    """`ptxgen dump ptxgen.kernels.gemm_blockscaled [--kernel-args scales=global,BN=128]`: the
    kernel; by default the one gemm_blockscaled launches (DEFAULT_CONFIG)."""
    return [make_blockscaled(STAGES, ctas, pingpong, overlap, cluster, scales, BN)]


def ring_scales(scale_a, scale_b):
    """The scale tensors of a scales="ring" kernel, from gemm_blockscaled's scale_a (M, KB) and
    scale_b (NB, KB): each transposed, its rows padded with zeros to a multiple of
    SCALE_ROW_UNIT (TMA's row pitch), so that a K block's scales of 128 rows are 512
    contiguous bytes.  A scale tensor already stored that way (column_major_scales) is used in
    place."""
    def transposed(x):
        held = _column_major_storage(x)
        return held if held is not None else _padded_transpose(x)
    return transposed(scale_a), transposed(scale_b)


def _padded_transpose(x):
    """x (rows, KB) transposed into zeros (KB, rows padded to a multiple of SCALE_ROW_UNIT)."""
    rows, kb = x.shape
    out = x.new_zeros((kb, -(-rows // SCALE_ROW_UNIT) * SCALE_ROW_UNIT))
    out[:, :rows] = x.t()
    return out


def column_major_scales(x):
    """x (rows, KB) float32 stored column-major with its columns padded to a multiple of
    SCALE_ROW_UNIT rows, the layout DeepGEMM takes its scales in: gemm_blockscaled then reads
    it without the per-call transposition (a (rows, KB) view of a zero-padded (KB, rows
    padded) tensor)."""
    return _padded_transpose(x).t()[:x.shape[0]]


def _column_major_storage(x):
    """The (KB, rows padded) tensor a column-major (rows, KB) scale view reads from, when its
    storage holds that whole tensor with TMA's pitch and start; else None (copy it)."""
    rows, kb = x.shape
    pitch = x.stride(1)
    if x.stride(0) != 1 or kb < 2 or pitch < rows or pitch % SCALE_ROW_UNIT or \
            x.data_ptr() % TMA_ALIGN:
        return None
    if (x.storage_offset() + kb * pitch) * 4 > x.untyped_storage().nbytes():
        return None
    return x.as_strided((kb, pitch), (pitch, 1))


def launch_default(a, b, scale_a, scale_b, out):
    """DEFAULT_CONFIG's kernel on (M, K) a and b that TMA reads as they are, the scales as
    ring_scales lays them out; out (M, N) bfloat16, contiguous (stored through a row-padded
    tile where N is not a multiple of 8).  gemm_blockscaled's launch, and gemm's for block
    scales."""
    stages, *rest = DEFAULT_CONFIG
    d = store_target(out)
    kernel_for(stages, sm_count(a.device), *rest)(a, b, d, *ring_scales(scale_a, scale_b))
    return store_back(d, out)


def gemm_blockscaled(a, b, scale_a, scale_b, out=None):
    """(a * scale_a) @ (b * scale_b)^T for float8_e4m3fn a (M, K), b (N, K) on one CUDA device,
    scale_a (M, ceil(K/128)) and scale_b (ceil(N/128), ceil(K/128)) float32, contiguous
    (transposed for the kernel on each call) or in column_major_scales' layout (read in
    place); bfloat16 out (M, N).  The scales apply per 128-wide K block, in fp32.  Inside
    torch.compile it is torch.ops.ptxgen.gemm with these block scales (gemm's rules)."""
    if compiling():
        return traced("gemm", (a, b), out, scale_a=scale_a, scale_b=scale_b)
    import torch
    named = (("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b))
    cuda_tensors("gemm_blockscaled", *named)
    for name, x in named:
        scale = name.startswith("scale")
        if x.dim() != 2 or not (x.is_contiguous() or scale and
                                 _column_major_storage(x) is not None):
            raise GemmInputError(f"{name}: a contiguous 2-D tensor"
                                 + (" (or column_major_scales' layout)" if scale
                                    else "") + f", got shape {tuple(x.shape)}, strides "
                                 f"{tuple(x.stride()) if x.dim() else ()}")
    if a.dtype != torch.float8_e4m3fn or b.dtype != torch.float8_e4m3fn:
        raise GemmInputError(f"a and b: float8_e4m3fn, got {a.dtype} and {b.dtype}")
    (M, K), N = a.shape, b.shape[0]
    if b.shape[1] != K:
        raise GemmInputError(f"a (M, K) @ b (N, K)^T: got {tuple(a.shape)} and "
                             f"{tuple(b.shape)}")
    if K % TMA_ALIGN:                           # 1-byte elements
        raise GemmInputError(f"K = {K}: a row of {K} bytes; TMA needs row pitches that are "
                             f"multiples of {TMA_ALIGN} bytes (pad K to a multiple of "
                             f"{TMA_ALIGN})")
    KB, NB = -(-K // 128), -(-N // 128)
    for name, x, want in (("scale_a", scale_a, (M, KB)), ("scale_b", scale_b, (NB, KB))):
        if x.dtype != torch.float32 or tuple(x.shape) != want:
            raise GemmInputError(f"{name}: float32 of shape {want} (one scale per "
                                 f"{'row' if name == 'scale_a' else '128 rows'} and 128-wide "
                                 f"K block), got {x.dtype} of shape {tuple(x.shape)}")
    if out is None:
        out = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    elif (not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N)
          or out.dtype != torch.bfloat16 or not out.is_contiguous() or out.device != a.device):
        raise GemmInputError(f"out: a contiguous ({M}, {N}) bfloat16 tensor on {a.device}")
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.zero_()
    return launch_default(a, b, scale_a, scale_b, out)
