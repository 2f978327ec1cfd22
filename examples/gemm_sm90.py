"""A persistent, warp-specialized Hopper GEMM (sm_90a): D = A @ B^T, fp32 accumulation.

    A (M, K), B (N, K) row-major (K contiguous), D (M, N) row-major
    bfloat16 / float16 in, same dtype out;  float8_e4m3fn in, bfloat16 out (optional scales)

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
Tiles are visited in groups of GROUP_M tile rows (the same B columns stay in L2).  A tile
at the edge is zero-filled by TMA on load and clipped on store, so any M, N work; K only
needs a row pitch that is a multiple of 16 bytes (TMA's rule).

    python examples/gemm_sm90.py           # PTX resources; on an H200 also checks a few shapes
"""

import functools

import ptxgen as pg
from ptxgen.primitives.tcgen05 import canonical_layout

BM = 128                 # CTA tile rows: two consumer warpgroups x 64
GROUP_M = 8              # tile rows per rasterization group
_IN = {"bfloat16": "bfloat16", "float16": "float16", "float8_e4m3fn": "bfloat16"}


def make_gemm(dtype="bfloat16", BN=256, STAGES=4, ctas=132, scaled=False, promote=0):
    """The kernel for one configuration; M, N, K are launch-time symbols.  `promote` = P > 0
    (fp8): wgmma accumulates P K-steps (of 128) into a partial tile, which is then added to
    the fp32 accumulator, because Hopper's fp8 wgmma keeps only ~14 mantissa bits of its
    running sum; P = 1 is what cuBLAS does unless use_fast_accum (measured: the same error
    against fp64).  Two 64 x BN fp32 tiles fit the 232 registers for BN = 128 only."""
    out_dt = _IN[dtype]
    if promote and BN > 192:
        raise ValueError(f"promote={promote} keeps two 64 x BN fp32 tiles: BN <= 192 fits the "
                         f"consumers' 232 registers, BN = {BN} does not")
    elem = 1 if dtype.startswith("float8") else 2
    BK = 128 // elem                          # one 128-byte swizzle span of K per stage
    M, N, K = pg.var("M"), pg.var("N"), pg.var("K")
    ND = pg.var("ND")                         # D's row length: N, or N padded to 8 (TMA pitch)
    LA = canonical_layout(64, BK, dtype, stages=2 * STAGES)   # [2 * stage + half]
    LB = canonical_layout(BN, BK, dtype, stages=STAGES)
    if BN % 64 or not 64 <= BN <= 256:
        raise ValueError(f"BN = {BN}: a multiple of 64 up to 256 (64-column store boxes)")
    boxes = BN // 64                          # 64-column TMA store boxes per warpgroup
    CB = boxes if boxes <= 3 else 2           # boxes per epilogue pass (shared: CB x 8 KiB)
    LC = canonical_layout(64, 64, out_dt, stages=2 * CB)

    def gemm(A: pg.Tensor((M, K), dtype), B: pg.Tensor((N, K), dtype),
             D: pg.Tensor((M, ND), out_dt), SA: pg.Tensor((1,), "float32"),
             SB: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(384)
        cta = pg.cta_id(ctas)
        pool = pg.SMEMPool()
        As = pool.alloc((2 * STAGES, 64, BK), dtype, align=1024, layout=LA)
        Bs = pool.alloc((STAGES, BN, BK), dtype, align=1024, layout=LB)
        Cs = pool.alloc((2 * CB, 64, 64), out_dt, align=1024, layout=LC)
        pipe = pg.Pipeline(pool, stages=STAGES, consumers=2, producer_arrivals=3)
        pool.commit()
        pipe.init()
        tiles_m = pg.let((M + BM - 1) // BM)
        tiles_n = pg.let((N + BN - 1) // BN)
        nk = pg.let((K + BK - 1) // BK)
        mine = pg.let((tiles_m * tiles_n - cta + ctas - 1) // ctas)
        per_group = pg.let(GROUP_M * tiles_n)

        def tile_origin(i):
            """Row and column of the i-th tile of this CTA, grouped GROUP_M tile rows at a time."""
            t = pg.let(cta + i * ctas)
            first = pg.let(t // per_group * GROUP_M)
            rows = pg.let(pg.min(tiles_m - first, GROUP_M))
            r = pg.let(t % per_group)
            return pg.let((first + r % rows) * BM), pg.let(r // rows * BN)

        with pg.warpgroup_role(0):
            pg.setmaxnreg(40, "dec")
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
                        pg.tile.thread.copy_async(Bs[s:s + 1, 0:BN, 0:BK],
                                                  B[n0:n0 + BN, k0:k0 + BK], mbar=prod.full)
                        prod.commit()

        with pg.warpgroup_role(range(1, 3)) as c:
            pg.setmaxnreg(232, "inc")
            cons = pipe.consumer(scope="warpgroup")
            done = pipe.consumer(scope="warpgroup")       # one stage behind: what gets released
            acc = pg.tile.warpgroup.mma_accumulator((64, BN), "float32")
            part = pg.tile.warpgroup.mma_accumulator((64, BN), "float32") if promote else acc
            first_thread = tx % 128 == 0

            def k_step(k, d, accumulate):
                """Multiply stage k into d; once the previous step's group is done, release
                its stage."""
                s = cons.stage
                cons.wait()
                pg.tile.warpgroup.gemm_async(d, As[2 * s + c, 0:64, 0:BK], Bs[s, 0:BN, 0:BK],
                                             accumulate=accumulate)
                cons.advance()
                pg.tile.warpgroup.gemm_wait(1)
                with pg.if_(k > 0):
                    done.release()

            for i in pg.serial(mine):
                m0, n0 = tile_origin(i)
                if not promote:
                    for k in pg.serial(nk):
                        k_step(k, acc, k > 0)
                else:       # every `promote` K-steps: the partial sum into fp32
                    pg.tile.warpgroup.zero(acc)
                    for k in pg.serial(nk):
                        k_step(k, part, k % promote != 0)
                        with pg.if_((k % promote == promote - 1) | (k == nk - 1)):
                            pg.tile.warpgroup.gemm_wait(0)
                            pg.tile.warpgroup.add(acc, acc, part)
                pg.tile.warpgroup.gemm_wait(0)
                done.release()
                if scaled:                              # fp8: per-tensor dequantization
                    pg.tile.warpgroup.mul(acc, acc, pg.let(SA[0] * SB[0]))
                # epilogue: 64 rows x CB boxes of 64 columns per pass through Cs[c]
                for h in range(boxes // CB):
                    with pg.if_(first_thread):
                        pg.tile.thread.async_wait(0, read=True, kind="bulk")
                    pg.named_barrier(4 + c, 128)
                    for j in range(CB):
                        col = (h * CB + j) * 64
                        pg.tile.warpgroup.cast(Cs[c * CB + j, 0:64, 0:64],
                                               acc[0:64, col:col + 64])
                    pg.ptx.fence.proxy_async()
                    pg.named_barrier(4 + c, 128)
                    with pg.if_(first_thread):
                        for j in range(CB):
                            col = (h * CB + j) * 64
                            pg.tile.thread.copy_async(
                                D[m0 + 64 * c:m0 + 64 * c + 64, n0 + col:n0 + col + 64],
                                Cs[c * CB + j:c * CB + j + 1, 0:64, 0:64])
                        pg.tile.thread.async_commit(kind="bulk")
            with pg.if_(first_thread):
                pg.tile.thread.async_wait(0, kind="bulk")

    name = (f"gemm_sm90_{dtype}_n{BN}_s{STAGES}" + ("_scaled" if scaled else "") +
            (f"_p{promote}" if promote else ""))
    gemm.__name__ = name
    return pg.kernel(gemm, grid=(ctas,), block=(384,))


kernel_for = functools.lru_cache(maxsize=None)(make_gemm)     # one kernel per configuration


@functools.lru_cache(maxsize=None)
def _unit_scale(device):
    """The scale 1.0 as a device tensor, made once per device (not a fill kernel per call)."""
    import torch
    return torch.ones(1, dtype=torch.float32, device=device)


def _sms(device) -> int:
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


KERNELS = [make_gemm()]           # what run_all dumps (bf16, BN 256, 4 stages, 132 CTAs)


def gemm(a, b, out=None, *, scale_a=None, scale_b=None, fast_accum=False, BN=None,
         STAGES=None):
    """a (M, K) @ b (N, K)^T on torch CUDA tensors (row-major).  bfloat16 / float16 give the
    same dtype; float8_e4m3fn gives bfloat16, times scale_a * scale_b (float32 tensors of one
    element, as torch._scaled_mm takes them), accumulated as exactly as cuBLAS's default
    (each K-step's partial sum promoted to fp32, on 128 x 192 tiles) unless `fast_accum`
    (wgmma's own fp8 accumulation, 128 x 256 tiles: cuBLAS's use_fast_accum=True).
    BN: 256 (192 for promoted fp8), or 128 when wide tiles would leave SMs idle (small M * N)."""
    import torch
    names = {torch.bfloat16: "bfloat16", torch.float16: "float16",
             torch.float8_e4m3fn: "float8_e4m3fn"}
    if a.dtype != b.dtype or a.dtype not in names:
        raise TypeError(f"gemm takes two bfloat16, float16 or float8_e4m3fn tensors, got "
                        f"{a.dtype} and {b.dtype}")
    dt = names[a.dtype]
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"gemm computes a (M, K) @ b (N, K)^T; got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    if not (a.is_contiguous() and b.is_contiguous()):
        raise ValueError("gemm needs row-major (contiguous) a and b; call .contiguous()")
    (M, K), N = a.shape, b.shape[0]
    if K * a.element_size() % 16:
        raise ValueError(f"K = {K}: a row of {K * a.element_size()} bytes; TMA needs row "
                         f"pitches that are multiples of 16 bytes (pad K to a multiple of "
                         f"{16 // a.element_size()})")
    scaled = dt.startswith("float8")
    out_dtype = torch.bfloat16 if scaled else a.dtype
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    elif out.shape != (M, N) or out.dtype != out_dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous ({M}, {N}) {out_dtype} tensor")
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.zero_()
    sms = _sms(a.device)
    promote = 1 if scaled and not fast_accum else 0
    if BN is None:
        wide = 192 if promote else 256          # promoted fp8: two fp32 tiles fit BN <= 192
        BN = wide if -(-M // BM) * -(-N // wide) >= sms else 128
    if STAGES is None:
        STAGES = 4 if BN >= 192 else 5
    pitch_ok = N % 8 == 0                     # the TMA store needs 16-byte output rows
    d = out if pitch_ok else torch.empty((M, -(-N // 8) * 8), dtype=out_dtype,
                                         device=a.device)
    one = _unit_scale(a.device)
    sa = one if scale_a is None else scale_a.reshape(1).to(torch.float32)
    sb = one if scale_b is None else scale_b.reshape(1).to(torch.float32)
    kernel_for(dt, BN, STAGES, sms, scaled, promote)(a, b, d, sa, sb)
    if not pitch_ok:
        out.copy_(d[:, :N])
    return out


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
