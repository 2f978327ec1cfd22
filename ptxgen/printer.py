"""The IR printer: readable, Python-like text for expressions, statements and kernels.

`str(k.ir)` prints one statement a line with loops indented; the emitter reuses
`format_stmt` for the `// <statement>` comment above each statement's PTX.
"""
from __future__ import annotations

from .ir import (BOOL, INT32, INT64, Barrier, BinOp, Buffer, BufferPtr, BufferRegion, Cast,
                 Comment, Const, DeclBuffer, For, If, Instr, Let, Load, Lowered, Mem, Not, PrimFunc,
                 Select, SpecialReg, Stmt, Store, TileCall, VecOperand, Var, While, Alloc,
                 TEXT)
from .expr import ARITH_OPS, CMP_OPS, PRECEDENCE   # the operator tables live with the nodes

# ----------------------------------------------------------------------------------
# The emitter prints every statement into a PTX comment, so the common cases (variables
# and int32 literals as operands, single indices) are formatted in line rather than by a
# recursive call.  (A list comprehension beats map() here: map calls a Python function
# from C, without the interpreter's cheap inlined call.)

def _fmt_const(c: Const) -> str:
    dt = c.dtype
    if dt is INT32 or dt is INT64:
        return str(c.value)
    if dt is BOOL:
        return "True" if c.value else "False"
    if dt.is_float:
        s = repr(float(c.value))
        return s if dt.name == "float32" else f"{dt.name}({s})"
    return f"{dt.name}({c.value})"


def _fmt_list(xs) -> str:
    """Comma-separated expressions (indices); a lone variable or literal in line."""
    if len(xs) == 1:
        x = xs[0]
        t = type(x)
        return x.name if t is Var else str(x.value) if t is Const and x.dtype is INT32 \
            else format_expr(x)
    return ", ".join([format_expr(x) for x in xs])


def _binop_forms():
    """op -> (infix symbol with its spaces, precedence of the left and of the right operand,
    the parent precedence above which it is parenthesized): one lookup per node.  The call
    forms (min/max) have the bare name and left precedence 0, which no infix op has."""
    out = {op: (f" {sym} ", 5, 5, 0) for op, sym in CMP_OPS.items()}
    out.update({op: (op, 0, 0, 99) for op in ("min", "max")})
    for op, p in PRECEDENCE.items():
        rhs = p + 1 if op in ("sub", "floordiv", "floormod", "div") else p
        # bitwise (precedence <= 4): parenthesize compound operands for readability
        sym = f" {ARITH_OPS[op]} "
        out[op] = (sym, 9, 9, 0) if p <= 4 else (sym, p, rhs, p)
    return out


_BINOP_FORMS = _binop_forms()


def format_expr(e, parent_prec: int = 0) -> str:
    t = type(e)
    if t is BinOp:
        sym, p, rhs_p, above = _BINOP_FORMS[e.op]
        a = e.a
        ta = type(a)
        sa = a.name if ta is Var else str(a.value) if ta is Const and a.dtype is INT32 \
            else format_expr(a, p)
        b = e.b
        tb = type(b)
        sb = b.name if tb is Var else str(b.value) if tb is Const and b.dtype is INT32 \
            else format_expr(b, rhs_p)
        if parent_prec > above:   # min/max: `above` 99, never parenthesized
            return f"({sa}{sym}{sb})"
        return f"{sa}{sym}{sb}" if p else f"pg.{sym}({sa}, {sb})"
    if t is Var:
        return e.name
    if t is Const:
        return str(e.value) if e.dtype is INT32 else _fmt_const(e)
    if t is Load:
        idx = _fmt_list(e.indices)
        if e.dtype is e.buffer.dtype:
            return f"{e.buffer.name}[{idx}]"
        hint = _hint(e.cache) if e.cache else ""
        return f"{e.buffer.name}.vload([{idx}], {e.dtype.name}{hint})"
    if t is SpecialReg:
        return "%" + e.name
    if t is Cast:
        return f"pg.cast({format_expr(e.a)}, {e.dtype.name})"
    if t is Select:
        return f"pg.select({format_expr(e.cond)}, {format_expr(e.t)}, {format_expr(e.f)})"
    if t is Not:
        return f"~{format_expr(e.a, 9)}"
    if t is BufferPtr:
        if e.indices is None:
            return f"{e.buffer.name}.data"
        return f"{e.buffer.name}.ptr_to([{_fmt_list(e.indices)}])"
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
    shape = ", ".join([format_expr(s) for s in b.shape])
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
        v, buf, idx = s.value, s.buffer, _fmt_list(s.indices)
        if v.dtype.lanes > 1 and v.dtype is not buf.dtype:
            hint = _hint(s.cache) if s.cache else ""
            return f"{buf.name}.vstore([{idx}], {format_expr(v)}{hint})"
        return f"{buf.name}[{idx}] = {format_expr(v)}"
    if t is Let:
        lane0 = "  # lane 0's copy (shfl.sync.idx)" if s.broadcast else ""
        return f"{s.var.name} = pg.let({format_expr(s.value)}){lane0}"
    if t is Instr:
        ops = ", ".join([_fmt_operand(o) for o in s.operands])
        g = f"@{format_expr(s.guard)} " if s.guard is not None else ""
        return f"{g}pg.ptx[{s.opcode!r}]({ops})"
    if t is For:
        start, stop, step = s.start, s.stop, s.step
        stop = stop.name if type(stop) is Var else format_expr(stop)
        if isinstance(step, int) and step == 1:
            if type(start) is Const and start.value == 0:
                return f"for {s.var.name} in pg.{s.kind}({stop}):"
            step = ""
        else:
            step = ", " + (step.name if type(step) is Var else format_expr(step))
        start = start.name if type(start) is Var else format_expr(start)
        return f"for {s.var.name} in pg.{s.kind}({start}, {stop}{step}):"
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
        if s.kind in ("cta", "arrive") and s.count is not None:
            bid = s.id if isinstance(s.id, int) else format_expr(s.id)
            fn = "named_barrier" if s.kind == "cta" else "named_barrier_arrive"
            return f"pg.{fn}({bid}, {s.count})"
        return "pg.cta_sync()" if s.kind == "cta" else "pg.warp_sync()"
    if t is Comment:
        return f"# {s.text}"
    if t is Lowered:
        return s.text
    if t is TileCall:
        args = ", ".join([str(a) if isinstance(a, BufferRegion) else format_expr(a)
                          for a in s.args])
        opts = "".join([f", {k}={v!r}" for k, v in s.options.items()])
        return f"pg.tile.{s.scope}.{s.op}({args}{opts if args else opts[2:]})"
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
        if isinstance(s, (For, While, Lowered)):
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
        elif p.kind == "tmap":
            ps.append(f"{p.name}: <{p.spec.describe()}>")
        else:
            ps.append(f"{p.name}: pg.var({p.var.dtype})")
    grid = f"<{f.attrs['grid']}>" if "grid" in f.attrs else tuple(f.grid)
    cluster = f", cluster={tuple(f.attrs['cluster'])}" if "cluster" in f.attrs else ""
    lines = [f"@pg.kernel(grid={grid}, block={tuple(f.block)}{cluster})",
             f"def {f.name}({', '.join(ps)}):"]
    _print_body(f.body, lines, 1)
    if len(lines) == 2:
        lines.append("    pass")
    return "\n".join(lines)


# the nodes print through these (ir.TEXT is the hook; see its docstring)
TEXT.expr, TEXT.stmt, TEXT.func = format_expr, format_stmt, print_func
