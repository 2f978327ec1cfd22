"""numpy references of the tile-math ops, shared by the simulator tests and the GPU tests.

Arrays hold each dtype's bits: bfloat16 as uint16, float8 as uint8 (numpy has neither);
float4_e2m1fn as packed bytes in memory (two elements a byte, the first in the low nibble),
its codes one uint8 each where a function says so (`fp4_codes` / `fp4_pack` convert).
Exact references round with `round_bits` (tests/support/ptxsim_math.py): Fractions rounded to a
format with any PTX rounding mode; the transcendentals are compared within stated bounds.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .ptxsim_math import cvt_nan, cvt_value, decode, int_nan, round_bits

NP = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
      "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
      "float16": np.float16, "float32": np.float32, "float64": np.float64,
      "bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
      "float4_e2m1fn": np.uint8, "bool": np.bool_}
FMT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
       "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float4_e2m1fn": "e2m1"}
FP4 = "float4_e2m1fn"
NARROW = ("float8_e4m3fn", "float8_e5m2", FP4)
FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


# ---- bfloat16 / float8 as bits ---------------------------------------------------------------
def bf16_bits(x):
    """float32 values -> bfloat16 bits, round to nearest even (NaN stays NaN)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, ((b >> 16) | 0x40).astype(np.uint16), r)


def bf16_values(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def fp4_codes(packed):
    """Packed float4_e2m1fn bytes -> one code (0..15) per element, the low nibble first (the
    last axis twice as long)."""
    b = np.asarray(packed, np.uint8)
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[:-1] + (2 * b.shape[-1],))


def fp4_pack(codes):
    """Codes (0..15, an even count) -> packed float4_e2m1fn bytes, pairing elements in
    row-major order as memory does: the last axis halved when it is even, else flat."""
    c = np.asarray(codes, np.uint8)
    shape = c.shape[:-1] + (c.shape[-1] // 2,) if c.shape and c.shape[-1] % 2 == 0 else (-1,)
    f = c.reshape(-1, 2)
    return (f[:, 0] & 0xF | (f[:, 1] & 0xF) << 4).astype(np.uint8).reshape(shape)


def values(a, dt):
    """Bits of dtype dt -> numpy values (float32 for bfloat16, float64 for float8; codes of
    float4_e2m1fn, one a uint8, -> float64)."""
    if dt == "bfloat16":
        return bf16_values(a)
    if dt in NARROW:
        return np.array([float(decode(int(b), FMT[dt])) for b in a.ravel()]).reshape(a.shape)
    return a


def to_bits(v, dt):
    """numpy values (float32/float64) -> bits of dt, rounded to nearest even."""
    if dt == "bfloat16":
        return bf16_bits(np.asarray(v, np.float32))
    if dt in NARROW:        # float4_e2m1fn: codes, one a uint8
        return np.array([round_bits(_exact(x), FMT[dt], satfinite=True) for x in
                         np.ravel(v)], np.uint8).reshape(np.shape(v))
    return np.asarray(v).astype(NP[dt])


def _exact(x):
    x = float(x)
    return x if math.isnan(x) or math.isinf(x) else Fraction(x)


# ---- random inputs ---------------------------------------------------------------------------
def random(rng, dt, shape, kind="normal"):
    """Random bits of dtype dt; floats N(0, 1) (kind="positive": in [0.1, 4))."""
    if dt in INTS:
        info = np.iinfo(NP[dt])
        return rng.integers(info.min, info.max, size=shape, dtype=NP[dt], endpoint=True)
    if dt == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    v = rng.standard_normal(shape) if kind == "normal" else rng.uniform(0.1, 4, shape)
    return to_bits(v.astype(np.float32), dt) if dt != "float64" else v


def small_ints(rng, dt, shape):
    info = np.iinfo(NP[dt])
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi, size=shape, dtype=NP[dt], endpoint=True)


SPECIALS = [0.0, -0.0, 1.0, -1.5, 0.5, 3.0, -7.25, 1e-3, 65504.0, 70000.0, -70000.0, 1e-6,
            1e-8, 3e38, -3e38, 448.0, 460.0, 57344.0, 2.5, -2.5, 127.4, 255.6, -129.0,
            4294967295.0, 1e20, -1e20, float("inf"), float("-inf"), float("nan"), 1e-40,
            1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40, -(1 + 2**-8 + 2**-35), 16842753.0]


