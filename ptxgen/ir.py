"""The IR: expressions, buffers, statements and the kernel function.

Plain data plus a printer.  Nothing here knows about PTX: the emitter reads these
nodes, the builder creates them.  Expressions are immutable and hashable so that
passes can cache per node.  Operator overloads build nodes with C-like typing:
both sides must have one dtype; Python literals take the dtype of the other side.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from .dtypes import DType, dtype
from .errors import TraceError

INT32 = dtype("int32")
INT64 = dtype("int64")
class _Text:
    """How nodes print.  The printer (ptxgen/printer.py) is the layer above the IR and fills
    these in when it is imported, so the node classes carry no text forms of their own and
    ir imports nothing of it; until then a node prints as its class and id."""
    expr = stmt = func = staticmethod(object.__repr__)


TEXT = _Text()

# set(map(type, xs)) <= PLAIN_INT: every x is a plain Python int (bool excluded), with no
# Python-level call (the builder's launch tuples, the emitter's extents)
PLAIN_INT = frozenset((int,))
BOOL = dtype("bool")
HANDLE = dtype("handle")

_ids = itertools.count()
_INT32_VALUES = range(-2**31, 2**31)   # `x in` it: one C call, cheaper than a chained compare

# ----------------------------------------------------------------------------------
# expressions
# ----------------------------------------------------------------------------------
_ARITH = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%",
          "div": "/", "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>",
          "min": "min", "max": "max"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_PREC = {"or": 1, "xor": 2, "and": 3, "shl": 4, "shr": 4, "add": 5, "sub": 5,
         "mul": 6, "floordiv": 6, "floormod": 6, "div": 6}


class Expr:
    """Base class of expressions.  Subclasses are slotted classes with plain __init__s:
    a frozen dataclass costs 4x more to build, and the builder and the simplifier build
    thousands.  Immutable by contract: nothing assigns a field after construction (the
    cached structural key `_key` aside)."""

    dtype: DType
    __slots__ = ()

    # arithmetic: methods made by _arith/_rarith below the class -----------------
    def __truediv__(self, o): return binop("div", self, o)
    def __rtruediv__(self, o): return binop("div", o, self)
    def __lshift__(self, o): return binop("shl", self, o)
    def __rlshift__(self, o): return binop("shl", o, self)
    def __rshift__(self, o): return binop("shr", self, o)
    def __rrshift__(self, o): return binop("shr", o, self)
    def __neg__(self): return binop("sub", 0, self)

    def __invert__(self):
        if self.dtype == BOOL:
            return Not(self)
        return binop("xor", self, -1)

    def __lt__(self, o): return binop("lt", self, o)
    def __le__(self, o): return binop("le", self, o)
    def __gt__(self, o): return binop("gt", self, o)
    def __ge__(self, o): return binop("ge", self, o)
    def __eq__(self, o): return binop("eq", self, o)
    def __ne__(self, o): return binop("ne", self, o)
    eq = __eq__
    ne = __ne__
    __hash__ = object.__hash__   # identity; structural keys come from expr_key()

    def __bool__(self):
        raise TraceError("a traced expression has no Python truth value; use pg.if_(...) / "
                         "pg.while_(...) / pg.select(...) instead of Python if/while/and/or")

    def __index__(self):
        raise TraceError("a traced expression cannot be used as a Python int; use pg.serial/"
                         "pg.unroll for loops and constant extents for shapes")

    def __float__(self):
        raise TraceError("a traced expression has no Python float value (it is computed on the "
                         "GPU); use pg.cast(x, 'float32') to convert it in the kernel")

    def __round__(self, ndigits=None):
        raise TraceError("round() needs a Python number; a traced expression is computed on the "
                         "GPU: use pg.cast(x, 'int32') (truncates) in the kernel")

    __trunc__ = __floor__ = __ceil__ = __round__

    def __pos__(self):
        return self

    def __abs__(self):
        raise TraceError("abs() of a traced expression: write pg.max(x, -x)")

    def __pow__(self, o):
        raise TraceError("** of a traced expression: write the product (x * x) or shift "
                         "integers (1 << k)")

    __rpow__ = __pow__

    def __divmod__(self, o):
        return binop("floordiv", self, o), binop("floormod", self, o)

    def __rdivmod__(self, o):
        return binop("floordiv", o, self), binop("floormod", o, self)

    def __str__(self):
        try:
            return TEXT.expr(self)
        except RecursionError:   # a very deep expression (ptxgen/deep.py)
            from .deep import run_deep

            return run_deep(TEXT.expr, self)


def _arith(op):
    """Expr.__<op>__ for an op of binop's fast path: int32 index arithmetic (`i * 4`,
    `i + j`) is built right here, one call less per operator than going through binop."""
    def method(self, o):
        dt = self.dtype
        if type(o) is int:
            if dt is INT32 and o in _INT32_VALUES:
                return BinOp(op, self, Const(o, INT32), INT32)
        elif isinstance(o, Expr) and o.dtype is dt and dt.is_int:
            return BinOp(op, self, o, dt)
        return binop(op, self, o)
    return method


def _rarith(op):
    """Expr.__r<op>__: `4 * i` with an int32 `i` built here, as binop would."""
    def method(self, o):
        if type(o) is int and self.dtype is INT32 and o in _INT32_VALUES:
            return BinOp(op, Const(o, INT32), self, INT32)
        return binop(op, o, self)
    return method


def _arith_div(op):
    """Expr.__floordiv__ / __mod__: _arith's method, refusing a constant zero divisor."""
    def method(self, o):
        dt = self.dtype
        if type(o) is int:
            if dt is INT32 and o in _INT32_VALUES:
                if not o:
                    raise TraceError(const_hazard(op, self, Const(0, INT32)))
                return BinOp(op, self, Const(o, INT32), INT32)
        elif isinstance(o, Expr) and o.dtype is dt and dt.is_int:
            if type(o) is Const and not o.value:
                raise TraceError(const_hazard(op, self, o))
            return BinOp(op, self, o, dt)
        return binop(op, self, o)
    return method


