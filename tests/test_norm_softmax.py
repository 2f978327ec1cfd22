"""examples/rmsnorm.py and examples/softmax.py in the PTX simulator: ragged rows, M = 1,
one-element rows, the register-resident and the online (chunked) softmax, against float64
numpy within the examples' stated bounds."""
import sys

import numpy as np
import pytest

from support import ptxsim
import rmsnorm as RMS
import softmax as SM


def _run(k, arrays, scalars, m):
    ptxsim.run(k, arrays, scalars=list(scalars) + [m], grid=(m,))


@pytest.mark.parametrize("m,n", [(2, 1000), (1, 1001), (3, 24), (1, 1), (1, 2048)])
def test_rmsnorm(m, n):
    rng = np.random.default_rng(n)
    x = RMS.bf16_bits(rng.standard_normal((m, n)))
    w = RMS.bf16_bits(rng.uniform(0.5, 1.5, n))
    y = np.full((m, n), 0xFFFF, np.uint16)
    _run(RMS.make(n), [x, w, y], [1e-6], m)
    assert RMS.bf16_ulps(y, RMS.reference(x, w, 1e-6)).max() <= 1.0


def test_rmsnorm_knobs():
    rng = np.random.default_rng(5)
    x = RMS.bf16_bits(rng.standard_normal((1, 512)))
    w = RMS.bf16_bits(rng.uniform(0.5, 1.5, 512))
    for k in (RMS.make(512, per_thread=8), RMS.make(512, early_weight=False)):
        y = np.full((1, 512), 0xFFFF, np.uint16)
        _run(k, [x, w, y], [1e-5], 1)
        assert RMS.bf16_ulps(y, RMS.reference(x, w, 1e-5)).max() <= 1.0


def test_rmsnorm_weight_of_another_dtype():
    """bfloat16 rows times a float32 weight (torch's rms_norm takes either): the weight is
    read as float32, and y is bfloat16 within one ulp of float64."""
    rng = np.random.default_rng(7)
    x = RMS.bf16_bits(rng.standard_normal((2, 1000)))
    w = rng.uniform(0.5, 1.5, 1000).astype(np.float32)
    y = np.full((2, 1000), 0xFFFF, np.uint16)
    _run(RMS.make(1000, weight_dtype="float32"), [x, w, y], [1e-6], 2)
    ones = RMS.bf16_bits(np.ones(1000))
    assert RMS.bf16_ulps(y, RMS.reference(x, ones, 1e-6) * w.astype(np.float64)).max() <= 1.0


CASES = [(2, 1000, "bfloat16", None), (1, 1001, "float16", None), (2, 24, "float32", None),
         (1, 1, "float32", None), (1, 2048, "float32", None),
         (2, 1000, "float32", (4, 32, 8)), (1, 1003, "bfloat16", (1, 32, 8)),
         (1, 2056, "float16", (8, 64, 16))]


@pytest.mark.parametrize("m,n,dt,online", CASES)
def test_softmax(m, n, dt, online):
    rng = np.random.default_rng(n)
    x = SM.to_dtype((rng.standard_normal((m, n)) * 3).astype(np.float32), dt)
    y = np.full((m, n), 0x7F, SM._NP[dt])
    k = SM.make(n, dt) if online is None else SM._online(n, dt, *online)
    _run(k, [x, y], [], m)
    v = SM.values(x, dt).astype(np.float64)
    assert (SM.ulps(y, SM.reference(v), dt) / SM.bound(v, dt)).max() <= 1.0


@pytest.mark.parametrize("n,dtype,early", [
    (16384, "float32", True), (16384, "bfloat16", True), (32768, "bfloat16", False),
    (32768, "float32", False),
])
def test_rmsnorm_loads_the_weight_early_while_a_thread_holds_few_elements(n, dtype, early):
    """Past EARLY_WEIGHT_MAX elements a thread, the weight is read after the reduction; the
    kernel then assembles without spills (the early weight spilled at 32768 float32)."""
    k = RMS.make(n, dtype)
    assert k.name.endswith("_late") is not early
    assert "_late" not in RMS.make(n, dtype, weighted=False).name
    assert k.compile("sm_90a").spill_bytes == 0


@pytest.mark.parametrize("n,dtype,weighted", [
    (32769, "float32", True), (65536, "float16", True), (65536, "float32", False),
    (100000, "bfloat16", True), (1 << 20, "float32", True),
])
def test_rmsnorm_rows_past_the_registers_are_chunked(n, dtype, weighted):
    """A row of more than IN_REGISTERS elements a thread is read in chunks, twice, instead of
    spilling; any length assembles without spills."""
    k = RMS.make(n, dtype, weighted=weighted)
    assert k.name.startswith(f"rmsnorm_chunked_{dtype}_{n}_t1024_e16")
    assert k.compile("sm_90a").spill_bytes == 0


