"""Copy variants vec_16b..vec_256b, ldstmatrix and vec_auto's reg path.

Exact PTX forms, nvJitLink assembly per target, exact rejection reasons, and numpy models:
the register partition moves every element exactly once with aligned vectors, and a
simulation of ldmatrix/stmatrix semantics lands every element in the register the layout
names.
"""
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen as pg
from support.asm import assemble
from ptxgen.errors import DispatchError, PtxgenError
from ptxgen.layout import (ComposeLayout, S, Swizzle, TileLayout, laneid, tid, tid_in_wg,
                           wid_in_wg)
from ptxgen.primitives.copy.common import digits_offset
from ptxgen.primitives.copy.ldstmatrix import ldmatrix_layout, plan_ldsm
from ptxgen.primitives.copy.reg import plan_reg

HOPPER_BLACKWELL = ("sm_90a", "sm_100a")


def instrs(ptx):
    """Instruction lines of the body (comments dropped)."""
    body = ptx[ptx.index("{"):]
    return [ln.strip() for ln in body.splitlines()
            if ln.strip() and not ln.strip().startswith("//")]


def opcodes(ptx, prefix):
    return [ln.split()[0] for ln in instrs(ptx) if ln.startswith(prefix)]


def assert_assembles(k, archs=HOPPER_BLACKWELL):
    for arch in archs:
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, f"{arch}: {log}"


# ---- vec_16b .. vec_256b ------------------------------------------------------------------
def vec_kernel(bits, dt, n, hint=None, align=16, start=0, dst="global", src_scope="global"):
    """Thread t moves row t, columns start..start+n, through one forced vector each way."""
    kw = {"cache_hint": hint} if hint else {}

    @pg.kernel(grid=(1,), block=(32,), name=f"vec{bits}_{dt}")
    def k(A: pg.Tensor((32, 16), dt, align=align), B: pg.Tensor((32, 16), dt, align=align)):
        tx = pg.thread_id(32)
        if src_scope == "shared":
            sm = pg.alloc_shared((32, 16), dt, align=align)
            R = pg.alloc_local((n,), dt)
            pg.tile.thread.copy(sm[tx, start:start + n], A[tx, start:start + n],
                                dispatch=f"vec_{bits}b")
            pg.tile.thread.copy(R[0:n], sm[tx, start:start + n], dispatch=f"vec_{bits}b", **kw)
        else:
            R = pg.alloc_local((n,), dt)
            pg.tile.thread.copy(R[0:n], A[tx, start:start + n], dispatch=f"vec_{bits}b", **kw)
        pg.tile.thread.copy(B[tx, start:start + n], R[0:n], dispatch=f"vec_{bits}b")
    return k


VEC_CASES = [  # bits, dtype, elements, load form, store form
    (16, "int8", 2, "ld.global.u16", "st.global.u16"),
    (16, "float16", 1, "ld.global.u16", "st.global.u16"),
    (32, "bfloat16", 2, "ld.global.u32", "st.global.u32"),
    (32, "uint8", 4, "ld.global.u32", "st.global.u32"),
    (64, "float32", 2, "ld.global.v2.u32", "st.global.v2.u32"),
    (64, "int16", 4, "ld.global.v2.u32", "st.global.v2.u32"),
    (128, "float16", 8, "ld.global.v4.u32", "st.global.v4.u32"),
    (128, "float64", 2, "ld.global.v4.u32", "st.global.v4.u32"),
    (128, "float8_e4m3fn", 16, "ld.global.v4.u32", "st.global.v4.u32"),
]


@pytest.mark.parametrize("bits,dt,n,ld,st_", VEC_CASES)
def test_vec_fixed_register_forms(bits, dt, n, ld, st_):
    k = vec_kernel(bits, dt, n)
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "ld.global") == [ld] and opcodes(ptx, "st.global") == [st_]
    assert ".v8" not in ptx
    assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


def test_vec_fixed_register_moves_are_bit_moves():
    ptx = vec_kernel(128, "float16", 8).ptx("sm_90a")
    assert len(re.findall(r"mov\.b32 \{%rs\d+, %rs\d+\}, %r\d+;", ptx)) == 4     # unpack
    assert len(re.findall(r"mov\.b32 %r\d+, \{%rs\d+, %rs\d+\};", ptx)) == 4     # pack
    assert "cvt.f" not in ptx
    ptx8 = vec_kernel(32, "int8", 4).ptx("sm_90a")
    assert len(opcodes(ptx8, "bfe.s32")) == 4 and len(opcodes(ptx8, "bfi.b32")) == 3


def test_vec_fixed_shared_source_and_memory_pair():
    k = vec_kernel(128, "float32", 4, src_scope="shared")
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "st.shared") == ["st.shared.v4.u32"]
    assert opcodes(ptx, "ld.shared") == ["ld.shared.v4.u32"]
    assert opcodes(ptx, "ld.global") == ["ld.global.v4.u32"]
    assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