def _rarith_div(op):
    """Expr.__rfloordiv__ / __rmod__: `8 // x`, refusing x a constant zero."""
    def method(self, o):
        if type(self) is Const and not self.value and self.dtype.is_int:
            raise TraceError(const_hazard(op, as_expr(o, self.dtype), self))
        if type(o) is int and self.dtype is INT32 and o in _INT32_VALUES:
            return BinOp(op, Const(o, INT32), self, INT32)
        return binop(op, o, self)
    return method


for _op, _name in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("floordiv", "floordiv"),
                   ("floormod", "mod"), ("and", "and"), ("or", "or"), ("xor", "xor")):
    _div = _op in ("floordiv", "floormod")
    for _make, _fmt in (((_arith_div if _div else _arith), "__%s__"),
                        ((_rarith_div if _div else _rarith), "__r%s__")):
        _m = _make(_op)
        _m.__name__ = _fmt % _name
        _m.__qualname__ = "Expr." + _m.__name__
        setattr(Expr, _m.__name__, _m)
del _op, _name, _make, _fmt, _m, _div


class Const(Expr):
    __slots__ = ("value", "dtype", "_key")

    def __init__(self, value, dtype: DType = None):
        if dtype is None:
            dtype = INT32
        self.value = value
        self.dtype = dtype
        self._key = ("c", value, dtype.name)   # eager, as Var's: most constants get keyed

    def _make_key(self):
        return ("c", self.value, self.dtype.name)

    def __repr__(self):
        return f"Const({self.value!r}, {self.dtype})"


class Var(Expr):
    """A named immutable value: a parameter, a loop variable or a `let` binding.

    Identity semantics: two Vars with one name are different variables."""
    __slots__ = ("name", "dtype", "uid", "_key")

    def __init__(self, name: str, dtype: DType = None, uid: int | None = None):
        self.name = name
        self.dtype = INT32 if dtype is None else dtype
        self.uid = uid = next(_ids) if uid is None else uid
        self._key = ("v", uid)   # eager: every Var gets keyed, and a tuple costs less than a call

    def _make_key(self):
        return ("v", self.uid)

    def __repr__(self):
        return f"Var({self.name})"


class SpecialReg(Expr):
    """A PTX special register such as %tid.x."""
    __slots__ = ("name", "dtype", "_key")

    def __init__(self, name: str, dtype: DType = None):
        self.name = name
        self.dtype = INT32 if dtype is None else dtype
        self._key = ("sr", name)      # eager, as Var's

    def _make_key(self):
        return ("sr", self.name)

    def __repr__(self):
        return f"SpecialReg({self.name})"


