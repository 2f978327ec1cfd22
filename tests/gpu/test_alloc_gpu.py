"""SMEMPool / dynamic arena on a real GPU (sm_90+): bit-exact copies through shared memory.

Marked ``gpu``; skipped where no CUDA device (or neither torch nor cupy) is available.  Outputs
are poisoned with 0xFF bytes before each launch, so an element the kernel never wrote fails.
"""
import importlib.util

import pytest

from ptxgen.runtime import has_gpu

_ARRAYS = any(importlib.util.find_spec(m) is not None for m in ("torch", "cupy"))
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not _ARRAYS, reason="needs torch or cupy for device arrays")]


def _sm90():
    from ptxgen.runtime import device_arch
    if int(device_arch()[3:5]) < 9:
        pytest.skip("mbarrier.try_wait needs sm_90+")


def test_pool_copy_100kb_bit_exact():
    import smem_pool_demo as demo
    _sm90()
    assert demo.pool_copy.resources["smem_dynamic_bytes"] >= 100 * 1000
    ok_words, ok_halves = demo.run_pool_copy(seed=1)
    assert ok_words, "int32 tiles (phase 0) differ from the reversed input"
    assert ok_halves, "float16 tile reusing the space (phase 1) differs from the reversed input"


def test_pool_copy_repeat_launch():
    import smem_pool_demo as demo
    _sm90()
    assert demo.run_pool_copy(seed=2) == (True, True)


@pytest.mark.parametrize("nbytes", [64 * 1024, 200 * 1024])
def test_dynamic_arena_copy(nbytes):
    import smem_pool_demo as demo
    assert demo.run_arena_copy(nbytes, seed=3)