@pytest.mark.parametrize("hint,form", [
    ("nc", "ld.global.nc.v4.u32"),
    (["L2::256B", "nc", "L1::no_allocate"], "ld.global.nc.L1::no_allocate.L2::256B.v4.u32"),
    ("L1::evict_last", "ld.global.L1::evict_last.v4.u32"),
    ("L2::64B", "ld.global.L2::64B.v4.u32"),
])
def test_vec_fixed_cache_hints(hint, form):
    k = vec_kernel(128, "int32", 4, hint=hint)
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "ld.global") == [form]
    assert opcodes(ptx, "st.global") == ["st.global.v4.u32"]
    assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


def test_vec_256b_on_blackwell():
    k = vec_kernel(256, "float32", 8, hint=["nc", "L2::256B"], align=32)
    ptx = k.ptx("sm_100a")
    assert ".version 8.8\n.target sm_100a" in ptx
    assert opcodes(ptx, "ld.global") == ["ld.global.nc.L2::256B.v8.u32"]
    assert opcodes(ptx, "st.global") == ["st.global.v8.u32"]
    assert_assembles(k, ("sm_100a",))
    k16 = vec_kernel(256, "bfloat16", 16, align=32)        # 16-bit lanes still move as v8.u32
    assert opcodes(k16.ptx("sm_100a"), "ld.global") == ["ld.global.v8.u32"]
    assert ".v8.b16" not in k16.ptx("sm_100a") and ".v8.u16" not in k16.ptx("sm_100a")
    assert_assembles(k16, ("sm_100a",))


def dispatch_error(k, arch="sm_90a"):
    with pytest.raises(DispatchError) as e:
        k.ptx(arch)
    return str(e.value)


def test_forced_vec_128b_on_12_byte_region_rejected():
    msg = dispatch_error(vec_kernel(128, "float32", 3))
    assert "vec_128b: the region holds 3 x 32-bit element(s) = 96 bits, not one 128-bit " \
           "vector" in msg


def test_forced_vec_256b_on_sm90a_rejected():
    msg = dispatch_error(vec_kernel(256, "float32", 8, align=32), "sm_90a")
    assert "vec_256b: 256-bit loads/stores need sm_100 or newer and PTX 8.8; the target is " \
           "sm_90a" in msg


def test_vec_256b_needs_global_and_32_byte_alignment():
    msg = dispatch_error(vec_kernel(256, "float32", 8, align=32, src_scope="shared"), "sm_100a")
    assert "vec_256b: 256-bit loads/stores exist only in the global state space; sm is in " \
           "shared memory" in msg
    msg = dispatch_error(vec_kernel(256, "float32", 8, align=16), "sm_100a")
    assert "vec_256b: A: base alignment 16 B is below 32 B (declare align=32)" in msg


def test_cache_hint_on_shared_source_rejected():
    msg = dispatch_error(vec_kernel(128, "float32", 4, hint="nc", src_scope="shared"))
    assert "vec_128b: cache hints (nc) apply only to global loads; the source is shared" in msg


def test_cache_hint_on_register_source_rejected():
    @pg.kernel(grid=(1,), block=(32,))
    def k(B: pg.Tensor((32, 4), "float32")):
        tx = pg.thread_id(32)
        R = pg.alloc_local((4,), "float32")
        pg.tile.thread.copy(B[tx, 0:4], R[0:4], dispatch="vec_128b", cache_hint="nc")
    assert "vec_128b: cache hints (nc) apply only to global loads; the source is local" \
        in dispatch_error(k)


def test_vec_fixed_misaligned_region_rejected():
    msg = dispatch_error(vec_kernel(128, "float32", 4, start=2))
    assert "vec_128b: A: region start offset 2 + tx * 16 is not a multiple of 4" in msg


def test_vec_fixed_needs_thread_scope():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 4), "float32"), B: pg.Tensor((32, 4), "float32")):
        pg.tile.warp.copy(B[0:1, 0:4], A[0:1, 0:4], dispatch="vec_128b")
    assert "vec_128b: vec_128b runs in thread scope only (each thread moves its own vector); " \
           "the scope is warp (32 threads)" in dispatch_error(k)


def test_vec_fixed_is_forced_only():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 4), "float32"), B: pg.Tensor((32, 4), "float32")):
        tx = pg.thread_id(32)
        R = pg.alloc_local((4,), "float32")
        table = pg.tile.explain("copy", R[0:4], A[tx, 0:4], scope="thread")
        assert table.chosen == "reg"
        row = {r.name: r for r in table}
        assert row["vec_128b"].reason == "only when forced with dispatch='vec_128b'"
        pg.tile.thread.copy(R[0:4], A[tx, 0:4])
        pg.tile.thread.copy(B[tx, 0:4], R[0:4])
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "ld.global") == ["ld.global.v4.u32"]


# ---- vec_auto reg path ---------------------------------------------------------------------------
LANE_ROWS = TileLayout(S[(32, 8):(1 @ laneid, 1)])


