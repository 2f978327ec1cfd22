"""cast: every pair of ptxgen's element dtypes, with PTX's roundings and saturation, each
conversion rounding exactly once.

A pair PTX converts directly is one `cvt`.  Others go through float32: widening into it is
exact (16-bit, 8-bit and 4-bit floats, integers of up to 16 bits); where the source has more
precision than float32 (32/64-bit integers, float64) and the destination is narrower than
float32, the float32 step rounds to *odd* (round toward zero, then set the last bit when
inexact), which makes the second rounding to nearest exact (float32 keeps more than p + 2
bits of every narrower p); directed roundings compose with themselves.  Semantics:
float -> int rounds toward zero by default and saturates, as PTX's cvt does; a NaN becomes
what cvt.rzi writes (measured on the H200): 0 from float32 and narrower into 32 bits or less,
the sign bit alone (INT_MIN's bits) into 64 bits and from float64, clamped for 8/16-bit results;
int -> int wraps unless saturate=True; float narrowing rounds to nearest even unless
rounding= says otherwise and overflows to inf unless saturate=True (.satfinite); float8 and
float4_e2m1fn conversions are round-to-nearest and always saturate (the only forms PTX has).
float4_e2m1fn (±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no inf or NaN) converts through float16 from
(cvt.rn.f16x2.e2m1x2, exact) and float32 to (cvt.rn.satfinite.e2m1x2.f32): beyond ±6, and
±inf, saturate to ±6; a NaN becomes +6, the PTX ISA's rule for .satfinite into a format
without NaN ("NaN results are converted to positive MAX_NORM"; not measured on hardware).

This module converts one element at a time; cast_pairs.py has the two-element forms.
"""
from __future__ import annotations

from ...dtypes import E2M1X2, dtype
from ...errors import TraceError
from ...ir import BinOp, BOOL, Cast, Const, Expr, VecOperand, int_range
from .compute import Emit, convert, truth
from .ops import F16, F32, F64, ROUNDINGS

U32 = dtype("uint32")
FP8 = ("float8_e4m3fn", "float8_e5m2")
FP4 = "float4_e2m1fn"


def pair_type(dt) -> str:
    """The PTX type of two elements of a narrow float, as its cvt forms name it (e4m3x2)."""
    return dtype(dt).ptx.spell + "x2"


def _kind(dt) -> str:
    if dt is BOOL:
        return "bool"
    if dt.is_int:
        return "int"
    if dt.name in FP8:
        return "fp8"
    if dt.name == FP4:
        return "fp4"
    if dt.is_float:
        return "float"
    return "other"


def _ityp(dt) -> str:
    """PTX integer type of a register holding dt (sub-32-bit ints live extended in 32 bits)."""
    return ("s" if dt.kind == "int" else "u") + ("64" if dt.bits == 64 else "32")


def check_cast(src, dst, rounding, saturate, scope) -> None:
    """TraceError (naming the fix) for a conversion or modifier PTX does not have."""
    s, d = _kind(src), _kind(dst)
    for dt, k in ((src, s), (dst, d)):
        if k == "other":
            raise TraceError(f"cast: {dt} elements are not numbers; cast bool, integer and "
                             f"float regions")
    if rounding is not None and rounding not in ROUNDINGS:
        raise TraceError(f"cast rounding={rounding!r}: PTX rounds with one of "
                         f"{', '.join(ROUNDINGS)} (nearest even, toward zero, down, up)")
    pair = f"{src} -> {dst}"
    exact = (src is dst or s == "bool" or d == "bool" or (s == "int" and d == "int")
             or s == "fp8" and d == "float" or s == "fp4" and d in ("float", "fp8")
             or (s == "float" and d == "float" and _widens(src, dst)))
    if rounding is not None and exact:
        raise TraceError(f"cast {pair} is exact; it takes no rounding mode (drop "
                         f"rounding={rounding!r})")
    if d in ("fp8", "fp4"):
        if rounding not in (None, "rn"):
            raise TraceError(f"cast {pair}: PTX converts to {dst} with round-to-nearest-even "
                             f"only (cvt.rn.satfinite.{pair_type(dst)}.f32); drop "
                             f"rounding={rounding!r}")
        if saturate is False:
            raise TraceError(f"cast {pair}: PTX's {'float8' if d == 'fp8' else 'float4'} "
                             f"conversions always saturate to the largest finite value "
                             f"(.satfinite); drop saturate=False")
    if s in ("float", "fp8", "fp4") and d == "int" and saturate is False:
        raise TraceError(f"cast {pair}: PTX's float-to-integer conversions always saturate "
                         f"to the destination range; drop saturate=False")
    if saturate:
        if d == "float" and dst is F32 or d == "float" and dst is F64:
            raise TraceError(f"cast {pair} with saturate=True: PTX has no saturating conversion "
                             f"to {dst}; clamp with pg.tile.{scope}.min/max first")
        if d == "float" and exact:
            raise TraceError(f"cast {pair} is exact; saturate does not apply (drop "
                             f"saturate=True)")
        if s == "bool" or d == "bool":
            raise TraceError(f"cast {pair}: saturate does not apply to bool")


