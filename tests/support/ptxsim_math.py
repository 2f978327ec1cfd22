"""The float formats and math instructions of tests/support/ptxsim.py (a mixin of Sim, before AluOps).

Formats are modelled exactly: values are Fractions, `round_bits` rounds one to a format with
any PTX rounding mode (and .satfinite), so conversions, 16-bit and packed arithmetic and fma
are bit-exact models of the hardware's correctly rounded results.  The special-function
approximations (ex2/lg2/rsqrt/rcp .approx) are modelled as the exact function rounded to
nearest: a test that runs them states the hardware's error bound against numpy.  Warp
collectives (shfl.sync, redux.sync) run when every live lane of the warp reaches them.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .ptxsim_alu import _WIDTH, Unsupported, _mask, _signed

# name: (exponent bits, mantissa bits, has inf)  (float8_e4m3fn: no inf, NaN = all ones;
# float4_e2m1fn, "e2m1": no inf and no NaN, every code a number: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6})
FORMATS = {"f16": (5, 10, True), "bf16": (8, 7, True), "f32": (8, 23, True),
           "f64": (11, 52, True), "e4m3": (4, 3, False), "e5m2": (5, 2, True),
           "e2m1": (2, 1, False)}
NO_NAN = frozenset({"e2m1"})
_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8, "e2m1": 4}


def _params(fmt):
    eb, mb, has_inf = FORMATS[fmt]
    bias = (1 << (eb - 1)) - 1
    if has_inf:
        max_finite = (2 - Fraction(1, 1 << mb)) * Fraction(2) ** bias
    elif fmt in NO_NAN:          # e2m1: the top exponent and mantissa are a number (6)
        max_finite = (2 - Fraction(1, 1 << mb)) * Fraction(2) ** (bias + 1)
    else:                        # e4m3fn: the top exponent is finite but for mantissa 111
        max_finite = (2 - Fraction(2, 1 << mb)) * Fraction(2) ** (bias + 1)
    return eb, mb, has_inf, bias, max_finite


def nan_bits(fmt):
    """fmt's NaN; for a format without one (e2m1), what .satfinite writes for a NaN input:
    positive MAX_NORM, the PTX ISA's rule (cvt, .satfinite: "NaN results are converted to
    positive MAX_NORM" for such formats; not measured on hardware)."""
    eb, mb, has_inf, _, maxf = _params(fmt)
    if fmt in NO_NAN:
        return round_bits(maxf, fmt)
    return (((1 << eb) - 1) << mb) | ((1 << mb) - 1 if not has_inf else 1 << (mb - 1))


def decode(bits, fmt):
    """A format's bits as a Fraction, or a float inf/nan."""
    eb, mb, has_inf, bias, _ = _params(fmt)
    sign = -1 if bits >> (eb + mb) & 1 else 1
    e = (bits >> mb) & ((1 << eb) - 1)
    m = bits & ((1 << mb) - 1)
    if e == (1 << eb) - 1 and fmt not in NO_NAN and (has_inf or m == (1 << mb) - 1):
        if has_inf and m == 0:
            return sign * math.inf
        return math.nan
    if e == 0:
        return sign * Fraction(m, 1 << mb) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(m, 1 << mb)) * Fraction(2) ** (e - bias)


