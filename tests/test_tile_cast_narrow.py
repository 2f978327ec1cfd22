"""Casts from and to float4_e2m1fn, and float8 casts two elements per cvt (the x2 forms of
primitives/tilemath/cast_pairs.py): the PTX simulator against numpy bit for bit, the exact
PTX of the pairs, assembly for sm_100a / sm_120a, and the errors that name the fix."""
import re
import warnings

import numpy as np
import pytest

import ptxgen as pg
from support import tilemath_cases as TC
from support import tilemath_ref as R
from support.asm import assemble
from ptxgen.layout import S, TileLayout, laneid
from support.ptxsim_math import decode, round_bits
from test_tile_math import run_case

FP4, E4M3, E5M2 = R.FP4, "float8_e4m3fn", "float8_e5m2"
F32, F16 = "float32", "float16"


# ---- the e2m1 model itself, from the format's definition --------------------------------------
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_e2m1_codes_and_rounding():
    """Codes 0..7 are +{0, 0.5, 1, 1.5, 2, 3, 4, 6}, 8..15 the same negated (no inf, no NaN);
    round to nearest ties to the even code, beyond 6 (and inf) saturate, NaN is +6."""
    for c in range(16):
        v = decode(c, "e2m1")
        assert float(v) == (-1 if c & 8 else 1) * E2M1[c & 7]
    ties = {0.25: 0, 0.75: 2, 1.25: 2, 1.75: 4, 2.5: 4, 3.5: 6, 5.0: 6, 6.5: 7, 7.0: 7,
            100.0: 7, float("inf"): 7, -0.25: 8, -5.0: 14, float("-inf"): 15, -1e9: 15,
            0.2500001: 1, 5.999: 7, float("nan"): 7, -0.0: 8, 1e-30: 0}
    for x, code in ties.items():
        got = round_bits(R._exact(x) if x == x and abs(x) != float("inf") and x != 0 else x,
                         "e2m1", satfinite=True)
        assert got == code, (x, got, code)


# ---- casts of every dtype into float4_e2m1fn and back -------------------------------------------
def _extra(src):
    if src in R.INTS:
        return TC.FP4_INTS
    return TC.FP4_SPECIALS if src in R.FLOATS else ()


@pytest.mark.parametrize("src", TC.ALL)
def test_cast_to_fp4(src):
    """Every dtype -> float4_e2m1fn: ties to even, saturation to ±6, inf, NaN (-> +6), -0."""
    run_case(TC.cast_case(src, dsts=(FP4,), arch="sm_100a", extra=_extra(src), tag="_fp4"))


def test_cast_from_fp4():
    """All 16 codes (and random ones) -> every dtype, exactly (-0 stays -0)."""
    run_case(TC.cast_case(FP4, arch="sm_100a"))


@pytest.mark.parametrize("scope", ["thread", "warp", "warpgroup"])
def test_fp4_casts_in_scopes(scope):
    dsts = (F32, F16, "bfloat16", "int8", "uint16", E4M3)
    run_case(TC.cast_case(FP4, n=64, dsts=dsts, arch="sm_100a", scope=scope, tag="_" + scope))
    for src in (F32, "float64", "int32", E5M2):
        run_case(TC.cast_case(src, n=64, dsts=(FP4,), arch="sm_100a", scope=scope,
                              extra=_extra(src), tag="_" + scope))


