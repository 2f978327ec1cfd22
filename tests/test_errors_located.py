"""An error names the user's line even when contextlib (or another
standard-library frame) stands between it and ptxgen, and the Python errors a new user meets
(operators a tensor or region lacks, a wrong argument to a pg call, ...) are ptxgen errors."""
import math

import pytest

import ptxgen as pg
from support.located import fails, kernel, line_of


def test_errors_inside_with_blocks_name_the_user_line():
    def k(A: pg.Tensor((32,), "float32")):
        with pg.if_("s"):                                      # at: if
            pass

    fails(lambda: kernel(k), "if", "cannot use str 's' in a kernel expression", pg.TraceError)

    def k2(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        with pg.while_(tx + pg.float16(1.0) > 2):             # at: while
            pass

    fails(lambda: kernel(k2), "while", "dtype mismatch in tx + float16(1.0): int32 vs float16; "
          "use pg.cast(x, dtype)", pg.TraceError)


REGION = "A[0:4] is a region (an operand of tile primitives)"
TENSOR = "'A' is a tensor"
NOT_VALUE = (", not a value: index it (A[i, j]) to compute with an element, or use "
             "pg.tile.<scope>.<op> on regions")


@pytest.mark.parametrize("body,msg", [
    (lambda A: A[0:4].__setitem__(0, 1.0),
     f"{REGION}, not a tensor; index the tensor 'A' itself, or take the sub-region from it"),
    (lambda A: A[0:4][1], f"{REGION}, not a tensor; index the tensor 'A' itself, or take the "
                          f"sub-region from it"),
    (lambda A: A[0:4] + 1, REGION + NOT_VALUE),
    (lambda A: -A[0:4], REGION + NOT_VALUE),
    (lambda A: A * 2.0, TENSOR + NOT_VALUE),
    (lambda A: A < 1, TENSOR + NOT_VALUE),
    (lambda A: [x for x in A], "tensor 'A' cannot be iterated in Python; loop with "
                               "pg.serial/pg.unroll and index it"),
    (lambda A: len(A), "len() of tensor 'A': use its shape (A.shape[0])"),
    (lambda A: float(A[0]), "a traced expression has no Python float value (it is computed on "
                            "the GPU); use pg.cast(x, 'float32') to convert it in the kernel"),
    (lambda A: abs(A[0]), "abs() of a traced expression: write pg.max(x, -x)"),
    (lambda A: A[0] ** 2, "** of a traced expression: write the product (x * x) or shift "
                          "integers (1 << k)"),
    (lambda A: round(A[0]), "round() needs a Python number; a traced expression is computed on "
                            "the GPU: use pg.cast(x, 'int32') (truncates) in the kernel"),
    (lambda A: math.floor(A[0]), "round() needs a Python number; a traced expression is "
                                 "computed on the GPU: use pg.cast(x, 'int32') (truncates) in "
                                 "the kernel"),
    (lambda A: pg.cast(A.vload([0], "float32x4"), "float16"),
     "pg.cast of float32x4 to float16: vector values can only be loaded and stored; cast each "
     "element (a local buffer of float32)"),
    (lambda A: A.__setitem__(0, 1e39), "literal 1e+39 overflows float32 (it rounds to "
                                       "infinity); write float('inf') for infinity"),
])
def test_python_operations_a_kernel_value_lacks(body, msg):
    def k(A: pg.Tensor((32,), "float32")):
        body(A)

    fails(lambda: kernel(k), None, msg, pg.TraceError, where=line_of(body))


@pytest.mark.parametrize("body,msg", [
    (lambda A: pg.alloc_shared((4,), "float32", elem_offset=2),
     "alloc_shared() got an unexpected keyword argument 'elem_offset'"),
    (lambda A: pg.cta_sync(1), "cta_sync() takes 0 positional arguments but 1 was given"),
    (lambda A: pg.if_(), "if_() missing 1 required positional argument: 'cond'"),
    (lambda A: pg.tile.warp.copy(A), "_Scope.copy() missing 1 required positional argument: "
                                     "'src'"),
    (lambda A: A.vload([0]), "TensorHandle.vload() missing 1 required positional argument: "
                             "'dtype'"),
])
def test_wrong_arguments_to_pg_calls(body, msg):
    def k(A: pg.Tensor((32,), "float32")):
        body(A)

    fails(lambda: kernel(k), None, msg, pg.TraceError, where=line_of(body))


def test_unknown_names_under_pg_tile_and_pg_ptx():
    def k(A: pg.Tensor((32,), "float32")):
        pg.tile.wrap.copy(A, A)                                # at: scope

    fails(lambda: kernel(k), "scope", "pg.tile has no scope 'wrap'; the scopes are thread, warp, "
          "warpgroup, cta, cluster", pg.TraceAttributeError)

    def k2(A: pg.Tensor((32,), "float32")):
        pg.ptx.mbarrier.arive(A)                               # at: helper

    e = fails(lambda: kernel(k2), "helper", "pg.ptx.mbarrier has no helper 'arive'; use "
              "pg.ptx['mbarrier.arive...'] for raw PTX", pg.TraceAttributeError)
    assert isinstance(e, AttributeError)      # hasattr() still answers False
    assert not hasattr(pg.tile, "wrap")


def test_annotation_errors_name_their_line():
    with pytest.raises(pg.PtxgenError) as ei:
        def k(A: pg.Tensor((32,), "floatt")):                  # at: ann
            pass
    from support.located import at

    assert str(ei.value).startswith(f"{at('ann')}: unknown dtype 'floatt'")
    # bool tensors are one byte per element on main (DType.storage_bits): tile casts take them
    assert pg.Tensor((4,), "bool").dtype.name == "bool"

    def k2(A: pg.Tensor((32,), "float32"), n: "no_such_name"):  # at: str
        pass

    fails(lambda: kernel(k2), "str", "cannot evaluate the annotation of 'n' of k2: name "
          "'no_such_name' is not defined", pg.TraceError)
    with pytest.raises(pg.TraceError, match=r"@pg.kernel decorates a Python function, got 5"):
        pg.kernel(grid=(1,), block=(32,))(5)


def test_an_error_inside_a_branch_is_located_once():
    def k(A: pg.Tensor((32, 32), "float32")):
        tx = pg.thread_id(32)
        with pg.if_(tx < 3):
            for i in pg.serial(2):
                pg.tile.cta.copy(A[0:1, 0:32], A[1:2, 0:32],   # at: copy
                                 dispatch="vec_auto")   # declines with 3 of 32 threads active

    from support.located import at

    with pytest.raises(pg.DispatchError) as ei:
        kernel(k).ptx("sm_90a")
    assert str(ei.value).startswith(f"{at('copy')}: no copy variant accepts "
                                    f"pg.tile.cta.copy(A[0:1, 0:32], A[1:2, 0:32])")
