"""The IR's expressions: typed, immutable, hashable nodes and the constructors that check them.

Split from ir.py (buffers, statements, the kernel function), which re-exports the public
names here, so ``ir.Const`` and ``from ptxgen.ir import binop`` stay the spelling for users of
the IR; the private tables (operators, hazards) are imported from here by the few passes that
read them.  Expressions are immutable and hashable so that passes can cache per node.
Operator overloads build nodes with C-like typing: both sides must have one dtype; Python
literals take the dtype of the other side.  How nodes print is the printer's (``TEXT``).
"""
from __future__ import annotations

import itertools
import math
from functools import lru_cache

from .deep import run_deep
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

uids = itertools.count()
INT32_VALUES = range(-2**31, 2**31)   # `x in` it: one C call, cheaper than a chained compare

# ----------------------------------------------------------------------------------
# expressions
# ----------------------------------------------------------------------------------
ARITH_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%",
             "div": "/", "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>",
             "min": "min", "max": "max"}
CMP_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
PRECEDENCE = {"or": 1, "xor": 2, "and": 3, "shl": 4, "shr": 4, "add": 5, "sub": 5,
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
                         "pg.while_(...) / pg.select(...) instead of Python if/while/and/or, "
                         "and pg.max / pg.min instead of Python's max / min")

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
            return run_deep(TEXT.expr, self)


def _arith(op):
    """Expr.__<op>__ for an op of binop's fast path: int32 index arithmetic (`i * 4`,
    `i + j`) is built right here, one call less per operator than going through binop."""
    def method(self, o):
        dt = self.dtype
        if type(o) is int:
            if dt is INT32 and o in INT32_VALUES:
                return BinOp(op, self, Const(o, INT32), INT32)
        elif isinstance(o, Expr) and o.dtype is dt and dt.is_int:
            return BinOp(op, self, o, dt)
        return binop(op, self, o)
    return method


def _rarith(op):
    """Expr.__r<op>__: `4 * i` with an int32 `i` built here, as binop would."""
    def method(self, o):
        if type(o) is int and self.dtype is INT32 and o in INT32_VALUES:
            return BinOp(op, Const(o, INT32), self, INT32)
        return binop(op, o, self)
    return method


def _arith_div(op):
    """Expr.__floordiv__ / __mod__: _arith's method, refusing a constant zero divisor."""
    def method(self, o):
        dt = self.dtype
        if type(o) is int:
            if dt is INT32 and o in INT32_VALUES:
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
        if type(o) is int and self.dtype is INT32 and o in INT32_VALUES:
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
        self.uid = uid = next(uids) if uid is None else uid
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

    def __init__(self, buffer, indices: tuple, dtype: DType, cache: str = ""):   # an ir.Buffer
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

    def __init__(self, buffer, indices: tuple | None, dtype: DType = None):   # an ir.Buffer
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


@lru_cache(maxsize=None)   # per (interned) dtype: the facts ask per node
def int_range(dt: DType) -> tuple[int, int]:
    if dt.kind == "uint":
        return 0, (1 << dt.bits) - 1
    return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1


