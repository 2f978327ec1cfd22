"""Element types: one table, shared by the IR, the emitter and the runtime.

A dtype knows its bit width, its kind (int/uint/float/storage-only float) and, in
`dt.ptx`, how PTX holds and moves it: register class, arithmetic/cvt type, .param type,
ld/st type, how instructions spell it as an operand type and how a tensor map names it
(the `_PTX` table, the one place these are written).  Vector types
(``float32x4``) are a scalar dtype plus a lane count.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from .errors import PtxgenError


class PtxTypes(NamedTuple):
    """How PTX holds and moves one dtype (a row of `_PTX`)."""
    reg: str            # register class, also its mov type: pred b16 b32 b64 f32 f64
    arith: str | None   # type of its arithmetic, setp and cvt; None: moved, never computed on
    param: str          # .param / ld.param type of a scalar kernel parameter
    mem: str | None     # ld/st type of one element; None: no single-element form
    spell: str | None   # its operand type in mma/wgmma/tcgen05 and cvt (s8, e4m3, bf16; a
    #                     pair of it is spell + "x2"); None: no instruction names it
    tmap: str | None    # its CUtensorMapDataType name (TMA moves bits: fp8 as UINT8); None: none


class DType:
    """Interned per name (see dtype()), so equality is identity and costs nothing.  Immutable.

    `name` is canonical ("float16", "float32x4"); `kind` "int", "uint", "float", "storage"
    (fp8/fp4: bits only), "bool" or "handle"; `bits` of one lane.  The derived facts are
    computed once (dtypes are interned; the emitter reads them per node): `scalar` is the
    lane type of a vector, `storage_bits` the bits in memory (a bool takes one byte).  Written
    out rather than a frozen @dataclass, whose generated methods slow the import
    (benchmarks/RESULTS-archive.md, seventh session)."""

    def __init__(self, name: str, kind: str, bits: int, lanes: int = 1):
        init = object.__setattr__
        init(self, "name", name)
        init(self, "kind", kind)
        init(self, "bits", bits)
        init(self, "lanes", lanes)
        init(self, "storage_bits", 8 if kind == "bool" else bits)
        init(self, "is_int", kind in ("int", "uint"))
        init(self, "is_float", kind == "float")
        init(self, "scalar", self if lanes == 1 else dtype(name.rsplit("x", 1)[0]))
        if lanes == 1:
            ptx = PtxTypes(*_PTX[name])
        else:   # a vector: its lanes' types, held in 32-bit (64-bit lanes: 64-bit) registers
            reg = "b64" if bits == 64 else "b32"
            ptx = self.scalar.ptx._replace(reg=reg, param=reg)
        init(self, "ptx", ptx)

    def __setattr__(self, name, value):
        raise AttributeError(f"a DType is immutable: cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"a DType is immutable: cannot delete field {name!r}")

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


# ---- PTX facts per scalar dtype -------------------------------------------------------------
# name: (register class, arithmetic/cvt type, .param type, ld/st type, operand type spelling,
#        tensor-map type); see PtxTypes.
#   16-bit floats live as bits in b16 registers (and parameters); ints below 32 bits are held
#   and computed in 32 bits.  ld/st moves bits only, never a float conversion for 16-bit floats;
#   fp8 moves as u8, fp4 has no single-element form (move packed pairs as uint8).  Tensor maps
#   move bits too: every 8-bit type is UINT8 and int16 is UINT16 (the driver has no INT8/INT16).
_PTX = {
    "bool": ("pred", None, "pred", "u8", None, "UINT8"),
    "int8": ("b32", "s32", "s32", "s8", "s8", "UINT8"),
    "int16": ("b32", "s32", "s32", "s16", "s16", "UINT16"),
    "int32": ("b32", "s32", "s32", "s32", "s32", "INT32"),
    "int64": ("b64", "s64", "s64", "s64", "s64", "INT64"),
    "uint8": ("b32", "u32", "u32", "u8", "u8", "UINT8"),
    "uint16": ("b32", "u32", "u32", "u16", "u16", "UINT16"),
    "uint32": ("b32", "u32", "u32", "u32", "u32", "UINT32"),
    "uint64": ("b64", "u64", "u64", "u64", "u64", "UINT64"),
    "float16": ("b16", "f16", "b16", "b16", "f16", "FLOAT16"),
    "bfloat16": ("b16", "bf16", "b16", "b16", "bf16", "BFLOAT16"),
    "float32": ("f32", "f32", "f32", "f32", "f32", "FLOAT32"),
    "float64": ("f64", "f64", "f64", "f64", "f64", "FLOAT64"),
    "float8_e4m3fn": ("b32", None, "b32", "u8", "e4m3", "UINT8"),
    "float8_e5m2": ("b32", None, "b32", "u8", "e5m2", "UINT8"),
    "float4_e2m1fn": ("b32", None, "b32", None, "e2m1", None),
    "handle": ("b64", "u64", "b64", "u64", None, None),   # a pointer: address arithmetic is u64
    # not a tensor dtype (dtype() does not parse it): the byte of two float4_e2m1fn that PTX's
    # e2m1x2 conversions read and write, which must be a .b8 register (ptxas 13.0: "Arguments
    # mismatch for instruction 'cvt'" for a .b16 or .b32 one); see E2M1X2 below
    "float4_e2m1fn_x2": ("b8", None, "b8", "b8", "e2m1x2", None),
}

# register class -> (register name prefix, .reg type)
REG_CLASSES = {"pred": ("%p", ".pred"), "b8": ("%rc", ".b8"), "b16": ("%rs", ".b16"),
               "b32": ("%r", ".b32"), "b64": ("%rd", ".b64"), "f32": ("%f", ".f32"),
               "f64": ("%fd", ".f64")}
REG_PREFIX = {c: p for c, (p, _) in REG_CLASSES.items()}

# the vector that moves n bits without conversion, as (lane bits, lanes): one lane up to 32
# bits, 32-bit lanes above (64-bit values split in two; never .v8.b16, which crashes ptxas 13.0)
MOVE_CONTAINERS = {8: (8, 1), 16: (16, 1), 32: (32, 1), 64: (32, 2), 128: (32, 4),
                   256: (32, 8)}


def reg_class(dt: DType) -> str:
    """The register class that holds a value of `dt`."""
    return dt.ptx.reg


def int_type(dt: DType) -> str:
    """PTX arithmetic type of an integer dtype (sub-32-bit ints compute in 32 bits)."""
    return dt.ptx.arith


def mem_type(dt: DType) -> str:
    """The ld/st type of one element (the emitter reads `dt.ptx.mem` and calls this only to
    raise)."""
    dt = dt if isinstance(dt, DType) else dtype(dt)
    m = dt.ptx.mem
    if m is None:
        raise PtxgenError(f"{dt.scalar.name} has no single-element load/store form; move it in "
                          f"a wider container (e.g. a uint8 view of packed pairs)")
    return m


def uint_of(bits: int) -> DType | None:
    """The unsigned int dtype of `bits` bits (what moves raw bits), None if there is none."""
    name = f"uint{bits}"
    return _parse(name) if name in _SCALARS else None


ALL_SCALARS = tuple(k for k in _SCALARS if k != "handle")

# The register of cvt.rn.satfinite.e2m1x2.f32 / cvt.rn.f16x2.e2m1x2 (two float4_e2m1fn, the
# first element in the low nibble as in memory): an instruction operand of the tile-math
# casts only, never a tensor's or a Python value's dtype.
E2M1X2 = DType("float4_e2m1fn_x2", "storage", 8)


@lru_cache(maxsize=None)
def tensor_map_bytes(data_type: str) -> int | None:
    """Bytes of one element of a tensor map's CUtensorMapDataType (by name, the `tmap`
    column), None when no dtype has it."""
    for name, row in _PTX.items():
        if row[5] == data_type:
            return _parse(name).storage_bits // 8
    return None
