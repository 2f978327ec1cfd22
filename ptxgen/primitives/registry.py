"""Dispatch registry: each tile op declared once, with the variants dispatch chooses from.

A `TileOp` is the one declaration of an op: the Call class its variants see, the gate the
call needs (`requires(call)`: it sees the record, so one op can gate each instruction family
on its own arch), its variants, and its trace-time front end.  Three calls fill it, in any
import order (each creates the declaration the first time it names the op):

- `tile_op(name, call=Cls, requires=gate)` (primitives/): the record class and the gate;
- `@register(op, name, priority, when=[pred, ...])` (primitives/): a variant;
- `builder.tile_ops.register(name, fn)` (builder/): the front end `pg.tile.<scope>.<name>`
  (primitives never import builder, so builder attaches it: `TileOp.front`).

A variant has a name, a priority and predicates; each predicate returns (ok, reason) and
is a rule with a name (`predicate(name, fn)`, or a plain function: its __name__), which
explain's rows carry.  A predicate that raises rejects its variant with a row that names the
rule and the error; the other variants are still tried.  Dispatch tries variants by priority
(or the one forced with `dispatch="name"`); when none applies the error lists every
variant's reason, and `explain` returns the same table for a call that succeeds, marking the
chosen one.  A variant registered with `record=Cls` is a candidate only for calls whose
record is a Cls: the front end picks the family (gemm_async: wgmma for a register
accumulator, tcgen05 for TMEM), dispatch picks the variant within it.  `lower_tile` is the
one build-time entry: a traced TileCall in, the statements of its chosen variant out.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

from ..errors import DispatchError, PtxgenError
from .call import Call


class predicate:
    """A named rule: `predicate("aligned_16B", fn)`; `fn(call)` returns (ok, reason).  The
    name is what explain's rows and a raising rule's reason show."""
    __slots__ = ("name", "fn")

    def __init__(self, name: str, fn: Callable):
        self.name = name
        self.fn = fn

    def __call__(self, call):
        return self.fn(call)

    def __repr__(self):
        return f"predicate({self.name!r})"


def rule_name(pred) -> str:
    """A predicate's name: its own, or a plain function's __name__ without the underscore."""
    name = getattr(pred, "name", None)
    if isinstance(name, str):
        return name
    return getattr(pred, "__name__", type(pred).__name__).lstrip("_") or "predicate"


ACTIVE_RULE = "all_active"     # the rule of the scope's threads being active (Variant.check)


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

    def judge(self, call) -> tuple[bool, str, str]:
        """(accepted?, reason, rule): the rule that rejected, or the last that gave a reason.
        A predicate that raises rejects, its reason naming the error."""
        ok, why = call.all_active
        if not ok:
            if not self.handles_partial:
                return False, why, ACTIVE_RULE
            if call.narrowed is None:
                return False, (f"{why}; which threads are active is not a build-time "
                               f"progression the same in every instance, so the call cannot "
                               f"run on them alone"), ACTIVE_RULE
        last, last_pred = "", None   # the last reason given, named once at the end
        for pred in self.predicates:
            try:
                ok, why = pred(call)
            except Exception as e:   # noqa: BLE001 (a broken rule must not stop dispatch)
                name = rule_name(pred)
                return False, f"{name} raised {type(e).__name__}: {e}", name
            if not ok:
                return False, why, rule_name(pred)
            if why:
                last, last_pred = why, pred
        return True, last or "accepted", "" if last_pred is None else rule_name(last_pred)

    def check(self, call) -> tuple[bool, str]:
        return self.judge(call)[:2]


@dataclass(eq=False)
class TileOp:
    """The one declaration of a tile op: the Call class its variants see; `requires(call)`,
    a check the call needs before any variant is asked (an ArchError that names the target
    and the fix); the target `pg.tile.explain` judges for by default; its variants by
    priority; its front end (attached by builder/tile_ops).  `declared`: tile_op named it
    (a name with only a front end, such as mma_accumulator, records no call of its own)."""
    name: str
    call: type = Call
    requires: Callable | None = None
    explain_arch: str = "sm_90a"
    variants: list = field(default_factory=list)
    front: Callable | None = None
    declared: bool = False


_OPS: dict[str, TileOp] = {}


def declaration(name: str) -> TileOp:
    """The declaration of `name`, created empty the first time any of the three calls names
    it (a variant module may be imported before its op's tile_op)."""
    op = _OPS.get(name)
    if op is None:
        op = _OPS[name] = TileOp(name)
    return op


def register(op: str, name: str, priority: int, *, when=(), forced_only=False,
             handles_partial=False, record=None):
    """Decorator for the emit function of a variant of `op` (`when`: its predicates, plain
    functions or `predicate(name, fn)`; `record`: see the module docstring).  A variant of
    the same name replaces the earlier one."""
    def deco(fn):
        v = Variant(op, name, priority, list(when), fn, forced_only, handles_partial,
                    (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else "", record)
        d = declaration(op)
        d.variants = sorted([x for x in d.variants if x.name != name] + [v],
                            key=lambda x: -x.priority)
        return fn
    return deco


def variants(op: str, call=None) -> list[Variant]:
    """The variants of `op` by priority; with `call`, only those that apply to its record."""
    d = _OPS.get(op)
    if d is None:
        return []
    return [v for v in d.variants if call is None or v.applies(call)]


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
    """Declare the op `name` (its variants and front end may be registered before or after)."""
    op = declaration(name)
    op.call, op.requires, op.explain_arch = call, _call_gate(requires), explain_arch
    op.declared = True
    return op


def tile_ops() -> dict:
    """The declared ops by name."""
    return {n: op for n, op in _OPS.items() if op.declared}


def front_end(name: str):
    """The front end registered for `name` (None: no `pg.tile.<scope>.<name>`)."""
    op = _OPS.get(name)
    return None if op is None else op.front


def front_ends() -> list:
    """The names that have a front end."""
    return [n for n, op in _OPS.items() if op.front is not None]


def make_call(stmt, target, an, block, where="", gate=True) -> Call:
    """The Call of a traced TileCall, after the op's own gate (`gate=False`: explain, which
    shows the variants' verdicts on any target instead)."""
    spec = _OPS.get(stmt.op)
    if spec is None or not spec.declared:
        raise PtxgenError(f"unknown tile op {stmt.op!r}; tile ops are "
                          f"{', '.join(tile_ops())}")
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
    """One variant's verdict; `rule` names the predicate that decided it (the one that
    rejected or raised, else the last that gave the reason; "dispatch" for a variant the
    dispatch= choice left out, "" when no rule spoke)."""
    name: str
    priority: int
    ok: bool
    reason: str
    chosen: bool = False
    rule: str = ""

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
            rows.append(Row(v.name, v.priority, False, f"not requested (dispatch={forced!r})",
                            rule="dispatch"))
            continue
        if v.forced_only and forced is None:
            rows.append(Row(v.name, v.priority, False, "only when forced with dispatch="
                            f"{v.name!r}", rule="dispatch"))
            continue
        ok, why, rule = v.judge(call)
        row = Row(v.name, v.priority, ok, why, rule=rule)
        if ok and chosen is None:
            row.chosen = True
            chosen = v
        rows.append(row)
    return Explanation(op, call, rows)


def dispatch(op: str, call, forced: str | None = None) -> Variant:
    """The first accepting variant by priority; the full table is built only on failure."""
    d = _OPS.get(op)
    for v in d.variants if d is not None else ():
        if forced is not None and v.name != forced or v.forced_only and forced is None \
                or not v.applies(call):
            continue
        if v.judge(call)[0]:
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
