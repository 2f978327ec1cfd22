"""SMEMPool / dynamic arena on a real GPU (sm_90+): bit-exact copies through shared memory.

Marked ``gpu``; skipped where no CUDA device is visible.  Device arrays come from torch if
importable, else cupy (tests/gpu/_xp.py).  Outputs are poisoned with 0xFF bytes before each
launch, so an element the kernel never wrote cannot pass.
"""
import numpy as np
import pytest

from ptxgen.runtime import has_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]


def _results():
    from ptxgen.runtime import device_arch

    if int(device_arch()[3:].rstrip("af")) < 90:
        pytest.skip("mbarrier.try_wait needs sm_90+")
    import smem_pool_demo as demo
    from _xp import xp

    return {label: (got, want) for label, got, want in demo.check(xp, np.random.default_rng(7))}


def _assert_same(got, want, label):
    from _xp import same_bits, xp

    got = xp.asnumpy(got)
    assert same_bits(got, want), f"{label}: {int(np.sum(got != want))} elements differ"


def test_pool_copy_100kb_bit_exact():
    import smem_pool_demo as demo

    assert demo.pool_copy.resources["smem_dynamic_bytes"] >= 100 * 1000
    res = _results()
    for label in ("pool_copy int32 tiles (phase 0)", "pool_copy float16 reused tile (phase 1)"):
        _assert_same(*res[label], label)


@pytest.mark.parametrize("kb", [64, 200])
def test_dynamic_arena_bit_exact(kb):
    label = f"arena_copy_{kb}k"
    _assert_same(*_results()[label], label)
