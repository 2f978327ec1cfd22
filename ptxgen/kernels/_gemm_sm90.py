"""The pieces the persistent, warp-specialized Hopper GEMMs (sm_90a) share: gemm.py's general
kernel, gemm_blockscaled.py and the decode kernel of gemm_small_m.py build from them, so a fix
to the schedule, the producer, the consumers' K loop or the epilogue reaches all three.

Each piece traces into the kernel that calls it, and the variable names here are the names
the PTX comments show (a traced name is the one on the left of its line), so keep them.
"""
from typing import NamedTuple

import ptxgen as pg
from ptxgen.target import SMEM_LIMITS

BM = 128                 # CTA tile rows: two consumer warpgroups x 64
GROUP_M = 8              # tile rows per rasterization group
TURN = 10                # named barriers 10, 11: the ping-pong consumers' turns to issue
CTA_SMEM = SMEM_LIMITS[90][1]   # an sm_90 CTA's dynamic shared memory (the target table)
SMEM_RESERVE = 1024      # what a ring's barriers may take


TAIL_WIDTHS = (32, 16)   # the epilogue's tail boxes (columns; 64- and 32-byte swizzled rows)
BN_STEP = TAIL_WIDTHS[-1]   # so the general kernel's tile width is a multiple of this
EPILOGUE_ALIGN = 1024    # where the epilogue's tiles start (a swizzle pattern's whole repeat)


def epilogue_tails(BN: int) -> tuple:
    """The store boxes past a BN-wide tile's whole 64-column boxes (BN a multiple of
    BN_STEP): a 32- and / or a 16-column one, each with the 64- or 32-byte swizzle its rows
    span.  They let BN take any multiple of BN_STEP, so a tile count can be fitted to the
    SMs."""
    return tuple(w for w in TAIL_WIDTHS if BN % 64 & w)


def ring_stages_fit(stage_bytes: int, epilogue_bytes: int) -> int:
    """How many ring stages of `stage_bytes` an sm_90 CTA's shared memory holds beside
    `epilogue_bytes` of epilogue staging and SMEM_RESERVE."""
    return (CTA_SMEM - epilogue_bytes - SMEM_RESERVE) // stage_bytes


def check_cluster_pair(cluster, ctas):
    """The clusters the persistent GEMMs support: none (1) or pairs of CTAs (2, ctas even)."""
    if cluster not in (1, 2) or ctas % cluster:
        raise ValueError(f"cluster={cluster}: 1, or 2 with an even number of CTAs (got "
                         f"ctas={ctas})")