def to_value(x):
    """A Python number (or Fraction) as a Fraction, keeping inf/nan and float zeros as floats
    (a Fraction has no -0: round_bits reads the sign of a float -0.0)."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x) or x == 0):
        return x
    return Fraction(x)


def round_bits(x, fmt, mode="rn", satfinite=False, ftz=False):
    """The bits of x rounded to `fmt` with PTX rounding `mode` (rn/rz/rm/rp)."""
    eb, mb, has_inf, bias, maxf = _params(fmt)
    x = to_value(x)
    sbit = 1 << (eb + mb)
    if isinstance(x, float) and math.isnan(x):
        return nan_bits(fmt)
    neg = x < 0 or (x == 0 and isinstance(x, float) and math.copysign(1, x) < 0)
    s = sbit if neg else 0
    if isinstance(x, float) and math.isinf(x):
        if satfinite or not has_inf:
            return s | round_bits(maxf, fmt)
        return s | (((1 << eb) - 1) << mb)
    a = abs(x)
    if a == 0:
        return s
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, 1 - bias)
    q = Fraction(2) ** (e - mb)           # the quantum at this exponent
    m = a / q
    lo = m.numerator // m.denominator
    rem = m - lo
    up = {"rn": rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo & 1),
          "rz": False, "rm": neg and rem > 0, "rp": (not neg) and rem > 0}[mode]
    mq = lo + (1 if up else 0)
    v = mq * q
    if v > maxf:
        to_max = satfinite or mode == "rz" or (mode == "rm" and not neg) or \
            (mode == "rp" and neg) or fmt in NO_NAN
        if to_max:
            return s | round_bits(maxf, fmt)
        return s | (((1 << eb) - 1) << mb) if has_inf else nan_bits(fmt)
    if mq == 0:
        return s
    if mq >= 1 << mb and mq.bit_length() == mb + 1:     # normal
        ex = (mq.bit_length() - 1 - mb) + e + bias
        mant = (mq >> (mq.bit_length() - 1 - mb)) - (1 << mb)
        return s | (ex << mb) | mant
    if mq >= 1 << (mb + 1):                              # rounded up to the next binade
        return s | ((e + 1 + bias) << mb)
    if ftz:                                              # a subnormal result flushes
        return s
    return s | mq                                        # subnormal


# ---- cvt's NaNs and signed zeros (measured on the H200) -----------------------------------------
def canonical_nan(fmt):
    """The canonical NaN of fmt: positive, exponent and mantissa all ones (0x7fff, 0x7fffffff,
    0x7f for both float8 formats)."""
    eb, mb, _, _, _ = _params(fmt)
    return (1 << (eb + mb)) - 1


def cvt_nan(bits, sfmt, dfmt):
    """What a float -> float cvt writes for the NaN `bits` of sfmt, measured on the H200.

    The f64 conversions (cvt.f64.f16/f32, cvt.r*.f32/f16.f64) and the exact bf16 -> f32
    widening move the NaN as bits: the sign and the mantissa's top bits, shifted to the
    destination's width, with the quiet bit set (f16 0x7fff -> f64 0x7ffffc0000000000,
    f64 0x7ff8... -> f16 0x7e00).  Every other one (cvt.f32.f16, cvt.r*[.satfinite].f16/bf16
    [x2].f32, cvt.rn.f16x2.e4m3x2/e5m2x2, cvt.rn.satfinite.e4m3x2/e5m2x2.f32) writes the
    destination's canonical NaN, whatever the input NaN.  (The probe's NaNs were positive
    and quiet: that the sign and the low payload bits move too is the bit-move reading.)
    """
    if dfmt in NO_NAN:           # cvt.rn.satfinite.e2m1x2.f32: +MAX_NORM (see nan_bits)
        return nan_bits(dfmt)
    if "f64" not in (sfmt, dfmt) and (sfmt, dfmt) != ("bf16", "f32"):
        return canonical_nan(dfmt)
    seb, smb, _, _, _ = _params(sfmt)
    deb, dmb, _, _, _ = _params(dfmt)
    m = bits & ((1 << smb) - 1)
    m = m << (dmb - smb) if dmb >= smb else m >> (smb - dmb)
    sign = bits >> (seb + smb) & 1
    return sign << (deb + dmb) | ((1 << deb) - 1) << dmb | m | 1 << (dmb - 1)


def cvt_value(bits, fmt):
    """decode() for the source of a float -> float cvt: -0 as the float -0.0, which
    round_bits writes with its sign (every float -> float cvt keeps the sign of zero,
    measured on the H200); arithmetic keeps decode()'s Fractions."""
    x = decode(bits, fmt)
    return -0.0 if x == 0 and bits >> (_BITS[fmt] - 1) else x


