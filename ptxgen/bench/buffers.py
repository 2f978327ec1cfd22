"""Source/destination device buffers for copy benchmarks, and the exact check dst == src.

One pair of buffers serves the baselines and every kernel of a sweep, so all numbers
compare the same memory.  They are plain cuMemAlloc allocations (no torch needed); when
torch is importable they are also exposed as zero-copy torch tensors for the torch
baseline and for a fast on-device comparison.

Content is chosen so that wrong copies cannot pass by accident:

* src bytes lie in [1, 254]: never 0 (an untouched zeroed buffer never matches) and
  never 0xFF, the poison written to dst before each check (a skipped byte never matches);
* src repeats with an *odd* period (just under 64 MiB), so a kernel that reads or writes
  at an offset error of any power-of-two tile, row or block size sees different bytes.
"""
from __future__ import annotations

from ..errors import CudaError, PtxgenError
from .sweep import copy_bytes
from ..runtime.driver import call, drv, synchronize
from ..runtime.launcher import stream_handle

__all__ = ["CopyBuffers", "POISON", "FILL_PERIOD", "CHECK_CHUNK"]

POISON = 0xFF
FILL_PERIOD = (64 << 20) - 61      # odd, so no power-of-two offset aliases the pattern
CHECK_CHUNK = 256 << 20            # host comparison granularity (2 x 256 MiB of host RAM)


class CopyBuffers:
    """``nbytes``-sized src and dst buffers on the current device (``total // 2`` each).

    Use as a context manager or call :meth:`close`; ``src``/``dst`` are raw device
    addresses (ints), the form every kernel launcher receives.
    """

    def __init__(self, total_bytes: int, *, seed: int = 0, use_torch: bool = True):
        nbytes = copy_bytes(total_bytes)
        if nbytes <= 0:
            raise PtxgenError(f"--size {total_bytes} B is too small: need at least 2 MiB "
                              f"(two 1 MiB buffers)")
        free, _total = call("cuMemGetInfo")
        if 2 * nbytes > free:
            raise PtxgenError(f"copy buffers need 2 x {nbytes} B but only {free} B of device "
                              f"memory is free; pass a smaller --size")
        self.nbytes = nbytes
        self.src = self.dst = 0
        self.src = int(call("cuMemAlloc", nbytes))
        self.dst = int(call("cuMemAlloc", nbytes))
        self.torch_src = self.torch_dst = None
        if use_torch:
            self._wrap_torch()
        self._fill(seed)

    # ---- setup -----------------------------------------------------------
    def _fill(self, seed: int) -> None:
        """Random bytes in [1, 254]: one host chunk, then device-side doubling (fast)."""
        import numpy as np

        period = min(FILL_PERIOD, self.nbytes)
        chunk = np.random.default_rng(seed).integers(1, 255, size=period, dtype=np.uint8)
        call("cuMemcpyHtoD", self.src, chunk.ctypes.data, period)
        done = period
        while done < self.nbytes:
            n = min(done, self.nbytes - done)
            call("cuMemcpyDtoD", self.src + done, self.src, n)
            done += n
        call("cuCtxSynchronize")

    def _wrap_torch(self) -> None:
        """Zero-copy torch views via __cuda_array_interface__; skipped if torch is absent."""
        try:
            import torch
        except ImportError:
            return
        if not torch.cuda.is_available():
            return

        class _View:
            def __init__(self, ptr, n):
                self.__cuda_array_interface__ = {
                    "shape": (n,), "typestr": "|u1", "data": (ptr, False),
                    "strides": None, "version": 3, "stream": None}

        dev = torch.device("cuda", int(call("cuCtxGetDevice")))
        self.torch_src = torch.as_tensor(_View(self.src, self.nbytes), device=dev)
        self.torch_dst = torch.as_tensor(_View(self.dst, self.nbytes), device=dev)
        if (self.torch_src.data_ptr(), self.torch_dst.data_ptr()) != (self.src, self.dst):
            raise PtxgenError("torch.as_tensor copied the copy buffers instead of aliasing them")

    # ---- per-check -------------------------------------------------------
    def poison(self, stream=None) -> None:
        """Fill dst with 0xFF (a byte src never holds) before a correctness run."""
        call("cuMemsetD8Async", self.dst, POISON, self.nbytes,
             drv().CUstream(stream_handle(stream)))

    def check(self, stream=None) -> str | None:
        """None if dst == src exactly, else a short description of the first difference.

        Waits for ``stream``.  Uses torch.equal on device when torch views exist (a few
        ms for GiBs); otherwise, and to locate a difference, compares 256 MiB chunks on
        the host with numpy.
        """
        synchronize(stream)
        if self.torch_src is not None:
            import torch

            equal = torch.equal(self.torch_src, self.torch_dst)
            torch.cuda.synchronize()
            if equal:
                return None
        return self._host_diff()

    def _host_diff(self) -> str | None:
        import numpy as np

        n = min(CHECK_CHUNK, self.nbytes)
        a, b = np.empty(n, np.uint8), np.empty(n, np.uint8)
        bad_total, first = 0, None
        for off in range(0, self.nbytes, CHECK_CHUNK):
            m = min(CHECK_CHUNK, self.nbytes - off)
            call("cuMemcpyDtoH", a.ctypes.data, self.src + off, m)
            call("cuMemcpyDtoH", b.ctypes.data, self.dst + off, m)
            diff = np.flatnonzero(a[:m] != b[:m])
            if diff.size:
                bad_total += int(diff.size)
                if first is None:
                    i = int(diff[0])
                    first = (off + i, int(a[i]), int(b[i]))
        if first is None:
            return None
        off, want, got = first
        what = "never written" if got == POISON else f"0x{got:02x}, want 0x{want:02x}"
        return f"{bad_total} of {self.nbytes} bytes differ; first at byte {off} is {what}"

    def close(self) -> None:
        """Free both buffers; best effort, since after a kernel fault the context (and
        every free) fails and the report of what happened matters more."""
        self.torch_src = self.torch_dst = None
        for attr in ("src", "dst"):
            ptr, _ = getattr(self, attr, 0), setattr(self, attr, 0)
            if ptr:
                try:
                    call("cuMemFree", ptr)
                except CudaError:
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
