"""Deep programs: a 3,000-term expression built in a Python loop, 800 nested `pg.if_`s.

The printer, the facts, the simplifier, the lowering and the emitter recurse over expressions
and bodies; written as explicit-stack walks they would cost the common (shallow) kernel more
bytecodes than recursion does.  So they stay recursive, and a trace, build or print that runs
out of Python's default recursion limit is run again by `run_deep`: in a fresh thread with a
large C stack and a high recursion limit, so that even recursion through C slots cannot
overflow the stack.  The common path pays nothing (a `try` is free in CPython 3.11+).  What is
still too deep for that becomes a located ptxgen error, never a RecursionError.
"""
from __future__ import annotations

import sys
import threading

from .errors import TraceError

LIMIT = 200_000          # Python frames allowed while a deep program is handled
STACK = 1 << 30          # bytes of C stack of the thread that handles it (virtual memory)

_lock = threading.Lock()
_active = [0, 0]         # deep runs in progress, the recursion limit before the first one


def run_deep(fn, *args):
    """fn(*args) in a thread with a big stack and a high recursion limit; its result, or its
    exception re-raised here.  The limit is process-wide: it is raised while any deep run is
    in progress and restored by the last one."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn(*args)
        except BaseException as e:   # re-raised in the caller's thread
            out["error"] = e

    with _lock:
        if not _active[0]:
            _active[1] = sys.getrecursionlimit()
        _active[0] += 1
        if sys.getrecursionlimit() < LIMIT:
            sys.setrecursionlimit(LIMIT)
        old = threading.stack_size()
        try:
            threading.stack_size(STACK)   # applies to threads started from now on
            th = threading.Thread(target=target, name="ptxgen-deep", daemon=True)
            th.start()
        finally:
            threading.stack_size(old)
    try:
        th.join()
    finally:
        with _lock:
            _active[0] -= 1
            if not _active[0]:
                sys.setrecursionlimit(_active[1])
    if "error" in out:
        raise out["error"]
    return out["value"]


def too_deep(where: str, what: str):
    """The error for a program still too deep for run_deep (`where`: the user's file:line)."""
    return TraceError(f"{where + ': ' if where else ''}{what} nests too deeply for ptxgen (more "
                      f"than {LIMIT} Python frames); bind parts of long expressions with pg.let "
                      f"or flatten nested blocks")
