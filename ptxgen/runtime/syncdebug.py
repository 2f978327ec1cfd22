"""The host side of sync debug mode (passes/syncdebug.py builds the bounded waits).

Each loaded module gets 16 bytes of pinned host memory mapped into the device, whose device
address goes into the module's `__ptxgen_sync_rec`.  A wait that times out writes (magic,
site, parity, thread) there and traps.  The trap loses the CUDA context: no device memory can
be read after it, and the process should not launch on that device again.  The pinned page is
still host memory, so the record survives; `sync_launch` synchronizes after the launch and,
on a failure with a record, raises SyncError naming the barrier, its phase parity, the thread
and the user's line (the site table the build made).

The few driver calls the project's binding lacks (pinned mapped memory, module globals) go
through cuda-bindings directly.
"""
from __future__ import annotations

import ctypes
import struct

from ..errors import PtxgenError, SyncError
from . import driver


def _int(h) -> int:
    v = getattr(h, "value", h)
    try:
        return int(v or 0)
    except TypeError:
        return int(h.getPtr())


def _check(res, what):
    err = res[0]
    if int(err):
        raise SyncError(f"sync debug mode: {what} failed ({err!r})")
    return res[1:] if len(res) > 2 else (res[1] if len(res) == 2 else None)


class Record:
    """The pinned, device-mapped record of one module."""

    def __init__(self, module, sites, name, layout):
        from cuda.bindings import driver as cu

        self.sites, self.name, self.layout = sites, name, layout
        with driver.context_scope(module.ctx):
            flags = cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE
            self.host = _int(_check(cu.cuMemHostAlloc(16, flags), "cuMemHostAlloc"))
            dptr = _check(cu.cuMemHostGetDevicePointer(self.host, 0),
                          "cuMemHostGetDevicePointer")
            gptr, _ = _check(cu.cuModuleGetGlobal(cu.CUmodule(_int(module.handle)),
                                                  layout["symbol"].encode()),
                                 "cuModuleGetGlobal")
            word = struct.pack("<Q", _int(dptr))
            _check(cu.cuMemcpyHtoD(gptr, word, 8), "cuMemcpyHtoD")

    def clear(self):
        ctypes.memset(self.host, 0, 16)

    def error(self) -> SyncError | None:
        return decode(ctypes.string_at(self.host, 16), self.sites, self.name, self.layout)


def decode(raw: bytes, sites, name, layout) -> SyncError | None:
    """The SyncError a record describes, or None when no wait timed out.  `layout`: the
    builder's record description (passes.syncdebug.RECORD)."""
    magic, site, parity, tid = struct.unpack("<4I", raw[:16])
    if magic != layout["magic"] or site >= len(sites):
        return None
    what, bar, par_text, src = sites[site]
    secs = layout["limit_ns"] / 1e9
    if what == "wait":
        return SyncError(
            f"{src}: kernel '{name}': thread {tid} waited more than {secs:g} s on mbarrier "
            f"'{bar}' for phase parity {parity}{'' if par_text != '<computed>' else ' (computed)'}"
            f" and the phase never completed (sync debug mode): too few arrivals for its "
            f"count, a wrong parity, or a stage never released.  The kernel trapped; the CUDA "
            f"context of this device is lost, so restart the process before launching again")
    return SyncError(
        f"{src}: kernel '{name}': thread {tid} ran this pg.while_ loop for more than {secs:g} "
        f"s (sync debug mode): its condition never became false.  The kernel trapped; the CUDA "
        f"context of this device is lost, so restart the process before launching again")


def sync_launch(launcher, sites, layout, values, user, grid, block, stream,
                dynamic_smem_bytes):
    """Launch and wait; a failed launch with a record raises SyncError."""
    rec = getattr(launcher, "_sync_record", None)
    if rec is None:
        rec = launcher._sync_record = Record(launcher.module, sites, launcher.name, layout)
    rec.clear()
    try:
        launcher.launch(values, user, grid, block, stream, dynamic_smem_bytes)
        driver.synchronize(kernel=launcher.name, device=launcher.module.device)
    except PtxgenError as e:
        err = rec.error()
        if err is not None:
            raise err from e
        raise
