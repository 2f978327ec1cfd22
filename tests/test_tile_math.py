"""Tile math (elementwise ops, casts) run in the PTX simulator and compared with numpy:
bit for bit, or within the stated bound for the approximations (the simulator models
ex2/lg2/rsqrt/rcp.approx as correctly rounded, so those bounds are the hardware's)."""
import warnings

import numpy as np
import pytest

from support import ptxsim
from support import tilemath_cases as TC


def run_case(case):
    arrays = [np.array(a, copy=True) for a in case.arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ptxsim.run(case.kernel, arrays, arch=case.arch)
    bad = [f"{label}: {detail}" for label, ok, detail in TC.check(case, arrays) if not ok]
    assert not bad, "\n".join(bad)


DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int8", "uint16", "int64",
          "uint32"]


@pytest.mark.parametrize("dt", DTYPES)
def test_every_op_of_a_dtype(dt):
    run_case(TC.ops_case(dt, "warp", 64, 8, np.random.default_rng(1)))


@pytest.mark.parametrize("src", TC.ALL)
def test_cast_to_every_dtype(src):
    """Every (src, dst) pair, rounding to nearest / toward zero for float -> int, wrapping
    ints, satfinite float8; inputs include NaN, inf, -0, subnormals, ties, the ranges' ends."""
    run_case(TC.cast_case(src))


ROUNDED = [("float32", ("float16", "bfloat16", "int32", "uint8", "int64")),
           ("float64", ("float32", "float16", "bfloat16", "int16", "uint64")),
           ("int32", ("float32", "float16", "bfloat16")),
           ("int64", ("float32", "float16", "bfloat16", "float64")),
           ("uint64", ("float32", "bfloat16", "float64")),
           ("float16", ("bfloat16", "int8")), ("bfloat16", ("float16", "int32"))]


@pytest.mark.parametrize("rounding", ["rz", "rm", "rp", "rn"])
@pytest.mark.parametrize("src,dsts", ROUNDED, ids=[s for s, _ in ROUNDED])
def test_cast_rounding_modes(src, dsts, rounding):
    run_case(TC.cast_case(src, dsts=dsts, rounding=rounding, tag=f"_{rounding}"))


SATURATED = [("float32", ("float16", "bfloat16")), ("float64", ("float16", "bfloat16")),
             ("int32", ("int8", "uint8", "int16", "uint32", "uint64", "float16")),
             ("int64", ("int32", "uint16", "float16")), ("uint32", ("int32", "int8")),
             ("uint64", ("int64", "uint8")), ("bfloat16", ("float16",))]


@pytest.mark.parametrize("src,dsts", SATURATED, ids=[s for s, _ in SATURATED])
def test_cast_saturate(src, dsts):
    run_case(TC.cast_case(src, dsts=dsts, saturate=True, tag="_sat"))


