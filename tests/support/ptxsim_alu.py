"""The value semantics of tests/support/ptxsim.py: bit-pattern helpers and the ALU instructions
(integer and float arithmetic, logic, shifts, setp/selp, bfe/bfi, cvt), as a mixin of Sim."""
from __future__ import annotations

import struct

import numpy as np


class Unsupported(Exception):
    pass


class Trap(Exception):
    pass


_WIDTH = {"pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16,
          "bf16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32, "b64": 64, "u64": 64, "s64": 64,
          "f64": 64}


def _reg_bits(name: str) -> int:
    name = name.strip()
    if name.startswith(("%rd", "%fd")):
        return 64
    if name.startswith("%rs"):
        return 16
    if name.startswith("%p"):
        return 1
    return 32


def _mask(v, bits):
    return v & ((1 << bits) - 1)


def _signed(v, bits):
    v = _mask(v, bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def _f32(bits):
    return float(np.uint32(bits).view(np.float32))


def _f32_bits(x):
    return int(np.float32(x).view(np.uint32))


def _f64(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _f16(bits):
    return float(np.uint16(bits).view(np.float16))


def _bf16(bits):
    return _f32(bits << 16)


def _to_float(bits, ty):
    return {"f32": _f32, "f64": _f64, "f16": _f16, "bf16": _bf16}[ty](bits)


def _from_float(x, ty):
    if ty == "f32":
        return _f32_bits(np.float32(x))
    if ty == "f64":
        return _f64_bits(float(x))
    if ty == "f16":
        return int(np.float16(x).view(np.uint16))
    if ty == "bf16":   # round to nearest even from f32
        b = _f32_bits(np.float32(x))
        if (b & 0x7F800000) == 0x7F800000 and b & 0x7FFFFF:
            return ((b >> 16) | 0x40) & 0xFFFF
        return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    raise Unsupported(ty)


class AluOps:
    """Arithmetic and conversion opcodes; needs the host's _read/_write."""

    def _int_args(self, th, ctx, ty, ops):
        bits = _WIDTH[ty]
        vals = [self._read(th, ctx, o, ty) for o in ops]
        if ty[0] == "s":
            return [_signed(v, bits) for v in vals], bits
        return [_mask(v, bits) for v in vals], bits

    def _arith(self, th, ctx, parts, ops, fn_int, fn_float=None):
        ty = parts[-1]
        if ty in ("f32", "f64"):
            vals = [_to_float(self._read(th, ctx, o, ty), ty) for o in ops[1:]]
            dt = np.float32 if ty == "f32" else np.float64
            r = fn_float(*[dt(v) for v in vals])
            self._write(th, ops[0], _from_float(dt(r), ty), _WIDTH[ty])
            return
        if ty == "pred":
            vals = [self._read(th, ctx, o) for o in ops[1:]]
            self._write(th, ops[0], fn_int(*vals) & 1, 1)
            return
        vals, bits = self._int_args(th, ctx, ty, ops[1:])
        self._write(th, ops[0], fn_int(*vals), bits)

    def _op_add(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, lambda a, b: a + b, lambda a, b: a + b)

    def _op_sub(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, lambda a, b: a - b, lambda a, b: a - b)

    def _op_mul(self, th, ctx, p, o):
        if "wide" in p:
            ty = p[-1]
            (a, b), bits = self._int_args(th, ctx, ty, o[1:])
            self._write(th, o[0], a * b, 2 * bits)
            return
        self._arith(th, ctx, p, o, lambda a, b: a * b, lambda a, b: a * b)

    def _op_mad(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, lambda a, b, c: a * b + c)

    def _op_div(self, th, ctx, p, o):
        def idiv(a, b):
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        self._arith(th, ctx, p, o, idiv, lambda a, b: a / b)

    def _op_rem(self, th, ctx, p, o):
        def irem(a, b):
            r = abs(a) % abs(b)
            return r if a >= 0 else -r
        self._arith(th, ctx, p, o, irem)

    def _op_min(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, min, lambda a, b: np.fmin(a, b))

    def _op_max(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, max, lambda a, b: np.fmax(a, b))

    def _op_and(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, lambda a, b: a & b)

    def _op_or(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, lambda a, b: a | b)

    def _op_xor(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, lambda a, b: a ^ b)

    def _op_not(self, th, ctx, p, o):
        ty = p[-1]
        v = self._read(th, ctx, o[1])
        self._write(th, o[0], 0 if v else 1, 1) if ty == "pred" else \
            self._write(th, o[0], ~v, _WIDTH[ty])

    def _op_neg(self, th, ctx, p, o):
        self._arith(th, ctx, p, o, lambda a: -a, lambda a: -a)

    def _op_shl(self, th, ctx, p, o):
        ty = p[-1]
        a = self._read(th, ctx, o[1])
        b = self._read(th, ctx, o[2])
        self._write(th, o[0], a << b, _WIDTH[ty])

    def _op_shr(self, th, ctx, p, o):
        ty = p[-1]
        bits = _WIDTH[ty]
        a = self._read(th, ctx, o[1])
        b = self._read(th, ctx, o[2])
        a = _signed(a, bits) if ty[0] == "s" else _mask(a, bits)
        self._write(th, o[0], a >> min(b, bits), bits)

    def _op_setp(self, th, ctx, p, o):
        cmp, ty = p[1], p[2]
        if ty in ("f32", "f64"):
            a, b = (_to_float(self._read(th, ctx, x, ty), ty) for x in o[1:3])
        else:
            (a, b), _ = self._int_args(th, ctx, ty, o[1:3])
        r = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b,
             "ne": a != b}[cmp]
        self._write(th, o[0], r, 1)

    def _op_selp(self, th, ctx, p, o):
        ty = p[-1]
        c = self._read(th, ctx, o[3])
        self._write(th, o[0], self._read(th, ctx, o[1] if c else o[2], ty), _WIDTH[ty])

    def _op_bfe(self, th, ctx, p, o):
        ty = p[-1]
        bits = _WIDTH[ty]
        a = _mask(self._read(th, ctx, o[1]), bits)
        pos, ln = self._read(th, ctx, o[2]), self._read(th, ctx, o[3])
        v = (a >> pos) & ((1 << ln) - 1)
        if ty[0] == "s" and ln and v >> (ln - 1):
            v -= 1 << ln
        self._write(th, o[0], v, bits)

    def _op_bfi(self, th, ctx, p, o):
        a, b = self._read(th, ctx, o[1]), self._read(th, ctx, o[2])
        pos, ln = self._read(th, ctx, o[3]), self._read(th, ctx, o[4])
        m = ((1 << ln) - 1) << pos
        self._write(th, o[0], (b & ~m) | ((a << pos) & m), 32)

    def _op_cvt(self, th, ctx, p, o):
        mods = p[1:]
        dst, src = mods[-2], mods[-1]
        v = self._read(th, ctx, o[1])
        floats = ("f16", "bf16", "f32", "f64")
        if src in floats:
            x = _to_float(_mask(v, _WIDTH[src]), src)
            if dst in floats:
                self._write(th, o[0], _from_float(x, dst), _WIDTH[dst])
            else:   # .rzi: truncate toward zero
                self._write(th, o[0], int(x) if x == x else 0, _reg_bits(o[0]))
            return
        sbits = _WIDTH[src]
        iv = _signed(v, sbits) if src[0] == "s" else _mask(v, sbits)
        if dst in floats:
            self._write(th, o[0], _from_float(iv, dst), _WIDTH[dst])
        else:
            out_bits = _reg_bits(o[0])
            dbits = _WIDTH[dst]
            r = _signed(iv, dbits) if dst[0] == "s" else _mask(iv, dbits)
            self._write(th, o[0], r, out_bits)
