"""Buffers -> addresses: the byte offset of buf[indices] as an affine form, and the
register + immediate that address it.

Global addresses are 64-bit (`mul.wide` of the 32-bit element index, then add),
shared addresses 32-bit (`mad.lo` onto the symbol address).  The element offset
comes from the buffer's metadata only:
    byte(B[c]) = byte(B.data) + (B.elem_offset + B.layout(c)["m"]) * sizeof(B.dtype)
Constant parts fold into the `[reg+imm]` operand.

_address runs once per memory access, so its register allocation, emission and value-table
updates are written out (new_reg/emit/remember are what they do): the helper calls would be
a share of every build's Python calls, a tracked figure (benchmarks/emit_speed.py).
"""
from __future__ import annotations

import math
from functools import lru_cache
from operator import itemgetter

from ..errors import PtxgenError
from ..ir import (INT32, INT64, PLAIN_INT, BinOp, BufferPtr, Const, Expr, Var,
                  expr_key)
from ..layout import row_major_strides
from ..analysis.simplify import Affine
from ..target import STATE_SPACE
from ..target.forms import form

SPACE = STATE_SPACE      # the buffer's scope -> its PTX state space (target/table.py)
_COEF = itemgetter(1)   # the coefficient of an affine term [atom, coef]


def _stride_mul(ext, stride):
    """A row-major stride past a symbolic extent: the product unsimplified, in elements
    (offset_affine simplifies each index's product as a whole)."""
    if isinstance(stride, int) and isinstance(ext, int):   # int subclasses
        return stride * ext
    st = stride if isinstance(stride, Expr) else Const(stride, ext.dtype)
    e = ext if isinstance(ext, Expr) else Const(ext, st.dtype)
    return BinOp("mul", e, st, st.dtype)


@lru_cache(maxsize=1024)
def _byte_strides(shape: tuple, nb: int) -> tuple:
    """Row-major byte strides of an all-int shape: few shapes recur across builds."""
    return row_major_strides(shape, inner=nb)


