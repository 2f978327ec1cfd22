"""pg.tile.warp.gemm (mma.sync): fragment layouts against the PTX ISA's tables, results through
the PTX interpreter (bit-exact for integers and integer-valued floats, within fp32
accumulation error for random f16/bf16), ldmatrix-fed fragments, dispatch and its errors,
and assembly for sm_80 / sm_89 / sm_90a / sm_100a."""
import re

import numpy as np
import pytest

import ptxgen as pg
from support import ptxsim
from support.asm import assemble
from ptxgen.layout import S, TileLayout, laneid, warpid
from ptxgen.primitives.mma_sync.fragments import SHAPES, inverse

RNG = np.random.default_rng(19)
NP = {"float16": np.float16, "bfloat16": np.uint16, "int8": np.int8, "uint8": np.uint8,
      "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8, "float32": np.float32,
      "int32": np.int32}


def shape_of(dt):
    return "m16n8k16" if dt in ("float16", "bfloat16") else "m16n8k32"


def acc_of(dt):
    return "int32" if dt in ("int8", "uint8") else "float32"


# ---- fragment tables, from the PTX ISA text (g = groupID, t = threadID_in_group) -------------
def isa(shape, which, lane, i):
    g, t = lane // 4, lane % 4
    if which == "C":
        return g + 8 * (i // 2), 2 * t + i % 2
    if shape == "m16n8k16":
        return ((g + 8 * (i // 2 % 2), 2 * t + i % 2 + 8 * (i // 4)) if which == "A"
                else (2 * t + i % 2 + 8 * (i // 2), g))
    return ((g + 8 * (i // 4 % 2), 4 * t + i % 4 + 16 * (i // 8)) if which == "A"
            else (4 * t + i % 4 + 16 * (i // 4), g))


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("which", ["A", "B", "C"])
def test_fragment_tables_are_the_isa_tables(shape, which):
    rows, cols = inverse(shape, which)
    for lane in range(32):
        for i in range(rows.shape[1]):
            assert (rows[lane, i], cols[lane, i]) == isa(shape, which, lane, i)


def test_tiled_layout_is_instruction_major():
    lay = pg.mma_sync_layout("C", "m16n8k16", tile=(32, 16))
    # tile (1, 0) starts at register 2 * 4; inside it, c2 of lane 5 is row 1 + 8, col 2
    assert lay.apply(16 + 9, 2, shape=(32, 16)) == {"m": 8 + 2, "laneid": 5}
    r = pg.mma_sync_layout("A", "m16n8k32", "int8", tile=(16, 64))
    assert r.apply(0, 32, shape=(16, 64))["m"] == 16 and r.span("m") == 32


@pytest.mark.parametrize("rows,cols,trans,which", [(16, 16, False, "A"), (32, 64, False, "A"),
                                                   (16, 8, True, "B"), (32, 32, True, "B")])
def test_ldmatrix_layout_puts_every_element_in_the_mma_lane(rows, cols, trans, which):
    """ldmatrix's fragments deliver each element to the lane mma.sync reads it from (the
    register order may differ: the gemm reads registers from the layout)."""
    ld = pg.ldmatrix_layout(rows, cols, trans)
    mm = pg.mma_sync_layout(which, "m16n8k16", "float16", tile=(rows, cols))
    for r in range(rows):
        for c in range(cols):
            assert ld.apply(r, c, shape=(rows, cols))["laneid"] == \
                mm.apply(r, c, shape=(rows, cols))["laneid"]


def test_layout_constructor_errors():
    with pytest.raises(pg.LayoutError, match=r"m16n8k16 A elements are 16-bit, int8 is 8-bit; "
                       r"8-bit A/B use 'm16n8k32'"):
        pg.mma_sync_layout("A", "m16n8k16", "int8")
    with pytest.raises(pg.LayoutError, match=r"tile 24 x 16 is not a whole number of 16 x 16"):
        pg.mma_sync_layout("A", "m16n8k16", tile=(24, 16))
    with pytest.raises(pg.LayoutError, match=r"unknown mma.sync shape 'm16n8k8'"):
        pg.mma_sync_layout("A", "m16n8k8")
    assert pg.mma_sync_layout("D", "m16n8k32") == pg.mma_sync_layout("C", "m16n8k32")


# ---- kernels --------------------------------------------------------------------------------
def gemm_kernel(dt, M, N, K, accumulate=True, load_c=True, a_layout=None, b_layout=None,
                runtime_acc=False, name="mma"):
    """One warp: A (M, K), B (K, N) and C (M, N) from global into fragments (reg copies),
    gemm, C back to global."""
    sh, cdt = shape_of(dt), acc_of(dt)

    def k(A: pg.Tensor((M, K), dt), B: pg.Tensor((K, N), dt), C: pg.Tensor((M, N), cdt),
          flag: pg.int32):
        pg.lane_id()
        a = pg.alloc_local((M, K), dt, layout=a_layout or pg.mma_sync_layout("A", sh, tile=(M, K)))
        b = pg.alloc_local((K, N), dt, layout=b_layout or pg.mma_sync_layout("B", sh, tile=(K, N)))
        c = pg.alloc_local((M, N), cdt, layout=pg.mma_sync_layout("C", sh, tile=(M, N)))
        pg.tile.warp.copy(a, A[0:M, 0:K])
        pg.tile.warp.copy(b, B[0:K, 0:N])
        if load_c:
            pg.tile.warp.copy(c, C[0:M, 0:N])
        pg.tile.warp.gemm(c, a, b, accumulate=(flag != 0) if runtime_acc else accumulate)
        pg.tile.warp.copy(C[0:M, 0:N], c)
    return pg.kernel(k, grid=(1,), block=(32,), name=name)


def decode(x, dt):
    if dt == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dt in ("float8_e4m3fn", "float8_e5m2"):
        from support import ptxsim_mma
        f = ptxsim_mma._e4m3 if dt == "float8_e4m3fn" else ptxsim_mma._e5m2
        return np.vectorize(f)(x).astype(np.float64)
    return x.astype(np.float64 if dt == "float16" else np.int64)


def encode_small_ints(vals, dt):
    """Small integers as dt bit patterns (exact in every format used here)."""
    if dt == "float16":
        return vals.astype(np.float16)
    if dt == "bfloat16":
        return (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    table = {v: b for b in range(256) for v in [decode(np.array([b], np.uint8), dt)[0]]
             if v == v and abs(v) < 64}
    return np.vectorize(lambda v: table[float(v)])(vals).astype(np.uint8)


def run(k, a, b, c, flag=1, arch="sm_80"):
    c = c.copy()
    ptxsim.run(k, [a, b, c], [flag], arch=arch)
    return c


@pytest.mark.parametrize("dt", ["int8", "uint8"])
@pytest.mark.parametrize("M,N,K", [(16, 8, 32), (32, 24, 64)])
def test_integer_gemm_bit_exact_with_wraparound(dt, M, N, K):
    a = RNG.integers(0, 256, (M, K)).astype(np.uint8).view(NP[dt])
    b = RNG.integers(0, 256, (K, N)).astype(np.uint8).view(NP[dt])
    c = RNG.integers(-2 ** 31, 2 ** 31, (M, N)).astype(np.int32)
    c[0, 0] = 2 ** 31 - 1                        # and the sum wraps like the hardware's
    want = (c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64) + 2 ** 31) \
        % 2 ** 32 - 2 ** 31
    got = run(gemm_kernel(dt, M, N, K), a, b, c)
    assert np.array_equal(got, want.astype(np.int32))


def test_mixed_signedness_int8():
    M, N, K = 16, 8, 32
    sh = "m16n8k32"

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((M, K), "uint8"), B: pg.Tensor((K, N), "int8"),
          C: pg.Tensor((M, N), "int32")):
        pg.lane_id()
        a = pg.alloc_local((M, K), "uint8", layout=pg.mma_sync_layout("A", sh))
        b = pg.alloc_local((K, N), "int8", layout=pg.mma_sync_layout("B", sh))
        c = pg.alloc_local((M, N), "int32", layout=pg.mma_sync_layout("C", sh))
        pg.tile.warp.copy(a, A[0:M, 0:K])
        pg.tile.warp.copy(b, B[0:K, 0:N])
        pg.tile.warp.gemm(c, a, b, accumulate=False)
        pg.tile.warp.copy(C[0:M, 0:N], c)

    assert "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32" in k.ptx("sm_80")
    a = RNG.integers(0, 256, (M, K)).astype(np.uint8)
    b = RNG.integers(-128, 128, (K, N)).astype(np.int8)
    c = np.full((M, N), -1, np.int32)
    ptxsim.run(k, [a, b, c], arch="sm_80")
    assert np.array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))


@pytest.mark.parametrize("dt,arch", [("float16", "sm_80"), ("bfloat16", "sm_80"),
                                     ("float8_e4m3fn", "sm_89"), ("float8_e5m2", "sm_90a")])
@pytest.mark.parametrize("M,N,K", [(16, 8, 32), (32, 16, 64)])
def test_float_gemm_integer_values_bit_exact(dt, arch, M, N, K):
    """Integer-valued inputs: every partial sum is exact in fp32, whatever the order."""
    a = encode_small_ints(RNG.integers(-4, 5, (M, K)), dt)
    b = encode_small_ints(RNG.integers(-4, 5, (K, N)), dt)
    c = RNG.integers(-1000, 1000, (M, N)).astype(np.float32)
    want = (c + decode(a, dt) @ decode(b, dt)).astype(np.float32)
    assert np.array_equal(run(gemm_kernel(dt, M, N, K), a, b, c, arch=arch), want)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_float_gemm_within_fp32_accumulation_error(dt):
    M, N, K = 32, 16, 64
    f = RNG.standard_normal((M, K)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    if dt == "float16":
        a, b = f[0].astype(np.float16), f[1].astype(np.float16)
    else:
        a, b = [(x.view(np.uint32) >> 16).astype(np.uint16) for x in f]
    c = RNG.standard_normal((M, N)).astype(np.float32)
    want = c.astype(np.float64) + decode(a, dt) @ decode(b, dt)
    got = run(gemm_kernel(dt, M, N, K), a, b, c)
    bound = 2 ** -23 * (np.abs(c) + np.abs(decode(a, dt)) @ np.abs(decode(b, dt))) * (K + 1)
    assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize("how", ["false", "runtime0", "runtime1"])
def test_accumulate_flag(how):
    M, N, K = 16, 16, 32
    a = RNG.integers(-128, 128, (M, K)).astype(np.int8)
    b = RNG.integers(-128, 128, (K, N)).astype(np.int8)
    c = RNG.integers(-1000, 1000, (M, N)).astype(np.int32)
    prod = a.astype(np.int64) @ b.astype(np.int64)
    k = gemm_kernel("int8", M, N, K, accumulate=False, runtime_acc=how != "false")
    got = run(k, a, b, c, flag=1 if how == "runtime1" else 0)
    want = prod + c if how == "runtime1" else prod
    assert np.array_equal(got, want.astype(np.int32))
    if how == "false":
        assert not re.search(r"@%p\d+ mov.b32", k.ptx("sm_80"))


def test_any_register_order_with_the_right_lanes():
    """Registers are read from the layout: a fragment with a0..a7 in another register order
    multiplies the same (each instruction's registers are packed in fragment order)."""
    M, N, K = 16, 8, 16
    swapped = TileLayout(S[((2, 8), (2, 4, 2)):((4, 4 @ laneid), (2, 1 @ laneid, 1))])
    a = encode_small_ints(RNG.integers(-4, 5, (M, K)), "float16")
    b = encode_small_ints(RNG.integers(-4, 5, (K, N)), "float16")
    c = np.zeros((M, N), np.float32)
    got = run(gemm_kernel("float16", M, N, K, a_layout=swapped), a, b, c)
    assert np.array_equal(got, (decode(a, "float16") @ decode(b, "float16")).astype(np.float32))


def test_sub_regions_of_larger_fragments():
    """gemm on regions of bigger fragments (one instruction tile of each): the registers come
    from the layout at the region's start."""
    sh = "m16n8k16"

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 32), "float16"), B: pg.Tensor((32, 16), "float16"),
          C: pg.Tensor((32, 16), "float32")):
        pg.lane_id()
        a = pg.alloc_local((32, 32), "float16", layout=pg.mma_sync_layout("A", sh, tile=(32, 32)))
        b = pg.alloc_local((32, 16), "float16", layout=pg.mma_sync_layout("B", sh, tile=(32, 16)))
        c = pg.alloc_local((32, 16), "float32", layout=pg.mma_sync_layout("C", sh, tile=(32, 16)))
        pg.tile.warp.copy(a, A)
        pg.tile.warp.copy(b, B)
        pg.tile.warp.copy(c, C)
        pg.tile.warp.gemm(c[16:32, 8:16], a[16:32, 16:32], b[16:32, 8:16])
        pg.tile.warp.copy(C, c)

    a = encode_small_ints(RNG.integers(-4, 5, (32, 32)), "float16")
    b = encode_small_ints(RNG.integers(-4, 5, (32, 16)), "float16")
    c = RNG.integers(-50, 50, (32, 16)).astype(np.float32)
    want = c.copy()
    want[16:, 8:] += (decode(a, "float16")[16:, 16:] @ decode(b, "float16")[16:, 8:])
    got = c.copy()
    ptxsim.run(k, [a, b, got], arch="sm_80")
    assert np.array_equal(got, want)
    assert len(re.findall(r"^\s+mma\.sync\.aligned", k.ptx("sm_80"), re.M)) == 1


# ---- fed by ldmatrix from shared memory -------------------------------------------------------
def ldsm_gemm(dt, M, N, K, b_kn=True):
    """A (M, K) and B in shared memory, fragments loaded by pg.tile.warp.copy (ldmatrix for
    16-bit, the register path for 8-bit); B is stored (K, N) or, b_kn=False, (N, K)."""
    sh, cdt = shape_of(dt), acc_of(dt)
    bshape = (K, N) if b_kn else (N, K)

    def k(A: pg.Tensor((M, K), dt), B: pg.Tensor(bshape, dt), C: pg.Tensor((M, N), cdt)):
        pg.lane_id()
        As = pg.alloc_shared((M, K), dt)
        Bs = pg.alloc_shared(bshape, dt)
        pg.tile.warp.copy(As, A)
        pg.tile.warp.copy(Bs, B)
        pg.cta_sync()
        a = pg.alloc_local((M, K), dt, layout=pg.mma_sync_layout("A", sh, tile=(M, K)))
        b = pg.alloc_local((K, N), dt, layout=pg.mma_sync_layout("B", sh, tile=(K, N)))
        c = pg.alloc_local((M, N), cdt, layout=pg.mma_sync_layout("C", sh, tile=(M, N)))
        pg.tile.warp.copy(a, As[0:M, 0:K])
        pg.tile.warp.copy(b, Bs[0:K, 0:N] if b_kn else Bs.permute(1, 0)[0:K, 0:N])
        pg.tile.warp.gemm(c, a, b, accumulate=False)
        pg.tile.warp.copy(C[0:M, 0:N], c)
    return pg.kernel(k, grid=(1,), block=(32,), name="ldsm_mma")


@pytest.mark.parametrize("dt,b_kn", [("float16", True), ("bfloat16", False), ("int8", False)])
def test_fragments_from_shared_memory(dt, b_kn):
    M, N, K = 32, 16, 64
    k = ldsm_gemm(dt, M, N, K, b_kn)
    ptx = k.ptx("sm_80")
    if dt != "int8":
        want = ["ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                "ldmatrix.sync.aligned.m8n8.x4." + ("trans." if b_kn else "") + "shared.b16"]
        assert all(w in ptx for w in want), ptx
    if dt == "int8":
        a = RNG.integers(-128, 128, (M, K)).astype(np.int8)
        bt = RNG.integers(-128, 128, (N, K)).astype(np.int8)
        want = a.astype(np.int64) @ bt.T.astype(np.int64)
    else:
        a = encode_small_ints(RNG.integers(-4, 5, (M, K)), dt)
        bt = encode_small_ints(RNG.integers(-4, 5, (N, K)), dt)
        want = decode(a, dt) @ decode(bt, dt).T
    b = bt.T.copy() if b_kn else bt
    c = np.full((M, N), -7, NP[acc_of(dt)])
    ptxsim.run(k, [a, b, c], arch="sm_80")
    assert np.array_equal(c, want.astype(NP[acc_of(dt)]))


@pytest.mark.parametrize("dt", ["int8", "float8_e4m3fn"])
@pytest.mark.parametrize("which,rows,cols", [("A", 32, 64), ("B", 64, 16)])
def test_8bit_fragments_through_ldmatrix_and_stmatrix(dt, which, rows, cols):
    """ldmatrix moves 8-bit fragments as byte pairs: shared -> registers (ldmatrix) ->
    shared (stmatrix, sm_90) -> global reproduces the tile; B is the (K, N) view of an (N, K)
    K-contiguous tile."""
    lay = pg.mma_sync_layout(which, "m16n8k32", tile=(rows, cols))
    store = (rows, cols) if which == "A" else (cols, rows)

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor(store, dt), B: pg.Tensor(store, dt)):
        pg.lane_id()
        s1, s2 = pg.alloc_shared(store, dt), pg.alloc_shared(store, dt)
        pg.tile.warp.copy(s1, A)
        pg.cta_sync()
        r = pg.alloc_local((rows, cols), dt, layout=lay)
        view = (lambda t: t) if which == "A" else (lambda t: t.permute(1, 0))
        pg.tile.warp.copy(r, view(s1)[0:rows, 0:cols])
        pg.tile.warp.copy(view(s2)[0:rows, 0:cols], r)
        pg.cta_sync()
        pg.tile.warp.copy(B, s2)

    ptx = k.ptx("sm_90a")
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    a = RNG.integers(0, 256, store).astype(np.uint8).view(NP[dt])
    b = np.zeros_like(a)
    ptxsim.run(k, [a, b])
    assert a.tobytes() == b.tobytes()


def test_8bit_ldmatrix_declines_what_it_cannot_move():
    from ptxgen.primitives.copy.ldstmatrix import NOT_FRAGMENT8
    tables = []

    @pg.kernel(grid=(1,), block=(32,))
    def k(X: pg.Tensor((1,), "int32")):
        pg.lane_id()
        s = pg.alloc_shared((64, 16), "int8")                  # (K, N), N contiguous
        r = pg.alloc_local((64, 16), "int8", layout=pg.mma_sync_layout("B", "m16n8k32",
                                                                       tile=(64, 16)))
        tables.append(pg.tile.explain("copy", r, s, scope="warp"))
    assert {x.name: x.reason for x in tables[0]}["ldstmatrix"] == NOT_FRAGMENT8


# ---- dispatch, explain and the errors ----------------------------------------------------------
def one(dt="float16", cdt=None, a_layout=None, scope="warp", arch="sm_80", a_scope="local",
        shape=None, explain=None, M=16, block=32, partial=False):
    sh = shape or shape_of(dt)
    KK = SHAPES[sh][1]["A"].cols
    cdt = cdt or acc_of(dt)

    def k(X: pg.Tensor((1,), "int32")):
        lane = pg.lane_id()
        if a_scope == "shared":
            a = pg.alloc_shared((M, KK), dt)
        else:
            a = pg.alloc_local((M, KK), dt,
                               layout=a_layout or pg.mma_sync_layout("A", sh, tile=(M, KK)))
        b = pg.alloc_local((KK, 8), dt, layout=pg.mma_sync_layout("B", sh))
        c = pg.alloc_local((16, 8), cdt, layout=pg.mma_sync_layout("C", sh))
        if explain is not None:
            explain.append(pg.tile.explain("gemm", c, a[0:16, 0:KK], b, scope="warp", arch=arch))
        if partial:
            with pg.if_(lane < 16):
                getattr(pg.tile, scope).gemm(c, a[0:16, 0:KK], b)
        else:
            getattr(pg.tile, scope).gemm(c, a[0:16, 0:KK], b)
    return pg.kernel(k, grid=(1,), block=(block,)).ptx(arch)


def test_explain_lists_both_shapes():
    tables = []
    one("bfloat16", explain=tables)
    (t,) = tables
    assert t.chosen == "m16n8k16"
    text = str(t)
    assert "1 x mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in text
    assert "m16n8k32 multiplies 8-bit fragments" in text
    tables = []
    with pytest.raises(pg.DispatchError):
        one("float8_e5m2", explain=tables, arch="sm_80")
    assert tables[0].chosen is None
    assert "needs sm_89 or newer; the target is sm_80" in str(tables[0])


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(a_layout=TileLayout(S[(16, 16):(16, 1)])), pg.LayoutError,
     r"A a\[0:16, 0:16\]: its layout has no laneid axis, so every lane would hold all of it; "
     r"declare it with layout=mma_sync_layout\('A', 'm16n8k16', tile=\(16, 16\)\) "
     r"\(ldmatrix_layout\(16, 16\) is the same arrangement\)"),
    (dict(a_layout=TileLayout(S[(16, 16):(1 @ laneid, 16)])), pg.LayoutError,
     r"element \(0, 2\) is in lane 0, but mma.sync m16n8k16 reads it as a0 of lane 1"),
    (dict(a_layout=TileLayout(S[((2, 2, 8), (2, 4, 2)):((1 @ warpid, 2, 4 @ laneid),
                                                          (4, 1 @ laneid, 1))]), M=32, block=64),
     pg.LayoutError, r"its layout uses the warpid axis; an mma.sync fragment is one warp's"),
    (dict(dt="int8", a_layout=TileLayout(S[((2, 8), (2, 4, 4)):((4, 4 @ laneid), (8, 1 @ laneid, 2))])),
     pg.LayoutError, r"A a\[0:16, 0:32\]: its layout puts two fragment elements in one register: "
     r"declare it with layout=mma_sync_layout\('A', 'm16n8k32', tile=\(16, 32\)\)"),
    (dict(cdt="float16"), pg.TraceError,
     r"the accumulator C c\[0:16, 0:8\] is float16; float16 x float16 accumulates into float32"),
    (dict(scope="cta"), pg.TraceError,
     r"pg.tile.cta.gemm: mma.sync is one warp's instruction .* call pg.tile.warp.gemm"),
    (dict(a_scope="shared"), pg.LayoutError,
     r"A a\[0:16, 0:16\] is in shared memory; mma.sync reads register fragments: copy it into "
     r"a local tensor first"),
    (dict(arch="sm_75"), pg.ArchError, r"'mma.sync' needs sm_80 or newer; the target is sm_75"),
    (dict(dt="float8_e4m3fn"), pg.DispatchError,
     r"m16n8k32: 'mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32' needs sm_89 or newer; "
     r"the target is sm_80 \(build for a newer target, or use 16-bit fragments\)"),
    (dict(dt="float32", shape="m16n8k16", cdt="float32"), pg.DispatchError,
     r"m16n8k16: m16n8k16 multiplies float16 x float16 or bfloat16 x bfloat16 fragments; A is "
     r"float32"),
    (dict(partial=True), pg.DispatchError, r"not all 32 threads of the warp scope are active"),
])
def test_wrong_uses_name_the_fix(kw, exc, msg):
    with pytest.raises(exc, match=msg) as e:
        one(**kw)
    assert "test_mma_sync.py:" in str(e.value)


def test_shape_errors():
    def k(X: pg.Tensor((1,), "int32")):
        pg.lane_id()
        a = pg.alloc_local((16, 16), "float16", layout=pg.mma_sync_layout("A"))
        b = pg.alloc_local((16, 8), "float16", layout=pg.mma_sync_layout("B"))
        c = pg.alloc_local((16, 16), "float32", layout=pg.mma_sync_layout("C", tile=(16, 16)))
        pg.tile.warp.gemm(c, a, b)
    with pytest.raises(pg.TraceError, match=r"gemm computes C \(M, N\) \+= A \(M, K\) @ B \(K, N\); "
                       r"got C \(16, 16\), A \(16, 16\), B \(16, 8\)"):
        pg.kernel(k, grid=(1,), block=(32,))


@pytest.mark.parametrize("dt,archs", [
    ("float16", ["sm_80", "sm_90a", "sm_100a"]), ("bfloat16", ["sm_80", "sm_90a", "sm_100a"]),
    ("int8", ["sm_80", "sm_90a", "sm_100a"]), ("float8_e4m3fn", ["sm_89", "sm_90a", "sm_100a"])])
def test_assembles(dt, archs):
    k = gemm_kernel(dt, 32, 16, 64, runtime_acc=True)
    for arch in archs:
        ptx = k.ptx(arch)
        if dt.startswith("float8"):
            assert re.search(r"\.version 8\.[4-9]", ptx)
        ok, log = assemble(ptx, arch)
        assert ok, f"{arch}: {log}"


# ---- examples/gemm_sm80.py through the interpreter ---------------------------------------------
@pytest.mark.parametrize("dt,out,cfg", [
    ("float16", "float32", {}), ("int8", "int32", {}),
    ("bfloat16", "bfloat16", dict(BM=32, BN=64, BK=32, WM=2, WN=1)),
    ("float16", "float16", dict(BM=32, BN=32, BK=32, WM=1, WN=2))])
def test_example_gemm_sm80(dt, out, cfg):
    """The example's kernel (default 128 x 128 tile with 8 warps, and smaller ones) on 2 CTAs
    along N (2 x 2 for the small tiles) and several K steps, bit-exact on integer-valued
    inputs."""
    import gemm_sm80 as g
    BM, BN = cfg.get("BM", 128), cfg.get("BN", 128)
    M, N, K = (BM, 2 * BN, 64) if not cfg else (2 * BM, 2 * BN, 96)
    k = g.make_gemm(M, N, K, dt, out, **cfg)
    a, b = g.small_ints(RNG, (M, K), dt), g.small_ints(RNG, (K, N), dt)
    want = g._as_out(g._as_f64(a, dt) @ g._as_f64(b, dt), out)
    c = np.frombuffer(b"\xa5" * want.nbytes, want.dtype).reshape(M, N).copy()
    ptxsim.run(k, [a, b, c], arch="sm_80")
    assert c.tobytes() == want.tobytes()
    ptx = k.ptx("sm_80")
    if dt != "int8":
        assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx


def test_example_gemm_sm80_assembles():
    import gemm_sm80 as g
    for k in g.KERNELS:
        for arch in ("sm_80", "sm_90a", "sm_100a"):
            ok, log = assemble(k.ptx(arch), arch)
            assert ok, f"{k.name} {arch}: {log}"
