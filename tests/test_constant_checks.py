"""Division or modulo by a constant zero and shift counts outside 0..bits-1,
in indices and in values, whether written as literals or made constant by unrolling or a let."""
import pytest

import ptxgen as pg
from support.located import build, fails


@pytest.mark.parametrize("dt", ["int32", "int64", "uint32"])
def test_value_division_by_zero(dt):
    def k(A: pg.Tensor((32,), dt)):
        tx = pg.thread_id(32)
        A[tx] = A[tx] // 0                                     # at: div

    fails(build(k), "div", "integer division by zero in A[tx] // 0; the divisor must be "
          "nonzero (guard it or pick another constant)", pg.TraceError)


def test_index_modulo_by_zero():
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx % 0] = 1.0                                        # at: mod

    fails(build(k), "mod", "integer modulo by zero in tx % 0; the divisor must be nonzero "
          "(guard it or pick another constant)", pg.TraceError)


def test_zero_divisor_made_by_unrolling():
    def k(A: pg.Tensor((64,), "int32")):
        tx = pg.thread_id(32)
        for j in pg.unroll(3):
            A[(tx + j) // (2 - j)] = 1                             # at: unroll

    fails(build(k), "unroll", "integer division by zero in (tx + 2) // 0; the divisor must be "
          "nonzero (guard it or pick another constant)", pg.TraceError)


def test_divisor_that_a_let_pins_to_zero():
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        z = pg.let(tx - tx)
        A[tx] = A[tx] % z                                      # at: let

    fails(build(k), "let", "integer modulo by zero in A[tx] % z: z is always 0 here; the "
          "divisor must be nonzero", pg.TraceError)


@pytest.mark.parametrize("dt,count,how", [
    ("int32", -1, "multiply or divide"), ("int32", 32, "widen the type (pg.cast) or shift less"),
    ("uint8", 8, "widen the type (pg.cast) or shift less"),
    ("int64", 64, "widen the type (pg.cast) or shift less")])
def test_shift_counts(dt, count, how):
    def k(A: pg.Tensor((32,), dt)):
        tx = pg.thread_id(32)
        A[tx] = A[tx] << count                                 # at: shl

    bits = {"int32": 32, "uint8": 8, "int64": 64}[dt]
    fails(build(k), "shl", f"shift count {count} in A[tx] << {count} is outside 0..{bits - 1} "
          f"for {dt}; {how} instead", pg.TraceError)


def test_negative_shift_made_by_unrolling():
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        for j in pg.unroll(2):
            A[tx] = (A[tx] >> (j - 1)) + 1                     # at: shr

    fails(build(k), "shr", "shift count -1 in A[tx] >> -1 is outside 0..31 for int32; multiply "
          "or divide instead", pg.TraceError)


def test_defined_constants_still_fold():
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        for j in pg.unroll(1, 3):
            A[tx] = (A[tx] >> j) + (A[tx] << (31 - j)) + tx // j % (j + 1)

    assert ".entry" in build(k)()
