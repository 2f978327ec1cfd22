"""IR -> IR lowering before emission: expand `pg.unroll` loops, find register buffers.

Unrolling substitutes the loop variable by each constant, so indices such as
`acc[k]` become constants and the local buffer can live in registers.  A local
buffer stays in registers only if every access index is a constant after this.

Both run on every build (and on every tile call's statements), so `lower` does them in one
walk over the statements, written for the interpreter: leaf operands (Var, Const) are
handled in line rather than by a recursive call, which costs as much as several bytecodes.
"""
from __future__ import annotations

import operator

from ..errors import PtxgenError
from ..expr import DIV_OPS
from ..ir import (Alloc, BinOp, BufferPtr, BufferRegion, Cast, Const, For, If, Instr,
                  Let, Load, Mem, Not, Select, SpecialReg, Store, TileCall, Var, VecOperand,
                  While)

_FOLD = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
         "floordiv": operator.floordiv, "floormod": operator.mod, "and": operator.and_,
         "or": operator.or_, "xor": operator.xor, "min": min, "max": max}
_SHIFTS = {"shl": operator.lshift, "shr": operator.rshift}   # fold for counts in 0..bits-1


def subst(e, m: dict):
    """Replace Vars (by uid) in an expression.  An unchanged subtree is returned as is;
    integer operations whose operands both become constants are folded."""
    t = type(e)
    if t is Var:
        return m.get(e.uid, e)
    if t is BinOp:
        a, b = e.a, e.b
        ta, tb = type(a), type(b)
        na = m.get(a.uid, a) if ta is Var else a if ta is Const else subst(a, m)
        nb = m.get(b.uid, b) if tb is Var else b if tb is Const else subst(b, m)
        if na is a and nb is b:
            return e
        if type(na) is Const and type(nb) is Const and e.dtype.is_int and na.dtype.is_int:
            fold = _FOLD.get(e.op)
            # x // c, x % c and shifts fold only with a defined value (not x // 0, x << -1):
            # the simplifier reports those at the statement
            if fold is not None:
                if nb.value or e.op not in DIV_OPS:
                    return Const(fold(na.value, nb.value), e.dtype)
            elif e.op in _SHIFTS and 0 <= nb.value < e.dtype.bits:
                return Const(_SHIFTS[e.op](na.value, nb.value), e.dtype)
        return BinOp(e.op, na, nb, e.dtype)
    if t is Load:
        idx = _subst_all(e.indices, m)
        return e if idx is e.indices else Load(e.buffer, idx, e.dtype, e.cache)
    if t is Cast:
        a = subst(e.a, m)
        return e if a is e.a else Cast(a, e.dtype)
    if t is BufferPtr:
        if e.indices is None:
            return e
        idx = _subst_all(e.indices, m)
        return e if idx is e.indices else BufferPtr(e.buffer, idx)
    if t is Select:
        c, x, y = subst(e.cond, m), subst(e.t, m), subst(e.f, m)
        return e if c is e.cond and x is e.t and y is e.f else Select(c, x, y, e.dtype)
    if t is Not:
        a = subst(e.a, m)
        return e if a is e.a else Not(a)
    return e   # Const, SpecialReg, None


def _subst_all(xs: tuple, m: dict) -> tuple:
    """subst over a tuple of expressions; the same tuple when nothing changed."""
    if len(xs) == 1:   # the usual index
        x = xs[0]
        t = type(x)
        y = m.get(x.uid, x) if t is Var else x if t is Const else subst(x, m)
        return xs if y is x else (y,)
    out, changed = [], False
    for x in xs:
        t = type(x)
        y = m.get(x.uid, x) if t is Var else x if t is Const else subst(x, m)
        out.append(y)
        if y is not x:
            changed = True
    return tuple(out) if changed else xs


def _subst_operand(o, m):
    if isinstance(o, Mem):
        return Mem(subst(o.ptr, m), o.offset)
    if isinstance(o, VecOperand):
        return VecOperand(tuple([_subst_operand(x, m) for x in o.items]))
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
            s = Store(s.buffer, _subst_all(s.indices, m), subst(s.value, m), s.cache, src=s.src)
        elif t is Let:
            fresh = Var(s.var.name, s.var.dtype)
            value = subst(s.value, m)
            m[s.var.uid] = fresh
            s = Let(fresh, value, s.bounds, src=s.src, broadcast=s.broadcast)
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
                         s.record, s.active, src=s.src)
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


def lower(body):
    """(body with every `pg.unroll` loop expanded into copies of its body, uids of the local
    buffers allocated in it whose every access has a constant element offset, whether it
    holds a tile call, whether it holds anything the protocol check follows).  A build needs
    all four, and one walk over the statements can expand the loops and collect what the
    register decision reads.  Statements with no unrolled loop inside are kept, not rebuilt;
    storage allocated outside `body` is already placed, so only its own allocations are
    decided."""
    allocated, accesses, exprs, tiles, syncs = set(), [], [], [], []
    out = _walk(body, allocated, accesses, exprs, tiles, syncs)
    has_sync = bool(syncs) or any(t.op in SYNC_TILE_OPS for t in tiles)
    return (list(body) if out is None else out), _registers(allocated, accesses, exprs), \
        bool(tiles), has_sync


# what the protocol check follows (passes/protocol.py): these tile ops, and instructions
# whose opcode starts with one of these
SYNC_TILE_OPS = frozenset(("copy_async", "async_commit", "async_wait", "gemm_async",
                           "gemm_wait"))
SYNC_OPCODES = ("mbarrier.", "mapa", "barrier.cluster")