class BinOp(Expr):
    __slots__ = ("op", "a", "b", "dtype", "_key")

    def __init__(self, op: str, a: Expr, b: Expr, dtype: DType):
        self.op = op
        self.a = a
        self.b = b
        self.dtype = dtype
        ka = a._key       # eager when both children have keys (lazy ones: Load, Cast, ...)
        kb = b._key
        self._key = None if ka is None or kb is None else (op, ka, kb, dtype.name)

    def _make_key(self):
        a, b = self.a, self.b   # children are Exprs: their keys inline, no expr_key calls
        ka, kb = a._key, b._key
        if ka is None:
            ka = a._key = a._make_key()
        if kb is None:
            kb = b._key = b._make_key()
        return (self.op, ka, kb, self.dtype.name)

    def __repr__(self):
        return f"BinOp({self.op}, {self.a!r}, {self.b!r})"


class Not(Expr):
    __slots__ = ("a", "dtype", "_key")

    def __init__(self, a: Expr, dtype: DType = None):
        self.a = a
        self.dtype = BOOL if dtype is None else dtype
        self._key = None

    def _make_key(self):
        return ("not", expr_key(self.a))

    def __repr__(self):
        return f"Not({self.a!r})"


class Cast(Expr):
    __slots__ = ("a", "dtype", "_key")

    def __init__(self, a: Expr, dtype: DType):
        self.a = a
        self.dtype = dtype
        self._key = None

    def _make_key(self):
        return ("cast", expr_key(self.a), self.dtype.name)

    def __repr__(self):
        return f"Cast({self.a!r}, {self.dtype})"


class Select(Expr):
    __slots__ = ("cond", "t", "f", "dtype", "_key")

    def __init__(self, cond: Expr, t: Expr, f: Expr, dtype: DType):
        self.cond = cond
        self.t = t
        self.f = f
        self.dtype = dtype
        self._key = None

    def _make_key(self):
        return ("sel", expr_key(self.cond), expr_key(self.t), expr_key(self.f))

    def __repr__(self):
        return f"Select({self.cond!r}, {self.t!r}, {self.f!r})"


class Load(Expr):
    """buffer[indices]; a vector dtype loads `lanes` consecutive elements; `cache` holds
    validated cache modifiers (e.g. ".nc.L1::no_allocate") for global vector loads."""
    __slots__ = ("buffer", "indices", "dtype", "cache", "_key")

    def __init__(self, buffer: "Buffer", indices: tuple, dtype: DType, cache: str = ""):
        self.buffer = buffer
        self.indices = indices
        self.dtype = dtype
        self.cache = cache
        self._key = None

    def _make_key(self):
        return ("ld", self.buffer.uid, tuple([expr_key(i) for i in self.indices]), self.dtype.name,
                self.cache)

    def __repr__(self):
        return f"Load({self.buffer.name}, {self.indices!r})"


class BufferPtr(Expr):
    """Address of buffer[indices] (indices None: the base pointer `buffer.data`)."""
    __slots__ = ("buffer", "indices", "dtype", "_key")

    def __init__(self, buffer: "Buffer", indices: tuple | None, dtype: DType = None):
        self.buffer = buffer
        self.indices = indices
        self.dtype = HANDLE if dtype is None else dtype
        self._key = None

    @property
    def scope(self):
        return self.buffer.scope

    @property
    def ty(self):
        """The element type pointed to (seed 002: `ptr_byte_offset(B.data, n, ty=B.data.ty)`)."""
        return self.buffer.dtype

    def _make_key(self):
        return ("ptr", self.buffer.uid, None if self.indices is None
                else tuple([expr_key(i) for i in self.indices]))

    def __repr__(self):
        return f"BufferPtr({self.buffer.name}, {self.indices!r})"


def expr_key(e):
    """Structural identity of an expression (Vars and buffers by identity), for caches.
    Kept in each node's `_key` slot: built with the node for leaves and BinOps (nearly all
    of them get keyed, and a tuple costs less than a call), else by _make_key on first use."""
    try:
        k = e._key
    except AttributeError:
        return ("?", id(e)) if isinstance(e, Expr) else e
    if k is None:
        k = e._key = e._make_key()
    return k


