"""The decode GEMM's kernels (gemm_small_m.py chooses the configuration and launches them):
make_small_m, the A/B-swapped persistent split-K GEMM, and make_reduce, the fixed-order sum of
its split partials when they are not reduced inside the GEMM.  See gemm_small_m.py for the
design."""
import ptxgen as pg
from ptxgen.primitives.tcgen05 import canonical_layout

from ._checks import ArgumentError
from ._gemm_sm90 import wgmma_consumer

BW = 128                   # weight rows per CTA tile: two consumer warpgroups x 64
SMEM_BUDGET = 200 * 1024   # ring bytes we allow ourselves (the epilogue tiles come on top)
MAX_STAGES = 16
OUT_DTYPE = {"bfloat16": "bfloat16", "float16": "float16", "float8_e4m3fn": "bfloat16"}
ELEM_BYTES = {"bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}


class GemmInputError(ArgumentError):
    """An argument of gemm_small_m or gemm_blockscaled that breaks a rule; the message names
    both.  An ArgumentError, so one except clause catches every wrapper's refusals."""


class ConfigError(GemmInputError):
    """A forced small-M configuration that the kernel's rules forbid."""


FP8_MAX_MN = 192   # fp8 keeps two 64 x MN fp32 tiles (the sum and each step's partial)


def valid_mn(MN, dtype="bfloat16") -> tuple:
    """(ok, reason) for a token tile width: wgmma's N is a multiple of 8 up to 256, and the
    epilogue moves 64-column chunks, so above 64 it is a multiple of 64; fp8's promotion
    keeps two fp32 tiles in the consumers' 232 registers, so it stops at FP8_MAX_MN."""
    if not isinstance(MN, int) or MN < 8 or MN > 256 or MN % 8:
        return False, f"MN = {MN!r}: wgmma N is a multiple of 8 from 8 to 256"
    if MN > 64 and MN % 64:
        return False, f"MN = {MN}: above 64 the epilogue's 64-token chunks need a multiple of 64"
    if MN > FP8_MAX_MN and str(dtype).startswith("float8"):
        return False, (f"MN = {MN}: float8 keeps two 64 x MN fp32 tiles (the sum and each "
                       f"K-step's partial) in 232 registers a thread, so at most {FP8_MAX_MN}")
    return True, ""


def valid_issue_group(G, STAGES) -> tuple:
    """(ok, reason) for the producer's load group: the consumers release a stage only once
    the next one is full, so a producer waiting for the whole ring would wait forever."""
    if not isinstance(G, int) or not 1 <= G < max(2, STAGES):
        return False, (f"issue_group = {G!r}: 1 to STAGES - 1 ({STAGES - 1}); the consumers "
                       f"hold one stage while the producer waits for a group, so it must not "
                       f"wait for the whole ring")
    return True, ""


def make_small_m(dtype="bfloat16", MN=16, STAGES=8, ctas=132, split=False, scaled=None,
                 fused=False, pdl=False, issue_group=1):
    """The kernel for one configuration; M, N, K and the split count S (W's first extent) are
    launch-time symbols.  split=False: D gets the tile (S must be 1); split=True: W (S, M, NW)
    gets each split's fp32 partial tile (D is not written: reduce_kernel sums W into it).
    fused=True: split-K reduced in this kernel (any S >= 1): each split stores its partial in
    W (S, tiles, BW, MN) (a whole tile per block, tokens contiguous: the accumulator
    fragment's own layout, so its stores are vectors of constant strides) and hands it to
    warp 1, which releases it at GPU scope and counts it in CNT (one per tile, zero before
    the launch) while the consumers go on with their next unit; one unit later they read the
    count, and the split that counted last sums the S partials in split order (loading
    128 // MN of them, at most 8, together) and writes D (that split's warp 1 set the counter
    back to zero).  The same bits as the reduce kernel, with no second launch and no wait
    on the consumers' path for the release and the count.  pdl (split=True): trigger the
    dependent launch of make_reduce(pdl=True) at the start (builder/griddep.py).
    issue_group: the producer waits for that many free stages and then loads them together,
    so each weight row's bytes of consecutive K-blocks are requested back to back."""
    if fused and split:
        raise ConfigError("split=True (workspace + reduce kernel) and fused=True (reduced in "
                          "the kernel) exclude each other")
    ok, why = valid_mn(MN, dtype)
    if not ok:
        raise ConfigError(why)
    ok, why = valid_issue_group(issue_group, STAGES)
    if not ok:
        raise ConfigError(why)
    if dtype not in OUT_DTYPE:
        raise ConfigError(f"dtype {dtype!r}: bfloat16, float16 or float8_e4m3fn")
    scaled = dtype.startswith("float8") if scaled is None else scaled
    promote = int(dtype.startswith("float8"))   # cuBLAS's default: each K-step's sum into fp32
    out_dt = OUT_DTYPE[dtype]
    BK = 128 // ELEM_BYTES[dtype]                 # one 128-byte swizzle span of K per stage
    MC = min(MN, 64)                         # tokens per epilogue chunk
    st_dt = "float32" if split else out_dt
    M, N, K = pg.var("M"), pg.var("N"), pg.var("K")
    ND, S, MW, NW = pg.var("ND"), pg.var("S"), pg.var("MW"), pg.var("NW")
    NT, NC = pg.var("NT"), pg.var("NC")      # fused: the tiles, their counters
    LW = canonical_layout(64, BK, dtype, stages=2 * STAGES)   # weights: [2 * stage + half]
    LX = canonical_layout(MN, BK, dtype, stages=STAGES)       # tokens

    def body(A, B, D, W, SA, SB, CNT):
        if split and pdl:     # the reduce kernel may be scheduled now: it waits for our end
            pg.launch_dependent_grids()
        tx = pg.thread_id(384)
        cta = pg.cta_id(ctas)
        pool = pg.SMEMPool()
        Ws = pool.alloc((2 * STAGES, 64, BK), dtype, align=1024, layout=LW)
        Xs = pool.alloc((STAGES, MN, BK), dtype, align=1024, layout=LX)
        Cs = pool.alloc((2, MC, 64), st_dt, align=1024)
        pipe = pg.Pipeline(pool, stages=STAGES, consumers=2, producer_arrivals=3)
        if fused:   # consumers -> counting warp: "a unit's partial is out" (both warpgroups);
            # its release: "counted", with the tile counter's old value in `verdict`
            hand = pg.Pipeline(pool, stages=1, consumers=1, producer_arrivals=2, name="hand")
            verdict = pool.alloc((1,), "int32")
        pool.commit()
        pipe.init()
        if fused:
            hand.init()
        CsT = Cs.permute(0, 2, 1)                       # (2, 64 weight rows, MC tokens)
        tiles_m = pg.let((M + MN - 1) // MN)
        tiles = pg.let((N + BW - 1) // BW * tiles_m)
        nk = pg.let((K + BK - 1) // BK)
        mine = pg.let((tiles * S - cta + ctas - 1) // ctas)

        def unit(i):
            """Weight row, token row, split, first K-block, K-block count and tile index of
            this CTA's i-th unit; consecutive CTAs take the token tiles of one weight tile
            (L2 reuse)."""
            u = pg.let(cta + i * ctas)
            s = pg.let(u // tiles)
            r = pg.let(u % tiles)
            kb0 = pg.let(s * nk // S)
            return (pg.let(r // tiles_m * BW), pg.let(r % tiles_m * MN), s, kb0,
                    pg.let((s + 1) * nk // S - kb0), r)

        def count_units(hc):
            """Warp 1 (fused, S > 1): per unit, once both consumer warpgroups have written
            their partial, release it at GPU scope and count it on the tile's counter; the
            old value goes to `verdict` (the split that counts last resets the counter).  Off
            the consumers' path: they read the verdict one unit later."""
            for i in pg.serial(mine):
                r = unit(i)[5]
                hc.wait()
                with pg.if_(tx % 32 == 0):
                    pg.ptx.fence.acq_rel("gpu")     # the partials the consumers published
                    old = pg.ptx.atom.add(CNT[r], 1, sem="acq_rel", scope="gpu")
                    verdict[0] = old
                    with pg.if_(old == S - 1):      # every split has counted: reset
                        CNT[r] = 0
                hc.release()

        with pg.warpgroup_role(0):
            pg.setmaxnreg(40, "dec")
            with pg.if_(tx == 0):
                prod = pipe.producer()
                def load(s, k0, n0, m0, full):
                    for h in range(2):
                        pg.tile.thread.copy_async(Ws[2 * s + h:2 * s + h + 1, 0:64, 0:BK],
                                                  B[n0 + 64 * h:n0 + 64 * h + 64, k0:k0 + BK],
                                                  mbar=full, cache_hint="evict_first")
                    pg.tile.thread.copy_async(Xs[s:s + 1, 0:MN, 0:BK],
                                              A[m0:m0 + MN, k0:k0 + BK], mbar=full,
                                              cache_hint="evict_last")

                G = issue_group
                for i in pg.serial(mine):
                    n0, m0, _, kb0, cnt, _ = unit(i)
                    if G == 1:
                        for k in pg.serial(cnt):
                            k0 = pg.let((kb0 + k) * BK)
                            prod.acquire()
                            load(prod.stage, k0, n0, m0, prod.full)
                            prod.commit()
                        continue
                    for g in pg.serial((cnt + G - 1) // G):
                        s0 = pg.let(prod.stage)
                        for j in range(G):          # wait until G stages are free ...
                            with pg.if_(g * G + j < cnt):
                                prod.acquire()
                                prod.commit()
                        for j in range(G):          # ... then fill them together
                            with pg.if_(g * G + j < cnt):
                                s = pg.let((s0 + j) % STAGES)
                                load(s, pg.let((kb0 + g * G + j) * BK), n0, m0, pipe.full[s])
            if fused:
                with pg.if_((tx // 32 == 1) & (S > 1)):
                    count_units(hand.consumer(scope="warp"))

        with pg.warpgroup_role(range(1, 3)) as c:
            pg.setmaxnreg(232, "inc")
            acc, first_thread, mma_tile = wgmma_consumer(
                pipe, tx, MN, lambda s: Ws[2 * s + c, 0:64, 0:BK], lambda s: Xs[s, 0:MN, 0:BK],
                promote, (SA, SB) if scaled else None, each_step=True)
            # fused: the last split loads CH partials at a time (<= 64 registers a thread), so
            # summing S partials costs ceil((S - 1) / CH) L2 round trips instead of S - 1;
            # from MN 128 on one partial is 64+ registers: one at a time, no guards to hold it
            CH = min(8, 128 // MN)
            parts = [pg.tile.warpgroup.mma_accumulator((64, MN), "float32")
                     for _ in range(max(1, CH))] if fused else None

            def store_tile(sp, m0, w0):
                """The accumulator out through shared memory and TMA, MC tokens at a time:
                into W's split sp, or into D (the TMA clips at its edges)."""
                for j in range(MN // MC):
                    with pg.if_(first_thread):
                        pg.tile.thread.async_wait(0, read=True, kind="bulk")
                    pg.named_barrier(4 + c, 128)
                    pg.tile.warpgroup.cast(CsT[c, 0:64, 0:MC], acc[0:64, j * MC:j * MC + MC])
                    pg.ptx.fence.proxy_async()
                    pg.named_barrier(4 + c, 128)
                    with pg.if_(first_thread):
                        t0 = m0 + j * MC
                        if split:
                            pg.tile.thread.copy_async(W[sp:sp + 1, t0:t0 + MC, w0:w0 + 64],
                                                      Cs[c:c + 1, 0:MC, 0:64])
                        else:
                            pg.tile.thread.copy_async(D[t0:t0 + MC, w0:w0 + 64],
                                                      Cs[c:c + 1, 0:MC, 0:64])
                        pg.tile.thread.async_commit(kind="bulk")

            def publish(sp, r):
                """Fused, S > 1: this warpgroup's partial into W; then the verdict on the
                previous unit (the counting warp has released the slot once it counted it)."""
                pg.tile.warpgroup.copy(W[sp, r, 64 * c:64 * c + 64, 0:MN], acc)
                hp.acquire()

            def hand_over():
                """Every thread's partial stores (and verdict reads) are done: one arrival per
                warpgroup tells the counting warp."""
                pg.named_barrier(4 + c, 128)
                with pg.if_(first_thread):
                    pg.ptx.mbarrier.arrive(hp.full)
                hp.commit()                 # every thread moves on to the next phase

            def reduce_if_last(i):
                """Unit i was the last split of its tile to count: sum the S partials in split
                order (CH loads in flight, then their adds) into acc and write D."""
                n0, m0, _, _, _, r = unit(i)
                with pg.if_(verdict[0] == S - 1):
                    rows = slice(64 * c, 64 * c + 64)
                    pg.tile.warpgroup.copy(acc, W[0, r, rows, 0:MN])
                    if CH <= 1:
                        for split_s in pg.serial(1, S):
                            pg.tile.warpgroup.copy(parts[0], W[split_s, r, rows, 0:MN])
                            pg.tile.warpgroup.add(acc, acc, parts[0])
                    else:
                        for g in pg.serial((S - 1 + CH - 1) // CH):
                            s0 = pg.let(1 + g * CH)
                            for j, p in enumerate(parts):
                                with pg.if_(s0 + j < S):
                                    pg.tile.warpgroup.copy(p, W[s0 + j, r, rows, 0:MN])
                            for j, p in enumerate(parts):
                                with pg.if_(s0 + j < S):
                                    pg.tile.warpgroup.add(acc, acc, p)
                    store_tile(0, m0, pg.let(n0 + 64 * c))

            hp = hand.producer() if fused else None
            for i in pg.serial(mine):
                n0, m0, sp, _, cnt, r = unit(i)
                mma_tile(cnt)
                w0 = pg.let(n0 + 64 * c)
                if fused:
                    with pg.if_(S == 1):
                        store_tile(sp, m0, w0)
                    with pg.if_(S > 1):
                        publish(sp, r)
                        with pg.if_(i > 0):
                            reduce_if_last(i - 1)
                        hand_over()
                else:
                    store_tile(sp, m0, w0)
            if fused:
                with pg.if_((S > 1) & (mine > 0)):   # the verdict on the last unit
                    hp.acquire()
                    reduce_if_last(mine - 1)
                    hand_over()
            with pg.if_(first_thread):
                pg.tile.thread.async_wait(0, kind="bulk")

    if fused:
        def gemm(A: pg.Tensor((M, K), dtype), B: pg.Tensor((N, K), dtype),
                 D: pg.Tensor((M, ND), out_dt), W: pg.Tensor((S, NT, BW, MN), "float32"),
                 SA: pg.Tensor((1,), "float32"), SB: pg.Tensor((1,), "float32"),
                 CNT: pg.Tensor((NC,), "int32")):
            body(A, B, D, W, SA, SB, CNT)
    else:
        def gemm(A: pg.Tensor((M, K), dtype), B: pg.Tensor((N, K), dtype),
                 D: pg.Tensor((M, ND), out_dt), W: pg.Tensor((S, MW, NW), "float32"),
                 SA: pg.Tensor((1,), "float32"), SB: pg.Tensor((1,), "float32")):
            body(A, B, D, W, SA, SB, None)

    gemm.__name__ = (f"gemm_small_m_{dtype}_n{MN}_s{STAGES}" + ("_splitk" if split else "") +
                     ("_fused" if fused else "") + ("_scaled" if scaled else "") +
                     ("_pdl" if split and pdl else "") +
                     (f"_g{issue_group}" if issue_group > 1 else ""))
    return pg.kernel(gemm, grid=(ctas,), block=(384,))


def make_reduce(out_dt="bfloat16", splits=2, ctas=1056, threads=256, pdl=False):
    """D[m, n] = sum over s = 0 .. splits-1, in that order, of W[s, m, n] (fp32), rounded once
    to out_dt: the fixed order makes split-K's result the same bits every run.  The split
    loop is unrolled so a thread's `splits` loads are in flight together (a serial loop
    waits for each: latency-bound); `ctas` fills the SMs (8 x 256 threads per SM).  pdl: a
    programmatic dependent launch (builder/griddep.py), scheduled while the split GEMM ahead
    of it finishes; it waits for that GEMM's end before its first read of W."""
    M, N, NW = pg.var("M"), pg.var("N"), pg.var("NW")

    def reduce(W: pg.Tensor((splits, M, NW), "float32"), D: pg.Tensor((M, N), out_dt)):
        if pdl:
            pg.wait_on_dependent_grids()   # launched before the GEMM ends (it triggers)
        tx = pg.thread_id(threads)
        b = pg.cta_id(ctas)
        for e in pg.serial(b * threads + tx, M * N, ctas * threads):
            m = pg.let(e // N)
            n = pg.let(e % N)
            parts = [pg.let(W[s, m, n]) for s in range(splits)]
            acc = parts[0]
            for p in parts[1:]:
                acc = pg.let(acc + p)
            D[m, n] = pg.cast(acc, out_dt)

    reduce.__name__ = f"gemm_small_m_reduce_{out_dt}_x{splits}" + ("_pdl" if pdl else "")
    return pg.kernel(reduce, grid=(ctas,), block=(threads,))