# ---- register, shared and global tiles of a narrow dtype -----------------------------------------
def narrow_case(scope, kind, ndt, arch="sm_100a", rng=None):
    """float32 -> ndt -> float16 / float32 on (H, W) tiles: `register` (float32 registers ->
    ndt registers -> float16 registers; float32 registers -> ndt memory -> float32 registers),
    `shared` (global -> shared ndt -> global) or `global`."""
    rng = rng or np.random.default_rng(5)
    H, W = TC.SHAPE[scope]
    T = TC.BLOCK[scope] if scope != "warpgroup" else 128
    r0, c0 = 2, 8
    RS, CS = H + 3, W + 16
    lay = TC.reg_layout(scope, H, W)

    @pg.kernel(grid=(1,), block=(T,), name=f"narrow_{scope}_{kind}_{ndt}")
    def k(A: pg.Tensor((RS, CS), F32), D1: pg.Tensor((RS, CS), ndt),
          D2: pg.Tensor((RS, CS), F16), D3: pg.Tensor((RS, CS), ndt),
          D4: pg.Tensor((RS, CS), F32)):
        if T > 1:
            pg.thread_id(T)
        t = getattr(pg.tile, scope)
        sync = pg.warp_sync if scope == "warp" else pg.cta_sync
        reg = lambda M: M[r0:r0 + H, c0:c0 + W]          # noqa: E731
        if kind == "register":
            ra, rf = (pg.alloc_local((H, W), F32, layout=lay) for _ in range(2))
            q = pg.alloc_local((H, W), ndt, layout=lay)
            h = pg.alloc_local((H, W), F16, layout=lay)
            t.cast(ra, reg(A))
            t.cast(q, ra)               # registers -> registers, pairs split into elements
            t.cast(reg(D1), q)          # ndt registers -> memory (the same dtype: moved)
            t.cast(h, q)                # ndt registers joined into pairs -> float16
            t.cast(reg(D2), h)
            t.cast(reg(D3), ra)         # float32 registers -> ndt memory, stored as pairs
            t.cast(rf, reg(D3))         # this thread's own bytes back, loaded as pairs
            t.cast(reg(D4), rf)
            return
        if kind == "shared":
            s = pg.alloc_shared((H, W), ndt, align=128)
            t.cast(s[0:H, 0:W], reg(A))
            sync()
            t.cast(reg(D1), s[0:H, 0:W])    # the same dtype: moved
            t.cast(reg(D2), s[0:H, 0:W])
            t.cast(reg(D4), s[0:H, 0:W])
            t.cast(reg(D3), reg(A))
            return
        t.cast(reg(D1), reg(A))
        t.cast(reg(D3), reg(A))
        sync()
        t.cast(reg(D2), reg(D1))
        t.cast(reg(D4), reg(D3))

    a = (rng.standard_normal((RS, CS)) * 3).astype(np.float32)
    a.flat[::7] = rng.choice(np.array(TC.FP4_SPECIALS + [np.nan, np.inf, -np.inf, -0.0, 500.0],
                                      np.float32), a.flat[::7].shape)
    outs = [TC.poison((RS, CS), d) for d in (ndt, F16, ndt, F32)]
    case = TC.Case(k.name, k, [a] + outs, arch=arch)
    sub = (slice(r0, r0 + H), slice(c0, c0 + W))
    packed = (sub[0], slice(c0 // 2, (c0 + W) // 2)) if ndt == FP4 else sub
    n_bits = R.cast(a[sub], F32, ndt)

    def region(i, sl, fn):
        def want():
            o = outs[i].copy()
            o[sl] = fn()
            return o
        return want

    case.checks += [
        (f"{ndt} memory[{scope}, {kind}]", 1, region(0, packed, lambda: n_bits), None),
        (f"{ndt} -> f16[{scope}, {kind}]", 2, region(1, sub, lambda: R.cast(n_bits, ndt, F16)),
         None),
        (f"f32 -> {ndt}[{scope}, {kind}]", 3, region(2, packed, lambda: n_bits), None),
        (f"{ndt} -> f32[{scope}, {kind}]", 4, region(3, sub, lambda: R.cast(n_bits, ndt, F32)),
         None),
    ]
    return case


TILE_CASES = [(s, k, d) for d in (FP4, E4M3, E5M2) for s in ("thread", "warp", "warpgroup", "cta")
              for k in ("register", "shared", "global")]


@pytest.mark.parametrize("scope,kind,ndt", TILE_CASES)
def test_narrow_tiles(scope, kind, ndt):
    run_case(narrow_case(scope, kind, ndt, arch="sm_100a" if ndt == FP4 else "sm_90a"))


def _odd_case(ndt, arch):
    """Three float32 registers a thread (a pair and an odd one) -> ndt registers -> float32."""
    lay = TileLayout(S[(32, 3):(1 @ laneid, 1)])

    @pg.kernel(grid=(1,), block=(32,), name=f"odd_{ndt}")
    def k(A: pg.Tensor((32, 3), F32), B: pg.Tensor((32, 3), F32)):
        pg.lane_id()
        r = pg.alloc_local((32, 3), F32, layout=lay)
        q = pg.alloc_local((32, 3), ndt, layout=lay)
        pg.tile.warp.cast(r, A[0:32, 0:3])
        pg.tile.warp.cast(q, r)
        pg.tile.warp.cast(r, q)
        pg.tile.warp.cast(B[0:32, 0:3], r)

    a = (np.random.default_rng(6).standard_normal((32, 3)) * 50).astype(np.float32)
    case = TC.Case(k.name, k, [a, TC.poison((32, 3), F32)], arch=arch)
    case.checks.append((f"odd {ndt}", 1, lambda: R.cast(R.cast(a, F32, ndt), ndt, F32), None))
    return case


@pytest.mark.parametrize("ndt", [E4M3, FP4])
def test_odd_register_count(ndt):
    """Registers pair consecutive elements; the odd last one converts alone (fp4 registers hold
    one element each: only memory needs both nibbles in one thread)."""
    run_case(_odd_case(ndt, "sm_100a" if ndt == FP4 else "sm_90a"))


# ---- exact PTX: one cvt per pair ------------------------------------------------------------------
def _body(ptx):
    return [ln.strip() for ln in ptx.splitlines()
            if ln.strip() and not ln.strip().startswith("//")]


def _regcast(src, dst, W, arch):
    lay = TileLayout(S[(32, W):(1 @ laneid, 1)])

    @pg.kernel(grid=(1,), block=(32,), name=f"rc_{src}_{dst}")
    def k(A: pg.Tensor((32, W), src), B: pg.Tensor((32, W), dst)):
        pg.lane_id()
        r = pg.alloc_local((32, W), src, layout=lay)
        q = pg.alloc_local((32, W), dst, layout=lay)
        pg.tile.warp.cast(r, A[0:32, 0:W])
        pg.tile.warp.cast(q, r)
        pg.tile.warp.cast(B[0:32, 0:W], q)
    return k.ptx(arch)


def test_fp8_register_pairs_ptx():
    """float32 registers -> float8 registers: one cvt.rn.satfinite.e4m3x2.f32 per pair, split
    into the two element registers; and back: the bytes joined, one cvt.rn.f16x2.e4m3x2."""
    lines = _body(_regcast(F32, E4M3, 4, "sm_90a"))
    i = lines.index("cvt.rn.satfinite.e4m3x2.f32 %rs1, %f2, %f1;")
    assert lines[i:i + 8] == [
        "cvt.rn.satfinite.e4m3x2.f32 %rs1, %f2, %f1;", "cvt.u32.u16 %r11, %rs1;",
        "and.b32 %r2, %r11, 255;", "shr.b32 %r3, %r11, 8;",
        "cvt.rn.satfinite.e4m3x2.f32 %rs2, %f4, %f3;", "cvt.u32.u16 %r12, %rs2;",
        "and.b32 %r4, %r12, 255;", "shr.b32 %r5, %r12, 8;"]
    assert sum(ln.startswith("cvt.rn.satfinite.e4m3x2.f32") for ln in lines) == 2
    lines = _body(_regcast(E4M3, F32, 4, "sm_90a"))
    i = lines.index("bfi.b32 %r12, %r3, %r2, 8, 8;")
    assert lines[i:i + 10] == [
        "bfi.b32 %r12, %r3, %r2, 8, 8;", "cvt.u16.u32 %rs1, %r12;",
        "cvt.rn.f16x2.e4m3x2 %r13, %rs1;", "mov.b32 {%rs2, %rs3}, %r13;",
        "bfi.b32 %r14, %r5, %r4, 8, 8;", "cvt.u16.u32 %rs4, %r14;",
        "cvt.rn.f16x2.e4m3x2 %r15, %rs4;", "mov.b32 {%rs5, %rs6}, %r15;",
        "cvt.f32.f16 %f5, %rs2;", "mov.f32 %f1, %f5;"]
    assert sum(ln.startswith("cvt.rn.f16x2.e4m3x2") for ln in lines) == 2


def test_fp8_memory_pairs_ptx():
    """A memory float8 operand moves its pairs as halfwords: four float32 -> two cvts -> one
    32-bit store of both; a 32-bit load of four float8 splits into two .b16 cvt operands."""
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((128,), F32), B: pg.Tensor((128,), E5M2), C: pg.Tensor((128,), F32)):
        pg.lane_id()
        pg.tile.warp.cast(B[0:128], A[0:128])
        pg.tile.warp.cast(C[0:128], B[0:128])
    lines = _body(k.ptx("sm_90a"))
    i = lines.index("cvt.rn.satfinite.e5m2x2.f32 %rs1, %f2, %f1;")
    assert lines[i:i + 14] == [
        "cvt.rn.satfinite.e5m2x2.f32 %rs1, %f2, %f1;",
        "cvt.rn.satfinite.e5m2x2.f32 %rs2, %f4, %f3;", "mov.b32 %r6, {%rs1, %rs2};",
        "mul.wide.s32 %rd7, %r1, 4;", "add.s64 %rd6, %rd2, %rd7;", "st.global.u32 [%rd6], %r6;",
        "mul.wide.s32 %rd9, %r1, 4;", "add.s64 %rd8, %rd2, %rd9;", "ld.global.u32 %r7, [%rd8];",
        "mov.b32 {%rs3, %rs4}, %r7;", "cvt.rn.f16x2.e5m2x2 %r8, %rs3;",
        "mov.b32 {%rs5, %rs6}, %r8;", "cvt.rn.f16x2.e5m2x2 %r9, %rs4;",
        "mov.b32 {%rs7, %rs8}, %r9;"]


def test_fp4_pairs_ptx():
    """float4_e2m1fn: a .b8 per pair; two pairs a 16-bit store, a 32-bit load four pairs."""
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((256,), F32), B: pg.Tensor((256,), FP4), C: pg.Tensor((256,), F16)):
        pg.lane_id()
        pg.tile.warp.cast(B[0:256], A[0:256])
        pg.tile.warp.cast(C[0:256], B[0:256])
    ptx = k.ptx("sm_100a")
    assert ".reg .b8 %rc<" in ptx and ".version 8.6" in ptx
    lines = _body(ptx)
    i = lines.index("cvt.rn.satfinite.e2m1x2.f32 %rc1, %f2, %f1;")
    assert lines[i:i + 7] == [
        "cvt.rn.satfinite.e2m1x2.f32 %rc1, %f2, %f1;",
        "cvt.rn.satfinite.e2m1x2.f32 %rc2, %f4, %f3;", "mov.b16 %rs1, {%rc1, %rc2};",
        "cvt.u32.u16 %r6, %rs1;", "mul.wide.s32 %rd7, %r9, 2;", "add.s64 %rd6, %rd2, %rd7;",
        "st.global.u16 [%rd6], %r6;"]
    i = lines.index("ld.global.u32 %r10, [%rd8];")
    assert lines[i:i + 6] == [
        "ld.global.u32 %r10, [%rd8];", "mov.b32 {%rc3, %rc4, %rc5, %rc6}, %r10;",
        "cvt.rn.f16x2.e2m1x2 %r11, %rc3;", "mov.b32 {%rs2, %rs3}, %r11;",
        "cvt.rn.f16x2.e2m1x2 %r12, %rc4;", "mov.b32 {%rs4, %rs5}, %r12;"]
    assert sum(ln.startswith("cvt.rn.f16x2.e2m1x2") for ln in lines) == 4
    assert sum(ln.startswith("cvt.rn.satfinite.e2m1x2.f32") for ln in lines) == 2   # a loop


