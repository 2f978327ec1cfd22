"""A launch while another context is current in the thread, on one GPU.

The launcher does not ask which context is current before a launch: it relies on the driver
refusing a function of a context that is not current, and then launches in its own context
and leaves the thread's one current (runtime/launcher.py).  On a machine with two GPUs that
other context is the second device's (tests/gpu/test_runtime_multi_gpu.py); here it is a
second context of the same device, made with cuCtxCreate, which puts the same assumption to
the driver with one GPU.  Both launch paths are covered: a kernel with a per-launch grid (the
general path) and one with constant dims (the generated own launch).

Marked ``gpu``; skipped cleanly without a CUDA device or torch.
"""
import ctypes

import numpy as np
import pytest

from _affine import make_affine, make_affine_fixed
from ptxgen.runtime import driver, has_gpu, stats

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]
torch = pytest.importorskip("torch")


def _affine_grid_fn():
    return make_affine(), 100_003


def _affine_constant_dims():
    return make_affine_fixed(16384), 16384


class _OtherContext:
    """A second context of device 0, current in this thread while the block runs."""

    def __enter__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.ctx = ctypes.c_void_p()
        rc = self.lib.cuCtxCreate_v2(ctypes.byref(self.ctx), 0, 0)   # pushed: now current
        if rc:
            pytest.skip(f"cuCtxCreate refused a second context (CUresult {rc})")
        return int(self.ctx.value)

    def __exit__(self, *exc):
        popped = ctypes.c_void_p()
        self.lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
        self.lib.cuCtxDestroy_v2(self.ctx)
        assert popped.value == self.ctx.value


@pytest.mark.parametrize("make", [_affine_grid_fn, _affine_constant_dims],
                         ids=["per-launch-grid", "constant-dims-own-launch"])
def test_launch_under_another_context_is_refused_then_made_in_ours(make):
    k, n = make()
    x_host = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    want = (x_host * np.float32(1.5) + np.float32(-0.25)).view(np.uint32)
    x = torch.from_numpy(x_host).cuda()
    out = torch.full_like(x, float("nan"))
    k(out, x, 1.5, -0.25)          # built, loaded and launched in the primary context
    k(out, x, 1.5, -0.25)          # the constant-dims kernel now has its own launch
    torch.cuda.synchronize()
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    d = driver.drv()
    primary = int(d.cuCtxGetCurrent()[1])
    assert primary == int(driver.primary_context(0))
    before = stats()["launch_retries"]
    with _OtherContext() as other:
        assert int(d.cuCtxGetCurrent()[1]) == other != primary
        for _ in range(3):
            k(out, x, 1.5, -0.25)
        assert int(d.cuCtxGetCurrent()[1]) == other      # the thread's context is left as is
    assert stats()["launch_retries"] - before == 1       # refused once; then it asks first
    assert int(d.cuCtxGetCurrent()[1]) == primary
    torch.cuda.synchronize()
    assert np.array_equal(out.cpu().numpy().view(np.uint32), want)
    k(out, x, 1.5, -0.25)           # back under its own context: no refusal, no question
    torch.cuda.synchronize()
    assert stats()["launch_retries"] - before == 1
