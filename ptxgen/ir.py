"""The IR: buffers, statements and the kernel function, over the expressions of expr.py.

Plain data plus a printer.  Nothing here knows about PTX: the emitter reads these
nodes, the builder creates them.  The expression nodes and their constructors live in
``ptxgen/expr.py`` (this module was over twice the size guide's ~500 lines with them) and
their public names are re-exported here: ``ir`` stays the module the other layers import the
IR from.
"""
from __future__ import annotations

import math
from typing import Any

from .dtypes import DType
from .errors import TraceError
from .expr import uids
from .expr import (  # noqa: F401  (re-exported: the IR's public expression names are ir's)
    BOOL, HANDLE, INT32, INT64, PLAIN_INT, TEXT, BinOp, BufferPtr, Cast, Const, Expr, Load, Not,
    Select, SpecialReg, Var, as_expr, binop, cast, const, const_hazard, expr_key, int_range,
    maximum, minimum, select, subexpressions)

# ----------------------------------------------------------------------------------
# buffers
# ----------------------------------------------------------------------------------
SCOPES = ("global", "shared", "shared.dyn", "local", "tmem", "shared.cluster")


class Buffer:
    """Metadata over a pointer: addr(B[c]) = data + elem_offset + layout(c)["m"].

    `data` is the storage this buffer views: None for a buffer that owns its storage
    (parameter or allocation), else the BufferPtr/Buffer it aliases (decl_buffer).
    Slotted, with a plain __init__ (a dataclass's costs a __post_init__ call per buffer)."""
    __slots__ = ("name", "shape", "dtype", "scope", "layout", "elem_offset", "align", "data",
                 "param", "tmem_addr", "uid", "root")

    def __init__(self, name: str, shape: tuple, dtype: DType, scope: str = "global",
                 layout: Any = None, elem_offset: Any = 0, align: int = 16, data: Any = None,
                 param: bool = False, tmem_addr: Any = None, uid: int | None = None):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.scope = scope
        self.layout = layout            # None = row-major; else a ptxgen.layout layout
        self.elem_offset = elem_offset  # int or Expr, in elements
        self.align = align
        self.data = data                # BufferPtr of the aliased storage (views)
        self.param = param
        # buffers reached through an address value: tmem (the allocated TMEM address) and
        # shared.cluster (another CTA's shared tile: the mapa'd shared::cluster address)
        self.tmem_addr = tmem_addr
        self.uid = next(uids) if uid is None else uid
        # the buffer that owns the storage this one views: the emitter asks per access, so it
        # is a plain attribute (a view's `data` is fixed when it is made)
        self.root = self if data is None else data.buffer.root

    def __hash__(self):
        return self.uid

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def storage_ptr(self) -> "BufferPtr":
        """The pointer a view of this buffer shares: its own data pointer, or its base if it
        owns its storage (a view keeps elem_offset, so both address the same elements)."""
        return self.data if self.data is not None else BufferPtr(self, None)

    def numel(self):
        for s in self.shape:
            if not isinstance(s, int):
                return None
        return math.prod(self.shape)

    def nbytes(self):
        n = self.numel()
        return None if n is None else (n * self.dtype.bits + 7) // 8

    def span_elems(self) -> int | None:
        """Elements of storage the layout touches (cosize), for allocation sizes."""
        if self.layout is None:
            return self.numel()
        return self.layout.cosize()

    def __repr__(self):
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"


def _fields_repr(self) -> str:
    """`Name(field=value, ...)` over the class's `_fields`: what @dataclass would print.  The
    IR's record classes are written out instead of made by @dataclass, whose generated methods
    (each compiled on import) cost about a third of `import ptxgen`."""
    return (f"{type(self).__qualname__}("
            + ", ".join([f"{f}={getattr(self, f)!r}" for f in self._fields]) + ")")