# ---- assembly, targets and errors ---------------------------------------------------------------
def _fp4_kernels():
    yield from (TC.cast_case(src, dsts=(FP4,), arch="sm_100a").kernel for src in TC.ALL)
    yield TC.cast_case(FP4, arch="sm_100a").kernel
    for s, k, d in TILE_CASES:
        if d == FP4:
            yield narrow_case(s, k, d).kernel
    yield _odd_case(FP4, "sm_100a").kernel


@pytest.mark.parametrize("arch", ["sm_100a", "sm_120a"])
def test_fp4_kernels_assemble(arch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in _fp4_kernels():
            ok, log = assemble(k.ptx(arch), arch)
            assert ok, f"{k.name}: {log}"


def test_fp8_pair_kernels_assemble():
    for s, k, d in TILE_CASES:
        if d != FP4:
            ok, log = assemble(narrow_case(s, k, d, arch="sm_90a").kernel.ptx("sm_90a"),
                               "sm_90a")
            assert ok, log


def _message(body, arch, block=32):
    with pytest.raises(pg.PtxgenError) as e:
        pg.kernel(grid=(1,), block=(block,))(body).ptx(arch)
    text = str(e.value)
    m = re.match(r"test_tile_cast_narrow\.py:\d+: ", text)
    assert m, text
    return type(e.value).__name__, text[m.end():]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100", "sm_120"])
def test_fp4_on_other_targets_names_the_targets(arch):
    def body(A: pg.Tensor((64,), FP4), B: pg.Tensor((64,), F32)):
        pg.tile.warp.cast(A[0:64], B[0:64])
    assert _message(body, arch) == (
        "ArchError", "instruction 'cvt.rn.satfinite.e2m1x2.f32' needs one of sm_100a, sm_100f, "
        f"sm_101a, sm_103a, sm_103f, sm_110a, sm_120a, sm_121a; the target is {arch}")

    def back(A: pg.Tensor((64,), F32), B: pg.Tensor((64,), FP4)):
        pg.tile.warp.cast(A[0:64], B[0:64])
    assert _message(back, arch)[1].startswith(
        "instruction 'cvt.rn.f16x2.e2m1x2' needs one of sm_100a")


def test_fp4_bytes_split_between_threads():
    """One float32 register a lane -> float4_e2m1fn memory: two lanes would share each byte."""
    def body(A: pg.Tensor((64,), FP4)):
        r = pg.alloc_local((32,), F32, layout=TileLayout(S[(32,):(1 @ laneid,)]))
        pg.tile.warp.fill(r, 1.0)
        pg.tile.warp.cast(A[0:32], r)
    kind, text = _message(body, "sm_100a")
    assert kind == "DispatchError"
    fix = ("A holds float4_e2m1fn, two elements a byte, and a thread must hold both elements "
           "of each byte it moves; give the register layout pairs of consecutive elements per "
           "thread (an even count along the contiguous dimension, from an even element)")
    assert text.splitlines()[1:] == [f"  {v}: {fix}" for v in ("packed", "vector", "scalar")]


def test_fp4_odd_region_start():
    def body(A: pg.Tensor((64,), FP4), B: pg.Tensor((64,), F32)):
        pg.tile.warp.cast(A[1:33], B[0:32])
    kind, text = _message(body, "sm_100a")
    assert kind == "DispatchError" and text.splitlines()[-1] == (
        "  scalar: 2 elements: A: region start offset 1 is not a multiple of 2; float4_e2m1fn "
        "moves in whole bytes of two elements: the regions must start at an even element and "
        "hold consecutive pairs")


@pytest.mark.parametrize("kw,want", [
    ({"rounding": "rz"}, "cast float32 -> float4_e2m1fn: PTX converts to float4_e2m1fn with "
                         "round-to-nearest-even only (cvt.rn.satfinite.e2m1x2.f32); drop "
                         "rounding='rz'"),
    ({"saturate": False}, "cast float32 -> float4_e2m1fn: PTX's float4 conversions always "
                          "saturate to the largest finite value (.satfinite); drop "
                          "saturate=False")])
def test_fp4_options(kw, want):
    def body(A: pg.Tensor((64,), FP4), B: pg.Tensor((64,), F32)):
        pg.tile.warp.cast(A[0:64], B[0:64], **kw)
    assert _message(body, "sm_100a") == ("TraceError", want)


def test_fp4_back_is_exact():
    def body(A: pg.Tensor((64,), F16), B: pg.Tensor((64,), FP4)):
        pg.tile.warp.cast(A[0:64], B[0:64], rounding="rn")
    assert _message(body, "sm_100a") == ("TraceError", "cast float4_e2m1fn -> float16 is exact; "
                                         "it takes no rounding mode (drop rounding='rn')")


def test_explain_names_the_pair_forms():
    out = {}

    def body(A: pg.Tensor((256,), F32), B: pg.Tensor((256,), FP4), C: pg.Tensor((256,), E4M3)):
        pg.lane_id()
        out["to"] = pg.tile.explain("cast", B[0:256], A[0:256], scope="warp", arch="sm_100a")
        out["both"] = pg.tile.explain("cast", C[0:256], B[0:256], scope="warp", arch="sm_100a")
        out["sm90"] = pg.tile.explain("cast", B[0:256], A[0:256], scope="warp", arch="sm_90a")
    pg.kernel(grid=(1,), block=(32,))(body).ptx("sm_100a")
    assert str(out["to"]).splitlines()[2] == (
        "-> packed       30  ok  cvt.rn.satfinite.e2m1x2.f32 pairs, 128/16-bit accesses, 32 "
        "thread(s) x 2 round(s) of 4")
    assert "cvt.rn.f16x2.e2m1x2 + cvt.rn.satfinite.e4m3x2.f32 pairs" in str(out["both"])
    assert str(out["sm90"]).splitlines()[2] == (
        "   packed       30  no  sm_90a has no cvt.rn.satfinite.e2m1x2.f32")
