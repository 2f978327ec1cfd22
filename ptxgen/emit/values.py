"""Registers and expression code: IR expressions -> PTX operands.

Every integer/float expression becomes one virtual register (or an immediate).
Pure sub-expressions are cached per lexical scope, so a value computed once in a
block is reused by later statements of the block and its children.  Values that
read memory or mutable registers are never cached.

val runs once per value, so it writes out what new_reg and remember do (each such line says
which): the helper calls would add to a build's Python calls, a tracked figure
(benchmarks/emit_speed.py).  An affine form is emitted as val(aff.to_expr()): a walk of its
own measured no faster (benchmarks/RESULTS.md).
"""
from __future__ import annotations

from functools import lru_cache

from ..dtypes import REG_CLASSES, DType, reg_class
from ..dtypes import REG_PREFIX as _PREFIX
from ..errors import PtxgenError, TraceError
from ..ir import (BOOL, BinOp, BufferPtr, Cast, Const, Load, Not, Select, SpecialReg, Var,
                  expr_key)
from ..printer import format_expr
from .convert import ConvertEmitter
from ..target.forms import form

_INT_REGS: dict = {}   # int dtype -> (PTX type, its bit type, register class, register prefix)


def _int_regs(dt: DType) -> tuple:
    ty = dt.ptx.arith
    t = _INT_REGS[dt] = (ty, "b" + ty[1:], dt.ptx.reg, _PREFIX[dt.ptx.reg])
    return t


@lru_cache(maxsize=None)   # few (class, count) pairs: most builds repeat earlier ones
def _reg_decl(cls: str, n: int) -> str:
    """The declaration of a register class's registers 0..n-1 (`.reg .b32 %r<n>;`)."""
    prefix, ty = REG_CLASSES[cls]
    return form("reg_decl").format(t=ty, p=prefix, n=n)


_SAFE_IMM = range(-2**31, 2**31)   # fits every integer type's immediate as it is


def wrap_int(v: int, dt: DType) -> int:
    """v as the integer type dt holds it (two's complement, mod 2^bits): folding constants
    (3000 multiplications by 3) can leave the type's range, the hardware never does."""
    bits = dt.bits
    v &= (1 << bits) - 1
    return v - (1 << bits) if dt.kind == "int" and v >> (bits - 1) else v


_CMP_OPS = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}