def _widens(src, dst) -> bool:
    return src.bits < dst.bits or src is dst


# ---- emission ---------------------------------------------------------------------------------
def cast_value(E: Emit, x: Expr, src, dst, rounding=None, saturate=None) -> Expr:
    """x (of dtype src) converted to dst."""
    s, d = _kind(src), _kind(dst)
    if src is dst:
        return x
    if s in ("fp8", "fp4"):
        x, src, s = (_fp8_to_f16(E, x, src) if s == "fp8" else _fp4_to_f16(E, x)), F16, "float"
        if dst is F16:
            return x
    if d == "bool":
        return truth(E, x)
    if s == "bool":
        if d == "fp8":
            return _to_fp8(E, Cast(x, F32), dst)
        if d == "fp4":
            return _to_fp4(E, Cast(x, F32), dst)
        return Cast(x, dst)
    if s == "int" and d == "int":
        return _int_to_int(x, src, dst, saturate)
    if s == "float" and d == "int":
        return _float_to_int(E, x, src, dst, rounding or "rz")
    rnd = rounding or "rn"
    if d == "fp8":
        return _to_fp8(E, _to_f32(E, x, src, "rn", odd=True), dst)
    if d == "fp4":
        return _to_fp4(E, _to_f32(E, x, src, "rn", odd=True), dst)
    if s == "float" and _widens(src, dst):
        return convert(x, dst)
    # narrowing float -> float, or int -> float
    direct = _direct_form(src, dst, saturate)
    if direct:
        return E.op("convert", (dst.ptx.spell, _src_type(src), rnd, bool(saturate)), dst, x)
    f = _to_f32(E, x, src, rnd, odd=(rnd == "rn"))
    if dst is F32:
        return f
    return E.op("convert", (dst.ptx.spell, "f32", rnd, bool(saturate)), dst, f)


def _src_type(dt) -> str:
    return dt.ptx.spell if dt.is_float else _ityp(dt)


def _direct_form(src, dst, saturate) -> bool:
    """PTX converts src to dst in one cvt (rounding applies; .satfinite only from f32)."""
    if dst is F32 or dst is F64:
        return True                      # every int and float64 -> f32/f64 exists
    if saturate:
        return src is F32
    if dst is F16:
        return src.is_int or src is F64 or src is F32
    return src is F32                    # bfloat16: from float32 only before sm_90


