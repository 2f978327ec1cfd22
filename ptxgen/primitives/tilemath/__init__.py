"""Tile math: elementwise ops (`add` ... `memset`, ops.ARITY) and reductions (`sum`, `max`,
`min`) over register, shared and global regions, as lowering rules.

Each op is declared with `tile_op` and has the variants of elementwise.py (`packed`,
`vector`, `scalar`) or reduce.py (`redux`, `shfl`, `serial`).  Their front ends are in
builder/tile_math.py: they check dtypes, shapes and options and record a `MathRecord` /
`ReduceRecord`, which the variants read as `call.record`.  Work is partitioned over the
scope's threads with the copy machinery (copy/common.py sides and leaves, copy/reg.py
thread maps): see plan.py.
"""
from __future__ import annotations

from functools import cached_property

from ...ir import BufferRegion
from ...printer import format_expr
from ..call import Call
from ..registry import tile_op
from .cast import check_cast
from .ops import ARITY, ELEMENTWISE, REDUCTIONS, MathRecord, compute_dtype
from .plan import operands


class MathCall(Call):
    """An elementwise call: its region operands as copy sides, analysed once."""

    @cached_property
    def opnds(self):
        return operands(self)

    @property
    def dst(self) -> BufferRegion:
        return self.args[0]

    def describe(self) -> str:
        a = ", ".join(str(x) if isinstance(x, BufferRegion) else format_expr(x)
                      for x in self.args)
        dts = "/".join(dict.fromkeys(str(x.dtype) for x in self.args
                                     if isinstance(x, BufferRegion)))
        return f"pg.tile.{self.scope.name}.{self.op}({a}) [{dts}, {self.scope}]"


for _op in ELEMENTWISE:
    tile_op(_op, MathCall)

from . import elementwise  # noqa: E402,F401  (registers the variants)
from .reduce import ReduceCall, ReduceRecord, scratch_elems, structure  # noqa: E402,F401

# `max` / `min` are elementwise with two sources and reductions with axis=: the reductions
# are declared under their own names, which the front end records
REDUCE_OPS = {"sum": "sum", "max": "reduce_max", "min": "reduce_min"}
for _op in REDUCE_OPS.values():
    tile_op(_op, ReduceCall)

__all__ = ["ARITY", "ELEMENTWISE", "REDUCTIONS", "REDUCE_OPS", "MathCall", "MathRecord",
           "ReduceCall",
           "ReduceRecord", "check_cast", "compute_dtype", "scratch_elems", "structure"]