class ValueEmitter(ConvertEmitter):
    """Mixin: needs self.emit(line), self.an (Analyzer), self.target, self.load(), self.address_value()."""

    def _init_values(self):
        self.reg_counts = dict.fromkeys(REG_CLASSES, 0)
        # pure values computed so far, visible in the current lexical scope: one dict, plus
        # per open scope the keys it added (dropped when the scope closes)
        self.known: dict = {}
        self._scope_keys: list = [[]]
        self.var_reg: dict[int, str] = {}
        self._impure = False

    # ---- registers ----------------------------------------------------------------
    def new_reg(self, cls: str) -> str:
        n = self.reg_counts[cls] + 1
        self.reg_counts[cls] = n
        return _PREFIX[cls] + str(n)

    def reg_decls(self) -> list[str]:
        return [_reg_decl(c, n + 1) for c, n in self.reg_counts.items() if n]

    def push_scope(self):
        self._scope_keys.append([])

    def pop_scope(self):
        known = self.known
        for k in self._scope_keys.pop():
            del known[k]

    def remember(self, key, reg: str):
        """Cache a pure value (or address) for the rest of the current scope."""
        self.known[key] = reg
        self._scope_keys[-1].append(key)

    # ---- values ---------------------------------------------------------------------
    def val(self, e) -> str:
        """Operand for an already simplified expression: register name or immediate."""
        t = type(e)
        if t is Var:
            r = self.var_reg.get(e.uid)
            if r is None:
                raise PtxgenError(f"variable '{e.name}' is used outside the scope that binds it "
                                  f"(a loop variable after its loop, or a value from another "
                                  f"branch)")
            return r
        if t is Const:
            if e.dtype.is_int:
                v = e.value
                return str(v) if v in _SAFE_IMM else str(wrap_int(v, e.dtype))
            return self.imm(e)
        if t is Load:   # reads memory: never reused, so never keyed
            self._impure = True
            return self.load(e)
        key = e._key
        if key is None:
            key = expr_key(e)
        r = self.known.get(key)
        if r is not None:
            return r
        saved, self._impure = self._impure, False
        if t is BinOp and e.dtype.is_int and e.op not in _CMP_OPS:   # index arithmetic
            r = self._int_binop(e)
        else:
            r = self._emit_expr(e)
        if not self._impure:   # remember(), inline
            self.known[key] = r
            self._scope_keys[-1].append(key)
        self._impure |= saved
        return r

    def reg(self, e) -> str:
        """Like val() but never an immediate (for operands that must be registers)."""
        v = self.val(e)
        if v[0] == "%":
            return v
        r = self.new_reg(reg_class(e.dtype))
        self.emit(form("mov", self._mov_type(e.dtype)).format(d=r, a=v))
        return r

    @staticmethod
    def _mov_type(dt):
        return reg_class(dt)   # each register class is named by its mov type

    def _emit_expr(self, e) -> str:
        t = type(e)
        if t is BinOp:
            return self._binop(e)
        if t is SpecialReg:
            if e.name.startswith(("cluster", "nclusterid")):
                self.need_opcode("sreg.cluster")
            r = self.new_reg("b32")
            self.emit(form("mov", "u32").format(d=r, a="%" + e.name))
            return r
        if t is Load:
            self._impure = True
            return self.load(e)
        if t is BufferPtr:
            return self.address_value(e)
        if t is Cast:
            return self._cast(self.val(e.a), e.a.dtype, e.dtype)
        if t is Select:
            p = self.val(e.cond)
            a, b = self.val(e.t), self.val(e.f)
            if e.dtype == BOOL:   # (c and t) or (not c and f), on predicates
                r, n = self.new_reg("pred"), self.new_reg("pred")
                self.emit(form("binary", "and", "pred").format(d=r, a=p, b=a))
                self.emit(form("unary", "not", "pred").format(d=n, a=p))
                self.emit(form("binary", "and", "pred").format(d=n, a=n, b=b))
                self.emit(form("binary", "or", "pred").format(d=r, a=r, b=n))
                return r
            r = self.new_reg(reg_class(e.dtype))
            ty = "b16" if reg_class(e.dtype) == "b16" else self._arith_type(e.dtype)
            self.emit(form("ternary", "selp", ty).format(d=r, a=a, b=b, c=p))
            return r
        if t is Not:
            a = self.val(e.a)
            r = self.new_reg("pred")
            self.emit(form("unary", "not", "pred").format(d=r, a=a))
            return r
        raise PtxgenError(f"cannot emit expression {format_expr(e)}")

    def _arith_type(self, dt):
        return dt.ptx.arith

    # ---- binary operations ---------------------------------------------------------
    def _binop(self, e: BinOp) -> str:
        op, dt = e.op, e.dtype
        if op in _CMP_OPS:
            return self._compare(e)
        if dt == BOOL:
            a, b = self.val(e.a), self.val(e.b)
            r = self.new_reg("pred")
            self.emit(form("binary", op, "pred").format(d=r, a=a, b=b))
            return r
        if dt.is_float:
            return self._float_binop(e)
        return self._int_binop(e)

    def _int_binop(self, e: BinOp) -> str:
        """Index arithmetic, the emitter's most frequent node: its register allocation and
        line are written out (what new_reg and emit do), and a 32/64-bit result skips
        _narrow."""
        op, dt = e.op, e.dtype
        ty, bty, cls, prefix = _INT_REGS.get(dt) or _int_regs(dt)
        b = e.b
        b_const = b.value if type(b) is Const else None
        a = e.a
        # a*c + b -> mad (one line instead of two), unless c is a power of 2 (a shift)
        if op == "add" and type(a) is BinOp and a.op == "mul" and type(a.b) is Const \
                and (a.b.value <= 0 or a.b.value & (a.b.value - 1)):
            x = self.val(a.a)
            y = self.val(b)
            r = self.new_reg(cls)
            self.emit(form("ternary", "mad.lo", ty).format(d=r, a=x, b=self.imm(a.b), c=y))
            return r if dt.bits >= 32 else self._narrow(r, dt)
        av = self.val(a)
        narrow = True            # a product or sum may leave a sub-32-bit type's range
        if op in _POW2_FORMS and b_const is not None and b_const > 0 \
                and b_const & (b_const - 1) == 0:
            bv = b_const.bit_length() - 1
            if op == "mul":
                line = form("binary", "shl", bty)
            elif op == "floordiv":   # arithmetic shift == floor division by 2^k
                line, narrow = form("binary", "shr", ty), False
            else:                    # two's complement: a & (2^k - 1) == floor modulo
                line, bv, narrow = form("binary", "and", bty), b_const - 1, False
        else:
            bv = self.val(b)
            if op in ("floordiv", "floormod"):
                return self._floor_divmod(op, e, av, bv, ty, cls)
            opcode = _INT_OPCODE.get(op)
            if opcode is None:
                raise PtxgenError(f"integer operator {op} has no PTX form")
            line = form("binary", opcode, ty if opcode in _TYPED_SIGNED else bty)
        n = self.reg_counts[cls] + 1   # new_reg, written out
        self.reg_counts[cls] = n
        r = prefix + str(n)
        self.lines.append("    " + line.format(d=r, a=av, b=bv))
        return r if not narrow or dt.bits >= 32 else self._narrow(r, dt)

    def _floor_divmod(self, op, e, a, b, ty, cls):
        bb = self.an.bounds(e.b)
        if bb[0] == bb[1] == 0:   # a value the facts pin to 0 (a let of 0): as x // 0
            raise TraceError(f"integer {'division' if op == 'floordiv' else 'modulo'} by zero "
                             f"in {format_expr(e)}: {format_expr(e.b)} is always 0 here; the "
                             f"divisor must be nonzero")
        nonneg = _nonneg(self.an.bounds(e.a)) and _nonneg(bb)
        r = self.new_reg(cls)
        if nonneg or ty[0] == "u":
            self.emit(form("binary", "div" if op == "floordiv" else "rem", ty).format(d=r, a=a, b=b))
            return r
        # truncating div/rem, then step down when the remainder's sign differs from b's
        q, m = self.new_reg(cls), self.new_reg(cls)
        self.emit(form("binary", "div", ty).format(d=q, a=a, b=b))
        self.emit(form("binary", "rem", ty).format(d=m, a=a, b=b))
        bits = ty[1:]
        p1, p2, x = self.new_reg("pred"), self.new_reg("pred"), self.new_reg(cls)
        self.emit(form("setp", "ne", ty).format(d=p1, a=m, b=0))
        self.emit(form("binary", "xor", "b" + bits).format(d=x, a=m, b=b))
        self.emit(form("setp", "lt", ty).format(d=p2, a=x, b=0))
        self.emit(form("binary", "and", "pred").format(d=p1, a=p1, b=p2))
        if op == "floordiv":
            self.emit(form("ternary", "selp", ty).format(d=r, a=-1, b=0, c=p1))
            self.emit(form("binary", "add", ty).format(d=r, a=q, b=r))
        else:
            self.emit(form("ternary", "selp", ty).format(d=r, a=b, b=0, c=p1))
            self.emit(form("binary", "add", ty).format(d=r, a=m, b=r))
        return r

    def _narrow(self, r: str, dt: DType) -> str:
        """Keep sub-32-bit integers sign/zero-extended in their 32-bit register (C semantics
        of a stored int8 value: wrap)."""
        if dt.bits >= 32:
            return r
        out = self.new_reg("b32")
        if dt.kind == "int":
            self.emit(form("ternary", "bfe", "s32").format(d=out, a=r, b=0, c=dt.bits))
        else:
            self.emit(form("binary", "and", "b32").format(d=out, a=r, b=(1 << dt.bits) - 1))
        return out

    def _float_binop(self, e: BinOp) -> str:
        op, dt = e.op, e.dtype
        name = dt.name
        if name in ("float16", "bfloat16"):   # compute in f32, round once per op (numpy semantics)
            a = self._to_f32(self.val(e.a), dt)
            b = self._to_f32(self.val(e.b), dt)
            r = self._f_op(op, "f32", a, b, "f32")
            return self._cast(r, _F32, dt)
        ty = "f32" if name == "float32" else "f64"
        return self._f_op(op, ty, self.val(e.a), self.val(e.b), ty)

    def _f_op(self, op, ty, a, b, cls):
        r = self.new_reg(cls)
        if op in ("add", "sub", "mul", "div"):
            self.emit(form("binary", f"{op}.rn", ty).format(d=r, a=a, b=b))
        elif op in ("min", "max"):
            self.emit(form("binary", op, ty).format(d=r, a=a, b=b))
        else:
            raise PtxgenError(f"float operator {op} has no PTX form")
        return r

    def _compare(self, e: BinOp) -> str:
        dt = e.a.dtype
        a, b = self.val(e.a), self.val(e.b)
        if dt.name in ("float16", "bfloat16"):
            a, b = self._to_f32(a, dt), self._to_f32(b, dt)
            ty = "f32"
        elif dt == BOOL:
            r = self.new_reg("pred")
            if e.op == "eq":
                self.emit(form("binary", "xor", "pred").format(d=r, a=a, b=b))
                self.emit(form("unary", "not", "pred").format(d=r, a=r))
            else:
                self.emit(form("binary", "xor", "pred").format(d=r, a=a, b=b))
            return r
        else:
            ty = self._arith_type(dt)
        r = self.new_reg("pred")
        self.emit(form("setp", _CMP_OPS[e.op], ty).format(d=r, a=a, b=b))
        return r

# integer operators -> PTX opcode; the signed/unsigned-typed ones take s32/u32..., the rest bNN
_INT_OPCODE = {"add": "add", "sub": "sub", "min": "min", "max": "max", "mul": "mul.lo",
               "and": "and", "or": "or", "xor": "xor", "shl": "shl", "shr": "shr"}
_POW2_FORMS = frozenset(("mul", "floordiv", "floormod"))   # shl / shr / and by a power of 2
_TYPED_SIGNED = frozenset(("add", "sub", "min", "max", "mul.lo", "shr"))


def _nonneg(b) -> bool:
    return b[0] is not None and b[0] >= 0


from ..dtypes import dtype as _dtype  # noqa: E402

_F32 = _dtype("float32")