@pytest.mark.parametrize("per_thread", [64, 1000])
def test_row_chunks_stay_within_the_registers_whatever_per_thread(per_thread):
    """per_thread past IN_REGISTERS sets the block size, not the chunk: a chunk of more
    elements a thread would spill as a row that long does."""
    for mod in (RMS, SM):
        k = mod.make(65536, "float32", per_thread=per_thread)
        assert k.compile("sm_90a").spill_bytes == 0, k.name


@pytest.mark.parametrize("make,args,message", [
    ("rmsnorm", dict(n=65536, early_weight=True),
     "rmsnorm: early_weight=True keeps the weight row in registers, but a row of 65536 "
     "elements at per_thread=16 holds 64 elements a thread, more than IN_REGISTERS = 32, so it "
     "is read in chunks; leave early_weight unset"),
    ("rmsnorm", dict(n=512, early_weight="yes"),
     "rmsnorm: early_weight must be True, False or None, got 'yes'"),
    ("rmsnorm", dict(n=512, per_thread=0),
     "rmsnorm: per_thread = 0: a positive int (n elements a row, about per_thread of them a "
     "thread)"),
    ("softmax", dict(n=2.0),
     "softmax: n = 2.0: a positive int (n elements a row, about per_thread of them a thread)"),
    ("softmax", dict(n=64, dtype="int8"),
     "softmax.make: dtype 'int8'; it takes float16, bfloat16, float32"),
])
def test_row_kernel_options_are_refused_by_name(make, args, message):
    """An option a row kernel cannot honour is an ArgumentError naming it (the wrappers pass
    their knobs here), never silently dropped."""
    from ptxgen.kernels import ArgumentError
    mod = RMS if make == "rmsnorm" else SM
    with pytest.raises(ArgumentError) as e:
        mod.make(**args)
    assert str(e.value) == message


def _chunked(n, dtype, V, T, E, weighted=True, weight_dtype=None):
    from ptxgen.kernels import rmsnorm as op   # the module's own: ptxgen.kernels.rmsnorm

    return sys.modules[op.__module__].chunked(n, dtype, V, T, E, weighted, weight_dtype)


@pytest.mark.parametrize("m,n,V,T,E", [(2, 1000, 8, 32, 8), (3, 256, 8, 32, 8),
                                       (1, 1001, 1, 32, 4), (2, 40, 4, 32, 4)])
def test_rmsnorm_chunked_bfloat16(m, n, V, T, E):
    """Full chunks, a ragged tail chunk (or none, or only the tail), 16-byte and scalar
    accesses: within one bfloat16 ulp of float64, as the register-resident form."""
    rng = np.random.default_rng(n)
    x = RMS.bf16_bits(rng.standard_normal((m, n)) * 4)
    w = RMS.bf16_bits(rng.uniform(0.5, 1.5, n))
    y = np.full((m, n), 0xFFFF, np.uint16)
    _run(_chunked(n, "bfloat16", V, T, E), [x, w, y], [1e-6], m)
    assert RMS.bf16_ulps(y, RMS.reference(x, w, 1e-6)).max() <= 1.0


@pytest.mark.parametrize("weighted", [True, False])
def test_rmsnorm_chunked_float32(weighted):
    """float32 rows (a float16 weight, or none) against float64 within float32 rounding."""
    rng = np.random.default_rng(3)
    m, n = 2, 999
    x = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    w = rng.uniform(0.5, 1.5, n).astype(np.float16)
    y = np.full((m, n), np.nan, np.float32)
    k = _chunked(n, "float32", 1, 32, 8, weighted, "float16")
    _run(k, [x, w, y] if weighted else [x, y], [1e-6], m)
    xv = x.astype(np.float64)
    want = xv / np.sqrt(np.mean(xv * xv, axis=1, keepdims=True) + 1e-6)
    if weighted:
        want = want * w.astype(np.float64)
    assert np.abs(y - want).max() <= 4e-6 * np.abs(want).max()


def test_examples_assemble():
    for k in RMS.KERNELS + SM.KERNELS:
        for arch in ("sm_80", "sm_90a", "sm_100a"):
            r = k.compile(arch)
            assert r.spill_bytes == 0, (k.name, arch)
