"""TMA planning: what a tensor map must say for one copy, from the two regions alone.

Why here: TMA copies a *box* of a global tensor into shared memory densely, innermost
tensor-map dimension fastest, and applies its swizzle to the shared address bits.  The box,
the swizzle and the element size live in the 128-byte CUtensorMap the runtime builds at
launch, so nothing of them reaches the PTX: a tile whose layout is not exactly that dense
(swizzled) box would be filled with garbage.  `plan_tensor_map` therefore derives the map
from the global region and checks the shared tile against it; the reasons name the fix.

Tensor-map order: the global tensor's stride-1 dimension first, then the others by
increasing stride (for a row-major tensor: its dims reversed).  The box's extents are the
region's; the shared tile must hold element `(c0, c1, ...)` of the box (tensor-map order) at
pre-swizzle offset `c0 + b0*c1 + b0*b1*c2 + ...` and be swizzled with `Swizzle.mma(mode)`,
which equals TMA's byte pattern (16-byte chunk bits XOR the 128-byte row bits) when the tile
starts on the pattern's repeat (`smem_align`).  A runtime region start is fine: it becomes a
coordinate; parts of the box outside the tensor are zero-filled (loads) or clipped (stores).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...dtypes import ALL_SCALARS, tensor_map_bytes
from ...dtypes import dtype as _dtype
from ...errors import LayoutError, PtxgenError
from ...ir import INT32, BufferRegion, Cast, Const, Expr, Var, as_expr
from ...layout import MMA_SWIZZLES
from ...printer import format_expr
from ...target import TMA_ALIGN, TMA_MAX_BOX

# TMA's swizzle modes, read from the one table: the CuTe Swizzle<B, 4, 3> family (the span
# of a swizzled row, 0 for none; where the pattern repeats)
MODE_BYTES = {n: s.row_bytes if s.cute_b else 0 for n, s in MMA_SWIZZLES.items()
              if s.cute_b is not None}
REPEAT = {n: MMA_SWIZZLES[n].repeat_bytes for n in MODE_BYTES}
# dtype name -> CUtensorMapDataType name (the runtime looks the enum up by name)
DATA_TYPES = {n: _dtype(n).ptx.tmap for n in ALL_SCALARS if _dtype(n).ptx.tmap}
# element types TMA's reduce-add takes (cp.reduce.async.bulk.tensor .add)
REDUCE_ADD = ("float16", "bfloat16", "float32", "int32", "uint32", "uint64")


@dataclass(frozen=True)
class TensorMapSpec:
    """What the runtime passes to cuTensorMapEncodeTiled, apart from the pointer.
    Entries are in tensor-map order (innermost first); a global extent is an int or the name
    of a shape symbol, a byte stride a tuple of factors (ints and symbol names)."""
    tensor: str            # the tensor parameter the map describes
    dtype: str             # ptxgen dtype name (element size; the type reduce-add computes in)
    data_type: str         # CUtensorMapDataType name, e.g. "FLOAT16"
    dims: tuple            # global extents
    strides: tuple         # byte strides of dims 1.. (rank - 1 entries)
    box: tuple             # box extents
    swizzle: str           # "none" / "32B" / "64B" / "128B"

    @property
    def rank(self) -> int:
        return len(self.box)

    @property
    def elem_bytes(self) -> int:
        return tensor_map_bytes(self.data_type)

    def describe(self) -> str:
        return (f"tensor map of {self.tensor}: box {'x'.join(map(str, self.box))} "
                f"{self.dtype}, swizzle {self.swizzle}")


@dataclass(frozen=True)
class TmaPlan:
    spec: TensorMapSpec
    coords: tuple          # int32 Exprs: the region start per tensor-map dim
    nbytes: int            # the box's bytes: every copy's transaction count
    smem_align: int        # bytes the shared tile's start must be aligned to

    def box_text(self) -> str:
        return "x".join(map(str, self.spec.box))



# The innermost box start, in bytes, must be a multiple of 16 (measured on the H200 with
# driver 580: unaligned starts fault with "illegal instruction" for every swizzle mode, loads
# and stores alike).  Constant starts are checked when the map is planned, runtime ones at the
# call site where the facts prove them misaligned (inner_start_ok); the rest are the caller's.
INNER_START_ALIGN = 16


def inner_start_ok(an, plan: "TmaPlan", elem_bytes: int) -> tuple[bool, str]:
    """A runtime innermost box start that is provably NOT a multiple of 16 bytes (`an`: the
    call site's facts, e.g. i * 8 + 3 elements of float16) is a build error, not an illegal
    instruction.  One the facts cannot decide (a scalar parameter) stays the caller's."""
    c0 = plan.coords[0]
    if isinstance(c0, Const):
        return True, ""
    k = INNER_START_ALIGN // math.gcd(INNER_START_ALIGN, elem_bytes)
    m, r = an.modset(an.simplify(c0.a if isinstance(c0, Cast) else c0))
    if m % k or r % k == 0:
        return True, ""
    return False, (f"the box's innermost start {_txt(c0)} is {r % k} elements past a multiple "
                   f"of {k} ({INNER_START_ALIGN} B; on the H200 an unaligned start faults with "
                   f"an illegal instruction): start the region at a multiple of {k} elements, "
                   f"or use dispatch='cp_async'")


def _txt(x):
    return format_expr(x) if isinstance(x, Expr) else str(x)


def _global_strides(buf):
    """Element strides of a global parameter per logical dim: ints, or factor tuples for a
    row-major tensor with symbolic extents; None with the reason when TMA cannot map it."""
    shape = buf.shape
    if buf.layout is None:
        out = []
        for d in range(len(shape)):
            factors = tuple(s.name if isinstance(s, Var) else s for s in shape[d + 1:])
            out.append(factors)
        return out, ""
    lay = buf.layout
    if hasattr(lay, "swizzle"):
        return None, f"'{buf.name}' has a swizzled layout; TMA reads plain strided tensors"
    if not all(isinstance(s, int) for s in shape):
        return None, f"'{buf.name}' has a layout over a symbolic shape"
    try:
        zero = lay.apply(*([0] * len(shape)), shape=shape)
        if any(k != "m" and v for k, v in zero.items()):
            return None, f"'{buf.name}' has thread axes in its layout"
        out = []
        for d in range(len(shape)):
            c = [0] * len(shape)
            c[d] = 1 if shape[d] > 1 else 0
            out.append((lay.apply(*c, shape=shape)["m"] - zero["m"],) if shape[d] > 1 else (0,))
        last = lay.apply(*[s - 1 for s in shape], shape=shape)["m"] - zero["m"]
    except LayoutError as e:
        return None, f"'{buf.name}': {e}"
    if last != sum((s - 1) * st[0] for s, st in zip(shape, out)):
        return None, f"'{buf.name}' has a nested layout; TMA needs one stride per dimension"
    return out, ""


def _order(buf, strides):
    """Tensor-map order of the logical dims: the stride-1 dim first, then by stride."""
    nd = len(buf.shape)
    if buf.layout is None:
        return list(reversed(range(nd)))
    ones = [d for d in range(nd) if strides[d] == (1,)]
    if not ones:
        return None
    first = ones[-1]
    rest = sorted((d for d in range(nd) if d != first), key=lambda d: (strides[d][0], -d))
    return [first] + rest


def _swizzle_of(sbuf):
    """(mode, reason): the TMA swizzle a shared tile's layout implies."""
    lay = sbuf.layout
    swz = getattr(lay, "swizzle", None) if lay is not None else None
    if swz is None or not swz.bits:
        return "none", ""
    mode = swz.mode
    if mode is None or not swz.is_mma(sbuf.dtype.bits):
        return None, (f"'{sbuf.name}' is swizzled with {swz!r}, which is not a TMA swizzle; use "
                      f"Swizzle.mma('32B' / '64B' / '128B', {sbuf.dtype.bits}) (or no swizzle)")
    return mode, ""


def _smem_offsets(region: BufferRegion):
    """Pre-swizzle element offset of region coordinate -> function, relative to its start."""
    buf = region.buffer
    lay = buf.layout
    lay = getattr(lay, "layout", lay)
    base = [s if isinstance(s, int) else 0 for s in region.starts]
    if lay is None:
        strides, acc = [], 1
        for s in reversed(buf.shape):
            strides.insert(0, acc)
            acc = acc * s if isinstance(s, int) else None
        if None in strides:
            return None
        return lambda c: sum(x * st for x, st in zip(c, strides))
    o0 = lay.apply(*base, shape=buf.shape)["m"]
    return lambda c: lay.apply(*[b + x for b, x in zip(base, c)], shape=buf.shape)["m"] - o0


def plan_tensor_map(g: BufferRegion, s: BufferRegion) -> tuple:
    """(TmaPlan, "") for a copy between global region `g` and shared region `s`, else
    (None, the reason with its fix).  Alignment of the shared tile, which needs the facts of
    the call site, is checked by the variants (`smem_align`)."""
    gb, sb = g.buffer, s.buffer
    dt = gb.dtype
    if not gb.param or gb.data is not None:
        return None, (f"TMA maps a tensor parameter directly; '{gb.name}' is a view of "
                      f"'{gb.root.name}' (copy from a region of the parameter itself)")
    if not (isinstance(gb.elem_offset, int) and gb.elem_offset == 0):
        return None, (f"'{gb.name}' has elem_offset {_txt(gb.elem_offset)}; a tensor map starts "
                      f"at the tensor's base pointer (pass the offset pointer as the argument)")
    if dt.name not in DATA_TYPES or dt.lanes != 1:
        return None, f"TMA moves 8/16/32/64-bit elements; '{gb.name}' is {dt}"
    if gb.align < 16:
        return None, (f"a tensor map's global address must be 16-byte aligned; '{gb.name}' "
                      f"declares align={gb.align} (declare align=16)")
    nd = len(gb.shape)
    if not 1 <= nd <= 5:
        return None, f"TMA maps tensors of 1 to 5 dimensions; '{gb.name}' has {nd}"
    strides, why = _global_strides(gb)
    if strides is None:
        return None, why
    order = _order(gb, strides)
    if order is None:
        return None, (f"'{gb.name}' has no stride-1 dimension; TMA's innermost dimension must "
                      f"be contiguous")
    eb = dt.bits // 8
    box = tuple(g.shape[d] for d in order)
    for k, (d, n) in enumerate(zip(order, box)):
        if n > TMA_MAX_BOX:
            return None, (f"the box is {n} elements along dim {d} of '{gb.name}'; TMA boxes are "
                          f"at most {TMA_MAX_BOX} per dimension: split the copy into tiles of "
                          f"at most {TMA_MAX_BOX} (one copy_async per tile)")
    inner = box[0] * eb
    if inner % TMA_ALIGN:
        return None, (f"the box's inner extent is {box[0]} x {eb} B = {inner} B, not a "
                      f"multiple of {TMA_ALIGN} B: make dim {order[0]}'s extent a multiple of "
                      f"{TMA_ALIGN // math.gcd(TMA_ALIGN, eb)} elements")
    tma_strides = []
    for d in order[1:]:
        f = tuple(strides[d]) + (eb,)
        if all(isinstance(x, int) for x in f):
            b = math.prod(f)
            if b % TMA_ALIGN or b >= 1 << 40:
                return None, (f"'{gb.name}': dim {d} has a byte stride of {b}, not a multiple "
                              f"of {TMA_ALIGN} below 2^40 (TMA global strides); pad the "
                              f"tensor's rows to a multiple of "
                              f"{TMA_ALIGN // math.gcd(TMA_ALIGN, eb)} elements")
            f = (b,)
        tma_strides.append(f)
    for d, e in enumerate(gb.shape):
        if isinstance(e, int) and e > 1 << 32:
            return None, f"'{gb.name}': dim {d} has {e} elements, more than TMA's 2^32"
    sb_scope = sb.root.scope
    if sb_scope not in ("shared", "shared.dyn"):
        return None, f"'{sb.name}' is in {sb_scope} memory; TMA moves to/from shared memory"
    mode, why = _swizzle_of(sb)
    if mode is None:
        return None, why
    span = MODE_BYTES[mode]
    if span and inner > span:
        return None, (f"the box's inner extent is {inner} B, wider than the {mode} swizzle span "
                      f"({span} B): copy {span // eb}-element columns (one copy_async per "
                      f"[..., k:k+{span // eb}] slice) or use a wider swizzle")
    if span and inner < span:   # measured on the H200: an illegal memory access
        narrower = next((m for m, b in MODE_BYTES.items() if b == inner), None)
        return None, (f"the box's inner extent is {inner} B, narrower than the {mode} swizzle "
                      f"span ({span} B): a swizzled TMA box row is the whole span (the H200 "
                      f"writes past the tile otherwise); make the box {span // eb} elements wide"
                      + (f" or lay the tile out with the {narrower} swizzle" if narrower else ""))
    why = _check_dense(g, s, order, box)
    if why:
        return None, why
    coords = []
    for d in order:
        st = g.starts[d]
        e = as_expr(st) if not isinstance(st, Expr) else st
        if e.dtype is not INT32:
            if not e.dtype.is_int:
                return None, f"region start {_txt(st)} is not an integer"
            e = Const(e.value, INT32) if isinstance(e, Const) else Cast(e, INT32)
        coords.append(e)
    inner0 = coords[0].value * eb if isinstance(coords[0], Const) else 0
    if inner0 % INNER_START_ALIGN:
        k = INNER_START_ALIGN // math.gcd(INNER_START_ALIGN, eb)
        return None, (f"the box starts {inner0} B into the innermost dimension (element "
                      f"{coords[0].value}); TMA needs a multiple of {INNER_START_ALIGN} B there "
                      f"(on the H200 an unaligned start faults with an illegal instruction): "
                      f"start the region at a multiple of {k} elements, or use "
                      f"dispatch='cp_async'")
    dims = tuple(gb.shape[d].name if isinstance(gb.shape[d], Var) else gb.shape[d]
                 for d in order)
    spec = TensorMapSpec(gb.name, dt.name, DATA_TYPES[dt.name], dims, tuple(tma_strides), box,
                         mode)
    return TmaPlan(spec, tuple(coords), math.prod(box) * eb, max(128, REPEAT[mode])), ""


def _check_dense(g, s, order, box) -> str:
    """'' when the shared region holds the box densely in tensor-map order (pre-swizzle)."""
    dense = {}
    acc = 1
    for d, n in zip(order, box):
        dense[d] = acc
        acc *= n
    gdims = [d for d, n in enumerate(g.shape) if n > 1]
    sdims = [d for d, n in enumerate(s.shape) if n > 1]
    if len(gdims) != len(sdims):
        return "internal: the regions' extents differ"
    off = _smem_offsets(s)
    if off is None:
        return f"'{s.buffer.name}' has a symbolic shape; TMA needs a constant shared tile"
    nd = len(s.shape)
    try:
        for gd, sd in zip(gdims, sdims):
            want = dense[gd]
            for k in range(1, s.shape[sd]):
                c = [0] * nd
                c[sd] = k
                got = off(c)
                if got != k * want:
                    step = off([1 if i == sd else 0 for i in range(nd)])
                    return (f"'{s.buffer.name}' is not laid out as the TMA box: along its dim "
                            f"{sd} element {k} is {got} elements from the start, the box puts it "
                            f"at {k * want} (step {step} vs {want}); a box lands densely, dim "
                            f"{order[0]} of '{g.buffer.name}' fastest: allocate the tile with "
                            f"the region's shape, row-major (a K-major MMA tile only when its "
                            f"rows are one swizzle span)")
    except (LayoutError, PtxgenError) as e:
        return f"'{s.buffer.name}': {e}"
    return ""


__all__ = ["TensorMapSpec", "TmaPlan", "plan_tensor_map", "inner_start_ok", "MODE_BYTES", "REPEAT",
           "DATA_TYPES", "REDUCE_ADD"]