def const(v, dt=None) -> Const:
    if dt is None:
        dt = BOOL if isinstance(v, bool) else INT32 if isinstance(v, int) else dtype("float32")
    dt = dtype(dt)
    if dt.is_int and not isinstance(v, int):
        raise TraceError(f"literal {v!r} is not an integer but the expression is {dt}; "
                         f"use pg.cast")
    if dt.is_int:
        lo, hi = int_range(dt)
        if not lo <= v <= hi:
            raise TraceError(f"literal {v} does not fit {dt}")
    if dt.is_float:
        v = float(v)
        # (65504 is below every float type's overflow: one compare for most literals)
        if not -65504.0 <= v <= 65504.0 and abs(v) >= _FLOAT_INF.get(dt.name, math.inf) and \
                math.isfinite(v):
            raise TraceError(f"literal {v!r} overflows {dt} (it rounds to infinity); write "
                             f"float('inf') for infinity")
    return Const(v, dt)


# per float type, the smallest magnitude that rounds to infinity (largest finite + half an ulp)
_FLOAT_INF = {"float32": 3.4028235677973366e38, "float16": 65520.0,
              "bfloat16": 3.39617752923046e38}


def int_range(dt: DType) -> tuple[int, int]:
    if dt.kind == "uint":
        return 0, (1 << dt.bits) - 1
    return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1


def as_expr(v, like: DType | None = None) -> Expr:
    """Wrap a Python literal; `like` gives the context dtype (literals are typed by context)."""
    if isinstance(v, Expr):
        return v
    if type(v) is int and (like is None or like is INT32) and v in _INT32_VALUES:
        return Const(v, INT32)
    if isinstance(v, bool):
        return Const(v, BOOL)
    if isinstance(v, int):
        if like is not None and like.is_float:
            return const(float(v), like)
        if like is not None and like.is_int:
            return const(v, like)
        if like is not None and like.kind == "storage":
            raise TraceError(f"{like} is a storage-only type: it can be moved, not computed on")
        return const(v, INT64 if not -2**31 <= v < 2**31 else INT32)
    if isinstance(v, float):
        if like is not None and like.is_float:
            return const(v, like)
        if like is not None and like.is_int:
            raise TraceError(f"float literal {v!r} used with an {like} expression; "
                             f"use pg.cast(x, 'float32') or an integer literal")
        return const(v, "float32")
    if hasattr(v, "__ptxgen_expr__"):
        return v.__ptxgen_expr__()
    raise TraceError(f"cannot use {type(v).__name__} {v!r} in a kernel expression")


def binop(op: str, a, b) -> Expr:
    if op in _FAST_INT and isinstance(a, Expr):   # the common case: int index arithmetic
        dt = a.dtype
        if dt.is_int:
            if type(b) is int:
                if dt is INT32 and b in _INT32_VALUES:
                    if not b and op in _DIV_OPS:
                        raise TraceError(const_hazard(op, a, Const(0, INT32)))
                    return BinOp(op, a, Const(b, INT32), INT32)
            elif isinstance(b, Expr) and b.dtype is dt:
                if type(b) is Const and op in _DIV_OPS and not b.value:
                    raise TraceError(const_hazard(op, a, b))
                return BinOp(op, a, b, dt)
    if not isinstance(a, Expr):
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    else:
        b = as_expr(b, a.dtype)
    if op in _HAZARD_OPS and type(b) is Const and a.dtype.is_int and \
            (not b.value if op in _DIV_OPS else not 0 <= b.value < a.dtype.bits):
        raise TraceError(const_hazard(op, a, b))
    if op in ("shl", "shr") and a.dtype.is_int and b.dtype.is_int and b.dtype != a.dtype:
        b = Cast(b, a.dtype) if not isinstance(b, Const) else const(b.value, a.dtype)
    if a.dtype != b.dtype:
        raise TraceError(f"dtype mismatch in {TEXT.expr(a)} {_ARITH.get(op, _CMP.get(op, op))} "
                         f"{TEXT.expr(b)}: {a.dtype} vs {b.dtype}; use pg.cast(x, dtype)")
    dt = a.dtype
    if dt.lanes != 1:
        raise TraceError(f"vector values ({dt}) can only be loaded and stored, not computed on")
    if dt.kind in ("storage", "handle"):
        raise TraceError(f"{dt} is a storage-only type: it can be moved, not computed on; "
                         f"use pg.cast to a float type first" if dt.kind == "storage" else
                         "pointers cannot be used in arithmetic; use ptr_to([...])")
    if op in _CMP:
        return BinOp(op, a, b, BOOL)
    if dt == BOOL and op not in ("and", "or", "xor"):
        raise TraceError(f"operator {_ARITH[op]} is not defined on bool; use & | ^")
    if dt.is_float and op in ("floordiv", "floormod", "and", "or", "xor", "shl", "shr"):
        raise TraceError(f"operator {_ARITH[op]} is not defined on {dt}")
    if dt.is_int and op == "div":
        raise TraceError("integer division is floor division: use // (and % for the remainder)")
    return BinOp(op, a, b, dt)


