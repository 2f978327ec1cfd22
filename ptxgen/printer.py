"""The IR printer: readable, Python-like text for expressions, statements and kernels.

`str(k.ir)` prints one statement a line with loops indented; the emitter reuses
`format_stmt` for the `// <statement>` comment above each statement's PTX.
"""
from __future__ import annotations

from .ir import (BOOL, INT32, INT64, Barrier, BinOp, Buffer, BufferPtr, BufferRegion, Cast,
                 Comment, Const, DeclBuffer, For, If, Instr, Let, Load, Mem, Not, PrimFunc,
                 Select, SpecialReg, Stmt, Store, TileCall, VecOperand, Var, While, Alloc,
                 _ARITH, _CMP, _PREC)

# ----------------------------------------------------------------------------------
def _fmt_const(c: Const) -> str:
    dt = c.dtype
    if dt is INT32 or dt is INT64:
        return str(c.value)
    if dt == BOOL:
        return "True" if c.value else "False"
    if dt.is_float:
        s = repr(float(c.value))
        return s if dt.name == "float32" else f"{dt}({s})"
    return f"{dt}({c.value})"


def _fmt_index(buf, indices) -> str:
    return f"{buf.name}[{', '.join([format_expr(i) for i in indices])}]"


def _binop_forms():
    """op -> (kind, symbol, precedence, right operand's precedence): one lookup per node."""
    out = {op: ("cmp", sym, 5, 5) for op, sym in _CMP.items()}
    out.update({op: ("call", op, 0, 0) for op in ("min", "max")})
    for op, p in _PREC.items():
        rhs = p + 1 if op in ("sub", "floordiv", "floormod", "div") else p
        # bitwise (precedence <= 4): parenthesize compound operands for readability
        out[op] = ("bit", _ARITH[op], 9, 9) if p <= 4 else ("arith", _ARITH[op], p, rhs)
    return out


_BINOP_FORMS = _binop_forms()


def format_expr(e, parent_prec: int = 0) -> str:
    t = type(e)
    if t is Var:
        return e.name
    if t is Const:
        return _fmt_const(e)
    if t is BinOp:
        kind, sym, p, rhs_p = _BINOP_FORMS[e.op]
        a, b = e.a, e.b   # variables and int32 literals, most operands, print inline
        ta, tb = type(a), type(b)
        sa = a.name if ta is Var else str(a.value) if ta is Const and a.dtype is INT32 \
            else format_expr(a, p if kind != "call" else 0)
        sb = b.name if tb is Var else str(b.value) if tb is Const and b.dtype is INT32 \
            else format_expr(b, rhs_p if kind != "call" else 0)
        if kind == "arith":
            return f"({sa} {sym} {sb})" if p < parent_prec else f"{sa} {sym} {sb}"
        if kind == "call":
            return f"pg.{sym}({sa}, {sb})"
        return f"({sa} {sym} {sb})" if parent_prec else f"{sa} {sym} {sb}"
    if t is Load:
        if e.dtype == e.buffer.dtype:
            return _fmt_index(e.buffer, e.indices)
        idx = ", ".join(format_expr(i) for i in e.indices)
        return f"{e.buffer.name}.vload([{idx}], {e.dtype}{_hint(e.cache)})"
    if t is SpecialReg:
        return f"%{e.name}"
    if t is Cast:
        return f"pg.cast({format_expr(e.a)}, {e.dtype})"
    if t is Select:
        return f"pg.select({format_expr(e.cond)}, {format_expr(e.t)}, {format_expr(e.f)})"
    if t is Not:
        return f"~{format_expr(e.a, 9)}"
    if t is BufferPtr:
        if e.indices is None:
            return f"{e.buffer.name}.data"
        return f"{e.buffer.name}.ptr_to([{', '.join(format_expr(i) for i in e.indices)}])"
    if isinstance(e, (int, float)):
        return str(e)
    return repr(e)


def _fmt_buffer_decl(b: Buffer) -> str:
    extra = []
    if b.layout is not None:
        extra.append(f"layout={b.layout!r}")
    if not (isinstance(b.elem_offset, int) and b.elem_offset == 0):
        extra.append(f"elem_offset={format_expr(b.elem_offset)}")
    if b.data is not None:
        extra.append(f"data={format_expr(b.data)}")
    shape = ", ".join(format_expr(s) for s in b.shape)
    tail = "".join(", " + x for x in extra)
    return f"(({shape}{',' if len(b.shape) == 1 else ''}), \"{b.dtype}\", scope=\"{b.scope}\"{tail})"