def int_nan(sfmt, ity):
    """What cvt.r*i.<ity>.<sfmt> writes for a NaN, measured on the H200: 0 from f32 into
    s32/u32; the bits 1 << (w - 1) (as ity's value: INT_MIN, or 2^(w-1) unsigned) from f32
    into s64/u64 and from f64 into s32/u32/s64/u64.  (ptxgen converts 16-bit and 8-bit
    floats through f32 and narrow integers through 32 bits; other widths are unmeasured.)"""
    w = _WIDTH[ity]
    if sfmt != "f64" and w <= 32:
        return 0
    return -(1 << (w - 1)) if ity[0] == "s" else 1 << (w - 1)


def _exp2(x):
    if isinstance(x, float) and math.isnan(x):
        return math.nan
    if x == math.inf:
        return math.inf
    if x == -math.inf:
        return 0.0
    try:
        return Fraction(2.0 ** float(x))
    except OverflowError:
        return math.inf


def _log2(x):
    if isinstance(x, float) and math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if x == math.inf:
        return math.inf
    return Fraction(math.log2(x))


def _rsqrt(x):
    if isinstance(x, float) and math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return math.inf
    if x == math.inf:
        return Fraction(0)
    return Fraction(1 / math.sqrt(x))


def _rcp(x):
    if isinstance(x, float):
        return math.nan if math.isnan(x) else Fraction(0)
    if x == 0:
        return math.inf
    return 1 / x


def _sqrt(x):
    if isinstance(x, float):
        return x if math.isnan(x) or x > 0 else math.nan
    if x < 0:
        return math.nan
    if x == 0:
        return x
    # floor(sqrt(x) * 2^k) / 2^k plus a sticky bit below it: enough for round_bits
    k = 1200
    q, rr = divmod(x.numerator << (2 * k), x.denominator)
    r = math.isqrt(q)
    exact = r * r == q and rr == 0
    return Fraction(r, 1 << k) + (0 if exact else Fraction(1, 1 << (k + 1)))


_EXACT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b}


def _exact_op(op, vals):
    """op on Fraction/inf/nan operands as IEEE does (inf arithmetic, NaN propagation)."""
    if any(isinstance(v, float) for v in vals):
        fv = [float(v) for v in vals]
        if op == "fma":
            return fv[0] * fv[1] + fv[2] if not any(math.isnan(v) for v in fv) else math.nan
        try:
            return {"add": fv[0] + fv[1], "sub": fv[0] - fv[1], "mul": fv[0] * fv[1],
                    "div": fv[0] / fv[1] if fv[1] else math.copysign(math.inf, fv[0])}[op]
        except ZeroDivisionError:
            return math.nan
    if op == "fma":
        return vals[0] * vals[1] + vals[2]
    if op == "div" and vals[1] == 0:
        return math.nan if vals[0] == 0 else math.copysign(math.inf, vals[0])
    return _EXACT[op](*vals)


def _zero_sign(op, vals, bits_in, fmt):
    """IEEE's sign of an exact zero result: x + (-x) = +0, -0 + -0 = -0, products' signs."""
    eb, mb, _, _, _ = _params(fmt)
    sb = eb + mb
    signs = [b >> sb & 1 for b in bits_in]
    if op == "mul" or op == "div":
        return signs[0] ^ signs[1]
    if op == "add":
        return signs[0] & signs[1]
    if op == "sub":
        return signs[0] & (signs[1] ^ 1)
    if op == "fma":
        p = signs[0] ^ signs[1]
        return p & signs[2]
    return 0