# ---- elementwise references -----------------------------------------------------------------
def promote(dts):
    rank = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}
    top = max(rank[d] for d in dts)
    if top > 1:
        return "float64" if top == 3 else "float32"
    return dts[0] if len(set(dts)) == 1 else "float32"


def _in_ct(a, dt, ct):
    """Operand bits of dt as values of the compute dtype (the IR's exact widening)."""
    v = values(a, dt) if not np.isscalar(a) else a
    if ct == "bfloat16":
        return np.asarray(v, np.float32)
    return np.asarray(v).astype(NP[ct]) if ct in NP else v


def _round_to(v, ct, dst):
    """Compute-dtype values -> dst bits (round to nearest even)."""
    if ct == "bfloat16" or dst == "bfloat16":
        return bf16_bits(np.asarray(v, np.float32)) if dst == "bfloat16" else \
            np.asarray(v, np.float32).astype(NP[dst])
    return np.asarray(v).astype(NP[dst])


def binary(op, a, adt, b, bdt, dst):
    """add/sub/mul/fdiv/max/min as the tile op computes them."""
    if adt in INTS:
        x, y = a.astype(NP[adt]), np.asarray(b).astype(NP[adt])
        with np.errstate(over="ignore"):
            r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
                 "min": np.minimum}[op](x, y)
        return r.astype(NP[dst])
    ct = promote([adt, bdt, dst])
    wct = "float32" if ct == "bfloat16" else ct
    x = _in_ct(a, adt, wct)
    y = _in_ct(b, bdt, wct) if not np.isscalar(b) else NP[wct](b)
    with np.errstate(all="ignore"):
        if ct in ("float16", "bfloat16"):     # computed in float32, rounded once to ct
            r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "fdiv": np.divide,
                 "max": np.fmax, "min": np.fmin}[op](x.astype(np.float32), y.astype(np.float32))
            r = bf16_values(bf16_bits(r)) if ct == "bfloat16" else r.astype(np.float16)
        else:
            r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "fdiv": np.divide,
                 "max": np.fmax, "min": np.fmin}[op](x, y)
    return _round_to(r, wct, dst)


def fma(a, b, c, dt):
    """Single-rounding fma in dt (all operands dt), exact."""
    if dt in INTS:
        with np.errstate(over="ignore"):
            return (a.astype(NP[dt]) * b.astype(NP[dt]) + c.astype(NP[dt])).astype(NP[dt])
    fmt = FMT[dt]
    av, bv, cv = (np.broadcast_to(values(x, dt) if not np.isscalar(x) else np.float64(x),
                                  np.shape(a)).ravel() for x in (a, b, c))
    out = []
    for x, y, z in zip(av, bv, cv):
        if any(math.isnan(v) or math.isinf(v) for v in (x, y, z)):
            r = float(x) * float(y) + float(z)
        else:
            r = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
            if r == 0:
                r = float(x) * float(y) + float(z)
        out.append(round_bits(r, fmt))
    bits = np.array(out, dtype={16: np.uint16, 32: np.uint32, 64: np.uint64}[
        {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[fmt]]).reshape(np.shape(a))
    return bits.view(NP[dt]) if dt != "bfloat16" else bits


def unary_exact(op, a, dt, dst):
    """sqrt / reciprocal: correctly rounded (16-bit through float32: exact)."""
    wct = "float32" if dt in ("float16", "bfloat16") else dt
    x = _in_ct(a, dt, wct)
    with np.errstate(all="ignore"):
        r = np.sqrt(x) if op == "sqrt" else NP[wct](1) / x
    return _round_to(r, wct, dst)


def unary_approx(op, a, dt):
    """exp / exp2 / log2 / rsqrt / silu in float64 (the exact value)."""
    x = np.asarray(values(a, dt), np.float64)
    with np.errstate(all="ignore"):
        return {"exp": np.exp, "exp2": np.exp2, "log2": np.log2,
                "rsqrt": lambda v: 1 / np.sqrt(v), "silu": lambda v: v / (1 + np.exp(-v))}[op](x)


def ulp(v, dt):
    """The spacing of dt at |v| (the smallest normal's at zero)."""
    p = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[dt]
    emin = {"float16": -14, "bfloat16": -126, "float32": -126, "float64": -1022}[dt]
    e = np.floor(np.log2(np.maximum(np.abs(v), 2.0 ** emin)))
    return 2.0 ** (e - (p - 1))


def ulp_error(got_bits, want, dt):
    """|got - want| in ulps of dt at want (inf/nan must match exactly)."""
    g = np.asarray(values(got_bits, dt), np.float64)
    w = np.asarray(want, np.float64)
    same = (np.isnan(g) & np.isnan(w)) | (g == w)
    with np.errstate(all="ignore"):
        err = np.abs(g - w) / ulp(w, dt)
    return np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf))