class BufferRegion:
    """buffer[start:start+extent, ...]: what tile primitives operate on.  Immutable."""
    _fields = ("buffer", "region")

    def __init__(self, buffer: Buffer, region: tuple):
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "region", region)   # ((start Expr|int, extent int), ...)

    def __setattr__(self, name, value):
        raise AttributeError(f"a BufferRegion is immutable: cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"a BufferRegion is immutable: cannot delete field {name!r}")

    __repr__ = _fields_repr

    @property
    def shape(self):
        return tuple([e for _, e in self.region])

    @property
    def starts(self):
        return tuple([s for s, _ in self.region])

    @property
    def dtype(self):
        return self.buffer.dtype

    def __getitem__(self, key, value=None):
        raise TraceError(f"{self} is a region (an operand of tile primitives), not a tensor; "
                         f"index the tensor '{self.buffer.name}' itself, or take the sub-region "
                         f"from it")

    __setitem__ = __getitem__

    def __iter__(self):
        raise TraceError(f"{self} is a region and cannot be iterated in Python; loop with "
                         f"pg.serial/pg.unroll over indices of '{self.buffer.name}'")

    def __str__(self):
        parts = []
        for s, e in self.region:
            s_txt = TEXT.expr(s) if isinstance(s, Expr) else str(s)
            end = s + e if isinstance(s, int) else f"{s_txt}+{e}"
            parts.append(f"{s_txt}:{end}")
        return f"{self.buffer.name}[{', '.join(parts)}]"


def not_a_value(cls, what):
    """Give `cls` (tensors, regions) arithmetic and comparison operators that raise a
    TraceError saying what it is (`what(obj)`) instead of Python's TypeError."""
    def refuse(self, *a):
        raise TraceError(f"{what(self)}, not a value: index it (A[i, j]) to compute with an "
                         f"element, or use pg.tile.<scope>.<op> on regions")
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift",
                 "and", "or", "xor", "matmul"):
        setattr(cls, f"__{name}__", refuse)
        setattr(cls, f"__r{name}__", refuse)
    for name in ("neg", "pos", "abs", "invert", "lt", "le", "gt", "ge", "float", "int", "index",
                 "round"):
        setattr(cls, f"__{name}__", refuse)
    return cls


not_a_value(BufferRegion, lambda r: f"{r} is a region (an operand of tile primitives)")


# ----------------------------------------------------------------------------------
# statements
# ----------------------------------------------------------------------------------
class Stmt:
    """A statement; `src` is the user's "file:line" that traced it (keyword-only in every
    statement's constructor).  `_fields` lists a class's fields in its repr's order.  The
    records' constructors are written out: as dataclasses their import costs more than the
    written-out rule allows (benchmarks/RESULTS-archive.md, "Build speed against 1a0e6d0")."""
    _fields = ("src",)

    def __init__(self, *, src: str = ""):
        self.src = src

    __repr__ = _fields_repr


class Store(Stmt):
    """buffer[indices] = value."""
    _fields = ("src", "buffer", "indices", "value", "cache")

    def __init__(self, buffer: Buffer, indices: tuple, value: Expr, cache: str = "", *,
                 src: str = ""):
        self.src = src
        self.buffer = buffer
        self.indices = indices
        self.value = value
        self.cache = cache       # validated store cache modifiers (".cs", ...)


class Let(Stmt):
    """An immutable binding var = value over the statements after it.  `broadcast`: value is
    the same in every lane of a warp (the builder checked it), and the emitter takes lane 0's
    with shfl.sync.idx: ptxas then knows the register is warp-uniform and keeps it, and the
    shared-memory addresses and wgmma descriptors made from it, in uniform registers."""
    _fields = ("src", "var", "value", "bounds", "broadcast")

    def __init__(self, var: Var, value: Expr, bounds: tuple | None = None, *, src: str = "",
                 broadcast: bool = False):
        self.src = src
        self.var = var
        self.value = value
        self.bounds = bounds     # (lo, hi) inclusive facts known at binding (thread ids)
        self.broadcast = broadcast


