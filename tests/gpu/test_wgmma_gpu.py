"""Hardware proof of the shared-memory descriptor builder (H200, sm_90a).

wgmma m64nNk16 bf16 with A/B descriptors from `smem_descriptors` -- the builder gemm_async
uses for tcgen05 (same fields; sm_100 only adds bit 46) -- multiplies random matrices; the
result must match numpy (fp32 accumulation, 1e-3 relative) for no swizzle and the 32B / 64B /
128B swizzles, K- and MN-major.  Every output is poisoned first (D = NaN, dumps = 0xFFFF).
The raw dumps of both shared tiles are checked first, so a failure says whether the tile
layout (stores) or the descriptor (LBO / SBO / swizzle / K-step advance) is wrong.
"""
import importlib.util

import numpy as np
import pytest

from ptxgen.runtime import has_gpu

_ARRAYS = any(importlib.util.find_spec(m) is not None for m in ("torch", "cupy"))
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not _ARRAYS, reason="needs torch or cupy for device arrays")]

import wgmma_desc_check as ex  # noqa: E402


def _need_sm90a():
    from ptxgen.runtime import device_arch

    if device_arch() != "sm_90a":
        pytest.skip(f"wgmma needs sm_90a (Hopper); this device is {device_arch()}")


def _run(case, seed):
    from _xp import xp

    N, sw, am, bm = case
    a, b, ref = ex.inputs(N, seed=seed)
    dA, dB = xp.asarray(a.view(np.int16)), xp.asarray(b.view(np.int16))
    D = xp.full((ex.M, N), np.nan, np.float32)
    dumpA = xp.full((ex.M * ex.K,), -1, np.int16)
    dumpB = xp.full((N * ex.K,), -1, np.int16)
    ex.kernel_for(*case)(xp.ptr(dA), xp.ptr(dB), xp.ptr(D), xp.ptr(dumpA), xp.ptr(dumpB))
    xp.sync()
    return (a, b, ref, xp.asnumpy(D), xp.asnumpy(dumpA).view(np.uint16),
            xp.asnumpy(dumpB).view(np.uint16))


@pytest.mark.parametrize("case", ex.CASES, ids=lambda c: "n%d-%s-%s%s" % c)
def test_wgmma_with_built_descriptors_matches_numpy(case):
    _need_sm90a()
    N, sw, am, bm = case
    a, b, ref, got, dump_a, dump_b = _run(case, seed=N + len(sw))
    for name, dump, bits, major in (("A", dump_a, a, am), ("B", dump_b, b, bm)):
        want = ex.expected_dump(bits, major, sw)
        bad = int(np.sum(dump != want))
        assert bad == 0, (f"shared tile {name} ({major}-major {sw}) is not laid out as the "
                          f"descriptor expects: {bad} of {want.size} elements differ "
                          f"(a layout/store problem, not a descriptor one)")
    assert np.isfinite(got).all(), f"{int(np.sum(~np.isfinite(got)))} outputs never written"
    err = np.abs(got.astype(np.float64) - ref)
    tol = 1e-3 * np.maximum(np.abs(ref), 1e-3 * np.abs(ref).max())
    assert (err <= tol).all(), (
        f"{int(np.sum(err > tol))} of {err.size} outputs differ from numpy; max abs error "
        f"{err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)} (descriptor for "
        f"{am}/{bm}-major {sw} is wrong)")


def test_wgmma_repeat_launch_is_stable():
    _need_sm90a()
    case = (64, "128B", "K", "K")
    first = _run(case, seed=11)[3]
    again = _run(case, seed=11)[3]
    assert np.array_equal(first, again)
