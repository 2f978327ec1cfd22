"""Checked atomics and memory fences: `pg.ptx.atom.<op>`, `pg.ptx.red.<op>`, `pg.ptx.fence.
{acq_rel, sc}`.

Why: ptxas takes each atomic operation on its own short list of types (no `and` of a float,
no signed `inc`, no scalar f16 `min`, an s64 `add` spelled .u64) and atom, red and fence each
take their own memory-order modifiers; a raw `pg.ptx["atom..."]` that gets one wrong fails in
ptxas, at a line of PTX the user never wrote.  These helpers derive the PTX type from the
buffer's element dtype, refuse at the call what ptxas would refuse (naming what is allowed),
and leave the arch to the table (cluster scope, a bfloat16 add and another CTA's shared
memory need sm_90: GATES).

Every form is spelled in full, atom.<sem>.<scope>.<space>.<op>.<type>, PTX's defaults
(.relaxed, .gpu) written out, so the line says what it orders; .shared (the CTA window) keeps
one kernel assembling on sm_80.  `ptr` is an element as other helpers take it: `t[i]`,
`t.ptr_to([i])`, a tensor (its first element) or a pg.shared_scalar, of global or shared
memory, or an element of a `pg.cluster_view(tile, rank)`: CTA `rank`'s copy of the tile
(distributed shared memory, .shared::cluster at the view's mapa'd address, as its loads and
stores), where scope must reach past the issuing CTA (cluster, gpu or sys).
"""
from __future__ import annotations

from ..dtypes import ALL_SCALARS, dtype as _dtype
from ..errors import TraceError
from ..ir import BufferPtr, Const, Expr, as_expr
from ..target import (ATOM_SEMS, ATOMIC_CLUSTER_SPACE, ATOMIC_SCOPES, ATOMIC_TYPES, FENCE_SEMS,
                      RED_OPS, RED_SEMS, STATE_SPACE)
from ..target.forms import opcode
from .context import fail
from .ptx import element_pointer, emit_instr, ptx
from .scalar import LocalScalar, local_scalar
from .tensor import TensorHandle

# Python names (and_/or_: `and`/`or` are keywords) -> PTX operations
_OPS = {"add": "add", "min": "min", "max": "max", "inc": "inc", "dec": "dec", "and_": "and",
        "or_": "or", "xor": "xor", "exch": "exch", "cas": "cas"}
_BY_WIDTH = ("and", "or", "xor", "exch", "cas")     # typed .b16/.b32/.b64: bits, not values
# the state spaces atomics act in: all but local memory, which no other thread can race on
_SPACE = {k: v for k, v in STATE_SPACE.items() if k != "local"}


def ptx_type(op: str, dt) -> str | None:
    """The PTX type of atomic `op` (PTX's name) on elements of `dt`, or None: the element's
    own spelling for arithmetic (an int64 add is .u64: ptxas has no .s64 add, and the bits are
    the same), its width for and/or/xor (integers) and exch/cas (any 16/32/64-bit value)."""
    dt = _dtype(dt)
    legal = ATOMIC_TYPES[op]
    if dt.lanes != 1:
        return None
    if op in _BY_WIDTH:
        if not (dt.is_int or (dt.is_float and op in ("exch", "cas"))):
            return None
        t = f"b{dt.bits}"
        # a b16 operand must be a 16-bit register: int16/uint16 live in 32-bit ones
        return t if t in legal and (t != "b16" or dt.ptx.reg == "b16") else None
    t = dt.ptx.spell
    if t == "s64" and t not in legal and "u64" in legal:
        t = "u64"
    return t if t in legal else None


def allowed_dtypes(op: str) -> list:
    """The element dtypes `op` (PTX's name) takes, for messages and tests."""
    return [n for n in ALL_SCALARS if ptx_type(op, n) is not None]


def _choice(what, arg, v, allowed, why=""):
    if not isinstance(v, str) or v not in allowed:
        raise fail(f"{what}: {arg}={v!r} is not allowed; {arg} must be one of "
                   f"{', '.join(repr(a) for a in allowed)}{why}")


def _target(ptr, what):
    """(element pointer, PTX state space) of `ptr`, checked."""
    if isinstance(ptr, LocalScalar):      # pg.shared_scalar: its one element
        ptr = BufferPtr(ptr.buffer, (Const(0),))
    p = element_pointer(ptr)
    if p is None:
        got = f"the {ptr.dtype} value {ptr}" if isinstance(ptr, Expr) else repr(ptr)
        raise fail(f"{what}: ptr must be an element of a global or shared tensor (t[i], "
                   f"t.ptr_to([i]) or a tensor, meaning its first element), got {got}")
    b = p.buffer
    scope = b.root.scope
    space = _SPACE.get(scope)
    if space is None:
        where = {"local": "local memory (per thread: no other thread can race on it)",
                 "tmem": "tensor memory"}.get(scope, f"{scope} memory")
        raise fail(f"{what}: ptr '{b.name}' is in {where}; atomics act on global or shared "
                   f"memory only")
    return p, space


