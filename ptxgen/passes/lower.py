"""IR -> IR lowering before emission: expand `pg.unroll` loops, find register buffers.

Unrolling substitutes the loop variable by each constant, so indices such as
`acc[k]` become constants and the local buffer can live in registers.  A local
buffer stays in registers only if every access index is a constant after this.
"""
from __future__ import annotations

from operator import is_

from ..ir import (Alloc, BinOp, BufferPtr, BufferRegion, Cast, Const, For, If, Instr, Let, Load,
                  Mem, Not, Select, SpecialReg, Store, TileCall, Var, VecOperand, While)


def subst(e, m: dict):
    """Replace Vars (by uid) in an expression.  An unchanged subtree is returned as is."""
    t = type(e)
    if t is Const or e is None:
        return e
    if t is Var:
        return m.get(e.uid, e)
    if t is BinOp:
        a, b = subst(e.a, m), subst(e.b, m)
        if a is e.a and b is e.b:
            return e
        if type(a) is Const and type(b) is Const and e.dtype.is_int and a.dtype.is_int:
            v = _FOLD.get(e.op)
            if v is not None and not (e.op in ("floordiv", "floormod") and b.value == 0):
                return Const(v(a.value, b.value), e.dtype)
        return BinOp(e.op, a, b, e.dtype)
    if t is Load:
        idx = _subst_all(e.indices, m)
        return e if idx is e.indices else Load(e.buffer, idx, e.dtype, e.cache)
    if t is BufferPtr:
        if e.indices is None:
            return e
        idx = _subst_all(e.indices, m)
        return e if idx is e.indices else BufferPtr(e.buffer, idx)
    if t is Cast:
        a = subst(e.a, m)
        return e if a is e.a else Cast(a, e.dtype)
    if t is Select:
        c, x, y = subst(e.cond, m), subst(e.t, m), subst(e.f, m)
        return e if c is e.cond and x is e.t and y is e.f else Select(c, x, y, e.dtype)
    if t is Not:
        a = subst(e.a, m)
        return e if a is e.a else Not(a)
    return e


def _subst_all(xs: tuple, m: dict) -> tuple:
    """subst over a tuple of expressions; the same tuple when nothing changed."""
    out = tuple([subst(x, m) for x in xs])
    return xs if all(map(is_, xs, out)) else out


_FOLD = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "floordiv": lambda x, y: x // y, "floormod": lambda x, y: x % y,
         "shl": lambda x, y: x << y, "shr": lambda x, y: x >> y, "and": lambda x, y: x & y,
         "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y, "min": min, "max": max}


def _subst_operand(o, m):
    if isinstance(o, Mem):
        return Mem(subst(o.ptr, m), o.offset)
    if isinstance(o, VecOperand):
        return VecOperand(tuple(_subst_operand(x, m) for x in o.items))
    if isinstance(o, str):
        return o
    return subst(o, m)


def subst_body(body, m: dict):
    """Substitute in a statement list.  Variables bound inside (lets, loop variables) get
    fresh copies: each unrolled copy binds its own, so facts learned in one copy (bounds
    that depend on the unrolled value) can never be reused in another."""
    out = []
    m = dict(m)
    for s in body:
        t = type(s)
        if t is Store:
            s = Store(s.buffer, tuple([subst(i, m) for i in s.indices]), subst(s.value, m),
                      s.cache, src=s.src)
        elif t is Let:
            fresh = Var(s.var.name, s.var.dtype)
            value = subst(s.value, m)
            m[s.var.uid] = fresh
            s = Let(fresh, value, s.bounds, src=s.src)
        elif t is For:
            fresh = Var(s.var.name, s.var.dtype)
            s = For(fresh, subst(s.start, m), subst(s.stop, m),
                    s.step if isinstance(s.step, int) else subst(s.step, m), s.kind,
                    subst_body(s.body, {**m, s.var.uid: fresh}), src=s.src)
        elif t is If:
            s = If(subst(s.cond, m), subst_body(s.then, m),
                   subst_body(s.else_, m) if s.else_ else s.else_, src=s.src)
        elif t is While:
            s = While(subst(s.cond, m), subst_body(s.body, m), src=s.src)
        elif t is Instr:
            s = Instr(s.opcode, tuple([_subst_operand(o, m) for o in s.operands]), s.form,
                      s.attrs, s.outs, subst(s.guard, m), src=s.src)
        elif t is TileCall:
            s = TileCall(s.op, tuple([_subst_arg(a, m) for a in s.args]), s.scope, s.options,
                         src=s.src)
        out.append(s)
    return out


def _subst_arg(a, m):
    """Tile-call operands: regions (their starts may use the unrolled variable) and exprs."""
    if isinstance(a, BufferRegion):
        return BufferRegion(a.buffer, tuple((subst(st, m) if not isinstance(st, int) else st, e)
                                            for st, e in a.region))
    if hasattr(a, "subst"):
        return a.subst(lambda x: subst(x, m))
    return subst(a, m) if hasattr(a, "dtype") else a


def unroll(body):
    """Expand every `pg.unroll` loop (constant bounds required) into copies of its body.
    Returns a new list; statements with no such loop inside are kept, not rebuilt."""
    out = _unroll(body)
    return list(body) if out is None else out


_NESTED = frozenset((For, If, While))


