"""Per-element arithmetic of the elementwise ops: IR expressions where the IR has the
operator (the emitter already lowers add/sub/mul/div/min/max/select and float widening and
narrowing exactly, 16-bit floats through float32), `ir.Instr` forms for the rest (fma, the
special-function unit, packed pairs).  Values are expressions; results that need a register
get a temporary of `Emit`.
"""
from __future__ import annotations

import math
import struct

from ...dtypes import dtype
from ...ir import (Alloc, BinOp, Buffer, BOOL, Cast, Const, Expr, Instr, Load, Select, Store,
                   VecOperand)
from ...target.forms import opcode
from .ops import BF16, F16, F32, F64

U32 = dtype("uint32")
LOG2E = 1.4426950408889634       # rounded to float32 when used (0f3FB8AA3B)


class Emit:
    """The statements of one lowered call and its temporary registers (one local buffer
    per dtype, constant indices only, so every element is a register)."""

    def __init__(self):
        self.stmts: list = []
        self._bufs: dict = {}

    def tmp(self, dt) -> Load:
        buf = self._bufs.get(dt.name)
        if buf is None:
            buf = self._bufs[dt.name] = Buffer(f"tm_{dt.name}", (0,), dt, "local")
        k = buf.shape[0]
        buf.shape = (k + 1,)
        return Load(buf, (Const(k),), dt)

    def allocs(self) -> list:
        return [Alloc(b) for b in self._bufs.values()]

    def instr(self, name, mods, ops, outs=1, guard=None):
        self.stmts.append(Instr(opcode(name, *mods), tuple(ops), form=name, outs=outs,
                                guard=guard))

    def put(self, dst: Load, value: Expr):
        """dst <- value (value converted by the caller to dst's dtype)."""
        self.stmts.append(Store(dst.buffer, dst.indices, value))

    def reg(self, value: Expr, dt) -> Load:
        """`value` in a register of dtype dt (a register load as it is)."""
        if isinstance(value, Load) and value.buffer.scope == "local" and value.dtype is dt:
            return value
        r = self.tmp(dt)
        self.put(r, value)
        return r

    def op(self, name, mods, dt, *args) -> Load:
        """A one-result instruction into a new register of dtype dt."""
        r = self.tmp(dt)
        self.instr(name, mods, (r,) + tuple(args))
        return r


def convert(x: Expr, dt) -> Expr:
    """x as dtype dt with the IR's conversion (round to nearest, exact widening)."""
    return x if x.dtype is dt else Cast(x, dt)


def truth(E: Emit, x: Expr) -> Expr:
    """x != 0 as a predicate; NaN is true (setp.neu: unordered), as in C and numpy."""
    if x.dtype is BOOL:
        return x
    if not x.dtype.is_float:
        return Cast(x, BOOL)
    if x.dtype is not F64:
        x = convert(x, F32)             # 16-bit setp: bf16 needs sm_90; compare in float32
    t = "f64" if x.dtype is F64 else "f32"
    return E.op("setp", ("neu", t), BOOL, x, Const(0.0, x.dtype))


def _f32(x: Expr) -> Expr:
    return convert(x, F32)


# ---- scalar forms ------------------------------------------------------------------------------
_BINOP = {"add": "add", "sub": "sub", "mul": "mul", "fdiv": "div", "max": "max", "min": "min"}


def scalar(E: Emit, op: str, ct, args: list, ftz: bool = False) -> Expr:
    """The value of `op` on one element's operands (expressions of any dtype), in ct;
    `ftz`: the special-function approximations flush subnormals (.approx.ftz)."""
    if op in _BINOP:
        a, b = (convert(x, ct) for x in args)
        return BinOp(_BINOP[op], a, b, ct)
    if op == "fma":
        if ct.is_int:
            a, b, c = (convert(x, ct) for x in args)
            return BinOp("add", BinOp("mul", a, b, ct), c, ct)
        a, b, c = (convert(x, ct) for x in args)
        return E.op("farith", ("fma", ct.ptx.arith), ct, a, b, c)
    if op == "select":
        c, a, b = args
        cond = truth(E, c)
        return Select(cond, convert(a, ct), convert(b, ct), ct)
    (x,) = args
    if ct is F64:
        x = convert(x, F64)
        if op == "sqrt":
            return E.op("rounded", ("sqrt", "f64"), F64, x)
        if op == "reciprocal":
            return E.op("rounded", ("rcp", "f64"), F64, x)
        if op == "rsqrt":   # 1 / sqrt, each correctly rounded: within 1 ulp
            return E.op("rounded", ("rcp", "f64"), F64, E.op("rounded", ("sqrt", "f64"), F64, x))
    r = _scalar_f32(E, op, _f32(x), ftz)
    return convert(r, ct)


