"""`pg.ptx[...]`: the raw-PTX escape hatch, and the namespace for checked helpers.

`pg.ptx["add.s32"](d, a, b)` emits one instruction verbatim.  Operands: expressions
(registers or immediates; an element of a local buffer is its register, so an
instruction may write it), pointers from `.data`/`.ptr_to` (rendered as `[addr]`;
wrap with `pg.addr(p)` for the address value), lists (a `{a, b}` vector) and str
(labels or literal operands).  Structured helpers (`pg.ptx.mbarrier.init`, ...)
register themselves in sub-namespaces and check operand types and arch.
"""
from __future__ import annotations

import re

from ..ir import BufferPtr, Const, Instr, Load, Mem, Var, VecOperand, as_expr
from ..errors import TraceAttributeError
from .context import check_live_expr, current, fail, user_src
from .resources import resource_error
from .nc_hazard import note_nc_load
from .scalar import LocalScalar
from .tensor import TensorHandle

_OPCODE = re.compile(r"[a-z][a-z0-9_]*(\.[A-Za-z0-9_:]+)*")


class _AddrOf:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


def _first_element(t: TensorHandle) -> BufferPtr:
    """A tensor as an operand means its first element (elem_offset included), not `.data`,
    which is the storage base a view shares with its arena."""
    return BufferPtr(t.buffer, tuple(Const(0) for _ in t.shape))


def element_pointer(x) -> BufferPtr | None:
    """The element a memory operand names: a tensor (its first element), `t[i]` or
    `t.ptr_to([i])`; None for anything else (the caller says what it expected)."""
    if isinstance(x, TensorHandle):
        return _first_element(x)
    if isinstance(x, Load):
        return BufferPtr(x.buffer, x.indices)
    if isinstance(x, BufferPtr):
        return x
    return None


def bar_ptr(bar, what: str, *, remote: bool = False) -> BufferPtr:
    """The shared-memory pointer of an mbarrier operand, checked.  `remote`: an element of a
    pg.cluster_view (another CTA's barrier) is taken too; only an arrive may name one, since
    a wait, an init or a copy's completion acts on the issuing CTA's own barrier."""
    ptr = element_pointer(bar)
    if ptr is None:
        raise resource_error(f"{what}: the mbarrier must be a shared uint64 slot (bars, "
                             f"bars[i] or bars.ptr_to([i]) of pool.alloc_mbarrier(n)), got {bar!r}")
    b = ptr.buffer
    if b.root.scope == "shared.cluster" and not remote:
        raise resource_error(f"{what}: '{b.name}' is an element of a pg.cluster_view (another "
                             f"CTA's mbarrier), but only pg.ptx.mbarrier.arrive may target "
                             f"another CTA's barrier; {what}, like every wait and init, acts "
                             f"on this CTA's own barrier: pass bars[i] itself, not "
                             f"pg.cluster_view(bars, rank)[i]")
    spaces = ("shared", "shared.dyn", "shared.cluster") if remote else ("shared", "shared.dyn")
    if b.root.scope not in spaces or b.dtype.bits != 64 or not b.dtype.is_int:
        raise resource_error(f"{what}: '{b.name}' is {b.dtype} in {b.root.scope} memory, but an "
                             f"mbarrier is an 8-byte word in shared memory: allocate it with "
                             f"pool.alloc_mbarrier(n) (or pg.alloc_shared((n,), 'uint64'))")
    return ptr


def addr(ptr):
    """Use a pointer as an address *value* operand instead of a `[mem]` operand."""
    if isinstance(ptr, TensorHandle):
        ptr = _first_element(ptr)
    return _AddrOf(ptr)


