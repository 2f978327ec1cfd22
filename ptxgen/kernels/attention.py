"""FlashAttention forward on Hopper (sm_90a), written with ptxgen's tile ops.

    attention(q, k, v, *, causal=False, scale=None, out=None, return_lse=False)
    q (B, Hq, Sq, D), k and v (B, Hkv, Skv, D), as torch SDPA takes them; Hq % Hkv == 0
    (GQA / MQA: query head h reads K/V head h // (Hq // Hkv), nothing is repeated);
    bfloat16 / float16; any D <= 256; any Sq, Skv >= 0; any strides (inputs in a layout
    other than row-major (B, H, S, D) are copied first, and such an out= is written through a
    copy); `causal` is SDPA's is_causal (query i sees keys j <= i); out (B, Hq, Sq, D) in q's
    dtype; lse (B, Hq, Sq) float32, the natural-log logsumexp of the scaled scores, when asked.
    The kernels are 64, 128, 192 or 256 columns wide.  A narrower D runs the next width on
    zero columns, which change no score: TMA zero-fills them past the rows' edge (the
    `narrow` kernels: W columns in memory) where D rows keep its 16-byte pitch, and padded
    copies are made where they do not (D = 100, say).

The schedule (one CTA per 128 query rows of one head, three warpgroups):
    warpgroup 0     producer (24 registers): one thread loads Q once (two 64-row halves,
                    one mbarrier each), then streams K and V tiles of BN keys through two
                    TMA rings (K and V have their own, so S = Q K^T starts as soon as K
                    lands); out-of-range rows and keys are zero-filled by TMA.
    warpgroups 1,2  consumers (240 registers), 64 query rows each.  Per key tile j:
                    S = Q K^T (wgmma, A and B from shared memory); the row max and sum are
                    reductions over the accumulator fragment into a replicated row tile
                    (tile.reduced); P = exp2(S * scale * log2 e - m), one fma and one ex2
                    per element with the (rows,) tile broadcast along the columns; O is
                    rescaled by exp2(m_old - m_new); P is cast to the bf16/f16 A fragment in
                    registers and O += P V is a register-A wgmma (V as the MN-major B).
                    The next tile's S = Q K^T is issued before this tile's softmax, so the
                    tensor cores run while the exponentials do (FlashAttention-3's
                    intra-warpgroup overlap).  Only tiles that cross the causal diagonal or
                    the end of the keys are masked, from the fragment's element coordinates.
    epilogue        O / l cast to the output dtype into a swizzled shared tile, one TMA
                    store per 64 rows (clipped at Sq); lse = (m + log2 l) ln 2.
The K/V head of query head h is h // (Hq // Hkv).  Causal CTAs take their key range
[0, min(Skv, q0 + 128)) only, and the grid runs the longest query tiles first.

Speed on one H200 (2026-12-04, bf16, H = 16, 16k tokens, against torch SDPA's cuDNN backend
in the same run; benchmarks/RESULTS.md, final tree): D = 128 613 / 634 TFLOP/s at S = 4k / 16k
(1.01x / 1.03x cuDNN), causal 545 / 621 (1.04x / 1.09x); D = 256 664 / 680 (1.06x / 1.03x);
D = 64 433 / 443 (0.96x / 0.97x).  At S = 1k: 0.82-1.01x.  On an H100 (2026-12-06): D = 192
1.03-1.12x cuDNN at S = 4k-16k, D = 96 (narrow D = 128 kernel) 1.02-1.14x; at S = 1k 0.96-1.02x.
"""

import contextlib
import functools
import math

import ptxgen as pg
from ._checks import (ArgumentError, meta_of, out_tensor, real, same_device, shares_memory,
                      tensor)
from ._torch import compiling, differentiable, into, tma_ready, torch_ops, traced
from ptxgen.primitives.tcgen05 import canonical_layout
from ptxgen.target import TMA_ALIGN

