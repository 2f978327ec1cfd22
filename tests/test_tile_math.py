"""Tile math (elementwise ops, casts) run in the PTX simulator and compared with numpy:
bit for bit, or within the stated bound for the approximations (the simulator models
ex2/lg2/rsqrt/rcp.approx as correctly rounded, so those bounds are the hardware's)."""
import warnings

import numpy as np
import pytest

import ptxsim
import tilemath_cases as TC
import tilemath_ref as R


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
