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

    def known_in_bounds(self, buf, indices, lanes: int, aff) -> bool:
        """Whether the facts confirm buf[indices] (and the vector's `lanes` elements along the
        last dimension) inside the buffer; an access they do not confirm is a suspect for
        static_bounds, the exact test.  Constants and variables with facts settle most
        accesses.  A compound index of a 1-D buffer that owns its storage is tested on `aff`,
        the access's byte offset (its index scaled, already simplified), before any walk over
        the index expression.  An extent that is not an int is inf (`_plan`): only the lower
        bound counts there.  An index read from memory is left alone: the exact test could not
        tell either."""
        if not indices:
            return lanes == 1
        vb = self.an._bounds
        for idx, ext in zip(indices, self._exts[buf.uid]):
            t = type(idx)
            if t is Var:
                lo, hi = vb.get(idx.uid, _NO_FACTS)
            elif t is Const:
                lo = hi = idx.value
            elif t is Load:       # a value from memory: neither provable nor refutable
                hi = None
                continue
            elif len(indices) == 1 and self._offset_in_bounds(buf, aff, lanes, ext):
                return True
            elif t is BinOp:
                lo, hi = _leaf_op_bounds(idx, vb) or self._tree_bounds(idx)
            else:
                lo, hi = self.an.bounds(idx)
            if lo is None or lo < 0:
                return False
            if hi is None:
                if ext is not math.inf:
                    return False
            elif hi >= ext:
                return False
        return hi is None or hi + lanes <= ext     # the vector's lanes run along the last dim

    def _offset_in_bounds(self, buf, aff, lanes: int, ext) -> bool:
        """known_in_bounds of a 1-D buffer's access from its byte offset `aff`, where the
        buffer owns its storage at a constant element offset (so `aff` is its index alone)."""
        if aff is None or buf.data is not None or buf.layout is not None or \
                type(buf.elem_offset) is not int:
            return False
        vb, an = self.an._bounds, self.an
        top = ext is not math.inf
        lo = hi = aff.const
        for atom, c in aff.terms.values():
            r = vb.get(atom.uid, _NO_FACTS) if type(atom) is Var else an.bounds(atom)
            low, high = r if c > 0 else (r[1], r[0])    # the ends that give lo and hi
            if low is None or top and high is None:
                return False
            lo += c * low
            if top:
                hi += c * high
        nb = buf.dtype.storage_bits // 8
        eo = buf.elem_offset * nb
        return lo >= eo and (not top or hi + (lanes - 1) * nb < eo + ext * nb)

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
