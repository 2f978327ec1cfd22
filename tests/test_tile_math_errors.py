"""Bad tile-math calls fail at trace (or build) time with the user's line and the fix,
exact messages."""
import re

import pytest

import ptxgen as pg
from ptxgen.layout import S, TileLayout, laneid, tid


def message(body, arch="sm_90a", block=32):
    with pytest.raises(pg.PtxgenError) as e:
        pg.kernel(grid=(1,), block=(block,))(body).ptx(arch)
    text = str(e.value)
    m = re.match(r"test_tile_math_errors\.py:\d+: ", text)
    assert m, f"not located at this file's line: {text}"
    return type(e.value).__name__, text[m.end():]


F32, I32, FP4 = "float32", "int32", "float4_e2m1fn"
CASES = {
    "int_float": (lambda A=pg.Tensor((64,), I32), B=pg.Tensor((64,), F32):
                  pg.tile.warp.add(A[0:64], B[0:64], B[0:64]),
                  "add dtype mismatch: src 1 B[0:64] is float32 but dst A[0:64] is int32; "
                  "integer and float operands do not mix (convert with pg.tile.warp.cast first)"),
    "int_widths": (lambda A=pg.Tensor((64,), I32), B=pg.Tensor((64,), "int16"):
                   pg.tile.warp.add(A[0:64], A[0:64], B[0:64]),
                   "add dtype mismatch: dst A[0:64] is int32 but src 2 B[0:64] is int16; integer "
                   "operands need one dtype (convert with pg.tile.warp.cast first)"),
    "shape": (lambda A=pg.Tensor((64,), F32), B=pg.Tensor((32,), F32):
              pg.tile.warp.mul(A[0:64], A[0:64], B[0:32]),
              "mul shape mismatch: dst A[0:64] has extents (64,) but src 2 B[0:32] has (32,); the "
              "operands need one shape (a global/shared operand may be shorter than a register "
              "tile along its last dimension; a register source may have extent 1 where the "
              "tile has more, or lack its trailing dims: it repeats along them)"),
    "fp8_rounding": (lambda A=pg.Tensor((64,), "float8_e4m3fn"), B=pg.Tensor((64,), F32):
                     pg.tile.warp.cast(A[0:64], B[0:64], rounding="rz"),
                     "cast float32 -> float8_e4m3fn: PTX converts to float8_e4m3fn with "
                     "round-to-nearest-even only (cvt.rn.satfinite.e4m3x2.f32); drop "
                     "rounding='rz'"),
    "exact_rounding": (lambda A=pg.Tensor((64,), F32), B=pg.Tensor((64,), "float16"):
                       pg.tile.warp.cast(A[0:64], B[0:64], rounding="rn"),
                       "cast float16 -> float32 is exact; it takes no rounding mode (drop "
                       "rounding='rn')"),
    "unknown_rounding": (lambda A=pg.Tensor((64,), F32):
                         pg.tile.warp.cast(A[0:64], A[0:64], rounding="rna"),
                         "cast rounding='rna': PTX rounds with one of rn, rz, rm, rp (nearest "
                         "even, toward zero, down, up)"),
    "saturate_f32": (lambda A=pg.Tensor((64,), F32), B=pg.Tensor((64,), "float64"):
                     pg.tile.warp.cast(A[0:64], B[0:64], saturate=True),
                     "cast float64 -> float32 with saturate=True: PTX has no saturating "
                     "conversion to float32; clamp with pg.tile.warp.min/max first"),
    "float_to_int_wrap": (lambda A=pg.Tensor((64,), "float16"), B=pg.Tensor((64,), "int8"):
                          pg.tile.warp.cast(B[0:64], A[0:64], saturate=False),
                          "cast float16 -> int8: PTX's float-to-integer conversions always "
                          "saturate to the destination range; drop saturate=False"),
    "fp4_add": (lambda A=pg.Tensor((64,), "float4_e2m1fn"), B=pg.Tensor((64,), F32):
                pg.tile.warp.add(B[0:64], A[0:64], B[0:64]),
                "add: A[0:64] holds float4_e2m1fn; of the tile-math ops only cast takes 4-bit "
                "elements (convert with pg.tile.warp.cast first, or view the storage as uint8)"),
    "fp4_rounding": (lambda A=pg.Tensor((64,), "float4_e2m1fn"), B=pg.Tensor((64,), F32):
                     pg.tile.warp.cast(A[0:64], B[0:64], rounding="rz"),
                     "cast float32 -> float4_e2m1fn: PTX converts to float4_e2m1fn with "
                     "round-to-nearest-even only (cvt.rn.satfinite.e2m1x2.f32); drop "
                     "rounding='rz'"),
    "exp_int": (lambda A=pg.Tensor((64,), I32): pg.tile.warp.exp(A[0:64], A[0:64]),
                "exp needs floating-point operands; dst A[0:64] is int32 (convert with "
                "pg.tile.warp.cast first)"),
    "exp_f64": (lambda A=pg.Tensor((64,), "float64"): pg.tile.cta.exp(A[0:64], A[0:64]),
                "exp on float64: PTX has no float64 ex2/lg2 approximation; convert to float32 "
                "with pg.tile.cta.cast first"),
    "storage": (lambda A=pg.Tensor((64,), "float8_e5m2"):
                pg.tile.warp.add(A[0:64], A[0:64], A[0:64]),
                "add: dst A[0:64] is float8_e5m2, a storage-only type; convert it with "
                "pg.tile.warp.cast to float16/bfloat16/float32 first"),
    "arity": (lambda A=pg.Tensor((64,), F32): pg.tile.warp.fma(A[0:64], A[0:64], A[0:64]),
              "pg.tile.warp.fma takes dst and 3 source(s), got 2"),
    "option": (lambda A=pg.Tensor((64,), F32):
               pg.tile.warp.add(A[0:64], A[0:64], A[0:64], rounding="rz"),
               "pg.tile.warp.add got unexpected option(s) rounding; it takes pad"),
    "pad_unneeded": (lambda A=pg.Tensor((64,), F32):
                     pg.tile.warp.add(A[0:64], A[0:64], A[0:64], pad=0.0),
                     "add: pad= is for a source shorter than the register tile; no source is"),
    "memset": (lambda A=pg.Tensor((64,), F32): pg.tile.warp.memset(A[0:64], 300),
               "memset: the value is a byte, an int in 0..255, got 300"),
    "select_cond": (lambda A=pg.Tensor((64,), F32):
                    pg.tile.warp.select(A[0:64], 1.5, A[0:64], A[0:64]),
                    "select: the condition is float32; it must be bool (compare it, e.g. "
                    "x > 0)"),
    "reduce_shape": (lambda A=pg.Tensor((8, 64), F32), B=pg.Tensor((8,), F32):
                     pg.tile.warp.sum(B[0:4], A[0:8, 0:64], axis=1),
                     "sum shape mismatch: reducing A[0:8, 0:64] over axis (1,) leaves extents "
                     "(8,) but dst B[0:4] has (4,)"),
    "reduce_axis": (lambda A=pg.Tensor((8, 64), F32), B=pg.Tensor((8,), F32):
                    pg.tile.warp.sum(B[0:8], A[0:8, 0:64], axis=2),
                    "sum: axis 2 is out of range for A[0:8, 0:64] (2 dims)"),
    "reduce_dtypes": (lambda A=pg.Tensor((8, 64), I32), B=pg.Tensor((8,), F32):
                      pg.tile.warp.max(B[0:8], A[0:8, 0:64], axis=1),
                      "max dtype mismatch: src A[0:8, 0:64] is int32 but dst B[0:8] is float32; "
                      "integer and float operands do not mix (convert with pg.tile.warp.cast "
                      "first)"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_trace_errors(name):
    fn, want = CASES[name]

    def body(*tensors):
        fn(*tensors)
    import inspect
    params = inspect.signature(fn).parameters
    body.__signature__ = inspect.Signature(
        [inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=v.default)
         for k, v in params.items()])
    body.__annotations__ = {k: v.default for k, v in params.items()}
    kind, text = message(body)
    assert kind == "TraceError"
    assert text == want


def test_ragged_source_needs_pad():
    def body(A: pg.Tensor((1000,), F32)):
        r = pg.alloc_local((1024,), F32, layout=TileLayout(S[(32, 32):(1 @ laneid, 1)]))
        pg.tile.warp.cast(r, A[0:1000])
    assert message(body) == ("TraceError", "cast: src 1 A[0:1000] has 1000 elements along its "
                             "last dimension where the register tile has 1024; pass pad=<value> "
                             "for the elements it lacks")


def test_register_layout_of_another_scope():
    def body(A: pg.Tensor((64,), F32)):
        r = pg.alloc_local((64,), F32, layout=TileLayout(S[(64,):(1 @ tid,)]))
        pg.tile.warp.add(r, A[0:64], 1.0)
    kind, text = message(body)
    assert kind == "DispatchError"
    assert text == (
        "no add variant accepts pg.tile.warp.add(r[0:64], A[0:64], 1.0) [float32, warp (32 "
        "threads)]:\n"
        "  packed: packed forms need every operand in one 16-bit float dtype (float32)\n"
        "  vector: the register layout uses the tid axis, which does not number the threads "
        "of the warp scope (use laneid)\n"
        "  scalar: the register layout uses the tid axis, which does not number the threads "
        "of the warp scope (use laneid)")


def test_float8_on_sm80_names_the_arch():
    def body(A: pg.Tensor((64,), "float8_e4m3fn"), B: pg.Tensor((64,), F32)):
        pg.tile.warp.cast(A[0:64], B[0:64])
    assert message(body, "sm_80") == ("ArchError", "'cvt.rn.satfinite.e4m3x2.f32' needs sm_89 "
                                      "or newer; the target is sm_80")


def test_float4_cast_on_sm90a_names_the_targets():
    """The cast that was refused at trace time ("4-bit elements are not addressable one by
    one") now builds where PTX has cvt.rn.satfinite.e2m1x2.f32 and names those targets
    elsewhere."""
    def body(A: pg.Tensor((64,), FP4), B: pg.Tensor((64,), F32)):
        pg.tile.warp.cast(A[0:64], B[0:64])
    assert message(body) == ("ArchError", "instruction 'cvt.rn.satfinite.e2m1x2.f32' needs one "
                             "of sm_100a, sm_100f, sm_101a, sm_103a, sm_103f, sm_110a, sm_120a, "
                             "sm_121a; the target is sm_90a")
    assert "cvt.rn.satfinite.e2m1x2.f32" in pg.kernel(grid=(1,), block=(32,))(body).ptx("sm_100a")


def test_reduce_dst_registers_in_other_threads():
    """A row per thread group reduced into registers that name other threads (row i is
    computed by lanes 4i..4i+3; lane i is not among them).  Lanes 4i + (0..3), the layout
    (8,):(4 @ laneid), would be right: a tile replicated over the lane bits it leaves out."""
    def body(A: pg.Tensor((8, 24), F32)):
        r = pg.alloc_local((8, 24), F32, layout=TileLayout(S[(8, (4, 6)):(4 @ laneid,
                                                                          (1 @ laneid, 1))]))
        pg.tile.warp.copy(r, A[0:8, 0:24])
        d = pg.alloc_local((8,), F32, layout=TileLayout(S[(8,):(1 @ laneid,)]))
        pg.tile.warp.sum(d, r, axis=1)
    assert message(body) == ("PtxgenError", "the register dst d[0:8] puts output (0,) in another "
                             "thread than thread 1 of the warp scope, which computes it; give it "
                             "the thread axes of the source's kept dimensions, or none")
