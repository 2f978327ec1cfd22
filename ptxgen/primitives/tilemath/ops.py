"""The elementwise tile ops as data: arity, the dtypes each takes, the dtype it computes in.

One table, read by the trace-time front end (to reject a call with the fix in the message)
and by the lowering (to pick instruction forms).  Typing is torch-like for floats and strict
for integers: float operands of several widths compute in the widest (float16 with bfloat16:
float32), and the result is rounded to nearest into the destination; integer operands must
all have the destination's dtype.  16-bit float arithmetic is computed in float32 and
rounded once, which equals the correctly rounded 16-bit result for add, sub, mul, fdiv and
sqrt (float32 carries more than 2p+2 bits of a 16-bit p); fma of 16-bit operands uses the
16-bit fma so that it rounds once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...dtypes import DType, dtype
from ...errors import TraceError

ARITY = {"add": 2, "sub": 2, "mul": 2, "fdiv": 2, "max": 2, "min": 2, "fma": 3,
         "exp": 1, "exp2": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "reciprocal": 1, "silu": 1,
         "cast": 1, "select": 3, "fill": 1, "zero": 0, "memset": 1}
ELEMENTWISE = tuple(ARITY)
FLOAT_ONLY = frozenset(("fdiv", "exp", "exp2", "log2", "sqrt", "rsqrt", "reciprocal", "silu"))
NO_F64 = frozenset(("exp", "exp2", "log2", "silu"))     # PTX has no float64 ex2/lg2
REDUCTIONS = ("sum", "max", "min")
ROUNDINGS = ("rn", "rz", "rm", "rp")

F16, BF16, F32, F64 = (dtype(n) for n in ("float16", "bfloat16", "float32", "float64"))
BOOL, U8 = dtype("bool"), dtype("uint8")


@dataclass(frozen=True)
class MathRecord:
    """What the front end derived: the op, which args are regions, the ragged operands
    (arg index -> (region dim, the iteration extent) for a memory operand shorter than
    the register tile along its last dimension), the pad value read there, and the cast's
    rounding / saturation (None: the PTX default of the conversion)."""
    op: str
    compute: DType | None                 # dtype the op computes in (None: cast/memset/fill)
    regions: tuple                        # per arg: True for a region, False for a scalar
    ragged: dict = field(default_factory=dict)
    pad: float | int | None = None
    rounding: str | None = None
    saturate: bool | None = None
    broadcast: dict = field(default_factory=dict)   # arg -> (own extents, tile extents)
    coords: tuple = ()                    # (Var uid, tile dim, region start) per coordinate
    ftz: bool = False                     # approximations flush subnormals (.approx.ftz)


def _fix(scope):
    return f"pg.tile.{scope}.cast"


def float_rank(dt: DType) -> int:
    return {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}[dt.name]


def promote(dts) -> DType:
    """The float dtype a mix computes in: the widest; float16 with bfloat16 is float32."""
    top = max(float_rank(d) for d in dts)
    if top > 1:
        return F64 if top == 3 else F32
    names = {d.name for d in dts}
    return F32 if len(names) > 1 else next(iter(dts))


def compute_dtype(op: str, scope: str, dst_name: str, dst_dt: DType, srcs) -> DType:
    """The dtype `op` computes in, or TraceError naming the fix.  `srcs`: [(name, dtype)]
    of region and traced-scalar operands (Python numbers take the result)."""
    all_ops = [(dst_name, dst_dt)] + list(srcs)
    for name, dt in all_ops:
        if dt.kind == "storage":
            raise TraceError(f"{op}: {name} is {dt}, a storage-only type; convert it with "
                             f"{_fix(scope)} to float16/bfloat16/float32 first")
        if dt.name == "bool" and op != "select":
            raise TraceError(f"{op}: {name} is bool; convert it with {_fix(scope)} first")
        if dt.kind == "handle":
            raise TraceError(f"{op}: {name} is a pointer, not a number")
    floats = [(n, d) for n, d in all_ops if d.is_float]
    ints = [(n, d) for n, d in all_ops if d.is_int]
    if floats and ints:
        (fn, fd), (iname, idt) = floats[0], ints[0]
        raise TraceError(f"{op} dtype mismatch: {fn} is {fd} but {iname} is {idt}; integer and "
                         f"float operands do not mix (convert with {_fix(scope)} first)")
    if ints:
        for n, d in ints[1:]:
            if d is not ints[0][1]:
                raise TraceError(f"{op} dtype mismatch: {ints[0][0]} is {ints[0][1]} but {n} is "
                                 f"{d}; integer operands need one dtype (convert with "
                                 f"{_fix(scope)} first)")
        if op in FLOAT_ONLY:
            raise TraceError(f"{op} needs floating-point operands; {ints[0][0]} is "
                             f"{ints[0][1]} (convert with {_fix(scope)} first)")
        return ints[0][1]
    ct = promote([d for _, d in floats])
    if op in NO_F64 and ct is F64:
        raise TraceError(f"{op} on float64: PTX has no float64 ex2/lg2 approximation; convert "
                         f"to float32 with {_fix(scope)} first")
    return ct


def is_16bit_float(dt: DType) -> bool:
    return dt is F16 or dt is BF16