class For(Stmt):
    """for var in range(start, stop, step): body (pg.serial, or pg.unroll until lowered).
    `step` is an int, or an integer Expr (pg.serial only); `kind` "serial" or "unroll"."""
    _fields = ("src", "var", "start", "stop", "step", "kind", "body")

    def __init__(self, var: Var, start: Expr, stop: Expr, step: Any, kind: str, body: list, *,
                 src: str = ""):
        self.src = src
        self.var = var
        self.start = start
        self.stop = stop
        self.step = step
        self.kind = kind
        self.body = body


class If(Stmt):
    """if cond: then, else: else_."""
    _fields = ("src", "cond", "then", "else_")

    def __init__(self, cond: Expr, then: list, else_: list | None = None, *, src: str = ""):
        self.src = src
        self.cond = cond
        self.then = then
        self.else_ = else_


class While(Stmt):
    """while cond: body."""
    _fields = ("src", "cond", "body")

    def __init__(self, cond: Expr, body: list, *, src: str = ""):
        self.src = src
        self.cond = cond
        self.body = body


class Alloc(Stmt):
    """Storage for a buffer (shared, local or the dynamic arena)."""
    _fields = ("src", "buffer")

    def __init__(self, buffer: Buffer, *, src: str = ""):
        self.src = src
        self.buffer = buffer


class DeclBuffer(Stmt):
    """A buffer view over another's storage."""
    _fields = ("src", "buffer")

    def __init__(self, buffer: Buffer, *, src: str = ""):
        self.src = src
        self.buffer = buffer


class Barrier(Stmt):
    """A barrier: kind "cta" (bar.sync id[, count]), "arrive" (bar.arrive id, count: signal
    without waiting, the producer side of a named barrier) or "warp" (bar.warp.sync)."""
    _fields = ("src", "kind", "id", "count")

    def __init__(self, kind: str = "cta", id: int = 0, count: int | None = None, *,
                 src: str = ""):
        self.src = src
        self.kind = kind
        self.id = id
        self.count = count


class Mem:
    """A memory operand [ptr] of an instruction."""
    _fields = ("ptr", "offset")

    def __init__(self, ptr: Expr, offset: int = 0):
        self.ptr = ptr
        self.offset = offset

    __repr__ = _fields_repr


class VecOperand:
    """A braced operand list {a, b, ...} of an instruction."""
    _fields = ("items",)

    def __init__(self, items: tuple):
        self.items = items

    __repr__ = _fields_repr


class Instr(Stmt):
    """One PTX instruction.  `form` names the templates/isa.ptx.j2 macro its `opcode` was
    rendered from (ptxgen.target.forms.opcode; gated by arch like any opcode), or is None for
    a user's raw `pg.ptx[...]` escape.  Operands are Exprs (registers/immediates),
    Mem, VecOperand, or str labels.  `outs` counts how many leading operands are written;
    `guard` is the predicate of `@p instr`."""
    _fields = ("src", "opcode", "operands", "form", "attrs", "outs", "guard")

    def __init__(self, opcode: str, operands: tuple, form: str | None = None,
                 attrs: dict | None = None, outs: int = 0, guard: Expr | None = None, *,
                 src: str = ""):
        self.src = src
        self.opcode = opcode
        self.operands = operands
        self.form = form
        self.attrs = attrs
        self.outs = outs
        self.guard = guard


class Comment(Stmt):
    """A `// text` line in the PTX."""
    _fields = ("src", "text")

    def __init__(self, text: str, *, src: str = ""):
        self.src = src
        self.text = text


class TileCall(Stmt):
    """A tile primitive (pg.tile.<scope>.<op>) as traced: validated by its front end, and
    dispatched to a variant by the tile-lowering pass (passes/tiles.py) once the target and
    the facts about every index are known.  `args`: BufferRegion / Expr operands, dst first;
    `scope`: "thread", "warp", "warpgroup" or "cta"; `options`: the user's (dispatch=,
    cache_hint=); `record`: what the front end derived from the operands (op-specific);
    `active`: (ok, reason[, (first, step, count) of the active threads])."""
    _fields = ("src", "op", "args", "scope", "options", "record", "active")

    def __init__(self, op: str, args: tuple, scope: str, options: dict | None = None,
                 record: Any = None, active: tuple = (True, ""), *, src: str = ""):
        self.src = src
        self.op = op
        self.args = args
        self.scope = scope
        self.options = {} if options is None else options
        self.record = record
        self.active = active


