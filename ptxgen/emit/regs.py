"""Register classes and the PTX types of integer dtypes: per-dtype facts, looked up in
tables after the first use (dtypes are interned)."""
from __future__ import annotations

from ..dtypes import DType
from ..ir import BOOL

# register class per value kind -> (prefix, .reg type)
REG_CLASSES = {"pred": ("%p", ".pred"), "b16": ("%rs", ".b16"), "b32": ("%r", ".b32"),
               "b64": ("%rd", ".b64"), "f32": ("%f", ".f32"), "f64": ("%fd", ".f64")}


def _reg_class(dt: DType) -> str:
    if dt == BOOL:
        return "pred"
    if dt.name == "float32":
        return "f32"
    if dt.name == "float64":
        return "f64"
    if dt.name in ("float16", "bfloat16"):
        return "b16"
    if dt.bits == 64:
        return "b64"
    return "b32"


def _int_type(dt: DType) -> str:
    bits = 64 if dt.bits == 64 else 32
    return f"{'s' if dt.kind == 'int' else 'u'}{bits}"


# dtypes are interned, so these per-dtype facts are table lookups after the first use
_REG_CLASS: dict = {}
_INT_TYPE: dict = {}


def reg_class(dt: DType) -> str:
    c = _REG_CLASS.get(dt)
    if c is None:
        c = _REG_CLASS[dt] = _reg_class(dt)
    return c


def int_type(dt: DType) -> str:
    """PTX arithmetic type of an integer dtype (sub-32-bit ints compute in 32 bits)."""
    t = _INT_TYPE.get(dt)
    if t is None:
        t = _INT_TYPE[dt] = _int_type(dt)
    return t


_PREFIX = {c: p for c, (p, _) in REG_CLASSES.items()}