BM = 128                     # query rows per CTA: two consumer warpgroups x 64
# keys per tile by (head dim, causal): the widest that fits 240 registers without spills, but
# narrower for causal (masked diagonal tiles) and D 192 (faster at S = 1k; RESULTS.md)
_BN = {(64, False): 128, (64, True): 128, (128, False): 176, (128, True): 128,
       (192, False): 96, (192, True): 96, (256, False): 80, (256, True): 80}
HEAD_DIMS = (64, 128, 192, 256)
_DTYPES = ("bfloat16", "float16")
LOG2E = 1.4426950408889634
TURN = 10                    # named barriers 10, 11: the consumers' turns to issue


def make_attention(dtype="bfloat16", D=128, causal=False, group=1, BN=None, stages=2,
                   pingpong=True, prescale=False, narrow=False):
    """The kernel for one configuration; B, H, S are launch-time symbols.  `prescale`: the
    scores are scaled before the mask and the max (one more multiply per score), which a
    scale <= 0 needs: the fused max(S) * scale and fma(S, scale, -m) assume scale > 0.
    `group` = Hq / Hkv
    is a constant: a run-time integer division would be a ptxas subroutine call, and a call
    makes ptxas drop setmaxnreg and serialize the wgmmas."""
    if D not in HEAD_DIMS or dtype not in _DTYPES:
        raise ValueError(f"make_attention: D = {D}, dtype = {dtype}; the kernels take D in "
                         f"{', '.join(map(str, HEAD_DIMS))} and dtype in {', '.join(_DTYPES)}")
    BN = BN or _BN[D, causal]
    B, Hq, Hkv, Sq, Skv = (pg.var(n) for n in ("B", "Hq", "Hkv", "Sq", "Skv"))
    W = pg.var("W") if narrow else D        # the tensors' head dim: W <= D columns
    LQ = canonical_layout(64, D, dtype, stages=2)
    LK = canonical_layout(BN, D, dtype, stages=stages)
    LV = canonical_layout(D, BN, dtype, major="MN", stages=stages)
    wg = pg.tile.warpgroup
    COLS = [(c, d) for c in range(2) for d in range(0, D, 64)]     # (Q half, 64 columns)

    def attention(Q: pg.Tensor((B, Hq, Sq, W), dtype), K: pg.Tensor((B, Hkv, Skv, W), dtype),
                  V: pg.Tensor((B, Hkv, Skv, W), dtype), O: pg.Tensor((B, Hq, Sq, W), dtype),
                  LSE: pg.Tensor((B, Hq, pg.var("SqPad")), "float32"), sl2: pg.float32):
        tx = pg.thread_id(384)
        qt = pg.let(pg.cta_id(dim="x"))
        h = pg.let(pg.cta_id(dim="y"))
        b = pg.let(pg.cta_id(dim="z"))
        q0 = pg.let(((Sq + BM - 1) // BM - 1 - qt) * BM)      # longest (causal) tiles first
        hk = pg.let(h // group)
        kv_end = pg.let(pg.min(Skv, q0 + BM) if causal else Skv)
        nblk = pg.let((kv_end + BN - 1) // BN)
        pool = pg.SMEMPool()
        Qs = pool.alloc((2, 64, D), dtype, align=1024, layout=LQ)
        Ks = pool.alloc((stages, BN, D), dtype, align=1024, layout=LK)
        Vs = pool.alloc((stages, D, BN), dtype, align=1024, layout=LV)
        qbar = pool.alloc_mbarrier(2)
        kpipe = pg.Pipeline(pool, stages=stages, consumers=2, producer_arrivals=D // 64,
                            name="kring")
        vpipe = pg.Pipeline(pool, stages=stages, consumers=2, producer_arrivals=D // 64,
                            name="vring")
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(qbar[0], D // 64)       # one TMA box per 64 columns
            pg.ptx.mbarrier.init(qbar[1], D // 64)
        kpipe.init()
        vpipe.init()

        with pg.warpgroup_role(0):
            pg.setmaxnreg(24, "dec")
            with pg.if_(tx == 0):
                for c, d in COLS:
                    pg.tile.thread.copy_async(Qs[c:c + 1, 0:64, d:d + 64],
                                              Q[b, h, q0 + 64 * c:q0 + 64 * c + 64, d:d + 64],
                                              mbar=qbar[c])
                kp, vp = kpipe.producer(), vpipe.producer()
                for j in pg.serial(nblk):
                    kv0 = pg.let(j * BN)
                    kp.acquire()
                    for d in range(0, D, 64):
                        pg.tile.thread.copy_async(Ks[kp.stage:kp.stage + 1, 0:BN, d:d + 64],
                                                  K[b, hk, kv0:kv0 + BN, d:d + 64], mbar=kp.full)
                    kp.commit()
                    vp.acquire()
                    vt = Vs.permute(0, 2, 1)            # V rows (keys) x D, as it lands
                    for d in range(0, D, 64):
                        pg.tile.thread.copy_async(vt[vp.stage:vp.stage + 1, 0:BN, d:d + 64],
                                                  V[b, hk, kv0:kv0 + BN, d:d + 64], mbar=vp.full)
                    vp.commit()

        with pg.warpgroup_role(range(1, 3)) as c:
            pg.setmaxnreg(240, "inc")
            kc, vc = kpipe.consumer(scope="warpgroup"), vpipe.consumer(scope="warpgroup")
            s = wg.mma_accumulator((64, BN), "float32")
            o = wg.mma_accumulator((64, D), "float32")
            p = wg.mma_a_fragment((64, BN), dtype)
            m = wg.reduced(s, axis=1)           # running max, scaled to log2 units
            m_new = wg.reduced(s, axis=1)
            l = wg.reduced(s, axis=1)           # running sum of exp2(...)
            t = wg.reduced(s, axis=1)
            row, col = wg.coords(s)
            r0 = pg.let(q0 + 64 * c)      # this warpgroup's first query row
            wg.fill(m, -math.inf)
            wg.zero(l)
            wg.zero(o)
            pg.ptx.mbarrier.try_wait(qbar[c], 0)

            def issue_s():
                kc.wait()
                wg.gemm_async(s, Qs[c, 0:64, 0:D], Ks[kc.stage, 0:BN, 0:D],
                              accumulate=False)

            def softmax(j):
                """S of key tile j -> P in s (exp2 units), the new max in m_new and the
                rescale factor exp2(m - m_new) in t; l is rescaled and summed."""
                kv0 = pg.let(j * BN)
                edge = kv0 + BN > Skv
                if causal:
                    edge = edge | (kv0 + BN > r0 + 1)
                if prescale:                     # scale <= 0: log2 units before the mask
                    wg.mul(s, s, sl2)
                with pg.if_(edge):               # only tiles at the diagonal / the keys' end
                    wg.select(s, (col + kv0 >= Skv) | (col + kv0 > row + r0) if causal
                              else col + kv0 >= Skv, -math.inf, s)
                wg.max(t, s, axis=1)
                if not prescale:                 # max(S) * scale: scale > 0
                    wg.mul(t, t, sl2)
                wg.max(m_new, m, t)
                wg.mul(t, m_new, -1.0)
                if prescale:
                    wg.add(s, s, t)
                else:
                    wg.fma(s, s, sl2, t)         # S * scale * log2 e - m_new: one fma
                wg.exp2(s, s, ftz=True)          # .ftz: no subnormal fix-ups around ex2
                wg.sub(t, m, m_new)              # log2 of the rescale factor
                wg.exp2(t, t, ftz=True)
                wg.mul(l, l, t)
                wg.mul(m, m_new, 1.0)
                wg.sum(m_new, s, axis=1)
                wg.add(l, l, m_new)

            def pv():
                vc.wait()
                wg.gemm_async(o, p, Vs[vc.stage, 0:D, 0:BN])

            def my_turn():
                """Ping-pong: the two warpgroups take turns to issue their wgmmas, so one
                runs its softmax while the other's GEMMs hold the tensor cores."""
                if pingpong:
                    pg.named_barrier(TURN + c, 256)

            def their_turn(last=False):
                if pingpong:
                    with pg.if_(c == 0) if last else contextlib.nullcontext():
                        pg.named_barrier_arrive(TURN + 1 - c, 256)

            if pingpong:
                with pg.if_(c == 1):             # warpgroup 0 issues first
                    pg.named_barrier_arrive(TURN, 256)
            my_turn()
            issue_s()
            their_turn()
            wg.gemm_wait(0)
            kc.release()
            softmax(0)
            wg.cast(p, s)
            for j in pg.serial(1, nblk):
                my_turn()
                issue_s()                        # S_j on the tensor cores ...
                pv()                             # ... then O += P_{j-1} V_{j-1}
                their_turn()
                wg.gemm_wait(1)                  # S_j is done (groups finish in order)
                kc.release()
                softmax(j)                       # ... while P V runs
                wg.gemm_wait(0)
                vc.release()
                wg.mul(o, o, t)
                wg.cast(p, s)
            my_turn()
            pv()
            their_turn(last=True)                # the arrivals match the turns taken
            wg.gemm_wait(0)
            vc.release()
            # epilogue: O / l, lse, one TMA store per warpgroup
            wg.log2(l, l)                       # 1 / l as exp2(-log2 l): rcp.rn would be a
            wg.mul(t, l, -1.0)                  # subroutine call, and a call makes ptxas drop
            wg.exp2(t, t)                       # setmaxnreg and serialize the wgmmas
            wg.mul(o, o, t)
            wg.add(t, l, m)
            wg.mul(t, t, math.log(2.0))
            wg.copy(LSE[b, h, r0:r0 + 64], t)
            wg.cast(Qs[c, 0:64, 0:D], o)      # this half of Q is read no more
            pg.ptx.fence.proxy_async()
            pg.named_barrier(6 + c, 128)    # ids 2, 3: the rings' releases
            with pg.if_(tx % 128 == 0):
                for d in range(0, D, 64):
                    pg.tile.thread.copy_async(O[b, h, r0:r0 + 64, d:d + 64],
                                              Qs[c:c + 1, 0:64, d:d + 64])
                pg.tile.thread.async_commit(kind="bulk")
                pg.tile.thread.async_wait(0, kind="bulk")

    attention.__name__ = (f"attention_{dtype}_d{D}_n{BN}_g{group}" +
                          ("_causal" if causal else "") + ("" if pingpong else "_nopp") +
                          ("_prescale" if prescale else "") + ("_narrow" if narrow else ""))
    return pg.kernel(attention, grid=lambda a: (-(-a["Sq"] // BM), a["Hq"], a["B"]),
                     block=(384,))


kernel_for = functools.lru_cache(maxsize=None)(make_attention)
KERNELS = [make_attention()]     # what run_all dumps: bf16, D 128, non-causal, no GQA


def dump(dtype: str = "bfloat16", D: int = 128, causal: bool = False, group: int = 1) -> list:
    """`ptxgen dump ptxgen.kernels.attention --kernel-args D=64,causal=True,group=4`: the
    kernel of that configuration."""
    return [kernel_for(dtype, D, causal, group)]


def attention_plan(q, k, v, out=None):
    """(B, Hq, Hkv, Sq, Skv, D, dtype) of valid inputs (Meta tuples: the rules read nothing
    else); an ArgumentError naming the argument otherwise."""
    op, dts = "attention", ("bfloat16", "float16")
    q, k, v = (tensor(op, n, m, dtypes=dts, dim=4) for n, m in (("q", q), ("k", k), ("v", v)))
    same_device(op, ("q", q), ("k", k), ("v", v))
    if not q.dtype == k.dtype == v.dtype:
        raise ArgumentError(f"attention: k and v must have q's dtype {q.dtype}, got {k.dtype} "
                            f"and {v.dtype}")
    B, Hq, Sq, D = q.shape
    if k.shape != v.shape:
        raise ArgumentError(f"attention: v must have k's shape {k.shape}, got {v.shape}")
    Bk, Hkv, Skv, Dk = k.shape
    if (Bk, Dk) != (B, D):
        raise ArgumentError(f"attention: k has shape {k.shape}, which does not match q's "
                            f"{q.shape} in the batch or head dimension")
    if D > HEAD_DIMS[-1]:
        raise ArgumentError(f"attention: q has head dimension {D}; the kernels take D up to "
                            f"{HEAD_DIMS[-1]} ({', '.join(map(str, HEAD_DIMS))}, or padded to "
                            f"the next of them)")
    if B > 65535 or Hq > 65535:
        raise ArgumentError(f"attention: q has shape {q.shape}; a launch takes at most 65535 "
                            f"batches and 65535 heads (CUDA's grid y and z: split the batch)")
    if Hq % Hkv if Hkv else Hq:       # no heads at all: an empty result
        raise ArgumentError(f"attention: k has {Hkv} heads, which do not divide q's {Hq} "
                            f"(GQA needs Hq % Hkv == 0)")
    if out is not None:
        out_tensor(op, out, q.shape, q.dtype, q.device)
    return B, Hq, Hkv, Sq, Skv, D, q.dtype


def attention(q, k, v, *, causal=False, scale=None, out=None, return_lse=False):
    """softmax(q k^T * scale [causal mask]) v for torch CUDA tensors (see the module
    docstring); returns out, or (out, lse) with return_lse.  Inside torch.compile it is
    torch.ops.ptxgen.attention."""
    if compiling():
        o, lse = (traced("attention", (q, k, v), out, causal=bool(causal), scale=scale)
                  if out is None else (out, traced_out_lse(q, k, v, out, causal, scale)))
        return (o, lse) if return_lse else o
    import torch
    metas = [meta_of(x) if hasattr(x, "is_contiguous") else x for x in (q, k, v, out)]
    B, Hq, Hkv, Sq, Skv, D, dt = attention_plan(*metas)
    sc = (1.0 / math.sqrt(D) if D else 1.0) if scale is None else \
        real("attention", "scale", scale)           # (D = 0: every score is 0, at any scale)
    if (q.requires_grad or k.requires_grad or v.requires_grad) and \
            differentiable("attention", out):          # autograd records the op
        o, lse = torch_ops().attention(q, k, v, bool(causal), scale)
        return (o, lse) if return_lse else o
    # A D between the kernel widths runs the next width Dk on zero columns, which change no
    # score and give o zero columns: TMA's zero fill past the rows' edge (the kernel's
    # `narrow` form) where rows of D elements keep TMA's 16-byte pitch, else padded copies.
    # TMA reads and writes (B, H, S, D) row-major from 16-byte aligned addresses: other
    # layouts (a (B, S, H, D) tensor's transpose, say) are copied, an out= that is not
    # written through a copy, as is one that overlaps an input (which must stay unwritten)
    Dk = next(d for d in HEAD_DIMS if d >= D)
    narrow = 0 < D < Dk and D * q.element_size() % TMA_ALIGN == 0
    padded = D != Dk and not narrow
    if padded:
        q, k, v = (torch.nn.functional.pad(t, (0, Dk - D)) for t in (q, k, v))
    q, k, v = tma_ready(q), tma_ready(k), tma_ready(v)
    given = out
    if padded or out is None or not out.is_contiguous() or out.data_ptr() % TMA_ALIGN or \
            shares_memory(out, (q, k, v)):
        out = torch.empty_like(q)
    pad = -(-Sq // BM) * BM
    lse = torch.empty((B, Hq, pad), dtype=torch.float32, device=q.device)
    if B and Hq and Sq:
        if Skv == 0:                     # an empty softmax: no weight, no value
            out.zero_()
            lse.fill_(-math.inf)
        else:
            kernel_for(dt, Dk, bool(causal), Hq // Hkv, prescale=sc <= 0, narrow=narrow)(
                q, k, v, out, lse, sc * LOG2E)
    if padded:
        out = out[..., :D] if given is not None else out[..., :D].contiguous()
    out = into(given, out)
    if not return_lse:
        return out
    return out, (lse if pad == Sq else lse[..., :Sq].contiguous())


def traced_out_lse(q, k, v, out, causal, scale):
    """Inside torch.compile with out=: the mutating op, which returns lse."""
    from ._torch import torch
    return torch.ops.ptxgen.attention_out(q, k, v, out, causal=bool(causal), scale=scale)