class Lowered(Stmt):
    """A tile op after dispatch: its variant's statements, emitted in a value scope of their
    own under `text`, the tile call as the user wrote it."""
    _fields = ("src", "text", "body")

    def __init__(self, text: str, body: list, *, src: str = ""):
        self.src = src
        self.text = text
        self.body = body


# ----------------------------------------------------------------------------------
# the kernel function
# ----------------------------------------------------------------------------------
class Param:
    """A kernel parameter: a tensor, a scalar, a shape symbol or a tensor map.  `kind` is
    "tensor", "scalar", "symbol" or "tmap"; `var` the scalar's or symbol's value (a tensor: its
    pointer; a tensor map: its address); `buffer` the tensor (a tensor map: the tensor the map
    describes); `spec` what the runtime encodes for a tensor map
    (primitives.async_copy.TensorMapSpec)."""
    _fields = ("name", "kind", "var", "buffer", "spec")

    def __init__(self, name: str, kind: str, var: Var | None = None,
                 buffer: Buffer | None = None, spec: Any = None):
        self.name = name
        self.kind = kind
        self.var = var
        self.buffer = buffer
        self.spec = spec

    __repr__ = _fields_repr


class PrimFunc:
    """A traced kernel: its parameters, body and launch geometry.  `dynamic_smem_bytes` is
    the arena size the launch needs; `register_buffers` the local buffers kept in registers
    (passes)."""
    _fields = ("name", "params", "body", "grid", "block", "dynamic_smem_bytes",
               "dynamic_smem_reserve", "attrs", "register_buffers")

    def __init__(self, name: str, params: list, body: list, grid: tuple = (1, 1, 1),
                 block: tuple = (1, 1, 1), dynamic_smem_bytes: int = 0,
                 dynamic_smem_reserve: int | None = None, attrs: dict | None = None,
                 register_buffers: frozenset = frozenset()):
        self.name = name
        self.params = params
        self.body = body
        self.grid = grid
        self.block = block
        self.dynamic_smem_bytes = dynamic_smem_bytes
        self.dynamic_smem_reserve = dynamic_smem_reserve
        self.attrs = {} if attrs is None else attrs
        self.register_buffers = register_buffers

    __repr__ = _fields_repr

    def __str__(self):
        try:
            return TEXT.func(self)
        except RecursionError:   # deep expressions or bodies (ptxgen/deep.py)
            from .deep import run_deep

            return run_deep(TEXT.func, self)


def traced_statements(body) -> list:
    """Every statement of ``body`` and of the loops and branches in it, in no promised order,
    without descending into Lowered (a tile op's library statements): what the user's trace
    holds.  Iterative, so a deeply nested kernel costs no recursion; a list, not a
    generator, since every build scans it (a generator resumes once per statement)."""
    out, stack = [], [body]
    while stack:
        stmts = stack.pop()
        out += stmts
        for s in stmts:
            t = type(s)
            if t is For or t is While:
                stack.append(s.body)
            elif t is If:
                stack.append(s.then)
                if s.else_:
                    stack.append(s.else_)
    return out


def walk(body, fn):
    """Visit every statement (pre-order)."""
    for s in body:
        fn(s)
        if isinstance(s, (For, While, Lowered)):
            walk(s.body, fn)
        elif isinstance(s, If):
            walk(s.then, fn)
            if s.else_:
                walk(s.else_, fn)




# the printer's entry points, part of ir's surface (they call through ir.TEXT)
def format_expr(e, parent_prec: int = 0) -> str:
    return TEXT.expr(e, parent_prec)


def format_stmt(s) -> str:
    return TEXT.stmt(s)


def print_func(f) -> str:
    return TEXT.func(f)