_FAST_INT = frozenset(("add", "sub", "mul", "floordiv", "floormod", "and", "or", "xor", "min",
                       "max"))
_DIV_OPS = frozenset(("floordiv", "floormod"))
_HAZARD_OPS = frozenset(("floordiv", "floormod", "shl", "shr"))


def const_hazard(op: str, a, b) -> str:
    """Why the integer `a <op> b` with a constant `b` has no defined value, or "": division
    or modulo by zero, a shift count outside 0..bits-1 (PTX clamps it, C leaves it undefined,
    and the simplifier cannot fold it).  Shared by the builder and the simplifier, which sees
    the constants that unrolling and folding make."""
    v = b.value
    if op in _DIV_OPS:
        if v:
            return ""
        sym = "//" if op == "floordiv" else "%"
        return (f"integer {'division' if op == 'floordiv' else 'modulo'} by zero in "
                f"{format_expr(a, 6)} {sym} 0; the divisor must be nonzero (guard it or pick "
                f"another constant)")
    bits = a.dtype.bits
    if 0 <= v < bits:
        return ""
    return (f"shift count {v} in {format_expr(a, 4)} {'<<' if op == 'shl' else '>>'} {v} is "
            f"outside 0..{bits - 1} for {a.dtype}; {'multiply or divide' if v < 0 else 'widen the type (pg.cast) or shift less'} instead")


def cast(x, dt) -> Expr:
    dt = dtype(dt)
    x = as_expr(x, dt)
    if x.dtype == dt:
        return x
    if x.dtype.lanes != 1 or dt.lanes != 1:
        raise TraceError(f"pg.cast of {x.dtype} to {dt}: vector values can only be loaded and "
                         f"stored; cast each element (a local buffer of {x.dtype.scalar})")
    return Cast(x, dt)


def select(c, t, f) -> Expr:
    c = as_expr(c)
    if c.dtype != BOOL:
        raise TraceError(f"pg.select condition must be bool, got {c.dtype}")
    if not isinstance(t, Expr):
        f = as_expr(f)
        t = as_expr(t, f.dtype)
    else:
        f = as_expr(f, t.dtype)
    if t.dtype != f.dtype:
        raise TraceError(f"pg.select branches differ in dtype: {t.dtype} vs {f.dtype}")
    return Select(c, t, f, t.dtype)


def minimum(a, b) -> Expr:
    return binop("min", a, b)


def maximum(a, b) -> Expr:
    return binop("max", a, b)


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
        self.uid = next(_ids) if uid is None else uid
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


@dataclass(frozen=True, eq=False)
class BufferRegion:
    """buffer[start:start+extent, ...]: what tile primitives operate on."""
    buffer: Buffer
    region: tuple  # ((start Expr|int, extent int), ...)

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
@dataclass(eq=False)
class Stmt:
    """A statement; `src` is the user's "file:line" that traced it.  (Each statement class
    has a docstring: without one, @dataclass computes it with inspect.signature, ~0.15 ms
    a class on `import ptxgen`.)"""
    src: str = field(default="", kw_only=True)   # user's "file:line"


@dataclass(eq=False)
class Store(Stmt):
    """buffer[indices] = value."""
    buffer: Buffer
    indices: tuple
    value: Expr
    cache: str = ""          # validated store cache modifiers (".cs", ...)


@dataclass(eq=False)
class Let(Stmt):
    """An immutable binding var = value over the statements after it."""
    var: Var
    value: Expr
    bounds: tuple | None = None   # (lo, hi) inclusive facts known at binding (thread ids)