class MathOps:
    """16-bit / packed float arithmetic, fma, the special functions, every cvt, collectives."""

    # ---- helpers -----------------------------------------------------------------------
    def _lanes(self, th, ctx, tok, ty):
        """(lane formats, lane values) of an operand of a scalar or x2 float type."""
        fmt = ty[:-2] if ty.endswith("x2") else ty
        v = self._read(th, ctx, tok, ty if ty in _WIDTH else None)
        if ty.endswith("x2"):
            w = _BITS[fmt]
            return fmt, [v & ((1 << w) - 1), (v >> w) & ((1 << w) - 1)]
        return fmt, [_mask(v, _BITS[fmt])]

    def _float_lanes_op(self, th, ctx, parts, ops, op):
        ty = parts[-1]
        mode = next((p for p in parts[1:-1] if p in ("rn", "rz", "rm", "rp")), "rn")
        ftz = "ftz" in parts
        srcs = [self._lanes(th, ctx, o, ty) for o in ops[1:]]
        fmt = srcs[0][0]
        out = []
        for lane in range(len(srcs[0][1])):
            bits = [s[1][lane] for s in srcs]
            vals = [decode(b, fmt) for b in bits]
            if op in ("min", "max"):
                out.append(self._minmax(op, bits, vals, fmt))
                continue
            r = _exact_op(op, vals)
            if r == 0 and not isinstance(r, float):
                out.append(_zero_sign(op, vals, bits, fmt) << (_BITS[fmt] - 1))
            else:
                out.append(round_bits(r, fmt, mode, ftz=ftz))
        self._write_lanes(th, ops[0], out, fmt, ty)

    @staticmethod
    def _minmax(op, bits, vals, fmt):
        nan = [isinstance(v, float) and math.isnan(v) for v in vals]
        if all(nan):
            return nan_bits(fmt)
        if nan[0]:
            return bits[1]
        if nan[1]:
            return bits[0]
        a, b = vals
        if a == b:   # +0 / -0: min takes the negative one, max the positive one
            sa = bits[0] >> (_BITS[fmt] - 1)
            return (bits[0] if sa else bits[1]) if op == "min" else (bits[1] if sa else bits[0])
        return bits[0] if (a < b) == (op == "min") else bits[1]

    def _write_lanes(self, th, tok, lanes, fmt, ty):
        w = _BITS[fmt]
        v = 0
        for k, b in enumerate(lanes):
            v |= b << (w * k)
        self._write(th, tok, v, _WIDTH.get(ty, 32) if not ty.endswith("x2") else 2 * w)

    # ---- arithmetic ---------------------------------------------------------------------
    def _maybe_16(self, th, ctx, parts, ops, op):
        ty = parts[-1]
        if ty in ("f16", "bf16", "f16x2", "bf16x2") or (op == "fma" and ty in ("f32", "f64")):
            self._float_lanes_op(th, ctx, parts, ops, op)
            return True
        return False

    def _op_add(self, th, ctx, p, o):
        if not self._maybe_16(th, ctx, p, o, "add"):
            super()._op_add(th, ctx, p, o)

    def _op_sub(self, th, ctx, p, o):
        if not self._maybe_16(th, ctx, p, o, "sub"):
            super()._op_sub(th, ctx, p, o)

    def _op_mul(self, th, ctx, p, o):
        if not self._maybe_16(th, ctx, p, o, "mul"):
            super()._op_mul(th, ctx, p, o)

    def _op_min(self, th, ctx, p, o):
        if not self._maybe_16(th, ctx, p, o, "min"):
            super()._op_min(th, ctx, p, o)

    def _op_max(self, th, ctx, p, o):
        if not self._maybe_16(th, ctx, p, o, "max"):
            super()._op_max(th, ctx, p, o)

    def _op_fma(self, th, ctx, p, o):
        if not self._maybe_16(th, ctx, p, o, "fma"):
            raise Unsupported(".".join(p))

    def _special(self, th, ctx, parts, ops, fn):
        ty = parts[-1]
        ftz = "ftz" in parts
        fmt, lanes = self._lanes(th, ctx, ops[1], ty)
        top = _BITS[fmt] - 1
        out = []
        for b in lanes:
            x = decode(b, fmt)
            if ftz and not isinstance(x, float) and x != 0 and abs(x) < Fraction(2) ** (
                    2 - (1 << (FORMATS[fmt][0] - 1))):
                x = Fraction(0)
            neg = b >> top & 1
            if x == 0 and fn in (_sqrt, _rsqrt, _rcp):     # signed zeros
                r = {_sqrt: 0, _rsqrt: math.inf, _rcp: math.inf}[fn]
                out.append((round_bits(r, fmt) if r else 0) | (neg << top))
                continue
            if isinstance(x, float) and math.isinf(x) and fn is _rcp:
                out.append(neg << top)
                continue
            out.append(round_bits(fn(x), fmt, "rn", ftz=ftz))
        self._write_lanes(th, ops[0], out, fmt, ty)

    def _op_ex2(self, th, ctx, p, o):
        self._special(th, ctx, p, o, _exp2)

    def _op_lg2(self, th, ctx, p, o):
        self._special(th, ctx, p, o, _log2)

    def _op_rsqrt(self, th, ctx, p, o):
        self._special(th, ctx, p, o, _rsqrt)

    def _op_rcp(self, th, ctx, p, o):
        self._special(th, ctx, p, o, _rcp)

    def _op_sqrt(self, th, ctx, p, o):
        self._special(th, ctx, p, o, _sqrt)

    def _op_setp(self, th, ctx, p, o):
        """Float compares as PTX defines them: eq..ge are ordered (false on NaN), equ..geu
        unordered (true on NaN); 16-bit floats compare as values."""
        cmp, ty = p[1], p[2]
        if ty not in ("f16", "bf16", "f32", "f64"):
            return super()._op_setp(th, ctx, p, o)
        a, b = (decode(_mask(self._read(th, ctx, x, ty), _BITS[ty]), ty) for x in o[1:3])
        nan = any(isinstance(v, float) and math.isnan(v) for v in (a, b))
        if cmp in ("num", "nan"):
            r = nan == (cmp == "nan")
        elif nan:
            r = cmp.endswith("u")
        else:
            a, b = float(a), float(b)
            r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                 "ge": a >= b}[cmp.rstrip("u") if cmp != "neu" else "ne"]
        self._write(th, o[0], r, 1)

    # ---- conversions --------------------------------------------------------------------
    def _op_cvt(self, th, ctx, p, o):
        mods = p[1:]
        dst, src = mods[-2], mods[-1]
        rnd = next((m for m in mods if m in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi",
                                             "rpi")), None)
        satf, sat = "satfinite" in mods, "sat" in mods
        floats = ("f16", "bf16", "f32", "f64")
        if dst.endswith("x2") or src.endswith("x2"):
            return self._cvt_x2(th, ctx, o, dst, src, rnd or "rn", satf)
        v = self._read(th, ctx, o[1])
        if src in floats:
            b = _mask(v, _WIDTH[src])
            if dst in floats:
                self._write(th, o[0], _cvt_float(b, src, dst, rnd or "rn", satf), _WIDTH[dst])
                return
            self._write(th, o[0], _float_to_int(decode(b, src), src, dst, rnd or "rzi"),
                        _reg_width(o[0], dst))
            return
        sbits = _WIDTH[src]
        iv = _signed(v, sbits) if src[0] == "s" else _mask(v, sbits)
        if dst in floats:
            self._write(th, o[0], round_bits(Fraction(iv), dst, rnd or "rn", satf), _WIDTH[dst])
            return
        dbits = _WIDTH[dst]
        if sat:
            lo, hi = (-(1 << (dbits - 1)), (1 << (dbits - 1)) - 1) if dst[0] == "s" else \
                (0, (1 << dbits) - 1)
            iv = min(max(iv, lo), hi)
        r = _signed(iv, dbits) if dst[0] == "s" else _mask(iv, dbits)
        self._write(th, o[0], r, _reg_width(o[0], dst))

    def _cvt_x2(self, th, ctx, o, dst, src, rnd, satf):
        dfmt, sfmt = dst[:-2], src[:-2] if src.endswith("x2") else src
        if src.endswith("x2"):                 # one packed operand: lanes lo, hi
            v = self._read(th, ctx, o[1])
            w = _BITS[sfmt]
            bs = [v & ((1 << w) - 1), (v >> w) & ((1 << w) - 1)]
        else:                                  # d = {hi: cvt(a), lo: cvt(b)}
            bs = [_mask(self._read(th, ctx, t), _BITS[sfmt]) for t in (o[2], o[1])]
        lanes = [_cvt_float(b, sfmt, dfmt, rnd, satf) for b in bs]
        w = _BITS[dfmt]
        self._write(th, o[0], lanes[0] | (lanes[1] << w), 2 * w if 2 * w > 16 else 16)

    # ---- warp collectives ----------------------------------------------------------------
    def _collective(self, lanes, ctx, pc):
        guard, op, ops = self.k.instrs[pc]
        base = op.split(".")[0]
        if base in ("ldmatrix", "stmatrix"):
            return self._matrix(lanes, ctx, pc)
        parts = op.split(".")
        if base == "shfl":
            mode = parts[2]
            if mode not in ("bfly", "idx") or mode == "idx" and self._read(
                    lanes[0], ctx, ops[3]) != 31:       # idx: whole-warp segments only
                raise Unsupported(op)
            vals = {t["lin"] % 32: self._read(t, ctx, ops[1]) for t in lanes}
            for t in lanes:
                lane = t["lin"] % 32
                b = self._read(t, ctx, ops[2])
                src = lane ^ b if mode == "bfly" else b & 31
                self._write(t, ops[0].split("|")[0], vals.get(src, vals[lane]), 32)
            return
        if base == "redux":
            kind, ty = parts[2], parts[-1]
            vals = [self._read(t, ctx, ops[1]) for t in lanes]
            vals = [_signed(v, 32) if ty == "s32" else _mask(v, 32) for v in vals]
            r = {"add": sum, "min": min, "max": max}[kind](vals)
            for t in lanes:
                self._write(t, ops[0], r, 32)
            return
        raise Unsupported(op)


