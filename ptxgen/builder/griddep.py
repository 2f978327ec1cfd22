"""Programmatic dependent launch (sm_90+): a kernel that starts while the kernel ahead of it in
the stream finishes.

A kernel that calls `pg.wait_on_dependent_grids()` is launched with programmatic stream
serialization (cuLaunchKernelEx, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): its
CTAs may be scheduled as soon as every CTA of the kernel ahead has called
`pg.launch_dependent_grids()` or exited, and each thread that reaches the wait blocks there
until that kernel has completed and its memory is visible.  So the launch latency between the
two overlaps the first one's tail.  Code before the wait runs beside the kernel ahead: it may
prepare (shared memory, barriers, tensor-map prefetches) but must not read what that kernel
writes, nor write what it reads.  With no kernel ahead, or one that never triggers, the wait
returns when the stream would have started the kernel anyway.

    @pg.kernel(grid=..., block=...)
    def consumer(W: ..., D: ...):
        pg.wait_on_dependent_grids()      # before the first read of the producer's output
        ...
"""
from __future__ import annotations

from ..ir import (BufferPtr, BufferRegion, Expr, For, If, Instr, Let, Load, Mem, Store, TileCall,
                  VecOperand, While, subexpressions, traced_statements)
from ..target.forms import opcode
from .context import current, fail
from .ptx import emit_instr


def wait_on_dependent_grids():
    """griddepcontrol.wait: block until the kernels this launch depends on have completed and
    their writes are visible; marks the kernel for a programmatic dependent launch.  Every
    thread must wait before it touches global memory, so the call is refused inside a branch
    or loop, and after a global access."""
    ctx = current()
    if len(ctx.bodies) != 1:
        raise fail("pg.wait_on_dependent_grids() must be called at the top level of the kernel "
                   "body, not inside pg.if_/pg.while_/loops: under a programmatic launch a "
                   "thread that skips it may read the kernel ahead's output before it is done")
    src = _first_global_access(ctx.bodies[0])
    if src is not None:
        raise fail(f"pg.wait_on_dependent_grids() comes after the global memory access at "
                   f"{src}: code before the wait runs beside the kernel ahead, so that access "
                   f"may read its output before it is written or overwrite what it reads; "
                   f"wait first")
    ctx.func.attrs["dependent_launch"] = True
    emit_instr(opcode("griddepcontrol", "wait"), [], form="griddepcontrol")


def launch_dependent_grids():
    """griddepcontrol.launch_dependents: once every CTA of this kernel has issued it (or
    exited), a dependent kernel next in the stream may be scheduled.  It says nothing about
    this kernel's writes: the dependent still waits for completion."""
    emit_instr(opcode("griddepcontrol", "launch_dependents"), [], form="griddepcontrol")


def _first_global_access(body):
    """The source line of the first traced statement of body that reads or writes global
    memory (a store, a load in any expression it holds, a tile op's global region, an
    instruction's global address), or None."""
    for st in traced_statements(body):
        t = type(st)
        if t is Store:
            if st.buffer.root.scope == "global":
                return st.src
            parts = (st.value, *st.indices)
        elif t is Let:
            parts = (st.value,)
        elif t is If or t is While:
            parts = (st.cond,)
        elif t is For:
            parts = (st.start, st.stop)
        elif t is Instr:
            parts = st.operands
        elif t is TileCall:
            parts = st.args
        else:
            continue
        if any(_touches_global(e) for e in parts):
            return st.src
    return None


def _touches_global(e) -> bool:
    t = type(e)
    if t is Load:
        return e.buffer.root.scope == "global" or any(_touches_global(i) for i in e.indices)
    if t is BufferRegion:
        return e.buffer.root.scope == "global"
    if t is Mem:
        p = e.ptr
        return type(p) is BufferPtr and p.buffer.root.scope == "global" or _touches_global(p)
    if t is VecOperand:
        return any(_touches_global(x) for x in e.items)
    return isinstance(e, Expr) and any(_touches_global(x) for x in subexpressions(e))