def _hint(mods: str) -> str:
    if not mods:
        return ""
    hints = mods[1:].split(".")
    return f", cache_hint={hints[0]!r}" if len(hints) == 1 else f", cache_hint={hints!r}"


def format_stmt(s: Stmt) -> str:
    """One line (the head line for compound statements); used in PTX comments too."""
    t = type(s)
    if t is Store:
        if s.value.dtype.lanes > 1 and s.value.dtype != s.buffer.dtype:
            idx = ", ".join(format_expr(i) for i in s.indices)
            return f"{s.buffer.name}.vstore([{idx}], {format_expr(s.value)}{_hint(s.cache)})"
        return f"{_fmt_index(s.buffer, s.indices)} = {format_expr(s.value)}"
    if t is Let:
        return f"{s.var.name} = pg.let({format_expr(s.value)})"
    if t is For:
        unit = isinstance(s.step, int) and s.step == 1
        rng = (format_expr(s.stop) if isinstance(s.start, Const) and s.start.value == 0
               and unit else f"{format_expr(s.start)}, {format_expr(s.stop)}"
               + ("" if unit else f", {format_expr(s.step)}"))
        return f"for {s.var.name} in pg.{s.kind}({rng}):"
    if t is If:
        return f"with pg.if_({format_expr(s.cond)}):"
    if t is While:
        return f"with pg.while_({format_expr(s.cond)}):"
    if t is Alloc:
        b = s.buffer
        return f"{b.name} = pg.alloc_buffer{_fmt_buffer_decl(b)}"
    if t is DeclBuffer:
        return f"{s.buffer.name} = pg.decl_buffer{_fmt_buffer_decl(s.buffer)}"
    if t is Barrier:
        if s.kind == "cta" and s.count is not None:
            bid = s.id if isinstance(s.id, int) else format_expr(s.id)
            return f"pg.named_barrier({bid}, {s.count})"
        return "pg.cta_sync()" if s.kind == "cta" else "pg.warp_sync()"
    if t is Instr:
        ops = ", ".join([_fmt_operand(o) for o in s.operands])
        g = f"@{format_expr(s.guard)} " if s.guard is not None else ""
        return f"{g}pg.ptx[{s.opcode!r}]({ops})"
    if t is Comment:
        return f"# {s.text}"
    if t is TileCall:
        args = ", ".join(str(a) if isinstance(a, BufferRegion) else format_expr(a) for a in s.args)
        opts = "".join(f", {k}={v!r}" for k, v in s.options.items() if not k.startswith("_"))
        return f"pg.tile.{s.scope}.{s.op}({args}{opts})"
    return repr(s)


def _fmt_operand(o) -> str:
    t = type(o)
    if t is Mem:
        return f"[{format_expr(o.ptr)}{'+' + str(o.offset) if o.offset else ''}]"
    if t is VecOperand:
        return "{" + ", ".join([_fmt_operand(x) for x in o.items]) + "}"
    if isinstance(o, str):
        return o
    return format_expr(o)


def _print_body(body, lines, depth):
    pad = "    " * depth
    for s in body:
        lines.append(pad + format_stmt(s))
        if isinstance(s, (For, While)):
            _print_body(s.body, lines, depth + 1)
        elif isinstance(s, If):
            _print_body(s.then, lines, depth + 1)
            if s.else_:
                lines.append(pad + "with pg.else_():")
                _print_body(s.else_, lines, depth + 1)


def print_func(f: PrimFunc) -> str:
    ps = []
    for p in f.params:
        if p.kind == "tensor":
            b = p.buffer
            shape = ", ".join(format_expr(s) for s in b.shape)
            extra = f", layout={b.layout!r}" if b.layout is not None else ""
            if not (isinstance(b.elem_offset, int) and b.elem_offset == 0):
                extra += f", elem_offset={format_expr(b.elem_offset)}"
            ps.append(f"{p.name}: pg.Tensor(({shape}{',' if b.ndim == 1 else ''}), "
                      f"\"{b.dtype}\"{extra})")
        elif p.kind == "scalar":
            ps.append(f"{p.name}: pg.{p.var.dtype}")
        else:
            ps.append(f"{p.name}: pg.var({p.var.dtype})")
    grid = f"<{f.attrs['grid']}>" if "grid" in f.attrs else tuple(f.grid)
    lines = [f"@pg.kernel(grid={grid}, block={tuple(f.block)})",
             f"def {f.name}({', '.join(ps)}):"]
    _print_body(f.body, lines, 1)
    if len(lines) == 2:
        lines.append("    pass")
    return "\n".join(lines)
