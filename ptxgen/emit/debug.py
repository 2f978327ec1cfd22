"""pg.debug_bounds(True): every global/shared index is checked against its buffer's extent.

A violation branches to a block after `ret` that prints the buffer's name with vprintf and
traps.  Indices the simplifier proves in range are not checked, and with the switch off the
emitted PTX is unchanged.
"""
from __future__ import annotations

import math

from ..errors import TraceError
from ..ir import BinOp, Const, Load, Var
from ..target.forms import form
from .names import sanitize


class BoundsChecks:
    """Mixin for Codegen (needs val, an, emit, label, new_reg, module_decls, tail, names)."""

    _escapes = None     # raw PTX that leaves the straight path (ret, bra, ...): no proofs
    _tree_memo = None   # id(index node) -> (node, bounds), made by the first compound index

    def check_indices(self, buf, indices, lanes: int = 1, aff=None):
        """Indices of an access that the facts do not confirm in bounds are suspects for
        static_bounds (lanes: the vector's elements, along the last dimension).  A 1-D
        buffer that owns its storage is tested on `aff`, the access's byte offset (its
        index scaled, already simplified): no walk over the index expression."""
        an, vb = self.an, self.an._bounds
        if aff is not None and len(indices) == 1 and buf.data is None and \
                buf.layout is None and type(buf.elem_offset) is int:
            ext = self._exts[buf.uid][0]
            top = ext is not math.inf       # a symbolic extent: only the lower bound counts
            try:
                lo = hi = aff.const
                for atom, c in aff.terms.values():
                    r = vb.get(atom.uid, _NO_FACTS) if type(atom) is Var else an.bounds(atom)
                    if c > 0:
                        lo += c * r[0]
                        if top:
                            hi += c * r[1]
                    else:
                        lo += c * r[1]
                        if top:
                            hi += c * r[0]
                nb = buf.dtype.storage_bits // 8
                eo = buf.elem_offset * nb
                if lo >= eo and (not top or hi + (lanes - 1) * nb < eo + ext * nb):
                    return
            except TypeError:     # a bound that is not known (None)
                pass
        last = len(indices) - 1
        for d, (idx, ext) in enumerate(zip(indices, buf.shape)):
            t = type(idx)
            if t is Load:
                continue          # a value from memory: nothing can be proven
            if t is Const:
                lo = hi = idx.value
            elif t is Var:
                lo, hi = vb.get(idx.uid, (None, None))
            elif t is BinOp:
                lo, hi = _leaf_op_bounds(idx, vb) or self._tree_bounds(idx)
            else:
                lo, hi = an.bounds(idx)
            if lo is None or lo < 0 or type(ext) is int and (
                    hi is None or hi + (lanes if d == last else 1) > ext):
                self.static_bounds(buf, indices, lanes)
                return

    def _raw_control(self) -> bool:
        if self._escapes is None:   # raw ret/bra/trap: reachability is not the IR's
            from ..analysis import ranges

            self._escapes = ranges.control_flow_escapes(self.func)
        return self._escapes

    def _tree_bounds(self, e):
        """bounds() of a compound index; `x + c` / `x - c` reuse x's bounds, kept per node
        for the whole build (the copies of an unrolled body share x and differ in c; facts
        never change once a variable is bound, and a dead variable is never used again)."""
        if e.op in ("add", "sub") and type(e.b) is Const and type(e.b.value) is int:
            memo = self._tree_memo
            if memo is None:
                memo = self._tree_memo = {}
            hit = memo.get(id(e.a))
            if hit is None:
                hit = memo[id(e.a)] = (e.a, self.an.bounds(e.a))
            lo, hi = hit[1]
            c = e.b.value if e.op == "add" else -e.b.value
            return (None if lo is None else lo + c, None if hi is None else hi + c)
        return self.an.bounds(e)

    def static_bounds(self, buf, indices, lanes: int = 1):
        """Raise for an index of buf that some thread executing this access provably takes
        outside its extent (load/store call it for the indices the facts do not confirm;
        analysis/ranges.py is exact: what it cannot decide is accepted)."""
        from ..analysis import ranges

        ctx = ranges.Context(self.lets, self.ctl, self.func)
        last = len(indices) - 1
        for d, (idx, ext) in enumerate(zip(indices, buf.shape)):
            n = lanes if d == last else 1
            w = ranges.out_of_bounds(ctx, idx, ext, n)
            if w is not None:
                if self._raw_control():
                    return
                raise TraceError(ranges.describe(buf, d, idx, ext, w, n))

    def bounds_check(self, buf, indices):
        """pg.debug_bounds(True): trap, printing the buffer's name, on an index outside its
        extent (one unsigned compare per dimension, so negative indices fail too)."""
        if not self.debug_bounds or buf.scope not in ("global", "shared", "shared.dyn"):
            return
        for d, (idx, ext) in enumerate(zip(indices, buf.shape)):
            idx = self.an.simplify(idx)
            if isinstance(idx, Const) and isinstance(ext, int) and 0 <= idx.value < ext:
                continue
            lo, hi = self.an.bounds(idx)
            if isinstance(ext, int) and lo is not None and hi is not None and 0 <= lo and hi < ext:
                continue
            v = self.val(idx)
            e = str(ext) if isinstance(ext, int) else self.val(self.an.simplify(ext))
            p = self.new_reg("pred")
            ty = "u64" if idx.dtype.bits == 64 else "u32"
            self.emit(form("setp", "ge", ty).format(d=p, a=v, b=e))
            label = self.label("oob")
            self.emit(form("bra").format(p=p, l=label))
            self._oob_block(label, f"ptxgen debug_bounds: index out of range in buffer "
                                   f"'{buf.name}' dimension {d} (extent {ext})\n")

    def _oob_block(self, label, message):
        decl = form("vprintf_decl")
        if decl not in self.module_decls:
            self.module_decls.append(decl)
        sym = sanitize(f"__oob_msg_{len(self.tail)}", self.names)
        data = list(message.encode()) + [0]
        self.module_decls.append(form("global_bytes_decl").format(
            name=sym, n=len(data), v=", ".join(map(str, data))))
        r = self.new_reg("b64")
        # one tail entry per line: the message symbols are numbered by the tail's length
        self.tail += form("debug_trap_block").format(l=label, r=r, name=sym).split("\n")


_NO_FACTS = (None, None)     # a variable without facts: its bounds are unknown


def _leaf_op_bounds(e, vb):
    """bounds() of `v op c` / `c op v` (v a variable with facts, c a constant; op + - * and
    // % by a positive constant), the usual shape of an index, without the recursive walk;
    None for anything else.  Same interval rules as analysis/facts.py."""
    a, b, op = e.a, e.b, e.op
    ta, tb = type(a), type(b)
    if ta is Var and tb is Const:
        v, c, var_first = a, b.value, True
    elif ta is Const and tb is Var:
        v, c, var_first = b, a.value, False
    else:
        return None
    r = vb.get(v.uid)
    if r is None or r[0] is None or r[1] is None:
        return None
    lo, hi = r
    if op == "add":
        return lo + c, hi + c
    if op == "mul":
        return (lo * c, hi * c) if c >= 0 else (hi * c, lo * c)
    if op == "sub":
        return (lo - c, hi - c) if var_first else (c - hi, c - lo)
    if not var_first:
        return None
    if op == "floordiv" and c > 0:
        return lo // c, hi // c
    if op == "floormod" and c > 0:
        return (lo, hi) if lo >= 0 and hi < c else (0, c - 1)
    return None