def operand(o):
    if isinstance(o, (Mem, VecOperand)):
        return o
    if isinstance(o, _AddrOf):
        return as_expr(o.ptr)
    if isinstance(o, BufferPtr):
        return Mem(o)
    if isinstance(o, TensorHandle):
        return Mem(_first_element(o))
    if isinstance(o, (list, tuple)):
        return VecOperand(tuple(operand(x) for x in o))
    if isinstance(o, str):
        if not re.fullmatch(r"[A-Za-z0-9_$%.:]+", o):
            raise fail(f"string operand {o!r} may only hold a label or a literal token")
        return o
    if isinstance(o, LocalScalar):
        return o.__ptxgen_expr__()
    return as_expr(o)


def _check_operands(ops, ctx, dead: dict):
    """Reject an operand (memory operands and vectors included) that uses a value or buffer
    of a body that has ended.  Leaf operands are tested in line, and a vector whose items
    were checked against this `dead` already is skipped (one register list is often passed
    to many instructions: `pg.ptx[wgmma](regs, ...)`)."""
    for o in ops:
        t = type(o)
        if t is Load or t is BufferPtr:     # register elements (acc[j]), addresses
            if o.buffer.uid in dead:
                check_live_expr(o, dead)
            for i in o.indices or ():
                if type(i) is not Const:
                    check_live_expr(i, dead)
        elif t is Mem:
            _check_operands((o.ptr,), ctx, dead)
        elif t is VecOperand:
            memo = ctx.vec_checked
            if memo is None or memo[0] != len(dead):   # new dead entries: check again
                memo = ctx.vec_checked = (len(dead), set())
            key = tuple(map(id, o.items))   # the items live in the IR: their ids are stable
            if key not in memo[1]:
                _check_operands(o.items, ctx, dead)
                memo[1].add(key)
        elif t is Var:
            if o.uid in dead:
                check_live_expr(o, dead)
        elif t is not Const and t is not str:
            check_live_expr(o, dead)


def emit_instr(opcode: str, operands, *, guard=None, gate=None, form=None, outs=0):
    """Append one instruction.  Library helpers pass the `form` (a macro of
    templates/isa.ptx.j2) their opcode was rendered from; a user's `pg.ptx[...]` has none.
    `outs`: how many leading operands it writes (the emitter checks they are registers)."""
    ctx = current()
    if not isinstance(opcode, str) or not _OPCODE.fullmatch(opcode):
        raise fail(f"{opcode!r} is not a PTX opcode (letters, digits, '_', '.' and '::' only)")
    ops = tuple(operand(o) for o in operands)
    g = as_expr(guard) if guard is not None else None
    dead = ctx.dead_loop_vars
    if dead:
        _check_operands(ops if g is None else ops + (g,), ctx, dead)
    if opcode.startswith("ld.global.nc"):    # the read-only path, spelled out
        for o in ops:
            if isinstance(o, Mem) and isinstance(o.ptr, BufferPtr):
                note_nc_load(ctx, o.ptr.buffer, user_src())
    return ctx.append(Instr(opcode, ops, form, attrs={"gate": gate} if gate else None, outs=outs,
                            guard=g))


class _Namespace:
    def __init__(self, path=""):
        self._path = path
        self._helpers = {}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        h = self._helpers.get(name)
        if h is not None:
            return h
        raise TraceAttributeError(
            f"{user_src()}: pg.ptx{'.' + self._path if self._path else ''} has no helper "
            f"'{name}'; use pg.ptx['{self._path + '.' if self._path else ''}{name}...'] for raw PTX")


class PtxNamespace(_Namespace):
    def __getitem__(self, opcode: str):
        def instr(*operands, guard=None):
            return emit_instr(opcode, operands, guard=guard)
        return instr

    def register(self, dotted: str, fn):
        """Add a checked helper, e.g. register("mbarrier.init", fn) -> pg.ptx.mbarrier.init."""
        ns = self
        parts = dotted.split(".")
        for p in parts[:-1]:
            nxt = ns._helpers.get(p)
            if nxt is None:
                nxt = _Namespace((ns._path + "." if ns._path else "") + p)
                ns._helpers[p] = nxt
            ns = nxt
        ns._helpers[parts[-1]] = fn
        return fn


ptx = PtxNamespace()