# ---- casts ---------------------------------------------------------------------------------------
def cast(a, src, dst, rounding=None, saturate=None):
    """The tile op's cast, exactly (see primitives/tilemath/cast.py for the semantics); a
    float4_e2m1fn source or result is packed bytes (the last axis half as long)."""
    if src == FP4:
        a = fp4_codes(a)
    flat = np.ravel(a)
    out = []
    for x in flat:
        out.append(_cast1(x, src, dst, rounding, saturate))
    r = np.array(out, dtype=NP[dst]).reshape(np.shape(a))
    return fp4_pack(r) if dst == FP4 else r


def _bits(x):
    return int(np.asarray(x).view({1: np.uint8, 2: np.uint16, 4: np.uint32,
                                   8: np.uint64}[np.asarray(x).dtype.itemsize]))


def _value(x, src):
    if src == "bool":
        return Fraction(int(bool(x)))
    if src in INTS:
        return Fraction(int(x))
    if src in FMT:
        return decode(_bits(x), FMT[src])
    raise ValueError(src)


def _route(src, dst, saturate):
    """The formats a float -> float cast passes through, one cvt a step, as cast.py emits
    it: float8 first to f16; then directly when f32 is one end or for f16 <-> f64 (but
    f64 -> f16 with saturate=True, which has .satfinite from f32 only), else through f32.
    Only a NaN's result depends on it (cvt_nan per instruction; into e2m1 always +6)."""
    r = [src] + (["f16"] if src in ("e4m3", "e5m2", "e2m1") else [])
    s = r[-1]
    if s != dst:
        direct = "f32" in (s, dst) or {s, dst} == {"f16", "f64"} and not saturate
        r += [dst] if direct else ["f32", dst]
    return r


def _cast1(x, src, dst, rounding, saturate):
    """One element cast as ptxgen's cvt sequence computes it on the H200 (measured): float ->
    float keeps the sign of zero and writes the NaN of the last cvt of its route (cvt_nan);
    float -> int NaN is what the 32/64-bit cvt.rzi writes (int_nan), clamped to dst."""
    v = _value(x, src)
    nan = isinstance(v, float) and math.isnan(v)
    if dst == "bool":
        return bool(nan or v != 0)
    if dst in INTS:
        info = np.iinfo(NP[dst])
        if src in INTS or src == "bool":
            n = int(v)
            if saturate:
                n = min(max(n, info.min), info.max)
            return np.array(n & ((1 << (8 * np.dtype(NP[dst]).itemsize)) - 1),
                            dtype=np.uint64).astype(NP[dst]) if n >= 0 or True else n
        if nan:     # cvt.rzi into the 32/64-bit type, from f32 (or narrower) or f64
            wide = ("s" if dst.startswith("int") else "u") + ("64" if info.bits == 64 else "32")
            return min(max(int_nan("f64" if src == "float64" else "f32", wide), info.min),
                       info.max)
        if isinstance(v, float):
            return info.max if v > 0 else info.min
        r = rounding or "rz"
        fl = v.numerator // v.denominator
        rem = v - fl
        n = {"rz": fl if v >= 0 or rem == 0 else fl + 1, "rm": fl, "rp": fl + (1 if rem else 0),
             "rn": fl + (1 if rem > Fraction(1, 2) or rem == Fraction(1, 2) and fl & 1 else 0)}[r]
        return min(max(n, info.min), info.max)
    fmt = FMT[dst]
    sat = bool(saturate) or dst in NARROW
    if nan:
        b, route = _bits(x), _route(FMT[src], fmt, saturate)
        for a, c in zip(route, route[1:]):
            b = cvt_nan(b, a, c)
    else:               # cvt_value: a -0 source as -0.0, which round_bits keeps
        b = round_bits(cvt_value(_bits(x), FMT[src]) if src in FMT else v, fmt,
                       rounding or "rn", sat)
    if dst == "bfloat16" or dst in NARROW:
        return b
    return np.array(b, dtype={"f16": np.uint16, "f32": np.uint32, "f64": np.uint64}[fmt]
                    ).view(NP[dst])
