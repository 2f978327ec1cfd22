"""Every example runs on the GPU and matches numpy bit for bit (outputs poisoned first)."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

EXAMPLES = ["smem_demo", "dyn_arena", "phase_loop", "let_scalar", "add_one", "grid_stride_copy"]


@pytest.mark.parametrize("mod", EXAMPLES)
def test_example_bit_exact(mod):
    from _xp import assert_results, xp

    m = __import__(mod)
    rng = np.random.default_rng(1234)
    assert_results(m.check(xp, rng))
