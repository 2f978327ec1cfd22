"""Immediates and conversions between register types (a mixin of the value emitter).

Float immediates are exact bit patterns (0f / 0d); float16 and bfloat16 constants are moved
into a b16 register.  Conversions follow C and numpy: float -> int truncates, narrowing ints
wrap, bf16 is the high half of an f32 where the target lacks cvt.f32.bf16.
"""
from __future__ import annotations

import struct

from ..dtypes import DType, dtype, int_type, reg_class
from ..errors import PtxgenError
from ..ir import BOOL, Const
from ..target import has_opcode
from ..target.forms import form, opcode

_F32 = dtype("float32")


class ConvertEmitter:
    """Mixin: needs self.new_reg, self.emit, self.need_opcode, self.target and _narrow
    (ValueEmitter)."""

    # ---- immediates -----------------------------------------------------------------
    def imm(self, c: Const) -> str:
        dt = c.dtype
        if dt.is_int:
            return str(int(c.value))
        if dt.name == "float32":
            return "0f%08X" % struct.unpack("<I", struct.pack("<f", c.value))[0]
        if dt.name == "float64":
            return "0d%016X" % struct.unpack("<Q", struct.pack("<d", c.value))[0]
        if dt.name == "float16":   # numpy's rounding to half; imported here, not with ptxgen
            import numpy as np

            r = self.new_reg("b16")
            self.emit(form("mov", "b16").format(d=r, a="0x%04X" % int(np.float16(c.value).view(np.uint16))))
            return r
        if dt.name == "bfloat16":
            bits = struct.unpack("<I", struct.pack("<f", c.value))[0]
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16   # round to nearest even
            r = self.new_reg("b16")
            self.emit(form("mov", "b16").format(d=r, a="0x%04X" % bits))
            return r
        if dt == BOOL:
            r = self.new_reg("pred")
            self.emit(form("setp", "eq" if c.value else "ne", "u32").format(d=r, a="0", b="0"))
            return r
        raise PtxgenError(f"no immediate form for {dt}")

    def _to_f32(self, v: str, dt: DType) -> str:
        if dt.name == "float32":
            return v
        return self._cast(v, dt, _F32)

    # ---- conversions -----------------------------------------------------------------
    def _cast(self, v: str, src: DType, dst: DType) -> str:
        if src == dst:
            return v
        if src.kind == "storage" or dst.kind == "storage":
            raise PtxgenError(f"cannot convert {src} to {dst}: fp8/fp4 types are storage only "
                              f"here (move their bits; compute in float16/float32)")
        if src == BOOL:
            r = self.new_reg(reg_class(dst))
            one = "1" if dst.is_int else self.imm(Const(1.0, dst))
            zero = "0" if dst.is_int else self.imm(Const(0.0, dst))
            self.emit(form("ternary", "selp", self._arith_type(dst) if dst.is_int or dst.bits >= 32
                           else "b16").format(d=r, a=one, b=zero, c=v))
            return r
        if dst == BOOL:
            r = self.new_reg("pred")
            zero = "0" if src.is_int else self.imm(Const(0.0, src))
            self.emit(form("setp", "ne", self._arith_type(src)).format(d=r, a=v, b=zero))
            return r
        if src.is_int and dst.is_int:
            sb, db = (64 if src.bits == 64 else 32), (64 if dst.bits == 64 else 32)
            if sb == db:
                if dst.bits < 32 and (dst.bits < src.bits or dst.kind != src.kind):
                    return self._narrow(v, dst)
                return v
            r = self.new_reg("b64" if db == 64 else "b32")
            self.emit(form("cvt", int_type(dst), int_type(src)).format(d=r, a=v))
            return self._narrow(r, dst)
        if src.is_int:   # int -> float
            if dst.name in ("float32", "float64", "float16"):
                r = self.new_reg(reg_class(dst))
                self.emit(form("cvt", dst.ptx.arith, int_type(src), rnd=".rn").format(d=r, a=v))
                return r
            return self._cast(self._cast(v, src, _F32), _F32, dst)
        if dst.is_int:   # float -> int, truncating like C and numpy astype
            if src.name == "bfloat16":
                v, src = self._cast(v, src, _F32), _F32
            r = self.new_reg("b64" if dst.bits == 64 else "b32")
            self.emit(form("cvt", int_type(dst) if dst.bits >= 32 else ("s32" if dst.kind == "int" else "u32"),
                           src.ptx.arith, rnd=".rzi").format(d=r, a=v))
            return self._narrow(r, dst)
        # float -> float
        s, d = src.name, dst.name
        if s == "bfloat16":
            if has_opcode("cvt.f32.bf16", self.target):
                r = self.new_reg("f32")
                self.need_opcode(opcode("cvt", "f32", "bf16"))
                self.emit(form("cvt", "f32", "bf16").format(d=r, a=v))
            else:   # bf16 is the high half of an f32
                t = self.new_reg("b32")
                self.emit(form("cvt", "u32", "u16").format(d=t, a=v))
                self.emit(form("binary", "shl", "b32").format(d=t, a=t, b=16))
                r = self.new_reg("f32")
                self.emit(form("mov", "b32").format(d=r, a=t))
            return self._cast(r, _F32, dst)
        if d == "bfloat16":
            v = self._cast(v, src, _F32)
            r = self.new_reg("b16")
            self.need_opcode(opcode("cvt", "bf16", "f32", rnd=".rn"))
            self.emit(form("cvt", "bf16", "f32", rnd=".rn").format(d=r, a=v))
            return r
        r = self.new_reg(reg_class(dst))
        widening = dst.bits > src.bits
        self.emit(form("cvt", dst.ptx.arith, src.ptx.arith, rnd="" if widening else ".rn").format(
            d=r, a=v))
        return r