def _type_of(what, py, op, dt, name):
    t = ptx_type(op, dt)
    if t is None:
        raise fail(f"{what}: ptr '{name}' holds {dt} elements, which {py} does not take; "
                   f"{py} takes {', '.join(allowed_dtypes(op))} elements")
    return t


def _value(v, dt, what, arg, name):
    """`v` as an expression of the element dtype, by a store's rules: a literal takes the
    element's type, an expression must already have it."""
    if isinstance(v, LocalScalar):
        v = v.__ptxgen_expr__()
    if isinstance(v, (TensorHandle, BufferPtr)):
        raise fail(f"{what}: {arg} must be a value of {dt}, not a tensor or pointer ({v!r})")
    if not isinstance(v, Expr):
        if isinstance(v, float) and dt.is_int:
            raise fail(f"{what}: {arg}={v!r} is a float, but '{name}' holds {dt} elements; "
                       f"use an integer or pg.cast({arg}, '{dt}')")
        try:
            v = as_expr(v, dt)
        except TraceError as e:
            raise fail(f"{what}: {arg}: {e}") from None
    if v.dtype is not dt:
        raise fail(f"{what}: {arg} is {v.dtype}, but '{name}' holds {dt} elements; use "
                   f"pg.cast({arg}, '{dt}')")
    return v


def _atomic(ins, py, ptr, values, sem, scope):
    what = f"pg.ptx.{ins}.{py}"
    op = _OPS[py]
    if ins == "red":
        _choice(what, "sem", sem, RED_SEMS,
                f" (a red returns no value to acquire with: use pg.ptx.atom.{py} for "
                f"'acquire' or 'acq_rel')")
    else:
        _choice(what, "sem", sem, ATOM_SEMS)
    _choice(what, "scope", scope, ATOMIC_SCOPES)
    p, space = _target(ptr, what)
    b = p.buffer
    if space == ATOMIC_CLUSTER_SPACE and scope == "cta":
        # ptxas takes .cta here; the memory model makes it no atomic for the other CTAs
        raise fail(f"{what}: scope='cta' on '{b.name}', a cluster_view (another CTA's "
                   f"shared memory): two atomics are indivisible against each other only when "
                   f"each one's scope includes the other's thread (PTX ISA, memory consistency "
                   f"model: morally strong operations), and .cta leaves out the CTA that owns "
                   f"the memory and the cluster's other CTAs; use scope='cluster' (or 'gpu', "
                   f"'sys')")
    t = _type_of(what, py, op, b.dtype, b.name)
    args = ("value",) if len(values) == 1 else ("expected", "desired")
    vals = [_value(v, b.dtype, what, a, b.name) for v, a in zip(values, args)]
    code = opcode(ins, sem, scope, space, op, t)
    if ins == "red":
        emit_instr(code, [p, *vals], form="red")
        return None
    old = local_scalar(b.dtype, name=f"{py.rstrip('_')}_old")
    emit_instr(code, [old, p, *vals], form="atom", outs=1)
    return old


def _helper(ins, py):
    """pg.ptx.<ins>.<py>(ptr, value, *, sem, scope) for ins "atom" (returns the old value) or
    "red" (does not)."""
    def helper(ptr, value, *, sem="relaxed", scope="gpu"):
        return _atomic(ins, py, ptr, (value,), sem, scope)
    op = _OPS[py]
    helper.__name__ = helper.__qualname__ = py
    helper.__doc__ = (
        f"atom.{op}: one indivisible read-modify-write of the element `ptr`; returns its old "
        f"value (a scalar of the element's dtype).  sem: {', '.join(ATOM_SEMS)}"
        if ins == "atom" else
        f"red.{op}: atom.{op} without the old value (no register waits for it).  sem: "
        f"{', '.join(RED_SEMS)}") + f"; scope: {', '.join(ATOMIC_SCOPES)}."
    return helper


def cas(ptr, expected, desired, *, sem="relaxed", scope="gpu"):
    """atom.cas: store `desired` if the element equals `expected` (bit for bit); returns the
    old value, so `old == expected` says whether this thread's swap happened."""
    return _atomic("atom", "cas", ptr, (expected, desired), sem, scope)


_FENCE_WHY = {"acq_rel": "a release and an acquire at once: a fence before the atom that "
                         "publishes data, or after the one that finds it published",
              "sc": "and all sc fences in one total order: what Dekker-style flags need"}


def _fence_helper(sem):
    def helper(scope="gpu"):
        _choice(f"pg.ptx.fence.{sem}", "scope", scope, ATOMIC_SCOPES)
        return emit_instr(opcode("fence", sem, scope), [], form="fence")
    helper.__name__ = helper.__qualname__ = sem
    helper.__doc__ = (f"fence.{sem}.<scope>: orders this thread's memory accesses before it "
                      f"against those after it, for the threads of `scope` ({_FENCE_WHY[sem]}).")
    return helper


HELPERS = {**{f"atom.{py}": _helper("atom", py) for py in _OPS if py != "cas"},
           "atom.cas": cas,
           **{f"red.{py}": _helper("red", py) for py, op in _OPS.items() if op in RED_OPS},
           **{f"fence.{sem}": _fence_helper(sem) for sem in FENCE_SEMS}}

for _name, _fn in HELPERS.items():
    ptx.register(_name, _fn)
