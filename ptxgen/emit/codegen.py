"""Statements -> PTX lines, and the module around them.

Input is a lowered PrimFunc (unrolled loops already expanded, see passes/lower.py).
Output is the whole PTX module text plus a line -> IR-statement map used by error
reports.  Every IR statement is preceded by a `// <statement>` comment.
"""
from __future__ import annotations

import re

from .. import __version__ as _version
from ..errors import PtxgenError
from ..ir import (BOOL, Alloc, Barrier, Comment, Const, DeclBuffer, For, If, Instr,
                  Let, Load, Mem, Store, TileCall, Var, VecOperand, While, format_stmt)
from ..passes.lower import lower
from ..analysis.simplify import Analyzer
from ..primitives import lower_tile_call
from ..target.forms import form, render_module
from .names import one_line, sanitize  # noqa: F401  (sanitize is re-exported)
from .memory import MemoryEmitter
from ..target import Target, check_opcode
from .regs import _PREFIX, reg_class
from .values import ValueEmitter

_LOCATED = re.compile(r"^[^\s:]+\.py:\d+: ")   # "file.py:12: ..."


class Codegen(ValueEmitter, MemoryEmitter):
    def __init__(self, func, target: Target, debug_bounds: bool = False):
        self.func = func
        self.debug_bounds = debug_bounds
        self.tail: list[str] = []
        self.target = target
        self.an = Analyzer()
        self.lines: list[str] = []
        self._marks: list = [(0, -1)]   # (first body line, index into self.stmts) per statement
        self.stmts: list = []           # (statement text, user src)
        self.ptx_version = target.min_ptx
        self.labels = 0
        self.names: set = set()
        self.decls: list[str] = []
        self.module_decls: list[str] = []
        self.lets: dict = {}            # var uid -> its Let (exact index ranges read values)
        self.ctl: list = []             # enclosing ("if", If, taken) / ("while", While) / ("for", For)
        self._init_values()
        self._init_memory()

    # ---- plumbing -----------------------------------------------------------------
    def emit(self, line: str):
        self.lines.append("    " + line)

    @property
    def line_stmt(self) -> list:
        """Per body line, the index into self.stmts of the statement that emitted it (-1:
        none).  Built on demand from the statement marks: only error reports need it."""
        out = []
        marks = self._marks + [(len(self.lines), -1)]
        for (start, idx), (end, _) in zip(marks, marks[1:]):
            out.extend([idx] * (end - start))
        return out

    def _mark(self, idx: int):
        self._marks.append((len(self.lines), idx))

    def label(self, what: str) -> str:
        self.labels += 1
        return f"$L_{what}_{self.labels}"

    def place(self, label: str):
        self.lines.append(label + ":")

    def need_opcode(self, opcode: str, **kw):
        need = check_opcode(opcode, self.target, **kw)
        if need > self.ptx_version:
            self.ptx_version = need

    # ---- statements ---------------------------------------------------------------
    def body(self, stmts):
        dispatch, comment = self._DISPATCH, Codegen.s_Comment
        lines, marks, texts = self.lines, self._marks, self.stmts
        outer = marks[-1][1]   # the enclosing statement: the latest mark is always its own
        for s in stmts:
            marks.append((len(lines), len(texts)))   # what _mark does, inline
            text = format_stmt(s)
            texts.append((text, s.src))
            handler = dispatch.get(type(s))
            if handler is None:
                raise PtxgenError(f"internal: no emitter for {type(s).__name__}")
            if handler is not comment:   # one_line's usual case, inline: printable text
                lines.append("    // " + (text if text.isprintable() else one_line(text)))
            try:
                handler(self, s)
            except PtxgenError as e:   # locate the error at the user's line, once (the
                # innermost statement's; a message that names its line already keeps it)
                if s.src and not getattr(e, "located", False) and \
                        not _LOCATED.match(str(e.args[0] if e.args else "")):
                    e.args = (f"{s.src}: {e.args[0]}",) + e.args[1:]
                e.located = True
                raise
            except RecursionError as e:   # the innermost statement names it (ptxgen/deep.py)
                if s.src and not hasattr(e, "ptxgen_src"):
                    e.ptxgen_src = s.src
                raise
        if marks[-1][1] != outer:   # what the enclosing statement emits next is its own
            marks.append((len(lines), outer))

    def s_TileCall(self, s):
        self.check_regions(s.args)
        stmts, in_regs = lower(lower_tile_call(s, self.target, self.an, self.func))
        self.local_in_regs |= in_regs
        self.push_scope()
        self.body(stmts)
        self.pop_scope()

    def s_Comment(self, s):
        self.lines.append("    // " + one_line(s.text))

    def s_Let(self, s: Let):
        an, var, value = self.an, s.var, s.value
        # index arithmetic: emitted and bound from its affine form
        aff = an.int_affine(value)
        self._impure = False
        if aff is None:
            value = an.simplify(value)
            v = self.val(value)
        else:
            v = self.affine_val(aff)
        if v[0] != "%" or self._impure:
            r = self.new_reg(reg_class(var.dtype))
            self.emit(form("mov", self._mov_type(var.dtype)).format(d=r, a=v))
            v = r
        self._impure = False
        self.var_reg[var.uid] = v
        self.lets[var.uid] = s
        if aff is None:
            an.bind_let(var, value, s.bounds)
        else:
            an.bind_let_affine(var, aff, s.bounds)

    def s_Store(self, s: Store):
        # the indices stay as written: the address's affine form simplifies them itself
        self.store(s.buffer, s.indices, self.an.simplify(s.value), s.cache)

    def s_Alloc(self, s: Alloc):
        self.alloc(s.buffer)

    def s_DeclBuffer(self, s: DeclBuffer):
        self.declare_view(s.buffer)

    def s_Barrier(self, s: Barrier):
        if s.kind == "cta":
            bid = s.id if isinstance(s.id, int) else self.val(self.an.simplify(s.id))
            self.emit(form("bar_sync", s.count is not None).format(id=bid, n=s.count))
        elif s.kind == "warp":
            self.emit("bar.warp.sync 0xffffffff;")
        else:
            raise PtxgenError(f"unknown barrier kind {s.kind!r}")

    def s_If(self, s: If):
        cond = self.an.simplify(s.cond)
        if isinstance(cond, Const):
            taken = s.then if cond.value else (s.else_ or [])
            self.push_scope()
            self.body(taken)
            self.pop_scope()
            return
        p = self.val(cond)
        l_else, l_end = self.label("else"), self.label("endif")
        self.emit(form("bra", True).format(p=p, l=l_else if s.else_ else l_end))
        ctl = self.ctl
        ctl.append(("if", s, True))
        self.push_scope()
        self.body(s.then)
        self.pop_scope()
        if s.else_:
            ctl[-1] = ("if", s, False)
            self.emit(form("jump").format(l=l_end))
            self.place(l_else)
            self.push_scope()
            self.body(s.else_)
            self.pop_scope()
        ctl.pop()
        self.place(l_end)

    def s_While(self, s: While):
        top, end = self.label("while"), self.label("endwhile")
        self.place(top)
        self.push_scope()
        cond = self.an.simplify(s.cond)
        if isinstance(cond, Const) and not cond.value:
            self.pop_scope()
            return
        if not isinstance(cond, Const):
            p = self.val(cond)
            self.emit(form("bra", True).format(p=p, l=end))
        self.ctl.append(("while", s))
        self.body(s.body)
        self.ctl.pop()
        self.pop_scope()
        self.emit(form("jump").format(l=top))
        self.place(end)

    def s_For(self, s: For):
        if s.kind != "serial":
            raise PtxgenError("internal: unrolled loops must be expanded before emission")
        an, var, step = self.an, s.var, s.step
        # bounds that are index arithmetic are emitted and bounded from their affine forms
        start, stop = s.start, s.stop
        start_aff, stop_aff = an.int_affine(start), an.int_affine(stop)
        if start_aff is not None and not start_aff.is_const():
            start, ((lo, _), start_mod) = start_aff, an.affine_facts(start_aff)
        else:
            if type(start) is not Var:
                start = an.simplify(start)
            lo, start_mod = an.bounds(start)[0], None
        if stop_aff is not None and not stop_aff.is_const():
            stop, hi_stop = stop_aff, an.affine_facts(stop_aff)[0][1]
        else:
            if type(stop) is not Var:   # simplify() returns a variable as it is
                stop = an.simplify(stop)
            hi_stop = an.bounds(stop)[1]
        int_step = isinstance(step, int)
        wide = var.dtype.bits == 64
        ty = "s64" if wide else "s32"
        hi = None if hi_stop is None else hi_stop - 1
        if int_step and isinstance(start, Const) and isinstance(stop, Const):
            trip = len(range(start.value, stop.value, step))
            if trip == 0:
                return
            hi = start.value + (trip - 1) * step
        else:
            trip = None
        # emit/label/place/push_scope inline, and a variable's register read inline (val()
        # raises for an unbound one)
        lines, var_reg = self.lines, self.var_reg
        cls = "b64" if wide else "b32"   # reg_class of an int
        counts = self.reg_counts         # new_reg, inline
        counts[cls] = k = counts[cls] + 1
        i = _PREFIX[cls] + str(k)
        a = self.affine_val(start) if start_mod is not None else \
            type(start) is Var and var_reg.get(start.uid) or self.val(start)
        lines.append("    " + form("mov", cls).format(d=i, a=a))
        stop_v = self.affine_val(stop) if stop is stop_aff else \
            type(stop) is Var and var_reg.get(stop.uid) or self.val(stop)
        self.labels = n = self.labels + 2
        top, end = f"$L_for_{n - 1}", f"$L_endfor_{n}"
        lines.append(top + ":")
        if not int_step:
            step = an.simplify(step)
        step_v = step if isinstance(step, int) else \
            type(step) is Var and var_reg.get(step.uid) or self.val(step)
        if trip is None:   # top-tested: the trip count may be zero
            counts["pred"] = k = counts["pred"] + 1
            p = _PREFIX["pred"] + str(k)
            lines.append("    " + form("setp", "ge", ty).format(d=p, a=i, b=stop_v))
            lines.append("    " + form("bra").format(p=p, l=end))
        var_reg[var.uid] = i
        # (start is an affine form where start_mod is given: bind_range then skips it)
        an.bind_range(var, lo, hi, s.step if int_step else 1, start, start_mod)
        self._scope_keys.append([])
        ctl = self.ctl
        ctl.append(("for", s))
        self.body(s.body)
        ctl.pop()
        self.pop_scope()
        lines.append("    " + form("binary", "add", ty).format(d=i, a=i, b=step_v))
        if trip is None:
            lines.append("    " + form("jump").format(l=top))
        else:              # bottom-tested: one compare and one back-branch per iteration
            p = self.new_reg("pred")
            lines.append("    " + form("setp", "lt", ty).format(d=p, a=i, b=stop_v))
            lines.append("    " + form("bra").format(p=p, l=top))
        lines.append(end + ":")
        an.unbind(var)
        del var_reg[var.uid]

    def s_Instr(self, s: Instr):
        self.need_opcode(s.opcode, **(s.attrs or {}).get("gate", {}))
        for o in s.operands[:s.outs]:   # an output must be a register, not a local-memory copy
            for x in (o.items if isinstance(o, VecOperand) else (o,)):
                r = x.buffer.root if type(x) is Load else None
                if r is not None and r.scope == "local" and r.uid not in self.local_regs:
                    raise PtxgenError(f"'{s.opcode}' writes '{x.buffer.name}', which lives in local "
                                      f"memory because it is indexed with a non-constant index; "
                                      f"index it with constants (pg.unroll) to keep it in registers")
        ops = [self.operand(o) for o in s.operands]
        text = form("raw", len(ops) > 0).format(op=s.opcode, ops=", ".join(ops))
        if s.guard is not None:
            g = self.an.simplify(s.guard)
            if isinstance(g, Const):
                if not g.value:
                    return
            else:
                text = f"@{self.val(g)} {text}"
        self.emit(text)

    def operand(self, o) -> str:
        t = type(o)
        if t is Load:
            buf, idx = o.buffer, o.indices
            if buf.data is None and buf.layout is None and len(idx) == 1 \
                    and type(idx[0]) is Const and o.dtype is buf.dtype:
                regs = self.local_regs.get(buf.uid)     # fast path: a staging register
                if regs is not None:
                    return regs[idx[0].value]
        elif t is VecOperand:
            return "{" + ", ".join([self.operand(x) for x in o.items]) + "}"
        elif t is Mem:
            base, off = self.mem_operand(o.ptr)
            off += o.offset
            return f"[{base}{_off(off)}]"
        elif isinstance(o, str):
            return o
        elif hasattr(o, "ptx_operand"):   # composite operands, e.g. [tmem_addr+8], [map, {x, y}]
            return o.ptx_operand(self.operand)
        return self.val(self.an.simplify(o))   # a local element is its register (writable)

    # ---- module -------------------------------------------------------------------
    def params(self) -> list[str]:
        out = []
        for p in self.func.params:
            name = self.param_names[p]
            if p.kind == "tensor":
                out.append(f"    .param .u64 .ptr .global .align {p.buffer.align} {name}")
            else:
                ty = reg_type_of(p.var.dtype)
                out.append(f"    .param .{ty} {name}")
        return out

    def entry(self):
        """Bind params: load scalars, cvta tensor pointers to the global window."""
        lines = self.lines   # emit, inline
        for p in self.func.params:
            name = self.param_names[p]
            if p.kind == "tensor":
                r = self.new_reg("b64")
                lines.append("    " + form("ld_param", "u64").format(d=r, a=name))
                lines.append("    " + form("cvta_global").format(d=r, a=r))
                self.base[p.buffer.uid] = r
            else:
                dt = p.var.dtype
                r = self.new_reg(reg_class(dt))
                lines.append("    " + form("ld_param", reg_type_of(dt)).format(d=r, a=name))
                self.var_reg[p.var.uid] = r
                if p.kind == "symbol":   # shape extents are never negative
                    self.an.bind_range(p.var, 0, None)

    def run(self) -> str:
        f = self.func
        self.kernel_name = sanitize(f.name, self.names)
        self.param_names = {p: sanitize(p.name, self.names) for p in f.params}
        self.stmts.append(("(kernel entry: parameters)", ""))
        self._mark(0)
        self.entry()
        self.body(f.body)
        self.finish_memory()
        bx, by, bz = (tuple(f.block) + (1, 1, 1))[:3]
        directives = [f".maxntid {bx}, {by}, {bz}"]
        decls = self.reg_decls() + self.decls
        return render_module(
            ptxgen_version=_version, arch=self.target.arch,
            ptx_version="%d.%d" % self.ptx_version, name=self.kernel_name,
            module_decls=self.module_decls, params=self.params(), directives=directives,
            decls=decls, body="\n".join(self.lines), tail="\n".join(self.tail))


Codegen._DISPATCH = {cls: getattr(Codegen, "s_" + cls.__name__)
                     for cls in (Alloc, Barrier, Comment, DeclBuffer, For, If, Instr, Let, Store,
                                 TileCall, While)}


def reg_type_of(dt) -> str:
    if dt == BOOL:
        return "pred"
    if dt.is_int:
        return ("s" if dt.kind == "int" else "u") + str(max(dt.bits, 32) if dt.bits < 64 else 64)
    return {"float32": "f32", "float64": "f64", "float16": "b16", "bfloat16": "b16"}.get(dt.name, "b32")


def _off(off: int) -> str:
    return "" if off == 0 else f"+{off}"
