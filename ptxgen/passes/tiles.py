"""Tile lowering: every TileCall dispatched to a variant before emission.

A variant's choice depends on facts (loop ranges, let values, symbol extents) in force at
the call, so the pass walks the body binding them exactly as the emitter will: both ask
the Analyzer's `let_form`/`loop_bounds` rules.  Branches the emitter never emits (constant
conditions, empty loops) are dropped here too, so a tile op in dead code is never
dispatched.  Each call becomes an `ir.Lowered` holding its variant's statements, already
through `passes.lower` (unrolled, register buffers decided), so emit/ never sees a tile op.
"""
from __future__ import annotations

from ..analysis.simplify import Analyzer
from ..errors import PtxgenError, TraceError, located_at
from ..ir import (BufferRegion, Const, For, If, Instr, Let, Lowered, PrimFunc, TileCall, Var,
                  While, walk)
from ..printer import format_stmt
from .lower import lower
from .proxy import check_proxy_fences

# primitives.lower_tile, imported by the first build that has a tile op (whose front end
# loaded the primitives while tracing): a build without one never loads them
_lower_tile = None


class _Pass:
    def __init__(self, func: PrimFunc, target):
        global _lower_tile
        if _lower_tile is None:
            from ..primitives import lower_tile as _lower_tile
        self.target, self.block, self.func = target, func.block, func
        self.an = Analyzer()
        self.lets: dict = {}           # var uid -> its Let (exact region ranges read values)
        self.ctl: list = []            # enclosing ("if", If, taken) / ("while", While) / ("for", For)
        self._escapes = None           # raw PTX that leaves the straight path: no proofs
        self.registers = set(func.register_buffers)
        self.tmaps = {p.var.uid for p in func.params if p.kind == "tmap"}
        self.tmaps_used: set = set()
        self.async_copies = False      # then the proxy-fence check runs (passes/proxy.py)
        for p in func.params:
            if p.kind == "symbol":     # shape extents are never negative
                self.an.bind_range(p.var, 0, None)

    def body(self, stmts: list) -> list:
        """stmts with their tile calls lowered (the same list object when there are none)."""
        out = None
        for k, s in enumerate(stmts):
            new = self.stmt(s)
            if new is not s and out is None:
                out = list(stmts[:k])
            if out is not None:
                out.append(new)
        return stmts if out is None else out

    def stmt(self, s):
        t, an = type(s), self.an
        if t is TileCall:
            return self.tile(s)
        if t is Let:
            aff, value = an.let_form(s.value)
            an.bind_let_form(s.var, aff, value, s.bounds)
            self.lets[s.var.uid] = s
            return s
        if t is For:
            lb = an.loop_bounds(s)
            if lb.trip == 0:
                return s if not s.body else For(s.var, s.start, s.stop, s.step, s.kind, [],
                                                src=s.src)
            an.bind_loop(s.var, lb, s.step)
            self.ctl.append(("for", s))
            body = self.body(s.body)
            self.ctl.pop()
            an.unbind(s.var)
            return s if body is s.body else For(s.var, s.start, s.stop, s.step, s.kind, body,
                                                src=s.src)
        if t is If:
            cond = an.simplify(s.cond)
            if isinstance(cond, Const):   # the emitter emits the taken branch only
                then = self.body(s.then) if cond.value else []
                other = self.body(s.else_) if not cond.value and s.else_ else None
            else:
                self.ctl.append(("if", s, True))
                then = self.body(s.then)
                self.ctl[-1] = ("if", s, False)
                other = self.body(s.else_) if s.else_ else s.else_
                self.ctl.pop()
            if then is s.then and other is s.else_:
                return s
            return If(s.cond, then, other, src=s.src)
        if t is While:
            cond = an.simplify(s.cond)
            if isinstance(cond, Const) and not cond.value:
                body = []
            else:
                self.ctl.append(("while", s))
                body = self.body(s.body)
                self.ctl.pop()
            return s if body is s.body else While(s.cond, body, src=s.src)
        return s

    def tile(self, s: TileCall) -> Lowered:
        try:
            self.check_regions(s.args)
            stmts = _lower_tile(s, self.target, self.an, self.block)
        except PtxgenError as e:
            raise located_at(e, s.src) from None
        stmts, in_regs = lower(stmts)[:2]
        self.registers |= in_regs
        self.async_copies |= s.op == "copy_async"
        if self.tmaps:
            walk(stmts, self._note_tensor_maps)
        return Lowered(format_stmt(s), stmts, src=s.src)

    def check_regions(self, args):
        """The regions of a tile call must lie inside their buffers: a symbolic start the
        facts do not confirm is decided like an index (the extent as its lanes)."""
        for r in args:
            if not isinstance(r, BufferRegion):
                continue
            for d, ((start, n), ext) in enumerate(zip(r.region, r.buffer.shape)):
                if isinstance(start, int):
                    continue          # checked when the region was taken
                lo, hi = self.an.bounds(start)
                if lo is not None and lo >= 0 and (type(ext) is not int or (
                        hi is not None and hi + n <= ext)):
                    continue
                from ..analysis import ranges

                ctx = ranges.Context(self.lets, self.ctl, self.func)
                w = ranges.out_of_bounds(ctx, start, ext, n)
                if w is not None and not self._raw_control():
                    v, point = w
                    where = ", ".join(f"{k} = {x}" for k, x in point.items())
                    raise TraceError(
                        f"region {r} is out of bounds along dimension {d} of "
                        f"'{r.buffer.name}' (extent {ext}): it covers {v}..{v + n - 1}"
                        f"{' for ' + where if where else ''}; guard the copy (pg.if_) or fix "
                        f"the region's start")

    def _raw_control(self) -> bool:
        if self._escapes is None:   # raw ret/bra/trap: reachability is not the IR's
            from ..analysis import ranges

            self._escapes = ranges.control_flow_escapes(self.func)
        return self._escapes

    def _note_tensor_maps(self, s):
        """Tensor-map parameters an emitted instruction names (the entry binds only those)."""
        if type(s) is Instr:
            for o in s.operands:
                v = getattr(o, "tmap", None)
                if isinstance(v, Var) and v.uid in self.tmaps:
                    self.tmaps_used.add(v.uid)


def lower_tiles(func: PrimFunc, target) -> PrimFunc:
    """func with every tile call replaced by its lowered statements."""
    p = _Pass(func, target)
    body = p.body(func.body)
    if p.async_copies:
        check_proxy_fences(body)
    attrs = func.attrs
    if p.tmaps_used:
        attrs = dict(attrs, tensor_maps_used=frozenset(p.tmaps_used))
    return PrimFunc(func.name, func.params, body, func.grid, func.block,
                    func.dynamic_smem_bytes, func.dynamic_smem_reserve, attrs,
                    frozenset(p.registers))
