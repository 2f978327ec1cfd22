"""Reductions (sum / max / min) in the PTX simulator against numpy: integer and max/min
results bit for bit, float sums within depth * 2^-p * sum|x| (the accumulation tree's
depth; see primitives/tilemath/reduce.py)."""
import pytest

from support import tilemath_cases as TC
from test_tile_math import run_case

SCOPES = ["thread", "warp", "warpgroup", "cta"]


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("src", ["register", "global", "shared"])
@pytest.mark.parametrize("scope", SCOPES)
def test_sum_float32(scope, src, axis):
    dst = "register" if axis is None else "global"
    run_case(TC.reduce_case(scope, src, dst, "sum", "float32", "float32", axis))


DTYPES = [("sum", "bfloat16", "float32"), ("max", "bfloat16", "bfloat16"),
          ("min", "float16", "float16"), ("sum", "float64", "float64"),
          ("sum", "int32", "int32"), ("sum", "int8", "int32"), ("max", "uint32", "uint32"),
          ("min", "int16", "int16"), ("max", "float32", "float32"), ("sum", "bfloat16", "bfloat16")]


@pytest.mark.parametrize("op,sdt,ddt", DTYPES, ids=[f"{o}-{s}-{d}" for o, s, d in DTYPES])
@pytest.mark.parametrize("scope,src", [("warp", "register"), ("cta", "register"),
                                       ("warpgroup", "global"), ("cta", "shared")])
def test_dtypes(scope, src, op, sdt, ddt):
    run_case(TC.reduce_case(scope, src, "global", op, sdt, ddt, 1))
    run_case(TC.reduce_case(scope, src, "register", op, sdt, ddt, None))


def test_row_per_warp_into_warp_registers():
    run_case(TC.reduce_case("cta", "register", "warp_register", "sum", "float32", "float32", 1))
    run_case(TC.reduce_case("cta", "register", "warp_register", "max", "int32", "int32", 1))


@pytest.mark.parametrize("src", ["register", "global"])
def test_two_warpgroups_each_reduce(src):
    """block 256, warpgroup scope: each warpgroup's cross-warp step has its own scratch part
    and named barrier (8 + warpgroup)."""
    run_case(TC.reduce_case("warpgroup", src, "global", "sum", "float32", "float32", 0,
                            block=256))
    run_case(TC.reduce_case("warpgroup", src, "register", "max", "int32", "int32", None,
                            block=256))


def test_cta_of_sixteen_threads():
    """shfl.sync names only the CTA's 16 lanes in its member mask."""
    import numpy as np
    import ptxgen as pg

    @pg.kernel(grid=(1,), block=(16,))
    def k(A: pg.Tensor((64,), "float32"), OUT: pg.Tensor((1,), "float32")):
        pg.thread_id(16)
        pg.tile.cta.sum(OUT[0:1], A[0:64])
    assert "shfl.sync.bfly.b32 %f" in k.ptx() and ", 65535;" in k.ptx()
    from support import ptxsim
    a = np.arange(64, dtype=np.float32)
    out = np.zeros(1, np.float32)
    ptxsim.run(k, [a, out])
    assert out[0] == a.sum()