KINDS = ["global", "shared", "swizzled", "register", "ragged"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scope", ["thread", "warp", "warpgroup", "cta"])
def test_scopes_and_operands(scope, kind):
    if scope == "thread" and kind == "swizzled":
        pytest.skip("the swizzled tile is 8 rows; the thread-scope tile has 4")
    run_case(TC.scope_case(scope, kind))


@pytest.mark.parametrize("scope", ["warp", "cta"])
def test_unaligned_regions(scope):
    run_case(TC.scope_case(scope, "global", aligned=False))
    run_case(TC.scope_case(scope, "register", aligned=False))


def _all_cases():
    yield from (TC.ops_case(dt, "warp", 64, off) for dt in DTYPES for off in (8, 3))
    yield from (TC.scope_case(s, k) for s in ("warp", "warpgroup", "cta") for k in KINDS)
    yield from (TC.cast_case(src) for src in TC.ALL)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_cases_assemble(arch):
    """Every kernel above assembles with nvJitLink; on sm_80 the float8 casts name sm_89."""
    import ptxgen as pg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in _all_cases():
            fp8 = case.name.startswith("cast_") and any(
                "float8" in str(a.dtype) for a in case.kernel.ir.params if a.buffer is not None
                for a in [a.buffer])
            if arch == "sm_80" and fp8:
                with pytest.raises(pg.ArchError, match="sm_89"):
                    case.kernel.compile(arch)
                continue
            case.kernel.compile(arch)


def _kernel(body, block=128):
    import ptxgen as pg
    return pg.kernel(grid=(1,), block=(block,))(body)


def test_explain_tables():
    import ptxgen as pg
    out = {}

    def body(A: pg.Tensor((4096,), "bfloat16"), B: pg.Tensor((4096,), "bfloat16"),
             C: pg.Tensor((4096,), "float32"), D: pg.Tensor((4,), "int32")):
        from ptxgen.layout import S, TileLayout, tid
        pg.thread_id(128)
        out["add80"] = str(pg.tile.explain("add", A[0:4096], A[0:4096], B[0:4096], scope="cta",
                                           arch="sm_80"))
        out["exp"] = str(pg.tile.explain("exp", C[1:4001], C[0:4000], scope="cta"))
        ri = pg.alloc_local((128,), "int32", layout=TileLayout(S[(128,):(1 @ tid,)]))
        out["sum"] = str(pg.tile.explain("sum", D[0:1], ri, scope="cta", axis=0))
    _kernel(body)
    assert out["add80"] == (
        "add pg.tile.cta.add(A[0:4096], A[0:4096], B[0:4096]) [bfloat16, cta (128 threads)]\n"
        "   variant     pri  result\n"
        "-> packed       30  ok  bf16x2 pairs (fma.rn.bf16x2: sm_80 has no bf16x2 add), 128-bit "
        "accesses, 128 thread(s) x 4 round(s) of 8\n"
        "   vector       20  ok  128-bit accesses, 128 thread(s) x 4 round(s) of 8\n"
        "   scalar        0  ok  one element per access, 16-bit accesses, 128 thread(s) x 32 "
        "round(s) of 1")
    assert out["exp"].splitlines()[2:] == [
        "   vector       20  no  no operand moves in vectors: 4 elements: C: region start offset "
        "1 is not a multiple of 4; 2 elements: C: region start offset 1 is not a multiple of 2",
        "-> scalar        0  ok  one element per access, 32-bit accesses, 128 thread(s) x 32 "
        "round(s) of 1 (guarded)"]
    assert out["sum"].splitlines()[2:] == [
        "-> redux        20  ok  redux.sync over 32 lanes, warps through shared memory",
        "   shfl         10  ok  32 lane(s) by shfl.sync.bfly, 4 warp(s) through shared memory",
        "   serial        0  no  the reduced elements are spread over threads"]


def test_memory_ops_stay_loops_and_forms():
    """A memory-only op is one serial PTX loop (not unrolled); sm_80 gets bf16x2 fma for add,
    sm_90 add.rn.bf16x2; f32 -> bf16 pairs use cvt.rn.bf16x2.f32; exp is ex2 of x * log2 e."""
    import ptxgen as pg

    def body(A: pg.Tensor((65536,), "bfloat16"), B: pg.Tensor((65536,), "float32")):
        pg.thread_id(128)
        pg.tile.cta.add(A[0:65536], A[0:65536], A[0:65536])
        pg.tile.cta.cast(A[0:65536], B[0:65536])
        pg.tile.cta.exp(B[0:65536], B[0:65536])
    k = _kernel(body)

    def n(ptx, op):
        return sum(line.strip().startswith(op) for line in ptx.splitlines())
    p90, p80 = k.ptx("sm_90a"), k.ptx("sm_80")
    assert n(p90, "$L_for_") == 3 and n(p90, "add.rn.bf16x2") == 4
    assert n(p80, "add.rn.bf16x2") == 0 and n(p80, "fma.rn.bf16x2") == 4
    assert n(p90, "cvt.rn.bf16x2.f32") == 2
    assert n(p90, "mul.rn.f32") == 4 and "0f3FB8AA3B" in p90 and n(p90, "ex2.approx.f32") == 4
