"""IR -> IR lowering before emission: expand `pg.unroll` loops, find register buffers.

Unrolling substitutes the loop variable by each constant, so indices such as
`acc[k]` become constants and the local buffer can live in registers.  A local
buffer stays in registers only if every access index is a constant after this.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import (BinOp, BufferPtr, BufferRegion, Cast, Const, For, If, Instr, Let, Load, Mem,
                  Not, Select, Store, TileCall, Var, VecOperand, While, walk)


def subst(e, m: dict):
    """Replace Vars (by uid) in an expression."""
    t = type(e)
    if t is Const or e is None:
        return e
    if hasattr(e, "uid") and t.__name__ == "Var":
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
        return Load(e.buffer, tuple(subst(i, m) for i in e.indices), e.dtype, e.cache)
    if t is BufferPtr:
        return e if e.indices is None else BufferPtr(e.buffer, tuple(subst(i, m) for i in e.indices))
    if t is Cast:
        return Cast(subst(e.a, m), e.dtype)
    if t is Select:
        return Select(subst(e.cond, m), subst(e.t, m), subst(e.f, m), e.dtype)
    if t is Not:
        return Not(subst(e.a, m))
    return e


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
            out.append(replace(s, indices=tuple(subst(i, m) for i in s.indices),
                               value=subst(s.value, m)))
        elif t is Let:
            fresh = Var(s.var.name, s.var.dtype)
            out.append(replace(s, var=fresh, value=subst(s.value, m)))
            m[s.var.uid] = fresh
        elif t is For:
            fresh = Var(s.var.name, s.var.dtype)
            out.append(replace(s, var=fresh, start=subst(s.start, m), stop=subst(s.stop, m),
                               step=subst(s.step, m) if not isinstance(s.step, int) else s.step,
                               body=subst_body(s.body, {**m, s.var.uid: fresh})))
        elif t is If:
            out.append(replace(s, cond=subst(s.cond, m), then=subst_body(s.then, m),
                               else_=subst_body(s.else_, m) if s.else_ else s.else_))
        elif t is While:
            out.append(replace(s, cond=subst(s.cond, m), body=subst_body(s.body, m)))
        elif t is Instr:
            out.append(replace(s, operands=tuple(_subst_operand(o, m) for o in s.operands),
                               guard=subst(s.guard, m)))
        elif t is TileCall:
            out.append(replace(s, args=tuple(_subst_arg(a, m) for a in s.args)))
        else:
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
    """Expand every `pg.unroll` loop (constant bounds required) into copies of its body."""
    out = []
    for s in body:
        t = type(s)
        if t is For:
            inner = unroll(s.body)
            if s.kind == "unroll":
                start, stop = s.start, s.stop
                if not (isinstance(start, Const) and isinstance(stop, Const)):
                    from ..errors import PtxgenError

                    raise PtxgenError(f"{s.src}: pg.unroll needs constant bounds")
                for k in range(start.value, stop.value, s.step):
                    out.extend(subst_body(inner, {s.var.uid: Const(k, s.var.dtype)}))
            else:
                out.append(replace(s, body=inner))
        elif t is If:
            out.append(replace(s, then=unroll(s.then), else_=unroll(s.else_) if s.else_ else s.else_))
        elif t is While:
            out.append(replace(s, body=unroll(s.body)))
        else:
            out.append(s)
    return out


def _loads(e, acc):
    t = type(e)
    if t is Load:
        acc.append((e.buffer, e.indices))
        for i in e.indices:
            _loads(i, acc)
    elif t is BinOp:
        _loads(e.a, acc)
        _loads(e.b, acc)
    elif t in (Cast, Not):
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
    if idx is None or not all(type(i) is Const for i in idx):
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


def register_buffers(body) -> set:
    """uids of local buffers whose every access has a constant element offset."""
    accesses = []

    def visit(s):
        t = type(s)
        if t is Store:
            accesses.append((s.buffer, s.indices))
            _loads(s.value, accesses)
            for i in s.indices:
                _loads(i, accesses)
        elif t is Let:
            _loads(s.value, accesses)
        elif t in (If, While):
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
                        _loads(x, accesses) if not isinstance(x, str) else None
                elif not isinstance(o, str):
                    _loads(o, accesses)

    walk(body, visit)
    local, dynamic = set(), set()
    for buf, idx in accesses:
        root = buf.root
        if root.scope != "local":
            continue
        local.add(root.uid)
        if buf.dtype is not root.dtype or not _const_offset(buf, idx):
            dynamic.add(root.uid)
    return local - dynamic
