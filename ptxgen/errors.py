"""Exception types.  Every user-facing failure is a PtxgenError subclass with a
message that says what is wrong, where, and (when known) the fix."""
from __future__ import annotations

import re

LOCATED = re.compile(r"^[^\s:]+\.py:\d+: ")   # "file.py:12: ..." (a located message)


class PtxgenError(Exception):
    """Base class: a mistake in the kernel, caught by ptxgen before ptxas or the GPU."""


class TraceError(PtxgenError):
    """Misuse of the builder, reported at the user's file and line."""


class TraceAttributeError(TraceError, AttributeError):
    """An unknown name under pg.tile / pg.ptx: a TraceError that hasattr() reads as missing."""


class LayoutError(PtxgenError):
    """An invalid layout, region or view."""


class ArchError(PtxgenError):
    """An instruction the target architecture (or PTX version) lacks."""


class DispatchError(PtxgenError):
    """No tile-primitive variant accepted a call; the message lists every reason."""


class ResourceError(PtxgenError):
    """Shared/tensor memory bookkeeping violated (overflow, bad column count, ...)."""


class PTXCompileError(PtxgenError):
    """ptxas/nvJitLink or the driver JIT rejected the PTX; carries line context and a repro."""


class LaunchError(PtxgenError):
    """A launch argument does not match the kernel signature, or the launch failed."""


class CudaError(PtxgenError):
    """A CUDA driver call failed."""


class SyncError(PtxgenError):
    """Sync debug mode: a wait did not complete in time; names the barrier, its phase parity,
    the waiting thread and the user's line (the kernel trapped: the context is lost)."""


def located_at(e: PtxgenError, src: str) -> PtxgenError:
    """`e`, its message prefixed once with the statement's `file:line` (build-time errors:
    the tile-lowering pass and the emitter locate what a statement raised this way)."""
    msg = str(e.args[0]) if e.args else ""
    if src and not getattr(e, "located", False):
        # the innermost statement's line; a message that names its line already keeps it
        if not LOCATED.match(msg):
            e.args = (f"{src}: {msg}",) + tuple(e.args[1:])
        e.located = True
    return e