def reg_kernel(shape, dt, layout, scope, block, mem="global", a_layout=None, explain=None,
               a_align=16, a_shape=None, region=None, s_layout=None):
    """A -> R (registers) -> B, directly or through shared memory."""
    a_shape = a_shape or shape
    region = region or tuple(slice(0, e) for e in shape)

    @pg.kernel(grid=(1,), block=(block,), name=f"reg_{scope}_{dt}")
    def k(A: pg.Tensor(a_shape, dt, layout=a_layout, align=a_align),
          B: pg.Tensor(a_shape, dt, layout=a_layout, align=a_align)):
        R = pg.alloc_local(shape, dt, layout=layout)
        cp = getattr(pg.tile, scope).copy
        if mem == "global":
            src, dst = A[region], B[region]
        else:
            sa = pg.alloc_shared(a_shape, dt, layout=s_layout)
            sb = pg.alloc_shared(a_shape, dt, layout=s_layout)
            pg.tile.cta.copy(sa[region], A[region])
            pg.cta_sync()
            src, dst = sa[region], sb[region]
        if explain is not None:
            explain.append(pg.tile.explain("copy", R[:, :] if len(shape) == 2 else R[:],
                                           src, scope=scope))
            explain.append(pg.tile.explain("copy", dst, R[:, :] if len(shape) == 2 else R[:],
                                           scope=scope))
        whole = tuple(slice(0, e) for e in shape)
        cp(R[whole], src)
        cp(dst, R[whole])
        if mem != "global":
            pg.cta_sync()
            pg.tile.cta.copy(B[region], sb[region])
    return k


def test_reg_warp_fp16_rows():
    ex = []
    k = reg_kernel((32, 8), "float16", LANE_ROWS, "warp", 32, explain=ex)
    assert ex[0].chosen == "reg"
    assert {r.name: r.reason for r in ex[0]}["reg"] == \
        "128-bit vectors, 32 thread(s) x 1 vector(s)"
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "ld.global") == ["ld.global.v4.u32"]
    assert opcodes(ptx, "st.global") == ["st.global.v4.u32"]
    assert "mul.wide.s32" in ptx and "shl.b32 %r2, %r1, 3;" in ptx    # lane * 8 elements
    assert "ld.local" not in ptx and "st.local" not in ptx and ".local" not in ptx
    assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


@pytest.mark.parametrize("dt,bfe", [("int8", "bfe.s32"), ("uint8", "bfe.u32"),
                                    ("float8_e5m2", "bfe.u32"), ("int16", "bfe.s32")])
def test_reg_narrow_ints_use_bit_fields(dt, bfe):
    bits = {"int16": 16}.get(dt, 8)
    cols = 128 // bits
    lay = TileLayout(S[(32, cols):(1 @ laneid, 1)])
    k = reg_kernel((32, cols), dt, lay, "warp", 32)
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "ld.global") == ["ld.global.v4.u32"]
    assert len(opcodes(ptx, bfe)) == cols and len(opcodes(ptx, "bfi.b32")) == cols - 4
    assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


def test_reg_warpgroup_and_cta_scopes():
    wg = reg_kernel((128, 4), "float32", TileLayout(S[(128, 4):(1 @ tid_in_wg, 1)]),
                    "warpgroup", 256)
    ptx = wg.ptx("sm_90a")
    assert "and.b32 %r1, %r1, 127;" in ptx or re.search(r"and\.b32 %r\d+, %r\d+, 127;", ptx)
    assert opcodes(ptx, "ld.global") == ["ld.global.v4.u32"]
    cta = reg_kernel((256, 2), "float32", TileLayout(S[(256, 2):(1 @ tid, 1)]), "cta", 256)
    assert opcodes(cta.ptx("sm_90a"), "ld.global") == ["ld.global.v2.u32"]
    both = reg_kernel((128, 8), "float16",
                      TileLayout(S[((4, 32), 8):((1 @ wid_in_wg, 1 @ laneid), 1)]),
                      "warpgroup", 128)
    assert opcodes(both.ptx("sm_90a"), "ld.global") == ["ld.global.v4.u32"]
    for k in (wg, cta, both):
        assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


def test_reg_column_fragments_vectorize_through_registers():
    # lane l holds column l: registers are strided by the row, memory rows are contiguous
    lay = TileLayout(S[(8, 32):(1, 1 @ laneid)])
    k = reg_kernel((8, 32), "float32", lay, "warp", 32)
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "ld.global") == ["ld.global.u32"] * 8      # 32 lanes x 1 column
    # two elements per lane along a contiguous pair: 64-bit vectors
    lay2 = TileLayout(S[(4, (32, 2)):(2, (1 @ laneid, 1))])
    k2 = reg_kernel((4, 64), "float32", lay2, "warp", 32)
    assert opcodes(k2.ptx("sm_90a"), "ld.global") == ["ld.global.v2.u32"] * 4
    assert_assembles(k2)


