"""The read-only-path hazard: a kernel that loads a buffer through ld.global.nc and also
writes it may read stale data, since that cache is not coherent with the kernel's own
writes.  Loads note themselves while tracing; the check runs once the trace has ended, when
every write of the kernel is known."""
from __future__ import annotations

from ..errors import TraceError
from ..ir import Buffer, BufferPtr, BufferRegion, Instr, Mem, Store, TileCall, traced_statements


def note_nc_load(ctx, buf: Buffer, src: str):
    """Record a read-only-path (.nc) load of `buf`; when the trace ends, a write to the same
    storage anywhere in the kernel is an error (ld.global.nc may serve stale data)."""
    if not ctx.nc_loads:
        ctx.finalizers.append(lambda: _check_nc(ctx))
    ctx.nc_loads.setdefault(buf.root.uid, (buf.root, src))


_WRITES = ("st.", "red.", "atom.", "cp.", "multimem.")


def _check_nc(ctx):
    nc = ctx.nc_loads
    for s in traced_statements(ctx.func.body):
        t = type(s)
        wrote = None
        if t is Store:
            wrote = s.buffer
        elif t is TileCall:     # dst first
            if s.args and isinstance(s.args[0], BufferRegion):
                wrote = s.args[0].buffer
        elif t is Instr and s.opcode.startswith(_WRITES):
            for o in s.operands:
                if isinstance(o, Mem):
                    wrote = o.ptr.buffer if isinstance(o.ptr, BufferPtr) else None
                    break
        if wrote is not None and wrote.root.uid in nc:
            root, src = nc[wrote.root.uid]
            raise TraceError(
                f"{src}: '{root.name}' is loaded through the read-only data path "
                f"(cache_hint 'nc', ld.global.nc) but this kernel also writes it (at "
                f"{s.src}); that cache is not coherent with the kernel's own writes and may "
                f"return stale data: drop the 'nc' hint or write another buffer")