def _to_f32(E: Emit, x, src, rnd, odd=False) -> Expr:
    """x as float32: exact for narrow sources; else rounded `rnd`, or to odd when `odd`."""
    if src is F32:
        return x
    if src.is_float and src.bits < 32 or src.is_int and src.bits <= 16:
        return Cast(x, F32) if src.is_float else E.op("convert", ("f32", _ityp(src), "rn"), F32, x)
    st = _src_type(src)
    if not odd:
        return E.op("convert", ("f32", st, rnd), F32, x)
    r = E.op("convert", ("f32", st, "rz"), F32, x)
    back = E.op("convert", (st, "f32", "" if src.is_float else "rzi"), src, r)   # exact
    bits = E.op("mov", ("b32",), U32, r)
    sticky = E.reg(Cast(BinOp("ne", back, x, BOOL), U32), U32)
    odd_bits = E.reg(BinOp("or", bits, sticky, U32), U32)
    return E.op("mov", ("b32",), F32, odd_bits)


def _int_to_int(x, src, dst, saturate) -> Expr:
    if saturate:
        (slo, shi), (dlo, dhi) = int_range(src), int_range(dst)
        if dlo > slo:
            x = BinOp("max", x, Const(dlo, src), src)
        if dhi < shi:
            x = BinOp("min", x, Const(dhi, src), src)
    return Cast(x, dst)


def _float_to_int(E: Emit, x, src, dst, rnd) -> Expr:
    """cvt.r*i into the 32/64-bit type (it saturates), then the narrow range clamped."""
    if src is not F32 and src is not F64:
        x, src = Cast(x, F32), F32
    wide = dtype(("int" if dst.kind == "int" else "uint") + ("64" if dst.bits == 64 else "32"))
    r = E.op("convert", (_ityp(wide), src.ptx.spell, rnd + "i"), wide, x)
    if dst.bits >= 32:
        return r
    lo, hi = int_range(dst)
    if dst.kind == "int":
        r = BinOp("min", BinOp("max", r, Const(lo, wide), wide), Const(hi, wide), wide)
    else:
        r = BinOp("min", r, Const(hi, wide), wide)
    return Cast(r, dst)


def _fp8_to_f16(E: Emit, x, src) -> Expr:
    """cvt.rn.f16x2.e4m3x2 on the byte in a b16 register; the low half is the value."""
    h = E.op("convert", ("u16", "u32"), F16, x)
    both = E.op("convert", ("f16x2", pair_type(src), "rn"), U32, h)
    lo, hi = E.tmp(F16), E.tmp(F16)
    E.instr("mov", ("b32",), (VecOperand((lo, hi)), both))
    return lo


def _to_fp8(E: Emit, f, dst) -> Expr:
    """cvt.rn.satfinite.e4m3x2.f32 with 0.0 as the upper value; the low byte is the value."""
    h = E.op("convert", (pair_type(dst), "f32", "rn", True), F16, Const(0.0, F32), f)
    return E.op("convert", ("u32", "u16"), dst, h)


def _fp4_to_f16(E: Emit, x) -> Expr:
    """cvt.rn.f16x2.e2m1x2 on the element's nibble (in a .b8 register); the low half is the
    value (bits 4..7 of the register, the upper value, are not read)."""
    b = E.op("convert", ("u8", "u32"), E2M1X2, x)
    both = E.op("convert", ("f16x2", "e2m1x2", "rn"), U32, b)
    lo, hi = E.tmp(F16), E.tmp(F16)
    E.instr("mov", ("b32",), (VecOperand((lo, hi)), both))
    return lo


def _to_fp4(E: Emit, f, dst) -> Expr:
    """cvt.rn.satfinite.e2m1x2.f32 with 0.0 as the upper value: the byte is the value's code."""
    b = E.op("convert", ("e2m1x2", "f32", "rn", True), E2M1X2, Const(0.0, F32), f)
    return E.op("convert", ("u32", "u8"), dst, b)


def f32_of(E: Emit, x, src) -> Expr:
    """x as the float32 that a conversion to float8 / float4_e2m1fn rounds: bool and narrow
    floats exactly, wider sources rounded to odd (one rounding in all)."""
    s = _kind(src)
    if s == "bool":
        return Cast(x, F32)
    if s in ("fp8", "fp4"):
        x, src = (_fp8_to_f16(E, x, src) if s == "fp8" else _fp4_to_f16(E, x)), F16
    return _to_f32(E, x, src, "rn", odd=True)
