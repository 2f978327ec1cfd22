"""Dispatch registry: variants of a tile op, each a small registered unit.

A variant has a name, a priority and predicates; each predicate returns
(ok, reason).  Dispatch tries variants by priority (or the one forced with
`dispatch="name"`); when none applies the error lists every variant's reason, and
`explain` returns the same table for a call that succeeds, marking the chosen one.

Every tile op (copy, the tcgen05 ops, and those to come) is declared once with `tile_op`:
the Call class its variants see and the gate the call needs, `requires(call)` (it sees the
record, so one op can gate each of its instruction families on its own arch).  A variant
registered with `record=Cls` is a candidate only for calls whose record is a Cls: the front
end picks the family (gemm_async: wgmma for a register accumulator, tcgen05 for TMEM),
dispatch picks the variant within it.  `lower_tile` is the one build-time entry: a traced
TileCall in, the statements of its chosen variant out.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

from ..errors import DispatchError, PtxgenError
from .call import Call


@dataclass
class Variant:
    op: str
    name: str
    priority: int
    predicates: list = field(default_factory=list)   # callables(call) -> (ok, reason)
    emit: Callable | None = None                      # callable(call) -> list[Stmt]
    forced_only: bool = False                         # chosen only with dispatch="name"
    handles_partial: bool = False                     # may run on the active part of a scope
    doc: str = ""
    record: type | None = None                        # only for calls with this record type

    def applies(self, call) -> bool:
        return self.record is None or isinstance(call.record, self.record)

    def check(self, call) -> tuple[bool, str]:
        ok, why = call.all_active
        if not ok:
            if not self.handles_partial:
                return False, why
            if call.narrowed is None:
                return False, (f"{why}; which threads are active is not a build-time "
                               f"progression the same in every instance, so the call cannot "
                               f"run on them alone")
        last = ""
        for pred in self.predicates:
            ok, why = pred(call)
            if not ok:
                return False, why
            last = why or last
        return True, last or "accepted"


_REGISTRY: dict[str, list[Variant]] = {}


def register(op: str, name: str, priority: int, *, when=(), forced_only=False,
             handles_partial=False, record=None):
    """Decorator for the emit function of a variant (`record`: see the module docstring)."""
    def deco(fn):
        v = Variant(op, name, priority, list(when), fn, forced_only, handles_partial,
                    (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "", record)
        variants = [x for x in _REGISTRY.get(op, []) if x.name != name]
        variants.append(v)
        variants.sort(key=lambda x: -x.priority)
        _REGISTRY[op] = variants
        return fn
    return deco


def variants(op: str, call=None) -> list[Variant]:
    """The variants of `op` by priority; with `call`, only those that apply to its record."""
    return [v for v in _REGISTRY.get(op, []) if call is None or v.applies(call)]


@dataclass(frozen=True)
class TileOp:
    """A tile op: the Call class its variants see, and `requires(call)`, a check the call
    needs before any variant is asked (an ArchError that names the target and the fix)."""
    name: str
    call: type = Call
    requires: Callable | None = None
    explain_arch: str = "sm_90a"     # the target `pg.tile.explain` judges for by default


_OPS: dict[str, TileOp] = {}


def _call_gate(requires):
    """`requires(call)`; a gate written as `requires(target)` (the first parameter named
    target) still works, called with the call's target."""
    if requires is None:
        return None
    try:
        first = next(iter(inspect.signature(requires).parameters), None)
    except (TypeError, ValueError):
        first = None
    return (lambda call: requires(call.target)) if first == "target" else requires


def tile_op(name: str, call: type = Call, requires=None, explain_arch="sm_90a") -> TileOp:
    _OPS[name] = op = TileOp(name, call, _call_gate(requires), explain_arch)
    return op


def tile_ops() -> dict:
    return dict(_OPS)


def make_call(stmt, target, an, block, where="", gate=True) -> Call:
    """The Call of a traced TileCall, after the op's own gate (`gate=False`: explain, which
    shows the variants' verdicts on any target instead)."""
    spec = _OPS.get(stmt.op)
    if spec is None:
        raise PtxgenError(f"unknown tile op {stmt.op!r}; tile ops are {', '.join(_OPS)}")
    call = spec.call.of(stmt, target, an, block, where)
    if gate and spec.requires is not None:
        spec.requires(call)
    return call


def lower_tile(stmt, target, an, block) -> list:
    """The statements of the variant that dispatch picks for `stmt` under the facts in `an`;
    each inherits the call's source line."""
    call = make_call(stmt, target, an, block)
    out = dispatch(stmt.op, call, stmt.options.get("dispatch")).emit(call)
    for s in out:
        if not s.src:
            s.src = stmt.src
    return out


@dataclass
class Row:
    name: str
    priority: int
    ok: bool
    reason: str
    chosen: bool = False

    def __str__(self):
        mark = "->" if self.chosen else "  "
        status = "ok  " if self.ok else "no  "
        return f"{mark} {self.name:<11} {self.priority:>3}  {status}{self.reason}"


class Explanation(list):
    """Rows of (variant, priority, accepted?, reason); str() is a readable table."""

    def __init__(self, op, call, rows):
        super().__init__(rows)
        self.op = op
        self.call = call

    @property
    def chosen(self):
        for r in self:
            if r.chosen:
                return r.name
        return None

    def __str__(self):
        head = f"{self.op} {self.call.describe()}\n   variant     pri  result"
        return head + "\n" + "\n".join(str(r) for r in self)


def evaluate(op: str, call, forced: str | None = None) -> Explanation:
    rows = []
    chosen = None
    names = [v.name for v in variants(op, call)]
    if forced is not None and forced not in names:
        raise DispatchError(f"{call.where}unknown {op} variant {forced!r}; variants are "
                            f"{', '.join(names)}")
    for v in variants(op, call):
        if forced is not None and v.name != forced:
            rows.append(Row(v.name, v.priority, False, f"not requested (dispatch={forced!r})"))
            continue
        if v.forced_only and forced is None:
            rows.append(Row(v.name, v.priority, False, "only when forced with dispatch="
                            f"{v.name!r}"))
            continue
        ok, why = v.check(call)
        row = Row(v.name, v.priority, ok, why)
        if ok and chosen is None:
            row.chosen = True
            chosen = v
        rows.append(row)
    return Explanation(op, call, rows)


def dispatch(op: str, call, forced: str | None = None) -> Variant:
    """The first accepting variant by priority; the full table is built only on failure."""
    for v in variants(op, call):
        if forced is not None and v.name != forced or v.forced_only and forced is None:
            continue
        if v.check(call)[0]:
            return v
    table = evaluate(op, call, forced)
    name = table.chosen
    if name is None:
        raise DispatchError(f"{call.where}no {op} variant accepts {call.describe()}:\n"
                            + "\n".join(f"  {r.name}: {r.reason}" for r in table))
    for v in variants(op, call):
        if v.name == name:
            return v
    raise AssertionError(name)