class AddressEmitter:
    """Mixin for Codegen: byte offsets and addresses (needs self.an, self.base, self.known,
    self.val and the register counters of ValueEmitter)."""

    def _root(self, buf):
        r = buf if buf.data is None else buf.root
        if r.uid not in self.base and r.uid not in self.local_regs:
            raise PtxgenError(f"buffer '{buf.name}' is used before its storage is allocated")
        return r

    def mem_operand(self, ptr: BufferPtr):
        """(base register, constant byte offset) of a pointer expression."""
        buf = ptr.buffer
        root = self._root(buf)
        # no separate simplify: the affine form simplifies the index's atoms itself
        return self._address(self.base[root.uid], SPACE.get(root.scope),
                             self.offset_affine(buf, ptr.indices))

    # ---- offsets as affine forms (no intermediate expression trees) --------------------
    def offset_affine(self, buf, indices) -> Affine:
        """Bytes from the root storage to buf[indices] (indices simplified; None: buf.data),
        as a fresh form the caller may rewrite.  Not cached per access: a (buffer, indices)
        pair rarely repeats, so its key would cost more than it saves; what is fixed per
        buffer (view base, element size, strides) is cached instead."""
        base = None if buf.data is None else self._view_base(buf)
        if indices is None:
            return Affine(INT32) if base is None else base.copy()
        nb, strides = self._plans.get(buf.uid) or self._plan(buf)
        if strides is None:   # a layout
            m = buf.layout.apply(*indices, shape=buf.shape)["m"]
            aff = Affine(INT32, {}, m) if isinstance(m, int) else self.an.affine(m)
            if nb != 1:
                aff.scale(nb)
        else:   # row-major: each index scaled by its byte stride as it is added
            aff = None
            for idx, s in zip(indices, strides):
                if type(s) is int:
                    a = Affine(INT32, {}, idx) if isinstance(idx, int) else self.an.affine(idx)
                else:   # a symbolic element stride: the product is simplified as an expression
                    dt = idx.dtype if isinstance(idx, Expr) else s.dtype
                    i = idx if isinstance(idx, Expr) else Const(idx, dt)
                    a = self.an.affine(BinOp("mul", i, s, dt))
                    s = nb
                if s != 1:
                    for t in a.terms.values():
                        t[1] *= s
                    a.const *= s
                if aff is None:   # the first index's form is the sum so far
                    aff = a
                    if a.dtype is not INT64:
                        a.dtype = INT32
                else:
                    if a.dtype is INT64:
                        aff.dtype = INT64
                    aff.add(a)
            if aff is None:
                aff = Affine(INT32)
        eo = buf.elem_offset
        if isinstance(eo, int):
            aff.const += eo * nb
        else:
            e = self.an.affine(eo)
            if e.dtype is INT64:
                aff.dtype = INT64
            aff.add(e.scale(nb) if nb != 1 else e)
        if aff.dtype is not INT64:
            for a, c in aff.terms.values():
                if c and a.dtype is not INT32:
                    aff.dtype = INT64   # unsigned (or narrow) indices: widen, zero-extending
                    break
        if base is not None:
            wide = aff.dtype is INT64 or base.dtype is INT64
            aff.add(base)
            aff.dtype = INT64 if wide else INT32
        return aff

    def _plan(self, buf) -> tuple:
        """(element bytes, strides) of a buffer, once: row-major strides innermost last, in
        bytes, or in elements (an Expr) past a symbolic extent; None for a layout.  Also its
        extents for the in-line bounds test of loads and stores (_exts)."""
        dt = buf.dtype
        bits = dt.storage_bits
        if bits < 8:
            raise PtxgenError(f"{dt} elements are not byte addressable; view "
                              f"'{buf.name}' as uint8 to move packed pairs")
        nb = bits // 8
        strides = None
        shape = buf.shape
        plain = set(map(type, shape)) <= PLAIN_INT
        if buf.layout is None:
            if plain:   # int extents: the strides in bytes at once
                strides = _byte_strides(shape, nb)
            else:
                strides = [s * nb if type(s) is int else s
                           for s in row_major_strides(shape, mul=_stride_mul)]
        # a symbolic extent is infinite: only its lower bound 0 is known
        self._exts[buf.uid] = shape if plain else \
            tuple([e if type(e) is int else math.inf for e in shape])
        plan = self._plans[buf.uid] = (nb, strides)
        return plan

    def _view_base(self, buf) -> Affine:
        """Bytes from the root storage to a view's data pointer.  Cached per view (its pointer
        never changes) and per structural pointer (parent uid, index keys), so views of one
        pointer share the form; both in _bases, whose keys are ints and tuples."""
        hit = self._bases.get(buf.uid)
        if hit is None:
            p = buf.data
            if p.indices is None:
                hit = Affine(INT32) if p.buffer.data is None else self._view_base(p.buffer)
            else:
                pidx = tuple([self.an.simplify(i) for i in p.indices])
                key = (p.buffer.uid, tuple([expr_key(i) for i in pidx]))
                hit = self._bases.get(key)
                if hit is None:
                    hit = self._bases[key] = self.offset_affine(p.buffer, pidx)
            self._bases[buf.uid] = hit
        return hit

    def _address(self, base, space, aff):
        """(register, immediate) for `base` + `aff` bytes.  The scaled variable part is
        cached separately from the base, so A[i, j] and B[i, j] share one index; an index
        that reads a local scalar or memory is never cached (it may change before the next
        access)."""
        const = aff.const
        terms = aff.terms
        # the index's identity: dtype, atoms and coefficients of its nonzero terms, keyed
        # without building the expression (the coefficients fix the scale g, below)
        coefs = tuple(map(_COEF, terms.values()))
        if 0 in coefs:   # a cancelled term
            terms = {k: t for k, t in terms.items() if t[1]}
            coefs = tuple(map(_COEF, terms.values()))
        if not coefs:
            return (base, const) if const >= 0 else self._fold_negative(base, const)
        ikey = (aff.dtype, tuple(terms), coefs)
        key = ("addr", base, ikey)
        known = self.known
        hit = known.get(key)
        if hit is None:
            # factor out the largest power-of-two multiple: emit the element-ish index once,
            # then one scale (mul.wide for the 64-bit spaces)
            g = math.gcd(*coefs)
            g &= -g
            wide64 = space != "shared" and space != "shared::cluster"   # 32-bit windows
            skey = ("scaled", ikey, wide64)
            scaled = known.get(skey) if wide64 else None
            atom = None
            if len(coefs) == 1 and coefs[0] == g:
                [(atom, _)] = terms.values()
            impure = False   # the index reads memory or a local scalar: never reused
            if scaled is not None:
                # the scaled index is known (only a pure one is kept), and so is its value,
                # in this scope: no operand needed
                v = None
            elif type(atom) is Var and atom.dtype is aff.dtype:
                v = self.val(atom)   # the index is a variable
            else:
                aff.const = 0
                if g != 1:
                    for t in aff.terms.values():
                        t[1] //= g
                saved, self._impure = self._impure, False
                v = self.val(aff.to_expr())
                impure = self._impure
                self._impure |= saved
            counts = self.reg_counts
            lines = self.lines
            scope = self._scope_keys[-1]
            if wide64:
                n = counts["b64"] + 1
                hit = "%rd" + str(n)
                if scaled is None:
                    n += 1
                    scaled = "%rd" + str(n)
                    mul = ("mul.lo", "s64") if aff.dtype is INT64 else ("mul.wide", "s32")
                    lines.append("    " + form("binary", *mul).format(d=scaled, a=v, b=g))
                    if not impure:
                        known[skey] = scaled
                        scope.append(skey)
                counts["b64"] = n
                lines.append("    " + form("binary", "add", "s64").format(d=hit, a=base, b=scaled))
            else:
                n = counts["b32"] + 1
                counts["b32"] = n
                hit = "%r" + str(n)
                if g == 1:
                    lines.append("    " + form("binary", "add", "s32").format(d=hit, a=base, b=v))
                else:
                    lines.append("    " + form("ternary", "mad.lo", "s32").format(d=hit, a=v, b=g, c=base))
            if not impure:
                known[key] = hit
                scope.append(key)
        return (hit, const) if const >= 0 else self._fold_negative(hit, const)

    def _fold_negative(self, reg, const):
        """PTX has no [reg-imm]: a negative offset is added into a new register."""
        return (self._add_const(reg, const), 0)

    def _add_const(self, reg, const) -> str:
        wide = reg.startswith("%rd")
        r = self.new_reg("b64" if wide else "b32")
        self.emit(form("binary", "add", "s64" if wide else "s32").format(d=r, a=reg, b=const))
        return r

    def address_value(self, ptr: BufferPtr) -> str:
        """A pointer as a value: 64-bit global address or 32-bit shared address."""
        base, off = self.mem_operand(ptr)
        return base if off == 0 else self._add_const(base, off)