def test_reg_shared_with_swizzle_caps_vector():
    swz = ComposeLayout(Swizzle(2, 1, 3), TileLayout(S[(32, 8)]))     # 2-element chunks
    ex = []
    k = reg_kernel((32, 8), "float32", LANE_ROWS, "warp", 32, mem="shared", s_layout=swz,
                   explain=ex)
    assert {r.name: r.reason for r in ex[0]}["reg"] == \
        "64-bit vectors, 32 thread(s) x 4 vector(s)"
    ptx = k.ptx("sm_90a")
    seg = ptx[ptx.index("// pg.tile.warp.copy(R"):ptx.index("// pg.cta_sync()", ptx.index(
        "// pg.tile.warp.copy(R"))]
    assert opcodes(seg, "ld.shared") == ["ld.shared.v2.u32"] * 4
    assert opcodes(seg, "st.shared") == ["st.shared.v2.u32"] * 4
    assert "xor.b32" in ptx and "div" not in ptx and "rem" not in ptx
    assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


def test_reg_row_stride_20_drops_to_v2():
    lay = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    ex = []
    k = reg_kernel((32, 8), "float16", lay, "warp", 32, a_shape=(32, 20),
                   region=(slice(0, 32), slice(0, 8)), explain=ex)
    assert {r.name: r.reason for r in ex[0]}["reg"] == \
        "64-bit vectors, 32 thread(s) x 2 vector(s)"
    assert opcodes(k.ptx("sm_90a"), "ld.global") == ["ld.global.v2.u32"] * 2


def test_reg_thread_scope_plain_local():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((64, 12), "float16"), B: pg.Tensor((64, 12), "float16")):
        tx = pg.thread_id(64)
        R = pg.alloc_local((12,), "float16")
        pg.tile.thread.copy(R[0:12], A[tx, 0:12])
        pg.tile.thread.copy(B[tx, 0:12], R[0:12])
    ptx = k.ptx("sm_90a")
    # row stride 24 B: 8-byte vectors, three of them
    assert opcodes(ptx, "ld.global") == ["ld.global.v2.u32"] * 3
    assert opcodes(ptx, "st.global") == ["st.global.v2.u32"] * 3
    assert_assembles(k, ("sm_80",) + HOPPER_BLACKWELL)


def test_reg_rejections():
    def reason(k):
        return dispatch_error(k)

    @pg.kernel(grid=(1,), block=(128,))
    def wrong_scope(A: pg.Tensor((32, 8), "float16"), B: pg.Tensor((32, 8), "float16")):
        R = pg.alloc_local((32, 8), "float16", layout=LANE_ROWS)
        pg.tile.warpgroup.copy(R[:, :], A[:, :])
    assert "reg: the register layout spreads the region over 32 thread(s) but the " \
           "warpgroup scope has 128" in reason(wrong_scope)

    @pg.kernel(grid=(1,), block=(32,))
    def wrong_axis(A: pg.Tensor((32, 8), "float16"), B: pg.Tensor((32, 8), "float16")):
        R = pg.alloc_local((32, 8), "float16", layout=TileLayout(S[(32, 8):(1 @ tid, 1)]))
        pg.tile.warp.copy(R[:, :], A[:, :])
    assert "reg: the register layout uses the tid axis, which does not number the " \
           "threads of the warp scope (use laneid)" in reason(wrong_axis)

    @pg.kernel(grid=(1,), block=(32,))
    def half(A: pg.Tensor((32, 8), "float16"), B: pg.Tensor((32, 8), "float16")):
        R = pg.alloc_local((32, 8), "float16", layout=LANE_ROWS)
        pg.tile.warp.copy(R[16:32, :], A[16:32, :])
    assert "reg: the register region R[16:32, 0:8] starts at a thread offset " \
           "{'laneid': 16}" in reason(half)

    @pg.kernel(grid=(1,), block=(32,))
    def not_bijective(A: pg.Tensor((32, 8), "float16"), B: pg.Tensor((32, 8), "float16")):
        R = pg.alloc_local((32, 8), "float16", layout=TileLayout(S[(32, 8):(1 @ laneid, 0)]))
        pg.tile.warp.copy(R[:, :], A[:, :])
    assert "reg: the register layout puts this thread's 8 elements in 1 register(s)" in \
        reason(not_bijective)


def test_register_buffer_indexed_dynamically_is_an_error():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 8), "float32"), B: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        R = pg.alloc_local((8,), "float32")
        pg.tile.thread.copy(R[0:8], A[tx, 0:8])
        B[tx] = R[tx % 8]
    with pytest.raises(PtxgenError, match=r"'mov.b32' writes 'R', which lives in local memory"):
        k.ptx("sm_90a")


# ---- numpy model of the register partition -----------------------------------------------------
_W = {"warp": {"laneid": 1}, "warpgroup": {"tid_in_wg": 1, "laneid": 1, "wid_in_wg": 32},
      "cta": {"tid": 1, "laneid": 1, "warpid": 32}, "thread": {}}