def as_expr(v, like: DType | None = None) -> Expr:
    """Wrap a Python literal; `like` gives the context dtype (literals are typed by context)."""
    if isinstance(v, Expr):
        return v
    if type(v) is int and (like is None or like is INT32) and v in INT32_VALUES:
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
                if dt is INT32 and b in INT32_VALUES:
                    if not b and op in DIV_OPS:
                        raise TraceError(const_hazard(op, a, Const(0, INT32)))
                    return BinOp(op, a, Const(b, INT32), INT32)
            elif isinstance(b, Expr) and b.dtype is dt:
                if type(b) is Const and op in DIV_OPS and not b.value:
                    raise TraceError(const_hazard(op, a, b))
                return BinOp(op, a, b, dt)
    if not isinstance(a, Expr):
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    else:
        b = as_expr(b, a.dtype)
    if op in HAZARD_OPS and type(b) is Const and a.dtype.is_int and \
            (not b.value if op in DIV_OPS else not 0 <= b.value < a.dtype.bits):
        raise TraceError(const_hazard(op, a, b))
    if op in ("shl", "shr") and a.dtype.is_int and b.dtype.is_int and b.dtype != a.dtype:
        b = Cast(b, a.dtype) if not isinstance(b, Const) else const(b.value, a.dtype)
    if a.dtype != b.dtype:
        sym = ARITH_OPS.get(op, CMP_OPS.get(op, op))
        raise TraceError(f"dtype mismatch in {TEXT.expr(a)} {sym} "
                         f"{TEXT.expr(b)}: {a.dtype} vs {b.dtype}; use pg.cast(x, dtype)")
    dt = a.dtype
    if dt.lanes != 1:
        raise TraceError(f"vector values ({dt}) can only be loaded and stored, not computed on")
    if dt.kind in ("storage", "handle"):
        raise TraceError(f"{dt} is a storage-only type: it can be moved, not computed on; "
                         f"use pg.cast to a float type first" if dt.kind == "storage" else
                         "pointers cannot be used in arithmetic; use ptr_to([...])")
    if op in CMP_OPS:
        return BinOp(op, a, b, BOOL)
    if dt == BOOL and op not in ("and", "or", "xor"):
        raise TraceError(f"operator {ARITH_OPS[op]} is not defined on bool; use & | ^")
    if dt.is_float and op in ("floordiv", "floormod", "and", "or", "xor", "shl", "shr"):
        raise TraceError(f"operator {ARITH_OPS[op]} is not defined on {dt}")
    if dt.is_int and op == "div":
        raise TraceError("integer division is floor division: use // (and % for the remainder)")
    return BinOp(op, a, b, dt)


_FAST_INT = frozenset(("add", "sub", "mul", "floordiv", "floormod", "and", "or", "xor", "min",
                       "max"))
DIV_OPS = frozenset(("floordiv", "floormod"))
HAZARD_OPS = frozenset(("floordiv", "floormod", "shl", "shr"))


def const_hazard(op: str, a, b) -> str:
    """Why the integer `a <op> b` with a constant `b` has no defined value, or "": division
    or modulo by zero, a shift count outside 0..bits-1 (PTX clamps it, C leaves it undefined,
    and the simplifier cannot fold it).  Shared by the builder and the simplifier, which sees
    the constants that unrolling and folding make."""
    v = b.value
    if op in DIV_OPS:
        if v:
            return ""
        sym = "//" if op == "floordiv" else "%"
        return (f"integer {'division' if op == 'floordiv' else 'modulo'} by zero in "
                f"{TEXT.expr(a, 6)} {sym} 0; the divisor must be nonzero (guard it or pick "
                f"another constant)")
    bits = a.dtype.bits
    if 0 <= v < bits:
        return ""
    fix = "multiply or divide" if v < 0 else "widen the type (pg.cast) or shift less"
    return (f"shift count {v} in {TEXT.expr(a, 4)} {'<<' if op == 'shl' else '>>'} {v} is "
            f"outside 0..{bits - 1} for {a.dtype}; {fix} instead")


def cast(x, dt) -> Expr:
    dt = dtype(dt)
    x = as_expr(x, dt)
    if x.dtype == dt:
        return x
    if x.dtype.lanes != 1 or dt.lanes != 1:
        raise TraceError(f"pg.cast of {x.dtype} to {dt}: vector values can only be loaded and "
                         f"stored; cast each element (a local buffer of {x.dtype.scalar})")
    return Cast(x, dt)


def subexpressions(e) -> tuple:
    """The expressions `e` is made of, one level down (a Load's indices included): the one
    place the walks over an expression tree (uniformity, protocol reads, ranges) learn its
    shape."""
    t = type(e)
    if t is BinOp:
        return (e.a, e.b)
    if t is Not or t is Cast:
        return (e.a,)
    if t is Select:
        return (e.cond, e.t, e.f)
    if t is Load:
        return tuple(e.indices)
    return ()


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