@dataclass(eq=False)
class For(Stmt):
    """for var in range(start, stop, step): body (pg.serial, or pg.unroll until lowered)."""
    var: Var
    start: Expr
    stop: Expr
    step: Any            # int, or an integer Expr (pg.serial only)
    kind: str            # "serial" | "unroll"
    body: list


@dataclass(eq=False)
class If(Stmt):
    """if cond: then, else: else_."""
    cond: Expr
    then: list
    else_: list | None = None


@dataclass(eq=False)
class While(Stmt):
    """while cond: body."""
    cond: Expr
    body: list


@dataclass(eq=False)
class Alloc(Stmt):
    """Storage for a buffer (shared, local or the dynamic arena)."""
    buffer: Buffer


@dataclass(eq=False)
class DeclBuffer(Stmt):
    """A buffer view over another's storage."""
    buffer: Buffer


@dataclass(eq=False)
class Barrier(Stmt):
    """A barrier: kind "cta" (bar.sync id[, count]) or "warp" (bar.warp.sync)."""
    kind: str = "cta"    # "cta" -> bar.sync 0; "warp" -> bar.warp.sync
    id: int = 0
    count: int | None = None


@dataclass(eq=False)
class Mem:
    """A memory operand [ptr] of an instruction."""
    ptr: Expr
    offset: int = 0


@dataclass(eq=False)
class VecOperand:
    """A braced operand list {a, b, ...} of an instruction."""
    items: tuple


@dataclass(eq=False)
class Instr(Stmt):
    """One PTX instruction.  `form` names the templates/isa.ptx.j2 macro its `opcode` was
    rendered from (ptxgen.target.forms.opcode; gated by arch like any opcode), or is None for
    a user's raw `pg.ptx[...]` escape.  Operands are Exprs (registers/immediates),
    Mem, VecOperand, or str labels.  `outs` counts how many leading operands are written."""
    opcode: str
    operands: tuple
    form: str | None = None
    attrs: dict | None = None
    outs: int = 0
    guard: Expr | None = None          # predicate: @p instr


@dataclass(eq=False)
class Comment(Stmt):
    """A `// text` line in the PTX."""
    text: str


@dataclass(eq=False)
class TileCall(Stmt):
    """A tile primitive (pg.tile.<scope>.<op>) as traced: validated by its front end, and
    dispatched to a variant by the tile-lowering pass (passes/tiles.py) once the target and
    the facts about every index are known."""
    op: str
    args: tuple            # BufferRegion / Expr operands, dst first
    scope: str             # "thread" | "warp" | "warpgroup" | "cta"
    options: dict = field(default_factory=dict)   # the user's options (dispatch=, cache_hint=)
    record: Any = None     # what the front end derived from the operands (op-specific)
    active: tuple = (True, "")   # (ok, reason[, (first, step, count) of the active threads])


@dataclass(eq=False)
class Lowered(Stmt):
    """A tile op after dispatch: its variant's statements, emitted in a value scope of their
    own under `text`, the tile call as the user wrote it."""
    text: str
    body: list


# ----------------------------------------------------------------------------------
# the kernel function
# ----------------------------------------------------------------------------------
@dataclass(eq=False)
class Param:
    """A kernel parameter: a tensor, a scalar, a shape symbol or a tensor map."""
    name: str
    kind: str                 # "tensor" | "scalar" | "symbol" | "tmap"
    var: Var | None = None    # scalar/symbol value; tensor: the pointer var; tmap: its address
    buffer: Buffer | None = None   # tensor; tmap: the tensor the map describes
    spec: Any = None          # tmap: what the runtime encodes (primitives.async_copy.TensorMapSpec)


@dataclass(eq=False)
class PrimFunc:
    """A traced kernel: its parameters, body and launch geometry."""
    name: str
    params: list
    body: list
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    dynamic_smem_bytes: int = 0       # the arena size the launch needs
    dynamic_smem_reserve: int | None = None
    attrs: dict = field(default_factory=dict)
    register_buffers: frozenset = frozenset()   # local buffers kept in registers (passes)

    def __str__(self):
        try:
            return TEXT.func(self)
        except RecursionError:   # deep expressions or bodies (ptxgen/deep.py)
            from .deep import run_deep

            return run_deep(TEXT.func, self)


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