def truth(reg_region, mem_region, scope):
    """{(thread, register) -> pre-swizzle memory offset} from the two layouts directly."""
    rb, mb = reg_region.buffer, mem_region.buffer
    out = {}
    for c in np.ndindex(*reg_region.shape):
        rc = [s + x for s, x in zip(reg_region.starts, c)]
        mc = [s + x for s, x in zip(mem_region.starts, c)]
        r = rb.layout.apply(*rc, shape=rb.shape) if rb.layout is not None else \
            {"m": int(np.ravel_multi_index(rc, rb.shape))}
        lay = getattr(mb.layout, "layout", mb.layout)
        m = lay.apply(*mc, shape=mb.shape)["m"] if lay is not None else \
            int(np.ravel_multi_index(mc, mb.shape))
        t = sum(v * _W[scope][a] for a, v in r.items() if a != "m")
        assert (t, r["m"]) not in out
        out[(t, r["m"])] = m
    return out


def reg_model_check(R_shape, R_layout, mem_shape, dt, scope, block, swz=None, mem="shared",
                    direction="load"):
    got = []

    @pg.kernel(grid=(1,), block=(block,))
    def k(A: pg.Tensor(mem_shape, dt)):
        R = pg.alloc_local(R_shape, dt, layout=R_layout)
        M = A if mem == "global" else pg.alloc_shared(
            mem_shape, dt, layout=swz if swz is not None else None)
        full_r = R[tuple(slice(0, e) for e in R_shape)]
        full_m = M[tuple(slice(0, e) for e in mem_shape)]
        pair = (full_r, full_m) if direction == "load" else (full_m, full_r)
        got.append(pg.tile.explain("copy", *pair, scope=scope))
    table = got[0]
    assert table.chosen is not None, str(table)
    call = table.call
    want = truth(call.dst if direction == "load" else call.src,
                 call.src if direction == "load" else call.dst, scope)
    return call, table, want


def check_reg_plan(call, want):
    plan = call.plan(plan_reg)[0]
    T = call.scope.nthreads
    model = {}
    for t in range(T):
        for r, m in plan.model(t):
            assert (t, r) not in model, "a register is written twice"
            model[(t, r)] = m
        toff = digits_offset(t, plan.threads, 0) if plan.threads else 0
        for regs, sd, m0 in plan.vectors:     # every vector access is aligned to its width
            start = plan.mem.base + toff + m0
            assert start % plan.V == 0
            if plan.mem.swizzle is not None:
                sw = [plan.mem.swizzle.apply(start + i) for i in range(plan.V)]
                assert sw == list(range(sw[0], sw[0] + plan.V))
    assert model == want                       # each element exactly once, to its register
    assert sorted(model.values()) == sorted(want.values())
    return plan


@pytest.mark.parametrize("case", [
    ("warp rows f16", (32, 8), LANE_ROWS, (32, 8), "float16", "warp", 32, None),
    ("warp cols f32", (8, 32), TileLayout(S[(8, 32):(1, 1 @ laneid)]), (8, 32), "float32",
     "warp", 32, None),
    ("wg f32", (128, 4), TileLayout(S[(128, 4):(1 @ tid_in_wg, 1)]), (128, 4), "float32",
     "warpgroup", 128, None),
    ("wg lanes+warps", (128, 8), TileLayout(S[((4, 32), 8):((1 @ wid_in_wg, 1 @ laneid), 1)]),
     (128, 8), "int8", "warpgroup", 128, None),
    ("cta interleaved", (4, 256), TileLayout(S[(4, (64, 4)):(1, (1 @ tid, 64 @ tid))]),
     (4, 256), "float16", "cta", 256, None),
    ("mma A fragment", (16, 16), ldmatrix_layout(16, 16), (16, 16), "float16", "warp", 32,
     None),
    ("swizzled 128B", (32, 64), TileLayout(S[(32, (8, 8)):(1 @ laneid, (8, 1))]), (32, 64),
     "float16", "warp", 32, ComposeLayout(Swizzle.mma(128, 16), TileLayout(S[(32, 64)]))),
])
@pytest.mark.parametrize("direction", ["load", "store"])
def test_reg_partition_model(case, direction):
    name, rs, rl, ms, dt, scope, block, swz = case
    call, table, want = reg_model_check(rs, rl, ms, dt, scope, block, swz, direction=direction)
    if table.chosen == "ldstmatrix":
        pytest.skip("ldstmatrix takes this one (checked by the ldmatrix model)")
    check_reg_plan(call, want)


