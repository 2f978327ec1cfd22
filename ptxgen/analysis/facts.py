"""Facts about integer expressions: bounds (intervals) and divisibility (modular sets).

The Analyzer (analysis/simplify.py) mixes this in; the facts come from where variables are
bound (loop ranges, thread-id extents, let values) and are what the simplifier and the
vector-alignment proofs rely on.
"""
from __future__ import annotations

import math

from ..ir import BOOL, BinOp, Cast, Const, Not, Select, SpecialReg, Var, expr_key, int_range

_SPECIAL_BOUNDS = {"laneid": (0, 31), "warpid": (0, 31), "nwarpid": (1, 32),
                   "tid.x": (0, 1023), "tid.y": (0, 1023), "tid.z": (0, 63),
                   "ntid.x": (1, 1024), "ntid.y": (1, 1024), "ntid.z": (1, 64),
                   "ctaid.x": (0, 2**31 - 1), "ctaid.y": (0, 65535), "ctaid.z": (0, 65535),
                   "nctaid.x": (1, 2**31 - 1), "nctaid.y": (1, 65535), "nctaid.z": (1, 65535)}
_CMP = frozenset(("lt", "le", "gt", "ge", "eq", "ne"))


class FactsMixin:
    """bounds / modset / divisibility; needs self._bounds, self._mod (var uid -> fact) and
    self._memo (expr_key -> bounds of an operation node), which must be cleared whenever a
    fact changes (bind/unbind): a node's bounds are a function of its variables' facts."""

    def bounds(self, e) -> tuple:
        """(lo, hi) inclusive; None for an unknown side."""
        t = type(e)
        if t is Var:
            b = self._bounds.get(e.uid)
            return b if b is not None else _dtype_bounds(e.dtype)
        if t is Const:
            dt = e.dtype
            v = int(e.value) if dt.is_int or dt is BOOL else None
            return (v, v)
        if t is BinOp:
            key = e._key
            if key is None:
                key = expr_key(e)
            b = self._memo.get(key)
            if b is None:
                b = self._memo[key] = self._binop_bounds(e)
            return b
        if t is SpecialReg:
            return _SPECIAL_BOUNDS.get(e.name, (None, None))
        if t is Select:
            a, b = self.bounds(e.t), self.bounds(e.f)
            return (_min(a[0], b[0]), _max(a[1], b[1]))
        if t is Cast:
            inner = self.bounds(e.a)
            lo, hi = _dtype_bounds(e.dtype)
            if inner[0] is not None and inner[1] is not None and lo is not None \
                    and lo <= inner[0] and inner[1] <= hi:
                return inner
            return (lo, hi)
        if t is Not:
            return (0, 1)
        return _dtype_bounds(getattr(e, "dtype", None))

    def _binop_bounds(self, e) -> tuple:
        """bounds() of an operation node, from its operands' bounds (memoized by bounds)."""
        op = e.op
        if op in _CMP:
            return (0, 1)
        a = self.bounds(e.a)
        b = self.bounds(e.b)
        if op == "add":
            return (_add(a[0], b[0]), _add(a[1], b[1]))
        if op == "sub":
            return (_sub(a[0], b[1]), _sub(a[1], b[0]))
        if op == "mul":
            if None in a or None in b:
                return _nonneg_or_unknown(a, b)
            if b[0] == b[1]:   # times a constant: the two products, ordered
                lo, hi = a[0] * b[0], a[1] * b[0]
                return (lo, hi) if lo <= hi else (hi, lo)
            ps = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
            return (min(ps), max(ps))
        if op in ("floordiv", "shr") and isinstance(e.b, Const):
            c = e.b.value if op == "floordiv" else 1 << e.b.value if e.b.value >= 0 else 0
            if c > 0:
                return (None if a[0] is None else a[0] // c, None if a[1] is None else a[1] // c)
        if op == "shl" and isinstance(e.b, Const) and e.b.value >= 0:
            c = 1 << e.b.value
            return (None if a[0] is None else a[0] * c, None if a[1] is None else a[1] * c)
        if op == "floormod" and isinstance(e.b, Const) and e.b.value > 0:
            c = e.b.value
            if a[0] is not None and a[1] is not None and a[0] >= 0 and a[1] < c:
                return a
            return (0, c - 1)
        if op == "and":
            if isinstance(e.b, Const) and e.b.value >= 0:
                hi = e.b.value if a[1] is None or a[0] is None or a[0] < 0 else min(a[1], e.b.value)
                return (0, hi)
            if nonneg(a) and nonneg(b):
                return (0, min(a[1], b[1]))
        if op in ("xor", "or") and nonneg(a) and nonneg(b):
            return (0, (1 << max(a[1], b[1]).bit_length()) - 1)
        if op == "min":
            return (_min(a[0], b[0]), _min(a[1], b[1]))
        if op == "max":
            return (_max(a[0], b[0]), _max(a[1], b[1]))
        return _dtype_bounds(e.dtype)

    # ---- divisibility ------------------------------------------------------
    def modset(self, e) -> tuple:
        """(m, r): e == m*k + r for some integer k.  m == 0 means e == r exactly."""
        t = type(e)
        if t is Var:
            return self._mod.get(e.uid, (1, 0))
        if t is Const:
            return (0, int(e.value)) if e.dtype.is_int else (1, 0)
        if t is BinOp:
            op = e.op
            if op in ("add", "sub"):
                m1, r1 = self.modset(e.a)
                m2, r2 = self.modset(e.b)
                g = math.gcd(m1, m2)
                r = r1 + r2 if op == "add" else r1 - r2
                return (g, r % g) if g else (0, r)
            if op == "mul":
                m1, r1 = self.modset(e.a)
                m2, r2 = self.modset(e.b)
                g = math.gcd(math.gcd(m1 * m2, m1 * r2), m2 * r1)
                return (g, (r1 * r2) % g) if g else (0, r1 * r2)
            if op == "shl" and isinstance(e.b, Const) and e.b.value >= 0:
                m, r = self.modset(e.a)
                c = 1 << e.b.value
                return (m * c, r * c)
            if op in ("floordiv", "shr") and isinstance(e.b, Const) and \
                    (e.b.value != 0 if op == "floordiv" else e.b.value >= 0):
                c = e.b.value if op == "floordiv" else 1 << e.b.value
                m, r = self.modset(e.a)
                if m == 0:
                    return (0, r // c)
                if m % c == 0:
                    return (m // c, r // c) if r % c == 0 or self._nonneg(e.a) else (1, 0)
                return (1, 0)
            if op == "floormod" and isinstance(e.b, Const) and e.b.value > 0:
                m, r = self.modset(e.a)
                g = math.gcd(m, e.b.value)
                return (g, r % g) if g else (0, r % e.b.value)
            if op == "and" and isinstance(e.b, Const) and e.b.value >= 0:
                # low zero bits of the mask and of the value both survive
                tz = trailing_zeros(e.b.value)
                m, r = self.modset(e.a)
                tz_a = trailing_zeros(math.gcd(m, r) if (m or r) else 0)
                k = max(tz, tz_a)
                return (1 << k, 0) if k < 63 else (0, 0)
            if op == "min" or op == "max":
                m1, r1 = self.modset(e.a)
                m2, r2 = self.modset(e.b)
                g = math.gcd(math.gcd(m1, m2), abs(r1 - r2))
                return (g, r1 % g) if g else (0, r1)
        if t is Select:
            m1, r1 = self.modset(e.t)
            m2, r2 = self.modset(e.f)
            g = math.gcd(math.gcd(m1, m2), abs(r1 - r2))
            return (g, r1 % g) if g else (0, r1)
        if t is Cast:
            return self.modset(e.a) if e.a.dtype.is_int else (1, 0)
        return (1, 0)

    def affine_facts(self, aff) -> tuple:
        """(bounds, modset) of aff.to_expr() without building it: the same interval and
        congruence rules as bounds()/modset() of that expression's nodes, folded along
        its chain ((t1 + t2) - t3) + const, t = atom or atom * |coef|."""
        dt = aff.dtype
        lo = hi = None
        m = r = 0
        first = True
        var_bounds, var_mod = self._bounds, self._mod
        for atom, c in aff.terms.values():
            if not c:
                continue
            if atom.dtype is not dt:   # to_expr casts a narrower atom: the general path
                e = aff.to_expr()
                return self.bounds(e), self.modset(e)
            if type(atom) is Var:      # bounds() and modset() of a variable, inline
                uid = atom.uid
                b = var_bounds.get(uid)
                t_lo, t_hi = b if b is not None else _dtype_bounds(dt)
                tm, tr = var_mod.get(uid, (1, 0))
            else:
                t_lo, t_hi = self.bounds(atom)
                tm, tr = self.modset(atom)
            k = c if c > 0 else -c
            if k != 1:   # atom * k
                if t_lo is None or t_hi is None:
                    t_lo, t_hi = (0, None) if t_lo is not None and t_lo >= 0 else (None, None)
                else:
                    t_lo, t_hi = t_lo * k, t_hi * k
                g = tm * k   # gcd(m * k, r * k, 0) with m >= 0, as modset() of the product
                tm, tr = (g, (tr * k) % g) if g else (0, tr * k)
            if first and c > 0:
                lo, hi, m, r = t_lo, t_hi, tm, tr
            else:   # node + t or node - t (the first node: 0 - t)
                if first:
                    lo = hi = 0
                if c > 0:   # _add/_sub, inline
                    lo = None if lo is None or t_lo is None else lo + t_lo
                    hi = None if hi is None or t_hi is None else hi + t_hi
                    r += tr
                else:
                    lo = None if lo is None or t_hi is None else lo - t_hi
                    hi = None if hi is None or t_lo is None else hi - t_lo
                    r -= tr
                m = math.gcd(m, tm)
                m, r = (m, r % m) if m else (0, r)
            first = False
        const = aff.const
        if first:
            return (const, const), (0, const)
        if const:
            lo = None if lo is None else lo + const
            hi = None if hi is None else hi + const
            r += const
            m, r = (m, r % m) if m else (0, r)
        return (lo, hi), (m, r)

    def divisible(self, e, k: int) -> bool:
        """True if e is provably a multiple of k."""
        if k == 1:
            return True
        m, r = self.modset(e)
        return (m % k == 0) and (r % k == 0)

    def affine_divisible(self, aff, k: int) -> bool:
        """True if the affine form is provably a multiple of k (term by term)."""
        if k == 1:
            return True
        if aff.const % k:
            return False
        for atom, c in aff.terms.values():
            if not c:
                continue
            m, r = self.modset(atom)
            if (c * m) % k or (c * r) % k:
                return False
        return True

    def _nonneg(self, e) -> bool:
        lo = self.bounds(e)[0]
        return lo is not None and lo >= 0


# ---- small helpers ----------------------------------------------------------------
def _dtype_bounds(dt):
    if dt is None or not (dt.is_int or dt == BOOL):
        return (None, None)
    if dt == BOOL:
        return (0, 1)
    return int_range(dt)


def nonneg(b) -> bool:
    return b[0] is not None and b[1] is not None and b[0] >= 0


def _nonneg_or_unknown(a, b):
    if a[0] is not None and a[0] >= 0 and b[0] is not None and b[0] >= 0:
        return (0, None)
    return (None, None)


def _add(x, y):
    return None if x is None or y is None else x + y


def _sub(x, y):
    return None if x is None or y is None else x - y


def _min(x, y):
    return None if x is None or y is None else min(x, y)


def _max(x, y):
    return None if x is None or y is None else max(x, y)


def trailing_zeros(v: int) -> int:
    if v == 0:
        return 64
    return (v & -v).bit_length() - 1


def fold(op, x, y, dt):
    if op == "floordiv":
        v = x // y
    elif op == "floormod":
        v = x % y
    elif op == "and":
        v = x & y
    elif op == "or":
        v = x | y
    elif op == "xor":
        v = x ^ y
    elif op == "shl":
        v = x << y
    elif op == "shr":
        v = x >> y
    elif op == "min":
        v = min(x, y)
    elif op == "max":
        v = max(x, y)
    else:
        raise ValueError(op)
    bits = dt.bits
    v &= (1 << bits) - 1
    if dt.kind == "int" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v
