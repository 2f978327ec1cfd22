"""Errors that point at the user's line: a PtxgenError raised while tracing gets the user's
file:line, a RecursionError of a deep trace or build becomes a located error, and a TypeError
that Python raised binding the arguments of a ptxgen function becomes a TraceError there.
(The Kernel's trace and build run through these; split from kernel.py.)"""
from __future__ import annotations

import os
import re

from ..deep import run_deep, too_deep
from ..errors import LOCATED, PKG_DIRS, PtxgenError, TraceError, is_library


def locate(e: PtxgenError):
    """Prefix an error raised while tracing with the user's file:line (the innermost
    traceback frame outside ptxgen), unless it already says where."""
    msg = str(e.args[0]) if e.args else ""
    if LOCATED.match(msg):
        return
    where = None
    tb = e.__traceback__
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if not is_library(fname):
            where = f"{os.path.basename(fname)}:{tb.tb_lineno}"
        tb = tb.tb_next
    if where:
        e.args = (f"{where}: {msg}",) + tuple(e.args[1:])


def deep_located(fn, args, what):
    """fn(*args) again under run_deep (see ptxgen/deep.py); a RecursionError even there is a
    located error: the statement the emitter notes it was in, else the outermost user frame,
    the kernel's own line that started the descent (a user's recursive helper repeats one
    line in every inner frame; a deep expression has no user frame below the kernel's)."""
    try:
        return run_deep(fn, *args)
    except RecursionError as e:
        where = getattr(e, "ptxgen_src", None)
        tb = e.__traceback__
        while where is None and tb is not None:
            if not is_library(tb.tb_frame.f_code.co_filename):
                where = f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
            tb = tb.tb_next
        raise too_deep(where or "", what) from None


_SIGNATURE = re.compile(r"^([\w.<>]+)\(\) (got an unexpected keyword argument|takes|missing|"
                        r"got multiple values|got some positional-only)")


def signature_error(e: TypeError):
    """A TraceError at the user's line for a TypeError that Python raised while binding the
    arguments of a ptxgen function (`pg.alloc_shared(..., elem_offset=2)`), else None.  The
    call failed before the function ran, so no ptxgen frame is on the traceback."""
    m = _SIGNATURE.match(str(e))
    if m is None:
        return None
    where = None
    tb = e.__traceback__
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if fname.startswith(PKG_DIRS):
            where = None          # raised inside ptxgen: not a call made by the user
        elif not is_library(fname):
            where = f"{os.path.basename(fname)}:{tb.tb_lineno}"
        tb = tb.tb_next
    if where is None or m.group(1) not in _pg_names():
        return None
    return TraceError(f"{where}: {e}")


def _pg_names() -> set:
    """Qualified names of the functions and methods ptxgen's loaded modules define (an error
    path: gathered afresh, as modules load on first use)."""
    import sys

    out = set()
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.split(".")[0] != "ptxgen" or mod is None:
            continue
        for v in list(vars(mod).values()):
            if getattr(v, "__module__", None) != mod_name:
                continue
            if isinstance(v, type):
                out.update(getattr(m, "__qualname__", "") for m in vars(v).values()
                           if callable(m))
                out.add(v.__qualname__)
            elif callable(v):
                out.add(getattr(v, "__qualname__", ""))
    return out