# ---- ldstmatrix --------------------------------------------------------------------------------
def ldsm_kernel(rows, cols, trans, scope="warp", block=32, warps=1, swz=None, dt="float16",
                layout=None, store=True, explain=None):
    lay = layout or ldmatrix_layout(rows, cols, trans, warps=warps)

    @pg.kernel(grid=(1,), block=(block,), name=f"ldsm_{rows}x{cols}{'_t' if trans else ''}")
    def k(A: pg.Tensor((rows, cols), dt), B: pg.Tensor((rows, cols), dt),
          C: pg.Tensor((rows, cols), dt)):
        cp = getattr(pg.tile, scope).copy
        sa = pg.alloc_shared((rows, cols), dt, layout=swz, align=128)
        sb = pg.alloc_shared((rows, cols), dt, layout=swz, align=128)
        R = pg.alloc_local((rows, cols), dt, layout=lay)
        pg.tile.cta.copy(sa[:, :], A[:, :])
        pg.cta_sync()
        if explain is not None:
            explain.append(pg.tile.explain("copy", R[:, :], sa[:, :], scope=scope))
            explain.append(pg.tile.explain("copy", sb[:, :], R[:, :], scope=scope))
        cp(R[:, :], sa[:, :])                 # ldmatrix
        cp(C[:, :], R[:, :])                  # registers -> global (vec_auto reg)
        if store:
            cp(sb[:, :], R[:, :])             # stmatrix
            pg.cta_sync()
            pg.tile.cta.copy(B[:, :], sb[:, :])
    return k


LDSM_CASES = [  # rows, cols, trans, x, instructions
    (8, 8, False, 1, 1), (8, 8, True, 1, 1),
    (16, 8, False, 2, 1), (8, 16, True, 2, 1),
    (16, 16, False, 4, 1), (16, 16, True, 4, 1),
    (32, 32, False, 4, 4), (64, 16, True, 4, 4),
]


@pytest.mark.parametrize("rows,cols,trans,x,count", LDSM_CASES)
def test_ldstmatrix_forms(rows, cols, trans, x, count):
    k = ldsm_kernel(rows, cols, trans)
    ptx = k.ptx("sm_90a")
    t = ".trans" if trans else ""
    assert opcodes(ptx, "ldmatrix") == [f"ldmatrix.sync.aligned.m8n8.x{x}{t}.shared.b16"] * count
    assert opcodes(ptx, "stmatrix") == [f"stmatrix.sync.aligned.m8n8.x{x}{t}.shared.b16"] * count
    assert re.search(r"ldmatrix\S+ \{%r\d+(, %r\d+)*\}, \[%r\d+(\+\d+)?\];", ptx)
    assert_assembles(k)
    k80 = ldsm_kernel(rows, cols, trans, store=False)
    ptx80 = k80.ptx("sm_80")
    assert opcodes(ptx80, "ldmatrix") == [f"ldmatrix.sync.aligned.m8n8.x{x}{t}.shared.b16"] * count
    assert_assembles(k80, ("sm_80",))


def test_stmatrix_declined_before_sm90():
    ptx = ldsm_kernel(16, 16, False).ptx("sm_80")     # vec_auto's reg path does the store
    assert "stmatrix" not in ptx
    assert opcodes(ptx, "ldmatrix") == ["ldmatrix.sync.aligned.m8n8.x4.shared.b16"]
    assert opcodes(ptx, "st.shared").count("st.shared.u32") == 4
    assert_assembles(ldsm_kernel(16, 16, False), ("sm_80",))


def test_stmatrix_reason_on_sm80():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((16, 16), "float16")):
        sm = pg.alloc_shared((16, 16), "float16")
        R = pg.alloc_local((16, 16), "float16", layout=ldmatrix_layout(16, 16))
        t = pg.tile.explain("copy", sm[:, :], R[:, :], scope="warp", arch="sm_80")
        assert {r.name: r.reason for r in t}["ldstmatrix"] == \
            "stmatrix needs sm_90 or newer; the target is sm_80"
        assert t.chosen == "reg"
    k.ir


@pytest.mark.parametrize("scope,block,warps", [("warpgroup", 128, 4), ("cta", 256, 8)])
@pytest.mark.parametrize("trans", [False, True])
def test_ldstmatrix_per_warp_scopes(scope, block, warps, trans):
    k = ldsm_kernel(16 * warps, 16, trans, scope=scope, block=block, warps=warps)
    ptx = k.ptx("sm_90a")
    t = ".trans" if trans else ""
    assert opcodes(ptx, "ldmatrix") == [f"ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16"]
    assert opcodes(ptx, "stmatrix") == [f"stmatrix.sync.aligned.m8n8.x4{t}.shared.b16"]
    assert_assembles(k)


def test_ldstmatrix_with_swizzled_shared():
    swz = ComposeLayout(Swizzle.mma(128, 16), TileLayout(S[(16, 64)]))
    k = ldsm_kernel(16, 64, False, swz=swz)
    ptx = k.ptx("sm_90a")
    assert opcodes(ptx, "ldmatrix") == ["ldmatrix.sync.aligned.m8n8.x4.shared.b16"] * 4
    assert "xor.b32" in ptx
    assert_assembles(k)


def test_ldstmatrix_global_operand_rejected():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((16, 16), "float16")):
        R = pg.alloc_local((16, 16), "float16", layout=ldmatrix_layout(16, 16))
        pg.tile.warp.copy(R[:, :], A[:, :], dispatch="ldstmatrix")
    assert "ldstmatrix: ldmatrix/stmatrix move between shared memory and registers; A is in " \
           "global memory" in dispatch_error(k)