def _reg_width(tok, ty):
    t = tok.strip()
    if t.startswith("%rd"):
        return 64
    if t.startswith("%rs"):
        return 16
    if t.startswith("%rc"):
        return 8
    return max(32, _WIDTH[ty])


def _cvt_float(bits, sfmt, dfmt, rnd, satf):
    """One lane of a float -> float cvt: the sign of zero kept, NaN as cvt_nan says.  A
    non-NaN f32 rounded to nearest into bf16 / f16 takes the shortcut (_F32_NARROW_RN)."""
    if sfmt == "f32" and rnd == "rn" and not satf and dfmt in _F32_NARROW_RN and \
            (bits & 0x7F800000 != 0x7F800000 or not bits & 0x7FFFFF):
        return _F32_NARROW_RN[dfmt](bits)
    return cvt_exact(bits, sfmt, dfmt, rnd, satf)


def cvt_exact(bits, sfmt, dfmt, rnd, satf):
    """_cvt_float through the exact model only (what the shortcut is tested against)."""
    x = cvt_value(bits, sfmt)
    if isinstance(x, float) and math.isnan(x):
        return cvt_nan(bits, sfmt, dfmt)
    return round_bits(x, dfmt, rnd, satf)


def _float_to_int(x, src, dst, rnd):
    """PTX's float -> integer: rounded by rnd, saturated to the range, NaN as int_nan says."""
    bits = _WIDTH[dst]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dst[0] == "s" else (0, (1 << bits) - 1)
    if isinstance(x, float):
        if math.isnan(x):
            return _mask(int_nan(src, dst), 64)
        return _mask(hi if x > 0 else lo, 64)
    fl = x.numerator // x.denominator
    rem = x - fl
    if rnd == "rzi":
        n = fl if x >= 0 or rem == 0 else fl + 1
    elif rnd == "rmi":
        n = fl
    elif rnd == "rpi":
        n = fl + (1 if rem else 0)
    else:
        n = fl + (1 if rem > Fraction(1, 2) or rem == Fraction(1, 2) and fl & 1 else 0)
    return _mask(min(max(n, lo), hi), 64)


# ---- f32 -> bf16 / f16, round to nearest even, no .satfinite: the epilogue's conversion --------
# The same bits as cvt_exact (tests/test_sim.py compares them) for every non-NaN input,
# without its Fractions: a simulated GEMM epilogue converts every accumulator element, and the
# exact path takes most of such a test's time.  NaNs keep the exact path (cvt_nan).
def _f32_to_bf16_rn(bits):
    return ((bits + 0x7FFF + (bits >> 16 & 1)) >> 16) & 0xFFFF


def _f32_to_f16_rn(bits):
    with np.errstate(over="ignore"):        # a finite f32 past f16's range rounds to inf
        return int(np.array(bits, np.uint32).view(np.float32).astype(np.float16).view(np.uint16))


_F32_NARROW_RN = {"bf16": _f32_to_bf16_rn, "f16": _f32_to_f16_rn}
