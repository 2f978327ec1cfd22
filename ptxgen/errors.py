"""Exception and warning types, and the user's line they point at.  Every user-facing failure
is a PtxgenError subclass with a message that says what is wrong, where, and (when known) the
fix."""
from __future__ import annotations

import linecache
import os
import re
import sys
import warnings
from functools import lru_cache

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


class PtxasWarning(UserWarning):
    """ptxas accepted the kernel but said something its author should hear: wgmma serialized,
    registers spilled to local memory, another ptxas warning (``CompileResult.notes``)."""


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


# Frames carry the path the module was imported by (maybe with "..", e.g. from a sys.path
# entry like "benchmarks/.."); match that spelling as well as the normalized one.
PKG_DIRS = tuple({os.path.dirname(__file__) + os.sep,
                  os.path.dirname(os.path.abspath(__file__)) + os.sep})
# ptxgen/kernels/ is kernel source written with the builder as a user writes it: its lines
# name the kernels' registers and locate their errors, as they did in examples/.
_KERNEL_DIRS = tuple(os.path.join(d, "kernels") + os.sep for d in PKG_DIRS)
# The standard library's directory: that of its pure modules (linecache is one, and unlike
# os never frozen), sysconfig's "stdlib" path without importing sysconfig for it (that import
# would slow `import ptxgen`; benchmarks/RESULTS.md has the figure).
_STDLIB = (os.path.dirname(os.path.normpath(os.path.abspath(linecache.__file__))) + os.sep,)


@lru_cache(maxsize=None)   # per file name; a hit is a C call, no Python frame
def is_library(filename: str) -> bool:
    """A frame of ptxgen or of the standard library (contextlib's `with` machinery,
    functools, ...), never the user's line; installed packages (site-packages) may be."""
    return filename.startswith(PKG_DIRS) and not filename.startswith(_KERNEL_DIRS) or \
        filename.startswith(_STDLIB) and "-packages" + os.sep not in filename


def _first_outside(inner: str, f):
    """The first frame from `f` outward whose file is not under the directory `inner`."""
    while f is not None and f.f_code.co_filename.startswith(inner):
        f = f.f_back
    return f


def caller_src(inner: str) -> str:
    """"file:line" of the user's call into the ptxgen subpackage whose directory is `inner`:
    the first frame outside it, when that frame is outside ptxgen too (a layout built at module
    level: no trace is running to locate its error).  "" when ptxgen itself made the call: the
    caller words the error (a dispatch reason, a fallback), and a trace locates what escapes."""
    f = _first_outside(inner, sys._getframe(1))
    if f is None or f.f_code.co_filename.startswith(PKG_DIRS):
        return ""
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"


def warn_user(message: str, category: type) -> None:
    """warnings.warn at the user's line, the first frame outside ptxgen and the standard
    library: a fixed stacklevel cannot know how deep in ptxgen the warning starts
    (k.compile(), a launch, a thread)."""
    f = sys._getframe(1)
    while f is not None and is_library(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        warnings.warn(message, category, stacklevel=2)
        return
    g = f.f_globals
    where = (message, category, f.f_code.co_filename, f.f_lineno, g.get("__name__"),
             g.setdefault("__warningregistry__", {}))
    try:    # the module's globals let the warning show a line that only its loader has
        warnings.warn_explicit(*where, g)
    except ImportError:     # `python -c` and the REPL: __main__'s loader has no source
        warnings.warn_explicit(*where)