def test_ldstmatrix_other_rejections():
    def reason(**kw):
        got = []

        @pg.kernel(grid=(1,), block=(kw.get("block", 32),))
        def k(A: pg.Tensor((16, 16), kw.get("dt", "float16"))):
            sm = pg.alloc_shared((16, 16), kw.get("dt", "float16"), align=kw.get("align", 16))
            R = pg.alloc_local((16, 16), kw.get("dt", "float16"),
                               layout=kw.get("layout", ldmatrix_layout(16, 16)))
            got.append(pg.tile.explain("copy", R[:, :], sm[:, :], scope=kw.get("scope", "warp"),
                                       cache_hint=kw.get("hint")))
        k.ir
        return {r.name: r.reason for r in got[0]}["ldstmatrix"]

    assert reason(dt="float32") == \
        "ldmatrix/stmatrix move 16-bit elements (.b16) or 8-bit pairs; the dtype is float32"
    assert reason(scope="thread", layout=TileLayout(S[(16, 16)])) == \
        "ldmatrix/stmatrix are warp-collective (.sync.aligned); the thread (1 thread) scope " \
        "is not whole warps"
    assert reason(hint="nc") == "cache hints do not apply to ldmatrix/stmatrix (shared memory)"
    # lane l holding row l//2, 4 columns: not a fragment
    lay = TileLayout(S[(16, (2, 8)):(2 @ laneid, (1 @ laneid, 1))])
    assert reason(layout=lay).startswith("the register layout is not an ldmatrix fragment")
    assert reason(block=128, scope="warpgroup") == \
        "the register layout spreads the region over 32 thread(s) but the warpgroup scope has 128"


def test_ldmatrix_layout_is_the_mma_a_fragment():
    lay = ldmatrix_layout(16, 16)
    for lane in range(32):
        g, q = lane // 4, lane % 4
        want = {0: (g, 2 * q), 1: (g, 2 * q + 1), 2: (g + 8, 2 * q), 3: (g + 8, 2 * q + 1),
                4: (g, 2 * q + 8), 5: (g, 2 * q + 9), 6: (g + 8, 2 * q + 8),
                7: (g + 8, 2 * q + 9)}
        for reg, (r, c) in want.items():
            assert lay.apply(r, c, shape=(16, 16)) == {"m": reg, "laneid": lane}
    bt = ldmatrix_layout(16, 8, trans=True)        # B fragment of m16n8k16 from a (K, N) tile
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for reg, k_ in enumerate((2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9)):
            assert bt.apply(k_, g, shape=(16, 8)) == {"m": reg, "laneid": lane}
    with pytest.raises(ValueError):
        ldmatrix_layout(12, 16)


