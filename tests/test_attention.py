"""ptxgen.kernels.attention without a GPU: the kernel runs in ptxsim on small ragged cases
(causal and not, GQA, two key tiles, 40-column rows read by the D = 64 kernel's narrow
form) and matches an fp64 numpy reference within bf16 rounding; every shipped
configuration assembles for sm_90a; the PTX has the schedule's instruction forms
(register-A wgmma for P V, bar.arrive turns, setmaxnreg, ex2.ftz)."""
import math
import re

import numpy as np
import pytest

from support.ptxsim import run
from ptxgen.kernels.attention import BM, HEAD_DIMS, LOG2E, make_attention


def _bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _f64(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("causal,Hq,Hkv,Sq,Skv,D", [(True, 1, 1, 70, 150, 64),
                                                     (False, 2, 1, 9, 100, 64),
                                                     (True, 1, 1, 40, 90, 40)])
def test_kernel_in_ptxsim_matches_fp64(causal, Hq, Hkv, Sq, Skv, D):
    """D = 40: the D = 64 kernel's narrow form, on rows of 40 elements (TMA zero-fills the
    rest; o's store stops at column 40)."""
    rng = np.random.default_rng(Sq + Skv)
    q = _bf16(rng.standard_normal((1, Hq, Sq, D)))
    k = _bf16(rng.standard_normal((1, Hkv, Skv, D)))
    v = _bf16(rng.standard_normal((1, Hkv, Skv, D)))
    o = np.full((1, Hq, Sq, D), 0x7FC0, np.uint16)          # NaN: every row must be written
    pad = -(-Sq // BM) * BM
    lse = np.full((1, Hq, pad), np.nan, np.float32)
    narrow = D not in HEAD_DIMS
    kern = make_attention("bfloat16", 64, causal, Hq // Hkv, narrow=narrow)
    run(kern, [q, k, v, o, lse], scalars=[np.float32(LOG2E / math.sqrt(D)), 1, Hq, Sq,
                                          *([D] if narrow else []), Hkv, Skv, pad],
        grid=(1, Hq, 1))
    for h in range(Hq):
        Q, K, V = _f64(q[0, h]), _f64(k[0, h * Hkv // Hq]), _f64(v[0, h * Hkv // Hq])
        s = Q @ K.T / math.sqrt(D)
        if causal:
            s = np.where(np.triu(np.ones((Sq, Skv), bool), 1), -np.inf, s)
        ref_lse = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
        ref = np.exp(s - ref_lse[:, None]) @ V
        got = _f64(o[0, h])
        assert np.abs(got - ref).max() <= 2 ** -7 * np.abs(ref).max(), h   # bf16 rounding
        assert np.abs(lse[0, h, :Sq] - ref_lse).max() < 1e-4


@pytest.mark.parametrize("D,narrow", [(D, False) for D in HEAD_DIMS] + [(128, True)])
@pytest.mark.parametrize("causal", [False, True])
def test_every_configuration_assembles_for_sm90a(D, narrow, causal):
    kern = make_attention("bfloat16", D, causal, narrow=narrow)
    res = kern.compile("sm_90a")
    assert res.cubin


def test_schedule_forms_in_the_ptx():
    ptx = make_attention("float16", 128, False, 4).ptx("sm_90a")
    # S = Q K^T from shared descriptors; O += P V with P in registers (the RS form)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n176k16\.f32\.f16\.f16 \{[^}]+\}, "
                     r"%rd\d+, %rd\d+", ptx)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 \{[^}]+\}, "
                     r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+", ptx)
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    assert re.search(r"bar\.arrive %r\d+, 256;", ptx) and re.search(r"bar\.sync %r\d+, 256;", ptx)
    assert "ex2.approx.ftz.f32" in ptx
    assert "rcp.rn" not in ptx and "div.rn" not in ptx     # a subroutine call drops setmaxnreg
