"""Tensor maps at launch: the 128-byte CUtensorMap of each TMA copy, encoded from the argument.

A kernel whose copies go through TMA takes one hidden `.param .align 64 .b8 [128]` per
(tensor, box, swizzle).  Its spec (primitives.async_copy.TensorMapSpec, read here by attribute
only: this layer imports no IR) fixes the element type, the box, the swizzle and how the
tensor's extents and strides follow from the signature; the launch supplies the pointer and
the values of the shape symbols.  `encode_args` turns that into the arguments of
cuTensorMapEncodeTiled, checking every rule the driver would reject with the fix named, and
`TensorMapBuilder` calls the driver once per distinct (pointer, extents, strides) of a
parameter, caching the bytes: a steady-state launch of the same buffers costs a dict lookup.
"""
from __future__ import annotations

import math

from ..dtypes import tensor_map_bytes
from ..errors import LaunchError
from ..layout import MMA_SWIZZLES
from ..target.table import TMA_ALIGN, TMA_MAX_BOX

# the span of a swizzled row per TMA swizzle mode (0: none), read from the one swizzle table:
# its CuTe Swizzle<B, 4, 3> family (128B_base32B is tcgen05's descriptor only)
SWIZZLE_BYTES = {n: s.row_bytes if s.cute_b else 0 for n, s in MMA_SWIZZLES.items()
                 if s.cute_b is not None}
_CACHE_MAX = 256


def _value(f, symbols, spec, what):
    if isinstance(f, int):
        return f
    v = symbols.get(f)
    if v is None:
        raise LaunchError(f"{spec.describe()}: the {what} needs symbol {f}, which is not bound")
    return v


def encode_args(spec, ptr: int, symbols: dict, kernel: str = "") -> dict:
    """The arguments of cuTensorMapEncodeTiled for `spec` over a tensor at `ptr` (enums by
    name, sizes innermost first), or a LaunchError that names the rule and the fix."""
    who = f"kernel '{kernel}': " if kernel else ""
    eb = tensor_map_bytes(spec.data_type)
    if eb is None:
        raise LaunchError(f"{who}{spec.describe()}: unknown tensor-map data type {spec.data_type}")
    rank = len(spec.box)
    if not 1 <= rank <= 5 or len(spec.dims) != rank or len(spec.strides) != rank - 1:
        raise LaunchError(f"{who}{spec.describe()}: a tensor map has 1 to 5 dimensions with one "
                          f"extent each and rank - 1 strides")
    if ptr % TMA_ALIGN or not ptr:
        raise LaunchError(f"{who}{spec.describe()}: the tensor's address {ptr:#x} is not "
                          f"{TMA_ALIGN}-byte aligned (TMA's global address rule); pass an "
                          f"aligned tensor")
    dims = [_value(d, symbols, spec, "extent") for d in spec.dims]
    for k, d in enumerate(dims):
        if not 1 <= d <= 1 << 32:
            raise LaunchError(f"{who}{spec.describe()}: extent {d} of tensor-map dim {k} is "
                              f"outside [1, 2^32]")
    strides = [math.prod(_value(f, symbols, spec, "stride") for f in fs) for fs in spec.strides]
    for k, s in enumerate(strides, 1):
        if s % TMA_ALIGN or not 0 < s < 1 << 40:
            raise LaunchError(
                f"{who}{spec.describe()}: tensor-map dim {k} has a byte stride of {s}, but TMA "
                f"global strides are multiples of {TMA_ALIGN} below 2^40: pad the tensor's rows "
                f"to a multiple of {TMA_ALIGN // math.gcd(TMA_ALIGN, eb)} elements (or use "
                f"dispatch='cp_async')")
    for k, b in enumerate(spec.box):
        if not 1 <= b <= TMA_MAX_BOX:
            raise LaunchError(f"{who}{spec.describe()}: box extent {b} of dim {k} is outside "
                              f"[1, {TMA_MAX_BOX}]")
    inner = spec.box[0] * eb
    span = SWIZZLE_BYTES[spec.swizzle]
    if inner % TMA_ALIGN or span and inner > span:
        cap = f" and at most the {spec.swizzle} span" if span else ""
        raise LaunchError(f"{who}{spec.describe()}: the box's inner {inner} bytes must be a "
                          f"multiple of {TMA_ALIGN}{cap}")
    return {
        "tensorDataType": spec.data_type, "tensorRank": rank, "globalAddress": ptr,
        "globalDim": dims, "globalStrides": strides, "boxDim": list(spec.box),
        "elementStrides": [1] * rank, "interleave": "NONE",
        "swizzle": spec.swizzle,
        "l2Promotion": "L2_256B" if inner >= 256 else "L2_128B", "oobFill": "NONE",
    }


