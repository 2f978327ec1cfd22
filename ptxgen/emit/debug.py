"""pg.debug_bounds(True): every global/shared index is checked against its buffer's extent.

A violation branches to a block after `ret` that prints the buffer's name with vprintf and
traps.  Indices the simplifier proves in range are not checked, and with the switch off the
emitted PTX is unchanged.
"""
from __future__ import annotations

from ..ir import Const
from ..target.forms import form
from .names import sanitize


class BoundsChecks:
    """Mixin for Codegen (needs val, an, emit, label, new_reg, module_decls, tail, names)."""

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