_LEAVES = frozenset((Const, Var, SpecialReg))
_NESTED = frozenset((For, If, While))
_NO_LOADS = frozenset((Const, Var, SpecialReg, str))   # str: an instruction's label operand


def _registers(allocated: set, accesses: list, exprs: list) -> set:
    """The register decision over what _walk collected (a body without a local allocation
    needs no expression walk)."""
    if not allocated:
        return set()
    for e in exprs:
        if type(e) is Mem:   # an instruction's memory operand
            e = e.ptr
        if type(e) not in _NO_LOADS:
            _loads(e, accesses)
    used, dynamic = set(), set()
    for buf, idx in accesses:
        root = buf.root
        uid = root.uid
        if uid not in allocated or uid in dynamic:
            continue
        used.add(uid)
        if buf.dtype is not root.dtype or not _const_offset(buf, idx):
            dynamic.add(uid)
    return used - dynamic


def _walk(body, allocated: set, accesses: list, exprs: list, tiles: list, syncs: list):
    """One pre-order pass over body: expands its `pg.unroll` loops and collects, from the
    statements of the result, the uids of the local buffers they allocate, the accesses they
    make directly (buffer, indices; indices None where an address is taken) and the
    expressions still to search for loads, its tile calls and its instructions of
    SYNC_OPCODES.  Returns the new statement list, or None when nothing changed (the list is
    copied on the first change)."""
    out = None
    for s in body:
        t = type(s)
        if t is Store:
            accesses.append((s.buffer, s.indices))
            exprs.append(s.value)
            exprs += s.indices
        elif t is Let:
            exprs.append(s.value)
        elif t is For:
            if s.kind == "unroll":
                copies = _expand(s)
                # nothing left to expand: a scan
                _walk(copies, allocated, accesses, exprs, tiles, syncs)
                if out is None:
                    out = list(body[:body.index(s)])
                out += copies
                continue
            exprs.append(s.start)
            exprs.append(s.stop)
            inner = _walk(s.body, allocated, accesses, exprs, tiles, syncs)
            if inner is not None:
                if out is None:
                    out = list(body[:body.index(s)])
                s = For(s.var, s.start, s.stop, s.step, s.kind, inner, src=s.src)
        elif t is Instr:   # _registers reads into Mem and VecOperand operands
            exprs += s.operands
            if s.opcode.startswith(SYNC_OPCODES):
                syncs.append(s)
        elif t is Alloc:
            if s.buffer.scope == "local":
                allocated.add(s.buffer.uid)
        elif t is If:
            exprs.append(s.cond)
            then = _walk(s.then, allocated, accesses, exprs, tiles, syncs)
            else_ = _walk(s.else_, allocated, accesses, exprs, tiles, syncs) if s.else_ else None
            if then is not None or else_ is not None:
                if out is None:
                    out = list(body[:body.index(s)])
                s = If(s.cond, s.then if then is None else then,
                       s.else_ if else_ is None else else_, src=s.src)
        elif t is While:
            exprs.append(s.cond)
            inner = _walk(s.body, allocated, accesses, exprs, tiles, syncs)
            if inner is not None:
                if out is None:
                    out = list(body[:body.index(s)])
                s = While(s.cond, inner, src=s.src)
        elif t is TileCall:   # a local region operand: registers if its start is constant
            exprs += s.args
            tiles.append(s)
        if out is not None:
            out.append(s)
    return out


def _expand(s: For) -> list:
    """The copies of a `pg.unroll` loop's body (its own unroll loops expanded first), one
    per iteration with the loop variable substituted by its value."""
    inner = s.body
    for x in inner:   # unroll's test, in line: most unrolled bodies are straight-line code
        if type(x) in _NESTED:   # what _walk collects here is of the template: not needed
            out = _walk(inner, set(), [], [], [], [])
            if out is not None:
                inner = out
            break
    start, stop = s.start, s.stop
    if not (isinstance(start, Const) and isinstance(stop, Const)):
        raise PtxgenError(f"{s.src}: pg.unroll needs constant bounds")
    uid, dt = s.var.uid, s.var.dtype
    out = []
    for k in range(start.value, stop.value, s.step):
        out += subst_body(inner, {uid: Const(k, dt)})
    return out


def _loads(e, acc: list):
    """Append (buffer, indices) of every load in e (an expression, a tile-call region, or
    anything else, which has none); indices None where an address is taken.  Leaf operands
    (most of them) are skipped before the call."""
    t = type(e)
    if t is BinOp:
        a, b = e.a, e.b
        if type(a) not in _LEAVES:
            _loads(a, acc)
        if type(b) not in _LEAVES:
            _loads(b, acc)
    elif t is Load:
        acc.append((e.buffer, e.indices))
        for i in e.indices:
            if type(i) not in _LEAVES:
                _loads(i, acc)
    elif t is BufferPtr:
        if e.indices is not None:
            acc.append((e.buffer, None))   # address taken: must live in memory
            for i in e.indices:
                if type(i) not in _LEAVES:
                    _loads(i, acc)
    elif t is Cast or t is Not:
        _loads(e.a, acc)
    elif t is Select:
        _loads(e.cond, acc)
        _loads(e.t, acc)
        _loads(e.f, acc)
    elif t is VecOperand:   # an instruction operand
        for i in e.items:
            _loads(i, acc)
    elif t is BufferRegion:   # a tile-call operand
        acc.append((e.buffer, tuple([Const(x) if isinstance(x, int) else x
                                     for x, _ in e.region])))


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