def driver_encode(args: dict) -> bytes:
    """cuTensorMapEncodeTiled through the runtime's driver binding (its enums and sizes: the
    ctypes one's or cuda-bindings'); the 128 bytes of the map."""
    import ctypes

    from . import driver

    d = driver.drv()
    sw = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}[args["swizzle"]]
    err, tmap = d.cuTensorMapEncodeTiled(
        getattr(d.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + args["tensorDataType"]),
        args["tensorRank"], args["globalAddress"],
        [d.cuuint64_t(x) for x in args["globalDim"]],
        [d.cuuint64_t(x) for x in args["globalStrides"]],
        [d.cuuint32_t(x) for x in args["boxDim"]],
        [d.cuuint32_t(x) for x in args["elementStrides"]],
        getattr(d.CUtensorMapInterleave, "CU_TENSOR_MAP_INTERLEAVE_" + args["interleave"]),
        getattr(d.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + sw),
        getattr(d.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + args["l2Promotion"]),
        getattr(d.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_" + args["oobFill"]))
    if int(err):
        raise driver.error(err, "cuTensorMapEncodeTiled", hint=f"arguments {args}")
    return ctypes.string_at(tmap.getPtr(), 128)


class TensorMapBuilder:
    """Per launch: the bytes of one tensor-map parameter from the bound argument values.

    `params` are the bound parameters in order (their values arrive in that order), `spec`
    the map's; `used=False` (the build chose no TMA copy for it) packs zeros without asking the
    driver.  `encode` replaces the driver (tests)."""

    def __init__(self, spec, params, *, kernel: str = "", used: bool = True, encode=None):
        self.spec, self.kernel, self.used = spec, kernel, used
        self.encode = encode or driver_encode
        names = [p.name for p in params]
        if spec.tensor not in names:
            raise LaunchError(f"kernel '{kernel}': {spec.describe()} names no parameter")
        self.tensor = names.index(spec.tensor)
        wanted = {f for f in spec.dims if not isinstance(f, int)} | \
            {f for fs in spec.strides for f in fs if not isinstance(f, int)}
        missing = [n for n in sorted(wanted) if n not in names]
        if missing and used:
            raise LaunchError(f"kernel '{kernel}': {spec.describe()} needs symbol(s) "
                              f"{', '.join(missing)}, which no parameter binds")
        self.symbols = [(n, names.index(n)) for n in sorted(wanted) if n in names]
        self.cache: dict = {}

    def __call__(self, values) -> bytes:
        if not self.used:
            return bytes(128)
        ptr = values[self.tensor]
        key = (ptr,) + tuple(values[i] for _, i in self.symbols)
        b = self.cache.get(key)
        if b is None:
            args = encode_args(self.spec, ptr, {n: values[i] for n, i in self.symbols},
                               self.kernel)
            b = self.encode(args)
            if len(b) != 128:
                raise LaunchError(f"kernel '{self.kernel}': a tensor map is 128 bytes, the "
                                  f"encoder returned {len(b)}")
            if len(self.cache) >= _CACHE_MAX:
                self.cache.clear()
            self.cache[key] = b
        return b


__all__ = ["encode_args", "driver_encode", "TensorMapBuilder", "SWIZZLE_BYTES"]