def _scalar_f32(E: Emit, op: str, x: Expr, ftz: bool = False) -> Expr:
    """The float32 forms; 16-bit operands were widened (exactly) by the caller."""
    ex2 = ("ex2", "f32", True) if ftz else ("ex2", "f32")
    if op == "exp":      # exp(x) = 2^(x * log2 e): the scale folded into one mul
        return E.op("approx", ex2, F32, BinOp("mul", x, Const(LOG2E, F32), F32))
    if op == "exp2":
        return E.op("approx", ex2, F32, x)
    if op == "log2":
        return E.op("approx", ("lg2", "f32", True) if ftz else ("lg2", "f32"), F32, x)
    if op == "sqrt":
        return E.op("rounded", ("sqrt", "f32"), F32, x)
    if op == "rsqrt":
        return E.op("approx", ("rsqrt", "f32", True) if ftz else ("rsqrt", "f32"), F32, x)
    if op == "reciprocal":
        return E.op("rounded", ("rcp", "f32"), F32, x)
    if op == "silu":     # x * 1 / (1 + 2^(-x log2 e))
        t = E.op("approx", ex2, F32, BinOp("mul", x, Const(-LOG2E, F32), F32))
        d = E.reg(BinOp("add", t, Const(1.0, F32), F32), F32)
        return BinOp("mul", x, E.op("approx", ("rcp", "f32"), F32, d), F32)
    raise AssertionError(op)


# ---- packed pairs ------------------------------------------------------------------------------
PACKED = frozenset(("add", "sub", "mul", "fma", "max", "min", "exp2"))


def packed_form(op: str, dt, target) -> tuple | None:
    """(macro, modifiers, extra operand) of the two-lane form of op on dt, else None.
    bfloat16x2 add/sub/mul before sm_90 are fma with 1 / -1 / -0 (exact: one rounding)."""
    t = "f16x2" if dt is F16 else "bf16x2" if dt is BF16 else None
    if t is None or op not in PACKED:
        return None
    sm = target.sm
    if op in ("max", "min"):
        return ("fminmax", (op, t), None) if sm >= 80 else None
    if op == "exp2":
        if dt is F16:
            return ("approx", ("ex2", "f16x2"), None) if sm >= 75 else None
        return ("approx", ("ex2", "bf16x2", True), None) if sm >= 90 else None
    if dt is BF16 and sm < 80:
        return None
    if dt is BF16 and sm < 90 and op != "fma":
        return ("farith", ("fma", t), op)
    return ("farith", (op, t), None)


def bits_of(value, dt) -> int:
    """The bit pattern of a Python number as one element of dt (round to nearest even)."""
    if dt.is_int or dt is BOOL:
        return int(value) & ((1 << dt.bits) - 1)
    import numpy as np       # float rounding only: integer constants never load numpy
    if dt is F16:
        return int(np.float16(value).view(np.uint16))
    if dt is F32:
        return struct.unpack("<I", struct.pack("<f", float(np.float32(value))))[0]
    if dt is F64:
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    if dt is BF16:
        b = bits_of(value, F32)
        if math.isnan(float(value)):
            return (b >> 16) | 0x40
        return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    if value == 0:
        return 0
    raise ValueError(f"no bit pattern for {value!r} as {dt}")


def pair(E: Emit, lo: Expr, hi: Expr, dt) -> Load:
    """Two 16-bit values packed into a b32 register (lo in the low half)."""
    r = E.tmp(U32)
    E.instr("mov", ("b32",), (r, VecOperand((E.reg(convert(lo, dt), dt),
                                             E.reg(convert(hi, dt), dt)))))
    return r


def unpair(E: Emit, v: Load, lo: Load, hi: Load):
    E.instr("mov", ("b32",), (VecOperand((lo, hi)), v))


def packed(E: Emit, op: str, dt, pairs: list, target) -> Load:
    """One two-lane instruction: pairs = [(lo, hi)] per operand; the result's b32."""
    name, mods, emulate = packed_form(op, dt, target)
    regs = [pair(E, lo, hi, dt) for lo, hi in pairs]
    if emulate is not None:      # bf16x2 add/sub/mul as fma: a*1+b, b*-1+a, a*b+(-0)
        one, neg, mzero = (pair(E, Const(v, dt), Const(v, dt), dt) for v in (1.0, -1.0, -0.0))
        a, b = regs
        regs = {"add": [a, one, b], "sub": [b, neg, a], "mul": [a, b, mzero]}[emulate]
    return E.op(name, mods, U32, *regs)


