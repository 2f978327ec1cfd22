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
    assert _pair().compile("sm_90").cubin


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
