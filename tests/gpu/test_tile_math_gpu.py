"""The simulator's tile-math cases (tests/support/tilemath_cases.py) on the GPU: every op of each
dtype, every cast pair with its roundings and saturation, the scopes x operand kinds
(global at offsets, shared, swizzled, registers, ragged) and the reductions; outputs
poisoned, compared with numpy bit for bit or within the stated bounds (the hardware's
ex2/lg2/rsqrt/rcp.approx errors included)."""
import warnings

import numpy as np
import pytest

from support import tilemath_cases as TC

pytestmark = pytest.mark.gpu


def run_gpu(case):
    """Each array through a byte buffer on the device (raw pointers: any dtype), then the
    checks on what came back."""
    import torch
    bufs = []
    for a in case.arrays:
        b = np.ascontiguousarray(a)
        t = torch.from_numpy(b.view(np.uint8).reshape(-1).copy()).cuda()
        bufs.append((t, b.dtype, b.shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case.kernel(*[t.data_ptr() for t, _, _ in bufs])
    torch.cuda.synchronize()
    results = [t.cpu().numpy().view(dt).reshape(shape) for t, dt, shape in bufs]
    bad = [f"{label}: {detail}" for label, ok, detail in TC.check(case, results) if not ok]
    assert not bad, "\n".join(bad)


DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int8", "uint8", "int16",
          "uint16", "int64", "uint32", "uint64"]


@pytest.mark.parametrize("off", [8, 3])
@pytest.mark.parametrize("scope", ["thread", "warp", "warpgroup", "cta"])
@pytest.mark.parametrize("dt", DTYPES)
def test_every_op(dt, scope, off):
    run_gpu(TC.ops_case(dt, scope, 64 if scope != "cta" else 192, off, np.random.default_rng(7)))


@pytest.mark.parametrize("src", TC.ALL)
def test_casts(src):
    run_gpu(TC.cast_case(src, n=384, rng=np.random.default_rng(8)))


@pytest.mark.parametrize("rounding", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("src", ["float32", "float64", "int32", "int64", "uint64", "float16",
                                 "bfloat16"])
def test_cast_roundings(src, rounding):
    from test_tile_math import ROUNDED
    dsts = dict(ROUNDED)[src]
    run_gpu(TC.cast_case(src, n=384, dsts=dsts, rounding=rounding, tag=f"_{rounding}"))


def test_cast_saturate():
    from test_tile_math import SATURATED
    for src, dsts in SATURATED:
        run_gpu(TC.cast_case(src, n=384, dsts=dsts, saturate=True, tag="_sat"))


@pytest.mark.parametrize("kind", ["global", "shared", "swizzled", "register", "ragged"])
@pytest.mark.parametrize("scope", ["thread", "warp", "warpgroup", "cta"])
def test_scopes_and_operands(scope, kind):
    if scope == "thread" and kind == "swizzled":
        pytest.skip("the swizzled tile is 8 rows; the thread-scope tile has 4")
    run_gpu(TC.scope_case(scope, kind))
    if kind in ("global", "register"):
        run_gpu(TC.scope_case(scope, kind, aligned=False))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("src", ["register", "global", "shared"])
@pytest.mark.parametrize("scope", ["thread", "warp", "warpgroup", "cta"])
def test_reduce_sum(scope, src, axis):
    dst = "register" if axis is None else "global"
    run_gpu(TC.reduce_case(scope, src, dst, "sum", "float32", "float32", axis))


@pytest.mark.parametrize("op,sdt,ddt", [("sum", "bfloat16", "float32"),
                                        ("max", "bfloat16", "bfloat16"),
                                        ("min", "float16", "float16"),
                                        ("sum", "float64", "float64"), ("sum", "int32", "int32"),
                                        ("sum", "int8", "int32"), ("max", "uint32", "uint32"),
                                        ("min", "int16", "int16"), ("max", "float32", "float32"),
                                        ("sum", "bfloat16", "bfloat16")])
@pytest.mark.parametrize("scope,src", [("warp", "register"), ("cta", "register"),
                                       ("warpgroup", "global"), ("cta", "shared")])
def test_reduce_dtypes(scope, src, op, sdt, ddt):
    run_gpu(TC.reduce_case(scope, src, "global", op, sdt, ddt, 1))
    run_gpu(TC.reduce_case(scope, src, "register", op, sdt, ddt, None))


def test_reduce_row_per_warp():
    run_gpu(TC.reduce_case("cta", "register", "warp_register", "sum", "float32", "float32", 1))
    run_gpu(TC.reduce_case("cta", "register", "warp_register", "max", "int32", "int32", 1))


@pytest.mark.parametrize("arch_fallback", ["sm_80"])
def test_sm80_forms_on_this_gpu(arch_fallback):
    """The bf16x2 add/mul-as-fma and the shift-based bf16 -> f32 of sm_80 are bit-exact too:
    the sm_80 PTX of the bf16 cases runs on any newer GPU."""
    case = TC.ops_case("bfloat16", "warp", 64, 8, np.random.default_rng(9), arch=arch_fallback)
    ptx = case.kernel.ptx(arch_fallback)
    assert "fma.rn.bf16x2" in ptx and "add.rn.bf16x2" not in ptx