def _unroll(body):
    """`unroll` of a statement list, or None when nothing in it changes."""
    for s in body:
        if type(s) in _NESTED:
            break
    else:
        return None   # straight-line code, the common case
    out, changed = [], False
    for s in body:
        t = type(s)
        new = None
        if t is For:
            inner = _unroll(s.body)
            if s.kind == "unroll":
                start, stop = s.start, s.stop
                if not (isinstance(start, Const) and isinstance(stop, Const)):
                    from ..errors import PtxgenError

                    raise PtxgenError(f"{s.src}: pg.unroll needs constant bounds")
                if inner is None:
                    inner = s.body
                new = []
                for k in range(start.value, stop.value, s.step):
                    new.extend(subst_body(inner, {s.var.uid: Const(k, s.var.dtype)}))
            elif inner is not None:
                new = [For(s.var, s.start, s.stop, s.step, s.kind, inner, src=s.src)]
        elif t is If:
            then = _unroll(s.then)
            else_ = _unroll(s.else_) if s.else_ else None
            if then is not None or else_ is not None:
                new = [If(s.cond, s.then if then is None else then,
                          s.else_ if else_ is None else else_, src=s.src)]
        elif t is While:
            inner = _unroll(s.body)
            if inner is not None:
                new = [While(s.cond, inner, src=s.src)]
        if new is None:
            out.append(s)
        else:
            out.extend(new)
            changed = True
    return out if changed else None


def register_buffers(body) -> set:
    """uids of the local buffers allocated in `body` whose every access there has a constant
    element offset.  Storage allocated outside `body` is already placed when it runs, so only
    its own allocations are decided here (and a body without one needs no expression walk)."""
    stmts, allocated = [], set()
    _scan(body, stmts, allocated)
    if not allocated:
        return set()
    accesses = []
    for s in stmts:
        t = type(s)
        if t is Store:
            accesses.append((s.buffer, s.indices))
            _loads(s.value, accesses)
            for i in s.indices:
                _loads(i, accesses)
        elif t is Let:
            _loads(s.value, accesses)
        elif t is If or t is While:
            _loads(s.cond, accesses)
        elif t is For:
            _loads(s.start, accesses)
            _loads(s.stop, accesses)
        elif t is TileCall:   # a local region operand: registers if its start is constant
            for a in s.args:
                if isinstance(a, BufferRegion):
                    accesses.append((a.buffer, tuple(Const(x) if isinstance(x, int) else x
                                                     for x in a.starts)))
        elif t is Instr:
            for o in s.operands:
                if isinstance(o, Mem):
                    _loads(o.ptr, accesses)
                elif isinstance(o, VecOperand):
                    for x in o.items:
                        if not isinstance(x, str):
                            _loads(x, accesses)
                elif not isinstance(o, str):
                    _loads(o, accesses)
    used, dynamic = set(), set()
    for buf, idx in accesses:
        root = buf.root
        if root.uid not in allocated:
            continue
        used.add(root.uid)
        if buf.dtype is not root.dtype or not _const_offset(buf, idx):
            dynamic.add(root.uid)
    return used - dynamic


def _scan(body, stmts: list, allocated: set):
    """Collect body's statements (pre-order) and the uids of the local buffers it allocates."""
    for s in body:
        t = type(s)
        if t is Alloc:
            if s.buffer.scope == "local":
                allocated.add(s.buffer.uid)
            continue
        stmts.append(s)
        if t is For or t is While:
            _scan(s.body, stmts, allocated)
        elif t is If:
            _scan(s.then, stmts, allocated)
            if s.else_:
                _scan(s.else_, stmts, allocated)


_LEAVES = frozenset((Const, Var, SpecialReg))


def _loads(e, acc):
    """Append (buffer, indices) of every load in e; indices None where an address is taken.
    Leaf operands (most of them) are skipped before the call."""
    t = type(e)
    if t is Load:
        acc.append((e.buffer, e.indices))
        for i in e.indices:
            if type(i) not in _LEAVES:
                _loads(i, acc)
    elif t is BinOp:
        if type(e.a) not in _LEAVES:
            _loads(e.a, acc)
        if type(e.b) not in _LEAVES:
            _loads(e.b, acc)
    elif t is Cast or t is Not:
        _loads(e.a, acc)
    elif t is Select:
        _loads(e.cond, acc)
        _loads(e.t, acc)
        _loads(e.f, acc)
    elif t is BufferPtr and e.indices is not None:
        acc.append((e.buffer, None))   # address taken: must live in memory
        for i in e.indices:
            _loads(i, acc)


def _const_offset(buf, idx) -> bool:
    """True when buf[idx] is a constant element offset from its root (no simplifier needed:
    unrolling already folded the indices)."""
    if idx is None:
        return False
    for i in idx:
        if type(i) is not Const:
            return False
    if not isinstance(buf.elem_offset, int):
        return False
    if buf.layout is not None:
        m = buf.layout.apply(*[i.value for i in idx], shape=buf.shape)["m"]
        if not isinstance(m, int):
            return False
    parent = buf.data
    if parent is None:
        return True
    return parent.indices is None and parent.buffer.dtype is buf.dtype and \
        _const_offset(parent.buffer, tuple(Const(0) for _ in parent.buffer.shape)) \
        or parent.indices is not None and _const_offset(parent.buffer, parent.indices)
