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

from ..target.forms import opcode
from .context import current
from .ptx import emit_instr


def wait_on_dependent_grids():
    """griddepcontrol.wait: block until the kernels this launch depends on have completed and
    their writes are visible; marks the kernel for a programmatic dependent launch."""
    current().func.attrs["dependent_launch"] = True
    emit_instr(opcode("griddepcontrol", "wait"), [], form="griddepcontrol")


def launch_dependent_grids():
    """griddepcontrol.launch_dependents: once every CTA of this kernel has issued it (or
    exited), a dependent kernel next in the stream may be scheduled.  It says nothing about
    this kernel's writes: the dependent still waits for completion."""
    emit_instr(opcode("griddepcontrol", "launch_dependents"), [], form="griddepcontrol")
