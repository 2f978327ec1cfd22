"""Shared pieces of the tcgen05 primitives: operands, election, fences.

Fence rules (PTX ISA "tcgen05 Memory Consistency Model"), applied by every primitive here so
a kernel cannot forget them:
  * a tcgen05 op that must see what a thread synchronization (bar.sync, an mbarrier wait)
    ordered before it starts with `tcgen05.fence::after_thread_sync`;
  * a tcgen05.ld/st whose effect another thread relies on after a later synchronization is
    completed (`tcgen05.wait::ld/st`) and followed by `tcgen05.fence::before_thread_sync`;
  * tcgen05.commit's mbarrier arrive carries an implicit before_thread_sync: nothing to add.
The primitives emit these fences themselves (`fence=False` leaves them out) and
`check_fences` lints PTX text against the same rules.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...target import TCGEN05_ARCHS, check_opcode
from ...target.forms import opcode
from ...errors import PtxgenError
from ...ir import (Buffer, BufferPtr, BufferRegion, Const, Expr, If, Instr, Load, cast)
from ...printer import format_expr

_U32 = _dtype("uint32")


@dataclass(eq=False)
class AddrOperand:
    """`[addr+offset]` of an address *value* (TMEM addresses: lane << 16 | column)."""
    addr: Expr
    offset: int = 0

    def ptx_operand(self, render) -> str:
        return f"[{render(self.addr)}{'+' + str(self.offset) if self.offset else ''}]"

    def __repr__(self):
        return f"[{format_expr(self.addr)}{'+' + str(self.offset) if self.offset else ''}]"


@dataclass(eq=False)
class TensorCoordOperand:
    """`[tensor_map, {c0, c1, ...}]`: the tensor operand of cp.async.bulk.tensor."""
    tmap: Expr
    coords: tuple

    def ptx_operand(self, render) -> str:
        return f"[{render(self.tmap)}, {{{', '.join(render(c) for c in self.coords)}}}]"

    def __repr__(self):
        return f"[{format_expr(self.tmap)}, {{{', '.join(format_expr(c) for c in self.coords)}}}]"


def has_tcgen05(call) -> tuple[bool, str]:
    t = call.target
    if t is None:
        return True, ""
    if t.arch in TCGEN05_ARCHS:
        return True, ""
    return False, (f"the target {t.arch} has no tcgen05 (needs one of "
                   f"{', '.join(sorted(TCGEN05_ARCHS))})")


def require_tcgen05(target, what: str):
    """ArchError naming the target when it lacks tcgen05 (before dispatch says less)."""
    check_opcode("tcgen05." + what, target)


def elect(scope) -> Expr | None:
    """The one issuing thread of a scope instance: its thread 0 (None for thread scope)."""
    if scope.name == "thread":
        return None
    return scope.tid == 0


def guarded(scope, body: list) -> list:
    cond = elect(scope)
    return body if cond is None else [If(cond, body)]


def fence(kind: str) -> Instr:
    return Instr(opcode("tcgen05_fence", kind), (), form="tcgen05_fence")


def tmem_cell(region: BufferRegion, r: int, c: int) -> tuple:
    """(lane, column, slot in the 32-bit cell) of region element (r, c) relative to the
    region's first element (constant starts; a symbolic column start counts as 0)."""
    buf, starts = region.buffer, region.starts
    base = tuple(s if isinstance(s, int) else 0 for s in starts)
    at = tuple(base[:-2]) + (base[-2] + r, base[-1] + c)
    o, o0 = buf.layout.apply(*at, shape=buf.shape), buf.layout.apply(*base, shape=buf.shape)
    return (o.get("TLane", 0) - o0.get("TLane", 0), o.get("TCol", 0) - o0.get("TCol", 0),
            o.get("m", 0) - o0.get("m", 0))


def tmem_addr(region: BufferRegion) -> Expr:
    """`lane << 16 | column` of the region's first element as a uint32 expression.  Only the
    last (column) start may be symbolic; packed 16-bit tiles then divide it by 2."""
    buf = region.buffer
    if buf.tmem_addr is None or buf.layout is None:
        raise PtxgenError(f"'{buf.name}' is not a TMEM tensor with an allocated address and a "
                          f"TLane/TCol layout (use TMEMPool.alloc or decl_buffer(..., "
                          f"scope='tmem', allocated_addr=..., layout=...))")
    starts = region.starts
    if not all(isinstance(s, int) for s in starts[:-1]):
        raise PtxgenError(f"TMEM region {region}: only the column start may be symbolic")
    const = tuple(s if isinstance(s, int) else 0 for s in starts)
    o = buf.layout.apply(*const, shape=buf.shape)
    if o.get("m", 0):
        raise PtxgenError(f"TMEM region {region} starts inside a 32-bit cell (slot {o['m']}); "
                          f"start on a whole column")
    addr = buf.tmem_addr
    off = (o.get("TLane", 0) << 16) + o.get("TCol", 0)
    sym = starts[-1]
    if not isinstance(sym, int):
        per = 32 // buf.dtype.bits
        addr = addr + cast(sym if per == 1 else sym // per, _U32)
    return addr + Const(off, _U32) if off else addr


def reg_ref(buf: Buffer, m: int) -> Load:
    """The register holding element `m` ("m" offset) of a register-resident local buffer."""
    flat = Buffer(buf.name, (1 << 20,), buf.dtype, "local", None, 0, buf.align,
                  buf.data if buf.data is not None else BufferPtr(buf, None))
    return Load(flat, (Const(buf.elem_offset + m),), buf.dtype)


_SYNC = ("bar.sync", "barrier.sync", "mbarrier.try_wait", "mbarrier.test_wait")
_NEEDS_AFTER = ("tcgen05.mma", "tcgen05.ld", "tcgen05.st", "tcgen05.cp", "tcgen05.dealloc")


def check_fences(ptx: str) -> list:
    """Lint PTX text against the fence rules above, in program (text) order: a tcgen05
    mma/ld/st/cp/dealloc after a thread sync needs an after_thread_sync fence in between; a
    completed ld/st needs a before_thread_sync fence before the next sync or mbarrier arrive.
    Returns the violations (empty when the rules hold).  Branches are read linearly."""
    out, synced, pending = [], None, None
    for n, line in enumerate(ptx.splitlines(), 1):
        ins = line.split("//")[0].strip()
        ins = ins.split(" ", 1)[1] if ins.startswith("@") else ins
        if not ins or ins.endswith(":"):
            continue
        op = ins.split()[0].rstrip(";")
        if op.startswith("tcgen05.fence::after_thread_sync"):
            synced = None
        elif op.startswith("tcgen05.fence::before_thread_sync"):
            pending = None
        elif op.startswith(_NEEDS_AFTER):
            if synced is not None:
                out.append(f"line {n}: {op} follows the thread sync at line {synced} without "
                           f"tcgen05.fence::after_thread_sync")
                synced = None
            if op.startswith(("tcgen05.ld", "tcgen05.st")):
                pending = n
        if op.startswith(_SYNC) or op.startswith("mbarrier.arrive"):
            if pending is not None:
                out.append(f"line {n}: {op} follows the tcgen05.ld/st at line {pending} without "
                           f"tcgen05.fence::before_thread_sync")
                pending = None
            if op.startswith(_SYNC):
                synced = n
    return out
