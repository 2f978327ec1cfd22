"""The call a tile op's variants are judged on: one protocol for every op.

A tile op is traced into an `ir.TileCall`: its operands, its scope, the user's options and
the *record* its trace-time front end validated (descriptors, element tables: whatever the
op derives from the operands alone).  At build time the tile-lowering pass turns it into a
`Call` with what only the build knows: the target, the facts in force at the call, the
block.  Predicates read the call and return `(ok, reason)`; they never write to it.  Work a
predicate and the emitter both need is a *plan*: `call.plan(fn, *args)` computes
`fn(call, *args)` once per call and returns the cached result to every later asker.
"""
from __future__ import annotations

from ..ir import BufferRegion
from ..printer import format_expr
from .scope import make_scope, narrow

_UNPLANNED = object()   # Call.plan: not computed yet (a plan may be None)


class Call:
    """What a variant's predicates and emitter see."""

    def __init__(self, op: str, args: tuple, scope, target, an, *, record=None, options=None,
                 all_active=(True, ""), where: str = "", stmt=None, block=(1, 1, 1)):
        self.op = op
        self.args = args
        self.record = record
        self.scope = scope if not isinstance(scope, str) else make_scope(scope, block)
        self.target = target
        self.an = an
        self.options = dict(options or {})
        self.options.pop("dispatch", None)   # the variant choice is not an option of it
        self.all_active = tuple(all_active[:2])
        # part of the scope is active: variants that may run on part of it see those threads
        self.narrowed = None
        if not self.all_active[0] and len(all_active) > 2 and all_active[2] is not None:
            self.narrowed = narrow(self.scope, *all_active[2])
        self.where = where
        self.stmt = stmt
        self.block = block
        self._plans: dict = {}

    @classmethod
    def of(cls, stmt, target, an, block, where=""):
        """The call of a traced TileCall, for dispatch at build time."""
        return cls(stmt.op, stmt.args, stmt.scope, target, an, record=stmt.record,
                   options=stmt.options, all_active=stmt.active, where=where, stmt=stmt,
                   block=block)

    @property
    def active_scope(self):
        """The threads that run the call: the scope, or the part of it a branch narrowed it to
        (what a variant registered with handles_partial works with)."""
        return self.narrowed or self.scope

    def plan(self, fn, *args):
        """fn(self, *args), computed once per call (predicates and emitters share it)."""
        key = (fn, args)
        out = self._plans.get(key, _UNPLANNED)
        if out is _UNPLANNED:
            out = self._plans[key] = fn(self, *args)
        return out

    def describe(self) -> str:
        a = ", ".join(str(x) if isinstance(x, BufferRegion) else format_expr(x)
                      for x in self.args)
        return f"pg.tile.{self.scope.name}.{self.op}({a}) [{self.target}]"


class RegionCall(Call):
    """A call whose first two arguments are its destination and source regions (copies,
    reductions)."""

    @property
    def dst(self):
        return self.args[0]

    @property
    def src(self):
        return self.args[1]
