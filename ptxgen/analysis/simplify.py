"""Integer simplifier: constant folding, canonical affine form, bounds and divisibility.

Every integer expression is normalized to `sum(coef * atom) + const` (atoms are
variables, special registers, loads and the non-affine operations left over).
Facts about variables come from where they are bound: loop ranges, thread-id
extents and `let` values.  A `let` is never inlined, but its value's facts
propagate to every use; that is what later proves vector alignment.

Shifts and low-bit masks are floor division / modulo by powers of two, so
they join the affine algebra; the emitter turns them back into shr/and.  The
xor rule `x ^ y == (x // 2^k) * 2^k + ((x % 2^k) ^ y)` for `0 <= y < 2^k` turns a
swizzled address into ADD of the high part plus XOR of the low part.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .facts import FactsMixin, fold, nonneg, trailing_zeros
from ..errors import TraceError
from ..expr import HAZARD_OPS
from ..ir import (BOOL, BinOp, Cast, Const, Expr, Load, Not, Select, SpecialReg, Var,
                  BufferPtr, const_hazard, expr_key, int_range)


_AFFINE_OPS = frozenset(("add", "sub", "mul", "shl"))   # integer ops that stay affine
_LEAVES = frozenset((Const, Var, SpecialReg, Load))      # what simplify() returns as it is


def _is_pow2(c: int) -> bool:
    return c > 0 and c & (c - 1) == 0


class Affine:
    """sum(coef * atom) + const over one integer dtype; atoms keyed structurally."""
    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype, terms=None, const=0):
        self.dtype = dtype
        self.terms = terms if terms is not None else {}   # key -> [atom, coef]
        self.const = const

    def add(self, other: "Affine", sign=1):
        terms = self.terms
        for k, (atom, c) in other.terms.items():
            t = terms.get(k)
            if t is None:
                terms[k] = [atom, sign * c]
            else:
                t[1] += sign * c
        self.const += sign * other.const
        return self

    def scale(self, c: int):
        for v in self.terms.values():
            v[1] *= c
        self.const *= c
        return self

    def scaled(self, c: int) -> "Affine":
        """A new form c * self without zero terms (so it reads like its expression)."""
        return Affine(self.dtype, {k: [a, n * c] for k, (a, n) in self.terms.items() if n},
                      self.const * c)

    def copy(self) -> "Affine":
        terms = self.terms   # fresh [atom, coef] lists: add/scale change them in place
        return Affine(self.dtype, dict(zip(terms, map(list, terms.values()))), self.const)

    def is_const(self) -> bool:
        for t in self.terms.values():
            if t[1]:
                return False
        return True

    def items(self):
        return [(a, c) for a, c in self.terms.values() if c]

    def to_expr(self) -> Expr:
        dt = self.dtype
        out = None
        for atom, c in self.terms.values():
            if not c:
                continue
            if atom.dtype is not dt:   # mixed widths: widen the narrow atom
                atom = Cast(atom, dt)
            if c > 0:
                t = atom if c == 1 else BinOp("mul", atom, Const(c, dt), dt)
                out = t if out is None else BinOp("add", out, t, dt)
            else:
                t = atom if c == -1 else BinOp("mul", atom, Const(-c, dt), dt)
                out = BinOp("sub", out if out is not None else Const(0, dt), t, dt)
        const = self.const
        if out is None:
            return Const(const, dt)
        if const > 0:
            return BinOp("add", out, Const(const, dt), dt)
        if const < 0:
            return BinOp("sub", out, Const(-const, dt), dt)
        return out


class LoopBounds(NamedTuple):
    """A serial loop's bounds as the emitter emits them and the facts its variable gets.
    `start` is an Affine when `start_mod` is given (index arithmetic, emitted from its form),
    else a simplified expression; likewise `stop` when `stop_affine`."""
    start: object
    stop: object
    start_mod: tuple | None
    stop_affine: bool
    lo: int | None
    hi: int | None
    trip: int | None     # the trip count when start, stop and step are constants


class Analyzer(FactsMixin):
    """Facts about variables in scope, and the simplification that uses them."""

    def __init__(self):
        self._bounds: dict[int, tuple] = {}
        self._mod: dict[int, tuple] = {}
        self._cache: dict = {}
        self._memo: dict = {}   # bounds per operation node under the current facts

    # ---- facts -------------------------------------------------------------
    def bind_let(self, var: Var, value: Expr, bounds=None):
        self._bind_facts(var, self.bounds(value), self.modset(value), bounds)

    def bind_let_affine(self, var: Var, aff: Affine, bounds=None):
        """bind_let of a value held as its affine form (see affine_facts)."""
        b, mod = self.affine_facts(aff)
        self._bind_facts(var, b, mod, bounds)

    def _bind_facts(self, var, b, mod, bounds):
        if bounds is not None:   # clip, an unknown side being unbounded
            lo, hi = b
            b = (max(-math.inf if lo is None else lo, bounds[0]),
                 min(math.inf if hi is None else hi, bounds[1]))
        self._bounds[var.uid] = b
        self._mod[var.uid] = mod
        self._memo.clear()   # cheap, and exact even if an expression used var before this
        # no simplify cache flush: a variable is bound before any expression that uses it is seen

    def int_affine(self, e):
        """The affine form simplify() would print back for e (an integer add, sub, mul or
        shl), else None: the emitter takes such values straight from the form."""
        if type(e) is BinOp and e.op in _AFFINE_OPS and e.dtype.is_int:
            return self.affine(e)
        return None

    def bind_range(self, var: Var, lo, hi, step=1, start=None, start_mod=None):
        """var takes values lo..hi inclusive (None = unknown), congruent to `start` mod step
        (`start_mod`: the start's modset, when the caller has it already)."""
        self._bounds[var.uid] = (lo, hi)
        if step > 1 and (start is not None or start_mod is not None):
            m, r = self.modset(start) if start_mod is None else start_mod
            g = math.gcd(step, m)
            self._mod[var.uid] = (g, r % g) if g else (0, r)
        self._memo.clear()

    # ---- the binding rules of statements: one place for the emitter and the passes ----
    def let_form(self, value):
        """(affine form or None, value): how a let's value is emitted and bound.  Index
        arithmetic is taken from its affine form; anything else is simplified."""
        aff = self.int_affine(value)
        return (None, self.simplify(value)) if aff is None else (aff, value)

    def bind_let_form(self, var: Var, aff, value, bounds=None):
        if aff is None:
            self.bind_let(var, value, bounds)
        else:
            self.bind_let_affine(var, aff, bounds)

    def loop_bounds(self, loop) -> LoopBounds:
        """Bounds of a serial For under the facts in force (see LoopBounds)."""
        start, stop, step = loop.start, loop.stop, loop.step
        start_aff, stop_aff = self.int_affine(start), self.int_affine(stop)
        if start_aff is not None and not start_aff.is_const():
            start, ((lo, _), start_mod) = start_aff, self.affine_facts(start_aff)
        else:
            if type(start) is not Var:   # simplify() returns a variable as it is
                start = self.simplify(start)
            lo, start_mod = self.bounds(start)[0], None
        stop_affine = stop_aff is not None and not stop_aff.is_const()
        if stop_affine:
            stop, hi_stop = stop_aff, self.affine_facts(stop_aff)[0][1]
        else:
            if type(stop) is not Var:
                stop = self.simplify(stop)
            hi_stop = self.bounds(stop)[1]
        hi, trip = (None if hi_stop is None else hi_stop - 1), None
        if isinstance(step, int) and type(start) is Const and type(stop) is Const:
            trip = len(range(start.value, stop.value, step))
            if trip:
                hi = start.value + (trip - 1) * step
        return LoopBounds(start, stop, start_mod, stop_affine, lo, hi, trip)

    def bind_loop(self, var: Var, lb: LoopBounds, step):
        """The loop variable's range and congruence inside the body."""
        self.bind_range(var, lb.lo, lb.hi, step if isinstance(step, int) else 1, lb.start,
                        lb.start_mod)

    def unbind(self, var: Var):
        self._bounds.pop(var.uid, None)
        self._mod.pop(var.uid, None)
        self._memo.clear()

    # ---- simplification ----------------------------------------------------
    def simplify(self, e):
        t = type(e)
        if t in _LEAVES or t is not BinOp and (not isinstance(e, Expr)
                                               or t is BufferPtr and e.indices is None):
            return e   # a Load's indices become an address's affine form, simplified there
        # memoized per node object: a structural key costs more than it saves (the emitter
        # sees each expression once; repeats are the same object).  The entry keeps the node
        # alive, so its id cannot be reused by another node while the cache lives.
        hit = self._cache.get(id(e))
        if hit is not None:
            return hit[1]
        out = self._simplify(e)
        self._cache[id(e)] = (e, out)
        return out

    def _simplify(self, e):
        t = type(e)
        if t is BinOp:
            if e.dtype.is_int:   # affine ops print their canonical form back
                return self.affine(e).to_expr() if e.op in _AFFINE_OPS else self._atom(e)
            a, b = self.simplify(e.a), self.simplify(e.b)
            if e.op in ("lt", "le", "gt", "ge", "eq", "ne"):
                return self._simplify_cmp(e.op, a, b)
            if e.dtype == BOOL and isinstance(a, Const) and isinstance(b, Const):
                return Const(bool({"and": a.value and b.value, "or": a.value or b.value,
                                   "xor": a.value != b.value}[e.op]), BOOL)
            if e.dtype == BOOL and e.op in ("and", "or"):
                for x, y in ((a, b), (b, a)):
                    if isinstance(x, Const):
                        return y if bool(x.value) == (e.op == "and") else x
            return e if a is e.a and b is e.b else BinOp(e.op, a, b, e.dtype)
        if t is BufferPtr:
            return BufferPtr(e.buffer, tuple([self.simplify(i) for i in e.indices]), e.dtype)
        if t is Cast:
            a = self.simplify(e.a)
            if isinstance(a, Const) and e.dtype.is_int and a.dtype.is_int:
                lo, hi = int_range(e.dtype)
                v = a.value & ((1 << e.dtype.bits) - 1)
                if e.dtype.kind == "int" and v > hi:
                    v -= 1 << e.dtype.bits
                return Const(v, e.dtype)
            if isinstance(a, Const) and e.dtype.is_float and a.dtype.is_int:
                return Const(float(a.value), e.dtype)
            return Cast(a, e.dtype)
        if t is Select:
            c = self.simplify(e.cond)
            if isinstance(c, Const):
                return self.simplify(e.t if c.value else e.f)
            return Select(c, self.simplify(e.t), self.simplify(e.f), e.dtype)
        if t is Not:
            a = self.simplify(e.a)
            return Const(not a.value, BOOL) if isinstance(a, Const) else Not(a)
        return e

    def _simplify_cmp(self, op, a, b):
        if a.dtype.is_int:
            d = self.bounds(BinOp("sub", a, b, a.dtype)) if not (isinstance(a, Const) and isinstance(b, Const)) \
                else (a.value - b.value, a.value - b.value)
            lo, hi = d
            decided = None
            if op == "lt":
                decided = True if hi is not None and hi < 0 else False if lo is not None and lo >= 0 else None
            elif op == "le":
                decided = True if hi is not None and hi <= 0 else False if lo is not None and lo > 0 else None
            elif op == "gt":
                decided = True if lo is not None and lo > 0 else False if hi is not None and hi <= 0 else None
            elif op == "ge":
                decided = True if lo is not None and lo >= 0 else False if hi is not None and hi < 0 else None
            elif op == "eq":
                decided = True if lo == hi == 0 else False if (lo is not None and lo > 0) or (hi is not None and hi < 0) else None
            elif op == "ne":
                decided = False if lo == hi == 0 else True if (lo is not None and lo > 0) or (hi is not None and hi < 0) else None
            if decided is not None:
                return Const(decided, BOOL)
        return BinOp(op, a, b, BOOL)

    # integer arithmetic --------------------------------------------------------
    def affine(self, e) -> Affine:
        """Canonical affine form of an integer expression (simplifying its atoms)."""
        t = type(e)
        if t is BinOp:
            op, b = e.op, e.b
            if op == "mul":
                if type(b) is Const:   # the common `x * c`: no form for the constant
                    a = e.a
                    if type(a) is Var:   # a variable's form, built inline
                        return Affine(a.dtype, {a._key: [a, int(b.value)]}, 0)
                    a, c = self.affine(a), int(b.value)
                    for t in a.terms.values():   # scale(), inline
                        t[1] *= c
                    a.const *= c
                    return a
                a, b = self.affine(e.a), self.affine(b)
                if not b.terms:
                    return a.scale(b.const)
                if not a.terms:
                    return b.scale(a.const)
            elif op == "add" or op == "sub":
                a = self.affine(e.a)
                if type(b) is Const:
                    a.const += int(b.value) if op == "add" else -int(b.value)
                    return a
                if type(b) is Var:   # one more term, without a form for it
                    t = a.terms.get(b._key)
                    if t is None:
                        a.terms[b._key] = [b, 1 if op == "add" else -1]
                    else:
                        t[1] += 1 if op == "add" else -1
                    return a
                return a.add(self.affine(b), 1 if op == "add" else -1)
            elif type(b) is Const:
                c = b.value
                if op == "shl":
                    if not 0 <= c < e.dtype.bits:
                        raise TraceError(const_hazard(op, e.a, b))
                    return self.affine(e.a).scale(1 << c)
                if c > 0:   # stay in affine form: no re-parsing
                    if op == "floordiv" or op == "floormod":
                        return self._divmod_aff(op, self.affine(e.a), c, e.dtype)
                    if op == "shr":
                        return self._divmod_aff("floordiv", self.affine(e.a), 1 << c, e.dtype)
                    if op == "and" and _is_pow2(c + 1):
                        return self._divmod_aff("floormod", self.affine(e.a), c + 1, e.dtype)
        elif t is Const:
            return Affine(e.dtype, {}, int(e.value))
        elif t is Var:   # its own atom
            return Affine(e.dtype, {e._key: [e, 1]}, 0)
        elif t is SpecialReg:
            return Affine(e.dtype, {expr_key(e): [e, 1]}, 0)
        dt = e.dtype
        if t is BinOp and op == "xor":   # a split xor is an affine form already
            s = self._xor_form(self.simplify(e.a), self.simplify(e.b), dt)
            if type(s) is Affine:
                return s
        else:
            s = self._atom(e)
        if type(s) is Const:
            return Affine(dt, {}, int(s.value))
        if type(s) is BinOp and (s.op in ("add", "sub") or s.op == "mul" and (
                type(s.a) is Const or type(s.b) is Const)):
            return self.affine(s)
        return Affine(dt, {expr_key(s): [s, 1]}, 0)

    def _aff_bounds(self, aff: Affine) -> tuple:
        """Interval of an affine form from its atoms' bounds (same as bounds() of its expr)."""
        lo = hi = aff.const
        for atom, c in aff.terms.values():
            if not c:
                continue
            a_lo, a_hi = self.bounds(atom)
            if a_lo is None or a_hi is None:
                return (None, None)
            if c > 0:
                lo, hi = lo + c * a_lo, hi + c * a_hi
            else:
                lo, hi = lo + c * a_hi, hi + c * a_lo
        return (lo, hi)

    def _atom(self, e):
        """Simplify a non-affine integer node."""
        t = type(e)
        if t is not BinOp:
            return self.simplify(e) if t is not Var and t is not SpecialReg else e
        op, dt = e.op, e.dtype
        if op == "mul":   # non-constant product
            a, b = self.simplify(e.a), self.simplify(e.b)
            return BinOp("mul", a, b, dt)
        b = self.simplify(e.b)
        if type(b) is Const and op in HAZARD_OPS:   # unrolling and folding make constants
            why = const_hazard(op, e.a, b)
            if why:
                raise TraceError(why)
        if op == "shr" and isinstance(b, Const):
            return self._divmod("floordiv", e.a, 1 << b.value, dt)
        if op in ("floordiv", "floormod") and isinstance(b, Const) and b.value > 0:
            return self._divmod(op, e.a, b.value, dt)
        if op == "and" and isinstance(b, Const) and b.value >= 0:
            m = b.value
            if _is_pow2(m + 1):
                return self._divmod("floormod", e.a, m + 1, dt)
            low = trailing_zeros(m)
            if _is_pow2((m >> low) + 1):   # contiguous mask: ((a >> low) % 2^n) << low
                inner = self._divmod_aff("floormod", self._divmod_aff(
                    "floordiv", self.affine(e.a), 1 << low, dt), (m >> low) + 1, dt)
                return inner.scaled(1 << low).to_expr()
            a = self.simplify(e.a)
            # bits of `a` above the mask do not matter: strip a `% 2^k` that covers the mask
            if type(a) is BinOp and a.op == "floormod" and isinstance(a.b, Const) \
                    and _is_pow2(a.b.value) and a.b.value > m:
                a = a.a
            return BinOp("and", a, b, dt)
        if op == "xor":
            return self._xor(self.simplify(e.a), b, dt)
        a = self.simplify(e.a)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(fold(op, a.value, b.value, dt), dt)
        if op in ("min", "max"):
            ba, bb = self.bounds(a), self.bounds(b)
            if ba[1] is not None and bb[0] is not None and ba[1] <= bb[0]:
                return a if op == "min" else b
            if bb[1] is not None and ba[0] is not None and bb[1] <= ba[0]:
                return b if op == "min" else a
        if op in ("or", "and") and isinstance(b, Const) and b.value == 0:
            return a if op == "or" else b
        return BinOp(op, a, b, dt)

    def _divmod(self, op, a_expr, c: int, dt):
        """floor a // c or a % c as an expression (see _divmod_aff)."""
        if type(a_expr) is Var and a_expr.dtype is dt and c > 1:
            # what _divmod_aff gives for {a: 1}: the node itself unless a's range folds it
            lo, hi = self.bounds(a_expr)
            if lo is None or hi is None or lo // c != hi // c:
                return BinOp(op, a_expr, Const(c, dt), dt)
        return self._divmod_aff(op, self.affine(a_expr), c, dt).to_expr()

    def _divmod_aff(self, op, a: Affine, c: int, dt) -> Affine:
        """floor a // c or a % c on an affine form: (c*Q + R) // c == Q + R // c.
        `a` is left as it is (the xor rule divides one form twice)."""
        if c == 1:
            return a.copy() if op == "floordiv" else Affine(dt, {}, 0)
        if not self._fits(a, dt):
            # the dividend may wrap in `dt`: (c*Q + R) // c == Q + R // c holds for the
            # integers, not for the wrapped value the instructions compute
            atom = BinOp(op, a.to_expr(), Const(c, dt), dt)
            return Affine(dt, {expr_key(atom): [atom, 1]}, 0)
        qt, rt = {}, {}
        for k, (atom, coef) in a.terms.items():
            if coef:
                if coef % c:
                    rt[k] = [atom, coef]
                else:
                    qt[k] = [atom, coef // c]
        qc, rc = divmod(a.const, c)
        if not rt:
            return Affine(dt, qt, qc) if op == "floordiv" else Affine(dt, {}, rc)
        r = Affine(dt, rt, rc)
        lo, hi = self._aff_bounds(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            # R // c is a known constant
            k = lo // c
            if op == "floordiv":
                return Affine(dt, qt, qc + k)
            r.const -= k * c
            return r
        atom = BinOp(op, r.to_expr(), Const(c, dt), dt)
        key = atom._key if atom._key is not None else expr_key(atom)
        if op == "floormod":
            return Affine(dt, {key: [atom, 1]}, 0)
        t = qt.get(key)   # Q + R // c
        if t is None:
            qt[key] = [atom, 1]
        else:
            t[1] += 1
        return Affine(dt, qt, qc)

    def _fits(self, a: Affine, dt) -> bool:
        """Whether every partial sum of `a` (as emitted: scaled terms added in turn) provably
        stays in `dt`'s range.  A form with one unscaled term has nothing to wrap."""
        items = [(atom, c) for atom, c in a.terms.values() if c]
        if len(items) == 1 and items[0][1] == 1 and not a.const or not dt.is_int:
            return True
        lo_t, hi_t = int_range(dt)
        lo = hi = 0
        for atom, c in items:
            b_lo, b_hi = self.bounds(atom)
            if b_lo is None or b_hi is None:
                return False
            t_lo, t_hi = (c * b_lo, c * b_hi) if c > 0 else (c * b_hi, c * b_lo)
            lo, hi = lo + t_lo, hi + t_hi
            if t_lo < lo_t or t_hi > hi_t or lo < lo_t or hi > hi_t:
                return False
        lo, hi = lo + a.const, hi + a.const
        return lo_t <= lo and hi <= hi_t

    def _xor(self, a, b, dt):
        r = self._xor_form(a, b, dt)
        return r.to_expr() if type(r) is Affine else r

    def _xor_form(self, a, b, dt):
        """a ^ b as an expression, or as an affine form when it splits into ADD-high plus
        XOR-low (kept as a form so that affine() need not parse it back)."""
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(fold("xor", a.value, b.value, dt), dt)
        for x, y in ((a, b), (b, a)):
            if isinstance(y, Const) and y.value == 0:
                return x
        # ADD-high / XOR-low: pick the operand with the smaller known non-negative range
        ba, bb = self.bounds(a), self.bounds(b)
        if nonneg(bb) and (not nonneg(ba) or bb[1] <= ba[1]):
            x, y, by = a, b, bb
        elif nonneg(ba):
            x, y, by = b, a, ba
        else:
            return BinOp("xor", a, b, dt)
        p = 1 << max(by[1], 1).bit_length()
        xa = self.affine(x)
        hi = self._divmod_aff("floordiv", xa, p, dt)
        lo = self._divmod_aff("floormod", xa, p, dt).to_expr()
        low = BinOp("xor", lo, y, dt) if not (isinstance(lo, Const) and lo.value == 0) else y
        out = hi.scaled(p)   # (x // p) * p
        if not out.terms and out.const == 0:
            return low
        out.add(Affine(dt, {expr_key(low): [low, 1]}))
        return out


# ---- small helpers -----------------------------------------------------------------
