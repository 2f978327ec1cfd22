"""Programmatic dependent launch primitives (builder/griddep.py): their PTX and arch gate."""
import pytest

import ptxgen as pg
from ptxgen.errors import ArchError


def _pair():
    @pg.kernel(grid=(2,), block=(64,))
    def k(A: pg.Tensor((128,), "float32")):
        pg.launch_dependent_grids()
        tx = pg.thread_id(64)
        pg.wait_on_dependent_grids()
        A[tx] = A[tx] + 1.0
    return k


def test_griddepcontrol_forms_in_order():
    lines = [ln.strip() for ln in _pair().ptx("sm_90a").splitlines()
             if ln.strip().startswith("griddepcontrol")]
    assert lines == ["griddepcontrol.launch_dependents;", "griddepcontrol.wait;"]


def test_griddepcontrol_needs_ptx_7_8_on_sm_90():
    text = _pair().ptx("sm_90")
    assert ".version 7.8" in text
    for arch in ("sm_90", "sm_90a", "sm_100a"):      # assembled by nvJitLink
        assert _pair().compile(arch).cubin


def test_griddepcontrol_refused_before_sm_90():
    with pytest.raises(ArchError, match=r"'programmatic dependent launch \(griddepcontrol\)' "
                                        r"needs sm_90 or newer; the target is sm_80"):
        _pair().ptx("sm_80")


def test_only_the_wait_marks_a_dependent_launch():
    @pg.kernel(grid=(1,), block=(32,))
    def ahead(A: pg.Tensor((32,), "float32")):
        pg.launch_dependent_grids()
    assert not ahead.ir.attrs.get("dependent_launch")
    assert _pair().ir.attrs["dependent_launch"] is True


def _trace(body):
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32"), B: pg.Tensor((32,), "float32")):
        body(A, B)
    return k


def test_wait_refused_inside_a_branch():
    def body(A, B):
        tx = pg.thread_id(32)
        with pg.if_(tx == 0):
            pg.wait_on_dependent_grids()
    with pytest.raises(pg.TraceError, match=r"test_griddep\.py:\d+: pg\.wait_on_dependent_grids"
                                            r"\(\) must be called at the top level of the "
                                            r"kernel body, not inside pg\.if_"):
        _trace(body)


@pytest.mark.parametrize("access", ["load", "store", "tile copy"])
def test_wait_refused_after_a_global_access(access):
    """Code before the wait runs beside the kernel ahead: a global read or write there is
    refused, naming its line; shared memory is fine."""
    def body(A, B):
        tx = pg.thread_id(32)
        sm = pg.alloc_shared((32,), "float32")
        sm[tx] = 2.0                                   # shared: allowed before the wait
        if access == "load":
            pg.let(A[tx])
        elif access == "store":
            B[tx] = 1.0
        else:
            pg.tile.warp.copy(sm[0:32], A[0:32])
        pg.wait_on_dependent_grids()
    with pytest.raises(pg.TraceError, match=r"pg\.wait_on_dependent_grids\(\) comes after the "
                                            r"global memory access at test_griddep\.py:\d+: "
                                            r"code before the wait runs beside the kernel "
                                            r"ahead"):
        _trace(body)


def test_wait_after_shared_memory_setup_is_accepted():
    def body(A, B):
        tx = pg.thread_id(32)
        sm = pg.alloc_shared((32,), "float32")
        sm[tx] = 2.0
        pg.wait_on_dependent_grids()
        B[tx] = A[tx] + sm[tx]
    assert "griddepcontrol.wait;" in _trace(body).ptx("sm_90a")
