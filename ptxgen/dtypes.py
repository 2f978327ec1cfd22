"""Element types: one table, shared by the IR, the emitter and the runtime.

A dtype knows its bit width, its kind (int/uint/float/storage-only float), the
PTX register class and the PTX "container" type used to move its bits without
conversion.  Vector types (``float32x4``) are a scalar dtype plus a lane count.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .errors import PtxgenError


@dataclass(frozen=True, eq=False)
class DType:
    """Interned per name (see dtype()), so equality is identity and costs nothing."""
    name: str          # canonical name, e.g. "float16", "float32x4"
    kind: str          # "int", "uint", "float", "storage" (fp8/fp4: bits only), "bool", "handle"
    bits: int          # bits of one lane
    lanes: int = 1
    # derived facts, computed once (dtypes are interned; the emitter reads these per node)
    is_int: bool = field(init=False, repr=False)
    is_float: bool = field(init=False, repr=False)
    scalar: "DType" = field(init=False, repr=False)   # the lane type of a vector

    def __post_init__(self):
        object.__setattr__(self, "is_int", self.kind in ("int", "uint"))
        object.__setattr__(self, "is_float", self.kind == "float")
        object.__setattr__(self, "scalar", self if self.lanes == 1
                           else dtype(self.name.rsplit("x", 1)[0]))

    @property
    def nbytes(self) -> float:
        """Bytes of the whole value (fractional for float4_e2m1fn)."""
        return self.bits * self.lanes / 8

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"dtype({self.name!r})"


_SCALARS = {
    "bool": ("bool", 1),
    "int8": ("int", 8), "int16": ("int", 16), "int32": ("int", 32), "int64": ("int", 64),
    "uint8": ("uint", 8), "uint16": ("uint", 16), "uint32": ("uint", 32), "uint64": ("uint", 64),
    "float16": ("float", 16), "bfloat16": ("float", 16), "float32": ("float", 32),
    "float64": ("float", 64),
    "float8_e4m3fn": ("storage", 8), "float8_e5m2": ("storage", 8),
    "float4_e2m1fn": ("storage", 4),
    "handle": ("handle", 64),
}

_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32",
    "bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "f16": "float16", "f32": "float32",
    "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "float8_e4m3": "float8_e4m3fn",
}


@lru_cache(maxsize=None)
def _parse(name: str) -> DType:
    name = _ALIASES.get(name, name)
    if name in _SCALARS:
        kind, bits = _SCALARS[name]
        return DType(name, kind, bits)
    base, sep, lanes = name.rpartition("x")
    if sep and lanes.isdigit() and base in _SCALARS and int(lanes) in (1, 2, 4, 8, 16, 32):
        kind, bits = _SCALARS[base]
        return DType(name, kind, bits, int(lanes))
    known = ", ".join(k for k in _SCALARS if k != "handle")
    raise PtxgenError(f"unknown dtype {name!r}; known dtypes: {known} "
                      f"(vector forms add a lane count, e.g. 'float32x4')")


def dtype(x) -> DType:
    """Normalize a dtype spec: a DType, a name, a numpy/torch dtype, or a ptxgen scalar type."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return _parse(x)
    name = getattr(x, "ptxgen_dtype", None)  # pg.int32 and friends
    if isinstance(name, str):
        return _parse(name)
    s = str(x)
    if s.startswith("torch."):
        s = s[6:]
    s = {"float8_e4m3fn": "float8_e4m3fn", "bool_": "bool"}.get(s, s)
    try:
        return _parse(s)
    except PtxgenError:
        raise PtxgenError(f"unknown dtype {x!r}") from None


# ---- PTX facts per scalar dtype ------------------------------------------
# memory type used by ld/st of one element (bits only, never a float conversion for 16-bit floats)
_MEM = {
    "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "b16", "bfloat16": "b16", "float32": "f32", "float64": "f64",
    "float8_e4m3fn": "u8", "float8_e5m2": "u8", "handle": "u64", "bool": "u8",
}


def mem_type(dt: DType) -> str:
    """The ld/st type of one element (the emitter asks per access: one lookup, no call)."""
    name = (dt if isinstance(dt, DType) else dtype(dt)).scalar.name
    m = _MEM.get(name)
    if m is None:
        raise PtxgenError(f"{name} has no single-element load/store form; move it in a "
                          f"wider container (e.g. a uint8 view of packed pairs)")
    return m


ALL_SCALARS = tuple(k for k in _SCALARS if k != "handle")