def simulate_ldsm(plan, T):
    """{(thread, register) -> shared offset} under PTX ldmatrix/stmatrix semantics: a lane's
    32 bits of a matrix are 2 16-bit elements or, for 8-bit plans, 4 bytes in memory order."""
    out = {}
    per = 2 if plan.byte is None else 4          # elements in one lane's 32 bits
    for k in range(plan.count):
        _, pairs = plan.instr(k)
        for w in range(T // 32):
            rows = [[plan.row_offset(w * 32 + j * 8 + r, k) for r in range(8)]
                    for j in range(plan.x)]
            for j in range(plan.x):
                assert all(a % (4 * per) == 0 for a in rows[j])   # 16-byte aligned rows
                for lane in range(32):
                    for p in range(per):
                        if plan.trans:
                            m = rows[j][2 * (lane % 4) + p] + lane // 4
                        else:
                            m = rows[j][lane // 4] + per * (lane % 4) + p
                        key = (w * 32 + lane, pairs[j][p])
                        assert key not in out
                        out[key] = m
    return out


@pytest.mark.parametrize("rows,cols,trans,x,count", LDSM_CASES)
@pytest.mark.parametrize("direction", ["load", "store"])
def test_ldstmatrix_model(rows, cols, trans, x, count, direction):
    call, table, want = reg_model_check((rows, cols), ldmatrix_layout(rows, cols, trans),
                                        (rows, cols), "float16", "warp", 32,
                                        direction=direction)
    assert table.chosen == "ldstmatrix"
    plan = call.plan(plan_ldsm)[0]
    assert (plan.x, plan.count, plan.trans) == (x, count, trans)
    assert simulate_ldsm(plan, 32) == want


@pytest.mark.parametrize("scope,block,warps", [("warpgroup", 128, 4), ("cta", 256, 8)])
@pytest.mark.parametrize("trans", [False, True])
def test_ldstmatrix_model_per_warp(scope, block, warps, trans):
    rows, cols = 16 * warps, 32
    call, table, want = reg_model_check((rows, cols), ldmatrix_layout(rows, cols, trans, warps),
                                        (rows, cols), "bfloat16", scope, block,
                                        swz=ComposeLayout(Swizzle.mma(64, 16),
                                                          TileLayout(S[(rows, cols)])))
    assert table.chosen == "ldstmatrix"
    assert simulate_ldsm(call.plan(plan_ldsm)[0], block) == want


def test_ldstmatrix_custom_fragment_order():
    # matrices numbered row-block-major instead (j = rb*2 + cb) and int16 elements
    lay = TileLayout(S[((2, 8), (2, 4, 2)):((4, 4 @ laneid), (2, 1 @ laneid, 1))])
    call, table, want = reg_model_check((16, 16), lay, (16, 16), "int16", "warp", 32)
    assert table.chosen == "ldstmatrix"
    assert simulate_ldsm(call.plan(plan_ldsm)[0], 32) == want
    k = ldsm_kernel(16, 16, False, dt="int16", layout=lay)
    ptx = k.ptx("sm_90a")
    # ldmatrix unpacks 8 halves; stmatrix and the store to C each pack 4 pairs
    assert len(opcodes(ptx, "bfe.s32")) == 8 and len(opcodes(ptx, "bfi.b32")) == 8
    assert_assembles(k)


# ---- property test: random register layouts ----------------------------------------------------
@st.composite
def lane_layouts(draw):
    """A (2^a, 2^b) tile whose 5 lane bits and remaining register bits are shuffled."""
    dt = draw(st.sampled_from(["int8", "float16", "float32", "float64"]))
    nbits = draw(st.integers(5, 9))
    a = draw(st.integers(0, nbits))
    roles = draw(st.permutations(["l0", "l1", "l2", "l3", "l4"] + [f"r{i}" for i in
                                                                     range(nbits - 5)]))
    return dt, a, nbits - a, list(roles)


def _layout_from_roles(a, b, roles):
    # bit i of the row-major index (innermost = i 0) has role roles[i]
    strides = []
    for role in roles:
        strides.append((1 << int(role[1])) @ laneid if role[0] == "l" else (1 << int(role[1:])))
    shape = tuple([2] * (a + b))
    return TileLayout(S[shape:tuple(reversed(strides))]).group((1 << a, 1 << b)), shape


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lane_layouts(), st.sampled_from(["global", "shared"]), st.booleans())
def test_reg_property_random_layouts(draw, mem, pad):
    dt, a, b, roles = draw
    lay, _ = _layout_from_roles(a, b, roles)
    rows, cols = 1 << a, 1 << b
    mshape = (rows, cols + (4 if pad else 0))
    got = []

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor(mshape, dt), B: pg.Tensor(mshape, dt)):
        R = pg.alloc_local((rows, cols), dt, layout=lay)
        M = A if mem == "global" else pg.alloc_shared(mshape, dt)
        got.append(pg.tile.explain("copy", R[:, :], M[0:rows, 0:cols], scope="warp"))
        pg.tile.warp.copy(R[:, :], M[0:rows, 0:cols])
        pg.tile.warp.copy(B[0:rows, 0:cols], R[:, :])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            ptx = k.ptx("sm_90a")
        except PtxgenError as e:
            assert str(e)
            return
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    table = got[0]
    want = truth(table.call.dst, table.call.src, "warp")
    if table.chosen == "reg":
        check_reg_plan(table.call, want)
    else:
        assert table.chosen == "ldstmatrix"
        assert simulate_ldsm(table.call.plan(plan_ldsm)[0], 32) == want


@pytest.mark.parametrize("roles", [["r1", "r0", "l0", "l1", "l4", "l3", "l2"],
                                   ["r0", "r1", "l0", "l1", "l4", "l3", "l2"]])
def test_ldmatrix_of_bytes_in_either_register_order_moves_the_data(roles):
    """8-bit ldmatrix whose register order of a lane's 4 bytes differs from memory's (r1
    innermost): ptxsim runs global -> shared -> ldmatrix -> registers -> global and gets the
    tile back, and the plan model agrees."""
    from support.ptxsim import run

    lay, _ = _layout_from_roles(0, 7, roles)
    got = []

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((1, 128), "int8"), B: pg.Tensor((1, 128), "int8")):
        pg.thread_id(32)
        M = pg.alloc_shared((1, 128), "int8")
        R = pg.alloc_local((1, 128), "int8", layout=lay)
        pg.tile.warp.copy(M[0:1, 0:128], A[0:1, 0:128])
        pg.cta_sync()
        got.append(pg.tile.explain("copy", R[:, :], M[0:1, 0:128], scope="warp"))
        pg.tile.warp.copy(R[:, :], M[0:1, 0:128])
        pg.tile.warp.copy(B[0:1, 0:128], R[:, :])
    assert "ldmatrix.sync.aligned.m8n8" in k.ptx("sm_90a") and got[0].chosen == "ldstmatrix"
    A = (np.arange(128) * 7 % 127).astype(np.int8).reshape(1, 128)
    B = np.full((1, 128), -1, np.int8)
    run(k, [A, B])
    assert np.array_equal(A, B)
    call = got[0].call
    assert simulate_ldsm(call.plan(plan_ldsm)[0], 32) == truth(call.dst, call.src, "warp")
