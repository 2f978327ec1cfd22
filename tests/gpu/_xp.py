"""numpy-like device arrays for GPU tests: torch if importable, else cupy."""
import numpy as np

try:
    import torch

    HAVE = torch.cuda.is_available()
    _T = {np.dtype(k): getattr(torch, v) for k, v in [
        ("float32", "float32"), ("float16", "float16"), ("float64", "float64"),
        ("int8", "int8"), ("uint8", "uint8"), ("int16", "int16"), ("int32", "int32"),
        ("int64", "int64"), ("uint16", "uint16"), ("uint32", "uint32")]}

    class XP:
        name = "torch"

        def asarray(self, a):
            a = np.ascontiguousarray(a)
            return torch.from_numpy(a.view(a.dtype)).cuda()

        def full(self, shape, value, dtype):
            a = np.full(shape, value, dtype=dtype)
            return self.asarray(a)

        def ptr(self, t):
            return t.data_ptr()

        def asnumpy(self, t):
            torch.cuda.synchronize()
            return t.cpu().numpy()

        def sync(self):
            torch.cuda.synchronize()
except ImportError:   # pragma: no cover - the device machine has torch
    import cupy

    HAVE = cupy.cuda.runtime.getDeviceCount() > 0

    class XP:
        name = "cupy"

        def asarray(self, a):
            return cupy.asarray(np.ascontiguousarray(a))

        def full(self, shape, value, dtype):
            return cupy.full(shape, value, dtype=dtype)

        def ptr(self, t):
            return t.data.ptr

        def asnumpy(self, t):
            cupy.cuda.runtime.deviceSynchronize()
            return cupy.asnumpy(t)

        def sync(self):
            cupy.cuda.runtime.deviceSynchronize()

xp = XP()


def same_bits(got, want) -> bool:
    """Bit-exact comparison (NaN payloads and signed zeros included)."""
    got = np.ascontiguousarray(got)
    want = np.ascontiguousarray(want)
    return got.shape == want.shape and got.tobytes() == want.tobytes()


def assert_results(results):
    for name, got, want in results:
        got = xp.asnumpy(got) if not isinstance(got, np.ndarray) else got
        assert same_bits(got, want), f"{name}: result differs from numpy " \
            f"({int(np.sum(np.asarray(got).view(np.uint8) != np.asarray(want).view(np.uint8)))} bytes)"


class OnlyCAI:
    """A device array that speaks only __cuda_array_interface__ (no DLPack), which does not
    say which device the memory is on: the launch asks the driver (cuPointerGetAttribute)."""

    def __init__(self, t):
        self.t = t

    @property
    def __cuda_array_interface__(self):
        return self.t.__cuda_array_interface__
