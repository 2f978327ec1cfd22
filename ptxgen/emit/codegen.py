"""Statements -> PTX lines, and the module around them.

Input is a lowered PrimFunc (unrolled loops already expanded, see passes/lower.py).
Output is the whole PTX module text plus a line -> IR-statement map used by error
reports.  Every IR statement is preceded by a `// <statement>` comment.
"""
from __future__ import annotations

from ..version import __version__ as _version
from ..errors import PtxgenError, located_at
from ..ir import (Alloc, Barrier, Comment, Const, DeclBuffer, For, If, Instr,
                  Let, Load, Lowered, Mem, Store, VecOperand, While)
from ..printer import format_stmt
from ..analysis.simplify import Analyzer
from ..target.forms import form, render_module
from .names import one_line, sanitize
from .memory import MemoryEmitter
from ..target import Target, check_opcode, gate_for
from ..dtypes import reg_class
from .values import ValueEmitter

class Codegen(ValueEmitter, MemoryEmitter):
    """One build's emitter.  Its instances keep at most 30 attribute names (with the mixins'):
    CPython 3.11 stores that many per class in an instance's inline values, and past them
    every instance gets a dict of its own, on which each `self.x` of the emitter takes the
    slow lookup.  So state that only some kernels need is a class default, set on the
    instance that uses it (whole_program here, the mixins' _escapes and _tree_memo)."""

    whole_program = False   # an instruction ptxas keeps only in whole-program mode

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
        g = gate_for(opcode)
        if g is not None and g.whole_program:
            self.whole_program = True

    # ---- statements ---------------------------------------------------------------
    def body(self, stmts):
        """Each statement under a `// <statement>` comment, marked for error reports.  The
        per-statement loop of every build: the mark and the comment are written out here
        (helper calls per statement are a share of every build's calls: emit_speed.py)."""
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
                raise located_at(e, s.src)
            except RecursionError as e:   # the innermost statement names it (ptxgen/deep.py)
                if s.src and not hasattr(e, "ptxgen_src"):
                    e.ptxgen_src = s.src
                raise
        if marks[-1][1] != outer:   # what the enclosing statement emits next is its own
            marks.append((len(lines), outer))

    def s_Lowered(self, s):
        self.push_scope()
        self.body(s.body)
        self.pop_scope()

    def s_Comment(self, s):
        self.lines.append("    // " + one_line(s.text))

    def s_Let(self, s: Let):
        var = s.var
        aff, value = self.an.let_form(s.value)
        self._impure = False
        v = self.val(value) if aff is None else self.val(aff.to_expr())
        if s.broadcast:      # lane 0's copy: the same value, known uniform to ptxas
            if var.dtype.bits != 32:
                raise PtxgenError(f"a broadcast let takes a 32-bit value (shfl.sync.idx.b32); "
                                  f"'{var.name}' is {var.dtype}")
            r = self.new_reg(reg_class(var.dtype))
            self.emit(form("broadcast").format(d=r, a=v))
            v = r
        elif v[0] != "%" or self._impure:
            r = self.new_reg(reg_class(var.dtype))
            self.emit(form("mov", self._mov_type(var.dtype)).format(d=r, a=v))
            v = r
        self._impure = False
        self.var_reg[var.uid] = v
        self.lets[var.uid] = s
        self.an.bind_let_form(var, aff, value, s.bounds)

    def s_Store(self, s: Store):
        # the indices stay as written: the address's affine form simplifies them itself
        self.store(s.buffer, s.indices, self.an.simplify(s.value), s.cache)

    def s_Alloc(self, s: Alloc):
        self.alloc(s.buffer, s.src)

    def s_DeclBuffer(self, s: DeclBuffer):
        self.declare_view(s.buffer)

    def s_Barrier(self, s: Barrier):
        if s.kind == "cta":
            bid = s.id if isinstance(s.id, int) else self.val(self.an.simplify(s.id))
            self.emit(form("bar_sync", s.count is not None).format(id=bid, n=s.count))
        elif s.kind == "arrive":
            bid = s.id if isinstance(s.id, int) else self.val(self.an.simplify(s.id))
            self.emit(form("bar_arrive").format(id=bid, n=s.count))
        elif s.kind == "warp":
            self.emit(form("bar_warp_sync").format(a="0xffffffff"))
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
        """A serial loop: bottom-tested (one compare and back-branch per iteration) when
        the trip count is a known non-zero constant, else top-tested."""
        if s.kind != "serial":
            raise PtxgenError("internal: unrolled loops must be expanded before emission")
        an, var = self.an, s.var
        lb = an.loop_bounds(s)
        if lb.trip == 0:
            return
        wide = var.dtype.bits == 64
        ty, cls = ("s64", "b64") if wide else ("s32", "b32")
        i = self.new_reg(cls)
        start = self.val(lb.start.to_expr()) if lb.start_mod is not None else self.val(lb.start)
        self.emit(form("mov", cls).format(d=i, a=start))
        stop = self.val(lb.stop.to_expr()) if lb.stop_affine else self.val(lb.stop)
        top, end = self.label("for"), self.label("endfor")
        self.place(top)
        step = s.step if isinstance(s.step, int) else self.val(an.simplify(s.step))
        if lb.trip is None:
            p = self.new_reg("pred")
            self.emit(form("setp", "ge", ty).format(d=p, a=i, b=stop))
            self.emit(form("bra").format(p=p, l=end))
        self.var_reg[var.uid] = i
        an.bind_loop(var, lb, s.step)
        self.push_scope()
        ctl = self.ctl
        ctl.append(("for", s))
        self.body(s.body)
        ctl.pop()
        self.pop_scope()
        self.emit(form("binary", "add", ty).format(d=i, a=i, b=step))
        if lb.trip is None:
            self.emit(form("jump").format(l=top))
        else:
            p = self.new_reg("pred")
            self.emit(form("setp", "lt", ty).format(d=p, a=i, b=stop))
            self.emit(form("bra").format(p=p, l=top))
        self.place(end)
        an.unbind(var)
        del self.var_reg[var.uid]

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
    def params(self, names: dict) -> list[str]:
        out = []
        for p in self.func.params:
            name = names[p]
            if p.kind == "tensor":
                out.append("    " + form("param_ptr").format(align=p.buffer.align, name=name))
            elif p.kind == "tmap":
                out.append("    " + form("param_tensormap").format(name=name))
            else:
                out.append("    " + form("param", p.var.dtype.ptx.param).format(name=name))
        return out

    def entry(self, names: dict):
        """Bind params (`names`: their sanitized names): load scalars, cvta tensor pointers to
        the global window."""
        lines = self.lines   # emit, inline
        for p in self.func.params:
            name = names[p]
            if p.kind == "tensor":
                r = self.new_reg("b64")
                lines.append("    " + form("ld_param", "u64").format(d=r, a=name))
                lines.append("    " + form("cvta_global").format(d=r, a=r))
                self.base[p.buffer.uid] = r
            elif p.kind == "tmap":    # its generic address, for the copies that use it
                if p.var.uid in self.func.attrs.get("tensor_maps_used", ()):
                    r = self.new_reg("b64")
                    self.need_opcode("cvta.param.u64")
                    lines.append("    " + form("mov", "u64").format(d=r, a=name))
                    lines.append("    " + form("cvta", "param").format(d=r, a=r))
                    self.var_reg[p.var.uid] = r
            else:
                dt = p.var.dtype
                r = self.new_reg(reg_class(dt))
                lines.append("    " + form("ld_param", dt.ptx.param).format(d=r, a=name))
                self.var_reg[p.var.uid] = r
                if p.kind == "symbol":   # shape extents are never negative
                    self.an.bind_range(p.var, 0, None)

    def run(self) -> str:
        f = self.func
        self.kernel_name = sanitize(f.name, self.names)
        param_names = {p: sanitize(p.name, self.names) for p in f.params}
        self.stmts.append(("(kernel entry: parameters)", ""))
        self._mark(0)
        self.entry(param_names)
        self.body(f.body)
        self.finish_memory()
        bx, by, bz = (tuple(f.block) + (1, 1, 1))[:3]
        directives = [form("maxntid").format(x=bx, y=by, z=bz)]
        if f.attrs.get("minnctapersm"):    # setmaxnreg needs ptxas to know the entry count
            directives.append(form("minnctapersm").format(n=f.attrs["minnctapersm"]))
        cluster = f.attrs.get("cluster")
        if cluster is not None:
            self.need_opcode("reqnctapercluster")
            cx, cy, cz = (tuple(cluster) + (1, 1, 1))[:3]
            directives += [form("explicitcluster").format(),
                           form("reqnctapercluster").format(x=cx, y=cy, z=cz)]
        decls = self.reg_decls() + self.decls
        return render_module(
            ptxgen_version=_version, arch=self.target.arch,
            ptx_version="%d.%d" % self.ptx_version, name=self.kernel_name,
            module_decls=self.module_decls, params=self.params(param_names),
            directives=directives,
            decls=decls, body="\n".join(self.lines), tail="\n".join(self.tail))


Codegen._DISPATCH = {cls: getattr(Codegen, "s_" + cls.__name__)
                     for cls in (Alloc, Barrier, Comment, DeclBuffer, For, If, Instr, Let, Lowered,
                                 Store, While)}


def _off(off: int) -> str:
    return "" if off == 0 else f"+{off}"