def persistent_tiles(cta, ctas, M, N, K, BN, BK, cluster=1, rank=None):
    """The persistent schedule of the Hopper GEMMs: (this CTA's tile count, K-steps, and
    tile_origin(i) -> (m0, n0) of its i-th tile).  CTA `cta` of `ctas` takes tiles cta,
    cta + ctas, ..., visited GROUP_M tile rows at a time so the same B columns stay in L2.
    cluster = 2 (two CTAs, `rank` 0 or 1): the cluster takes a 2 BM x BN tile, of
    which CTA `rank` computes rows rank * BM.. (both read the same B columns)."""
    if cluster == 1:
        unit, units, rows_h = cta, ctas, BM
    else:     # the cluster's index among the clusters, and its 2 BM-row tiles
        unit, units, rows_h = pg.let(cta // cluster), ctas // cluster, BM * cluster
    tiles_m = pg.let((M + rows_h - 1) // rows_h)
    tiles_n = pg.let((N + BN - 1) // BN)
    nk = pg.let((K + BK - 1) // BK)
    mine = pg.let((tiles_m * tiles_n - unit + units - 1) // units)
    per_group = pg.let(GROUP_M * tiles_n)

    def tile_origin(i):
        t = pg.let(unit + i * units)
        first = pg.let(t // per_group * GROUP_M)
        rows = pg.let(pg.min(tiles_m - first, GROUP_M))
        r = pg.let(t % per_group)
        m0 = (first + r % rows) * rows_h
        return pg.let(m0 if cluster == 1 else m0 + rank * BM), pg.let(r // rows * BN)
    return mine, nk, tile_origin


def tma_producer(tx, pipe, mine, nk, tile_origin, A, B, As, Bs, BN, BK, cluster=1, rank=None,
                 extra=None):
    """Warpgroup 0's thread 0: per tile and K-step, wait for a free ring stage and issue
    the TMA loads of A (two 64-row halves) and B, three arrivals on the stage's barrier.
    cluster = 2: CTA `rank` loads rows rank * BN / 2.. of the B tile the cluster shares and
    multicasts them into both CTAs' stage, so each CTA reads half of B from L2.
    extra: more loads of the same stage, on the same barrier (persistent_setup)."""
    with pg.if_(tx == 0):
        prod = pipe.producer()
        for i in pg.serial(mine):
            m0, n0 = tile_origin(i)
            for k in pg.serial(nk):
                k0 = pg.let(k * BK)
                s = prod.stage
                prod.acquire()
                for h in range(2):
                    pg.tile.thread.copy_async(As[2 * s + h:2 * s + h + 1, 0:64, 0:BK],
                                              A[m0 + 64 * h:m0 + 64 * h + 64, k0:k0 + BK],
                                              mbar=prod.full)
                if cluster == 1:
                    pg.tile.thread.copy_async(Bs[s:s + 1, 0:BN, 0:BK],
                                              B[n0:n0 + BN, k0:k0 + BK], mbar=prod.full)
                else:
                    h = BN // cluster
                    for q in range(cluster):       # static slices: one branch per rank
                        with pg.if_(rank == q):
                            pg.tile.thread.copy_async(
                                Bs[s:s + 1, q * h:q * h + h, 0:BK],
                                B[n0 + q * h:n0 + q * h + h, k0:k0 + BK], mbar=prod.full,
                                multicast=(1 << cluster) - 1)
                if extra is not None:
                    extra.load(s, m0, n0, k, prod.full)
                prod.commit()


class Persistent(NamedTuple):
    """What persistent_setup hands the consumers."""
    tx: object           # the thread index (384 threads)
    As: object           # the ring's A tiles, [2 * stage + half] (64 x BK each)
    Bs: object           # the ring's B tiles, [stage] (BN x BK)
    Cs: object           # the epilogue tiles, [CB * consumer + box] (64 x 64 of out_dt)
    Ts: tuple            # the tail boxes' tiles, [consumer] (64 x w), w in epilogue_tails
    pipe: object         # the ring's pg.Pipeline
    mine: object         # this CTA's tile count
    nk: object           # K-steps per tile
    tile_origin: object  # i -> (m0, n0) of this CTA's i-th tile


def persistent_setup(A, B, out_dt, BN, BK, CB, STAGES, ctas, LA, LB, LC,
                     cluster=1, extra=None, LT=()) -> Persistent:
    """The start of a persistent Hopper GEMM, up to its consumers: 384 threads, one
    shared-memory pool for the ring (STAGES stages of A 128 x BK and B BN x BK) and the
    epilogue tiles (CB 64 x 64 boxes per consumer warpgroup), the tile schedule, and warpgroup
    0 traced as the TMA producer.  LA, LB, LC: the tiles' layouts (made with the kernel).
    cluster = 2 (a kernel declared with cluster=(2, 1, 1)): the two CTAs of a cluster take
    tiles one above the other and share their B tile by multicast (tma_producer); the
    kernel must end with pg.cluster_sync() (see pg.Pipeline's cluster_ctas).  extra: what
    rides in each ring stage beside A and B (block scales, say): `extra.alloc(pool)` takes its
    shared memory before the pool is committed, `extra.load(s, m0, n0, k, mbar)` issues its
    TMA loads of stage s (tile origin m0, n0, K-step k) on the stage's full barrier,
    `extra.arrivals` of them.  LT: ((w, layout), ...) of the tail boxes (epilogue_tails), a
    64 x w tile of them per consumer."""
    (M, K), N = A.shape, B.shape[0]
    dtype = A.dtype
    tx = pg.thread_id(384)
    cta = pg.cta_id(ctas)
    pool = pg.SMEMPool()
    As = pool.alloc((2 * STAGES, 64, BK), dtype, align=1024, layout=LA)
    Bs = pool.alloc((STAGES, BN, BK), dtype, align=1024, layout=LB)
    Cs = pool.alloc((2 * CB, 64, 64), out_dt, align=EPILOGUE_ALIGN, layout=LC)
    Ts = tuple(pool.alloc((2, 64, w), out_dt, align=EPILOGUE_ALIGN, layout=lay, name=f"Ts{w}")
               for w, lay in LT)
    if extra is not None:
        extra.alloc(pool)
    pipe = pg.Pipeline(pool, stages=STAGES, consumers=2,
                       producer_arrivals=3 + (extra.arrivals if extra is not None else 0),
                       cluster_ctas=cluster)
    rank = pg.cta_rank_in_cluster() if cluster > 1 else None
    pool.commit()
    pipe.init()
    mine, nk, tile_origin = persistent_tiles(cta, ctas, M, N, K, BN, BK, cluster, rank)
    with pg.warpgroup_role(0):
        pg.setmaxnreg(40, "dec")
        tma_producer(tx, pipe, mine, nk, tile_origin, A, B, As, Bs, BN, BK, cluster, rank,
                     extra)
    return Persistent(tx, As, Bs, Cs, Ts, pipe, mine, nk, tile_origin)


def issue_wgmma(cons, d, a_of, b_of, accumulate=False, rank=None):
    """Wait for the consumer's ring stage s and start d (+)= a_of(s) @ b_of(s)^T; rank (0 or
    1, ping-pong): only in this warpgroup's turn, which is then handed over."""
    s = cons.uniform_stage
    cons.wait()
    if rank is not None:
        take_turn(rank)
    pg.tile.warpgroup.gemm_async(d, a_of(s), b_of(s), accumulate=accumulate)
    if rank is not None:
        hand_turn(rank)


def wgmma_k_step(cons, done, k, d, a_of, b_of, accumulate, rank=None):
    """One K-step of a consumer warpgroup: wait for the ring stage s, d (+)= a_of(s) @
    b_of(s)^T with one wgmma group left in flight, and once the previous step's group is done
    release its stage (`done` is the consumer position one stage behind `cons`).  rank (0 or
    1, ping-pong): issue the wgmma only in this warpgroup's turn, then hand the turn over."""
    issue_wgmma(cons, d, a_of, b_of, accumulate, rank)
    cons.advance()
    pg.tile.warpgroup.gemm_wait(1)
    with pg.if_(k > 0):
        done.release()


def wgmma_consumer(pipe, tx, n, a_of, b_of, promote=0, scale=None, each_step=False,
                   pingpong_rank=None, overlap=False):
    """A consumer warpgroup of the general and the decode GEMM, traced at the start of its
    warpgroup_role (after setmaxnreg): its two ring positions and its 64 x n fp32 accumulator.
    Returns (acc, first_thread, mma_tile); mma_tile(nk) traces one tile's nk K-steps of
    acc = a_of(s) @ b_of(s)^T over the ring stages s, waits for the last wgmma group, releases
    its stage and multiplies acc by scale = (SA, SB) (per-tensor, fp8: SA[0] * SB[0]).

    promote = P > 0 (fp8): wgmma sums P K-steps into a second tile `part`, which is then added
    to acc, because Hopper's fp8 wgmma keeps only ~14 mantissa bits of its running sum.
    each_step (the decode kernel, P = 1): add after every step with no traced test; the same
    sums as P = 1, in the PTX that kernel has always had.

    pingpong_rank = c (this consumer's rank, 0 or 1): the two consumers take turns to issue
    their K-steps' wgmmas (warpgroup 0 first), so one adds its partial tile into acc while
    the other's wgmma holds the tensor cores; the caller ends with pingpong_end(c).  The same
    sums in the same order: only when each warpgroup issues changes.

    overlap (promote = 1): two partial tiles; K-step k + 1's wgmma is issued before step k's
    tile is added to acc, so the addition runs beside the next MMA (a third 64 x n tile)."""
    if overlap and (promote != 1 or each_step or pingpong_rank is not None):
        raise ValueError("wgmma_consumer: overlap alternates two partial tiles of promote=1 "
                         "(not each_step, not ping-pong)")
    cons = pipe.consumer(scope="warpgroup")
    done = pipe.consumer(scope="warpgroup")       # one stage behind: what gets released
    acc = pg.tile.warpgroup.mma_accumulator((64, n), "float32")
    part = pg.tile.warpgroup.mma_accumulator((64, n), "float32") if promote else acc
    part2 = pg.tile.warpgroup.mma_accumulator((64, n), "float32") if overlap else None
    first_thread = tx % 128 == 0

    def k_step(k, d, accumulate):
        wgmma_k_step(cons, done, k, d, a_of, b_of, accumulate, pingpong_rank)

    if pingpong_rank is not None:
        pingpong_start(pingpong_rank)

    def add_part():
        pg.tile.warpgroup.gemm_wait(0)
        pg.tile.warpgroup.add(acc, acc, part)

    def issue(d):
        """Overlap: start the next ring stage's wgmma into the tile d."""
        issue_wgmma(cons, d, a_of, b_of)
        cons.advance()

    def add_done(p, d=None):
        """Overlap: with d, start the next K-step's wgmma into d; then, once p's wgmma is
        done, release its stage and add p into acc."""
        if d is not None:
            issue(d)
        pg.tile.warpgroup.gemm_wait(0 if d is None else 1)   # groups finish in order
        done.release()
        pg.tile.warpgroup.add(acc, acc, p)

    def mma_tile(nk):
        if overlap:
            pg.tile.warpgroup.zero(acc)
            overlapped_k_steps(nk, issue, lambda k, p, d: add_done(p, d), part, part2)
        elif not promote:
            for k in pg.serial(nk):
                k_step(k, acc, k > 0)
        else:       # every `promote` K-steps: the partial sum into fp32
            pg.tile.warpgroup.zero(acc)
            for k in pg.serial(nk):
                if each_step:
                    k_step(k, part, False)
                    add_part()
                else:
                    k_step(k, part, k % promote != 0)
                    with pg.if_((k % promote == promote - 1) | (k == nk - 1)):
                        add_part()
        if not overlap:
            pg.tile.warpgroup.gemm_wait(0)
            done.release()
        if scale is not None:                       # fp8: per-tensor dequantization
            SA, SB = scale
            pg.tile.warpgroup.mul(acc, acc, pg.let(SA[0] * SB[0]))
    return acc, first_thread, mma_tile


def overlapped_k_steps(nk, issue, step, part, part2):
    """nk >= 1 K-steps over two partial tiles that alternate: issue(part) starts step 0's
    wgmma, then step(k, p, d) for each k, where p holds step k's product and d is the tile
    to start step k + 1's wgmma in (None at the last step).  Steps go in pairs, so each tile
    keeps its registers; a wgmma stays in flight across the loop's back edge, and none is
    issued under a branch (ptxas would then serialize them all: C7514)."""
    issue(part)
    for k2 in pg.serial((nk - 1) // 2):
        step(2 * k2, part, part2)
        step(2 * k2 + 1, part2, part)
    last = pg.let(nk - 1 - (nk - 1) % 2)    # the first step the pairs left
    with pg.if_((nk - 1) % 2 == 1):
        step(last, part, part2)
        step(last + 1, part2, None)
    with pg.else_():
        step(last, part, None)


# Ping-pong consumers (rank c = 0, 1) take turns to issue their wgmmas: pingpong_start, then
# per K-step take_turn before the issue and hand_turn after it, and pingpong_end after the last.
def pingpong_start(c):
    """Warpgroup 1 hands warpgroup 0 the first turn."""
    with pg.if_(c == 1):
        pg.named_barrier_arrive(TURN, 256)


def take_turn(c):
    pg.named_barrier(TURN + c, 256)


def hand_turn(c):
    pg.named_barrier_arrive(TURN + 1 - c, 256)


def pingpong_end(c):
    """After the last K-step of a ping-pong consumer pair: warpgroup 0 takes the turn that
    warpgroup 1 handed over last, so both named barriers end complete."""
    with pg.if_(c == 0):
        pg.named_barrier(TURN, 256)


def consumer_end(c, pingpong, first_thread):
    """After consumer warpgroup c's last tile: the ping-pong turns closed (pingpong_end) and
    its last TMA stores complete before the CTA may exit."""
    if pingpong:
        pingpong_end(c)
    with pg.if_(first_thread):
        pg.tile.thread.async_wait(0, kind="bulk")


def cta_end(cluster):
    """The kernel's last statement, for every thread: with a cluster, no CTA exits while its
    peer may still arrive on its barriers."""
    if cluster > 1:
        pg.cluster_sync()


def store_tile(D, Cs, acc, c, m0, n0, boxes, CB, first_thread, Ts=()):
    """The epilogue of consumer warpgroup c: its 64 rows x `boxes` 64-column boxes of acc,
    cast to D's dtype through Cs[c * CB ..] (CB boxes per pass) and stored with TMA at rows
    m0 + 64 c, columns n0.. (clipped at the matrix edge), then the tail boxes (Ts, the tiles
    of epilogue_tails' widths) in the last pass.  Each pass first waits until the previous
    stores have read Cs and Ts."""
    passes = boxes // CB
    cols = [boxes * 64 + sum(T.shape[2] for T in Ts[:i]) for i in range(len(Ts))]
    last_tails = [(T, col, T.shape[2]) for T, col in zip(Ts, cols)]   # 32 and / or 16 wide
    for h in range(passes):
        tails = last_tails if h == passes - 1 else ()
        with pg.if_(first_thread):
            pg.tile.thread.async_wait(0, read=True, kind="bulk")
        pg.named_barrier(4 + c, 128)
        for j in range(CB):
            col = (h * CB + j) * 64
            pg.tile.warpgroup.cast(Cs[c * CB + j, 0:64, 0:64], acc[0:64, col:col + 64])
        for T, col, w in tails:
            pg.tile.warpgroup.cast(T[c, 0:64, 0:w], acc[0:64, col:col + w])
        pg.ptx.fence.proxy_async()
        pg.named_barrier(4 + c, 128)
        with pg.if_(first_thread):
            for j in range(CB):
                col = (h * CB + j) * 64
                pg.tile.thread.copy_async(
                    D[m0 + 64 * c:m0 + 64 * c + 64, n0 + col:n0 + col + 64],
                    Cs[c * CB + j:c * CB + j + 1, 0:64, 0:64])
            for T, col, w in tails:
                pg.tile.thread.copy_async(
                    D[m0 + 64 * c:m0 + 64 * c + 64, n0 + col:n0 + col + w], T[c:c + 1, 0:64, 0:w])
            pg.tile.thread.async_commit(kind="bulk")
