"""Shared machinery of the copy variants: region sides, leaf refinement, partitions.

A *side* is one operand region seen as leaves: (extent, stride) pairs in the
region's logical row-major order, outermost first, plus the pre-swizzle base offset
of the region start, the swizzle (if any) and the thread-axis strides (registers).
Both sides of a copy are refined to one common list of leaves, so one logical
linear index addresses both.  A partition cuts that list into [outer, threads, vec].
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...dtypes import MOVE_CONTAINERS
from ...dtypes import dtype as _dtype
from ...errors import LayoutError, PtxgenError
from ...ir import (Buffer, BufferPtr, BufferRegion, Const, Expr, Instr, Load, Mem, VecOperand)
from ...printer import format_expr
from ...analysis.offsets import byte_offset
from ...target.forms import opcode
from ...layout import row_major_strides
from ...target import WIDE_VECTOR_BITS, WIDE_VECTOR_GATE
from ...target import cache_modifiers as target_cache_modifiers

_U8 = _dtype("uint8")
_SPACE = {"global": "global", "shared": "shared", "shared.dyn": "shared", "local": "local",
          "tmem": "tmem"}


def cache_modifiers(call) -> tuple[bool, str]:
    """(ok, '.nc.L1::..') from options['cache_hint'] (str or list); global loads only."""
    return target_cache_modifiers("load", call.options.get("cache_hint"), call.src_side.space)


@dataclass
class Leaf:
    extent: int
    stride: object                 # "m" stride (int or Expr)
    axes: dict = field(default_factory=dict)   # thread-axis strides (registers)


@dataclass
class Side:
    region: BufferRegion
    buf: Buffer
    space: str
    leaves: list                   # Leaf, logical order, outermost first
    base: object                   # pre-swizzle "m" offset of the region start (int or Expr)
    swizzle: object = None         # ptxgen.layout.Swizzle or None

    @property
    def chunk_elems(self):
        return self.swizzle.chunk_elems if self.swizzle is not None else None


def _flatten(shape):
    if isinstance(shape, (tuple, list)):
        out = []
        for s in shape:
            out.extend(_flatten(s))
        return out
    return [shape]


def analyze_side(region: BufferRegion) -> Side:
    """Leaves and base offset of a region, from its buffer's layout metadata only."""
    buf = region.buffer
    root = buf.root
    space = _SPACE[root.scope]
    starts = [s for s, _ in region.region]
    extents = [e for _, e in region.region]
    lay = buf.layout
    swz = None
    if lay is not None and hasattr(lay, "swizzle") and hasattr(lay, "layout"):
        swz, lay = lay.swizzle, lay.layout
    if lay is None:
        strides = row_major_strides(buf.shape)
        leaves = [Leaf(e, st) for e, st in zip(extents, strides)]
        base = 0
        for s, st in zip(starts, strides):
            if not (isinstance(s, int) and s == 0):
                base = s * st + base if not isinstance(base, int) or base else s * st
        return Side(region, buf, space, leaves, base, swz)
    const_starts = all(isinstance(s, int) for s in starts)
    try:
        if const_starts:
            sub = lay.slice(buf.shape, tuple((s, e) for s, e in zip(starts, extents)))
            base = sub.offset.get("m", 0)
        else:
            sub = lay.slice(buf.shape, tuple((0, e) for e in extents))
            base = lay.apply(*starts, shape=buf.shape)["m"]
            _check_symbolic_start_dims(lay, buf.shape, starts, extents)
    except LayoutError as e:
        raise PtxgenError(f"region {region} cannot be sliced from the layout of "
                          f"'{buf.name}': {e}") from None
    leaves = []
    for ext, strides in sub.leaves():
        d = dict(strides)
        m = d.pop("m", 0)
        leaves.append(Leaf(ext, m, d))
    return Side(region, buf, space, leaves, base, swz)


def _check_symbolic_start_dims(lay, shape, starts, extents):
    """A symbolic start is only safe where the dim is one leaf (its slice never changes
    shape with the start)."""
    full = lay.slice(shape, tuple((0, s) for s in shape))
    modes = full.shape if isinstance(full.shape, tuple) else (full.shape,)
    for d, s in enumerate(starts):
        if not isinstance(s, int) and len(_flatten(modes[d])) != 1:
            raise PtxgenError(f"dimension {d} has a nested layout; its region start must be a "
                              f"constant, got {format_expr(s)}")


# ---- refinement ------------------------------------------------------------------------
def refine(sides) -> list[list[Leaf]]:
    """Split leaves so every side has the same extents (mixed radix, innermost first)."""
    n = math.prod(l.extent for l in sides[0].leaves)
    for s in sides[1:]:
        if math.prod(l.extent for l in s.leaves) != n:
            raise PtxgenError("internal: sides differ in size")
    if n == 1:   # one element: one leaf (the cuts below would leave none)
        return [[Leaf(1, 1, {})] for _ in sides]
    cuts = set()
    for s in sides:
        acc = 1
        for l in reversed(s.leaves):
            acc *= l.extent
            cuts.add(acc)
    cuts = sorted(cuts)
    for a, b in zip(cuts, cuts[1:]):
        if b % a:
            return None
    out = []
    for s in sides:
        leaves = []
        acc = 1
        for l in reversed(s.leaves):
            hi = acc * l.extent
            prev = acc
            for c in cuts:
                if prev < c <= hi:
                    k = prev // acc
                    leaves.append(Leaf(c // prev, _mul(l.stride, k),
                                       {a: v * k for a, v in l.axes.items()}))
                    prev = c
            acc = hi
        out.append(list(reversed(leaves)))
    return out


def _mul(x, k):
    if k == 1:
        return x
    return x * k


def is_int(x) -> bool:
    return isinstance(x, int)


# ---- partitions ---------------------------------------------------------------------------
def split_leaves(items, cuts):
    """Cut leaves `items` = [(extent, [stride per side])] (innermost first) at cumulative
    products `cuts` (e.g. [V, V*T]).  Returns one group per cut interval, or None when a
    cut does not fall on a divisor of a leaf."""
    pieces = []
    acc = 1
    for ext, strides in items:
        hi = acc * ext
        prev = acc
        for c in list(cuts) + [hi]:
            if prev < c <= hi:
                if c % prev:
                    return None
                k = prev // acc
                pieces.append((c // prev, [_mul(st, k) for st in strides], c))
                prev = c
        acc = hi
    groups = [[] for _ in range(len(cuts) + 1)]
    for e, st, top in pieces:
        g = next((i for i, c in enumerate(cuts) if top <= c), len(cuts))
        groups[g].append((e, st))
    return groups


def digits_offset(x, group, side_idx):
    """sum(digit_i(x) * stride_i) for mixed-radix digits of x (innermost leaf first)."""
    total = 0
    div = 1
    n = len(group)
    for i, (ext, strides) in enumerate(group):
        st = strides[side_idx]
        if is_int(st) and st == 0:
            div *= ext
            continue
        d = x if div == 1 else x // div
        if i < n - 1:
            d = d % ext
        term = d * st if not (is_int(st) and st == 1) else d
        total = term if is_int(total) and total == 0 else total + term
        div *= ext
    return total


def const_offset(x: int, group, side_idx) -> int | Expr:
    total = 0
    div = 1
    for ext, strides in group:
        d = (x // div) % ext
        total = total + d * strides[side_idx] if d else total
        div *= ext
    return total


# ---- emission helpers ---------------------------------------------------------------------
def flat_pointer(side: Side, offset):
    """A pointer to element `offset` (pre-elem_offset, post-swizzle) of a side's buffer.
    Sub-byte elements (float4_e2m1fn) are addressed as the byte holding them: every variant
    proves its vectors start on a whole byte before asking for their pointer."""
    buf = side.buf
    eo = buf.elem_offset
    off = offset if is_int(eo) and eo == 0 else offset + eo
    dt = buf.dtype
    if dt.storage_bits < 8:
        per = 8 // dt.bits
        off, dt = off // per, _U8
    flat = Buffer(buf.name, (1 << 40,), dt, buf.scope, None, 0, buf.align, buf.storage_ptr())
    return BufferPtr(flat, (off if isinstance(off, Expr) else Const(int(off)),))


def element_address(side: Side, pre_swizzle):
    """Element offset of a side's element given its pre-swizzle layout offset."""
    if side.swizzle is not None:
        return side.swizzle.apply(pre_swizzle)
    return pre_swizzle


# bits -> (PTX type, lanes, register dtype) of dtypes.MOVE_CONTAINERS, spelled as the unsigned
# types of the copies' uintN temp registers (the emitter's own ld/st spell them bN)
CONTAINERS = {n: (f"u{b}", k, f"uint{b}") for n, (b, k) in MOVE_CONTAINERS.items()}


def ld_st_pair(src_ptr, dst_ptr, bits, src_space, dst_space, regs, cache_hint=""):
    """ld.<src>.vN.uK {regs}, [src]; st.<dst>.vN.uK [dst], {regs} as Instr statements."""
    ty, n, _ = CONTAINERS[bits]
    gate = dict(WIDE_VECTOR_GATE) if bits == WIDE_VECTOR_BITS else None
    ops = VecOperand(tuple(regs)) if n > 1 else regs[0]
    lgate = gate
    if "::" in cache_hint:   # L1::/L2:: qualifiers need PTX 7.4 (ptx-reference §2)
        lgate = dict(gate or {}, min_ptx=max((gate or {}).get("min_ptx", (0, 0)), (7, 4)))
    ld = Instr(opcode("ld", src_space, ty, n, cache_hint), (ops, Mem(src_ptr)), form="ld",
               outs=1, attrs={"gate": lgate} if lgate else None)
    st = Instr(opcode("st", dst_space, ty, n), (Mem(dst_ptr), ops), form="st",
               attrs={"gate": gate} if gate else None)
    return ld, st


def reg_elems(tmp: Buffer, start: int, n: int):
    return [Load(tmp, (Const(start + k),), tmp.dtype) for k in range(n)]


def divisible(an, x, V) -> bool:
    """x (int or expression) is provably a multiple of V."""
    return an.divisible(an.simplify(x), V) if isinstance(x, Expr) else x % V == 0


def _txt(x):
    return format_expr(x) if isinstance(x, Expr) else x


def base_alignment_ok(an, side: Side, V: int, ebits: int | None = None) -> tuple[bool, str]:
    """The region start, elem_offset, the view chain and the declared base alignment must
    keep a V-element vector aligned (TIRx 0.27 forgot elem_offset here).  `ebits`: the bits
    of an element in memory where they are not its dtype's (tile math's bool: a byte)."""
    buf = side.buf
    eb = buf.dtype.bits if ebits is None else ebits
    vbytes = V * eb // 8
    if vbytes * 8 != V * eb:
        return False, f"{V} x {buf.dtype} is not a whole number of bytes"
    if not divisible(an, side.base, V):
        return False, f"{buf.name}: region start offset {_txt(side.base)} is not a multiple of {V}"
    if not divisible(an, buf.elem_offset, V):
        return False, f"{buf.name}: elem_offset {_txt(buf.elem_offset)} is not a multiple of {V}"
    chain = byte_offset(buf, None)
    if not divisible(an, chain, vbytes):
        return False, (f"{buf.name}: its view starts {_txt(chain)} bytes into "
                       f"'{buf.root.name}', not a multiple of {vbytes}")
    if buf.root.align % vbytes:
        return False, (f"{buf.name}: base alignment {buf.root.align} B is below {vbytes} B "
                       f"(declare align={vbytes})")
    return True, ""


def alignment_ok(an, side: Side, V: int, skip_leaf_ids=()) -> tuple[bool, str]:
    """Every stride except the vector's must be a multiple of V elements, and so must the
    region's base (base_alignment_ok)."""
    for i, l in enumerate(side.leaves):
        if i in skip_leaf_ids or l.extent == 1:
            continue
        if not divisible(an, l.stride, V):
            return False, f"{side.buf.name}: stride {_txt(l.stride)} is not a multiple of {V}"
    return base_alignment_ok(an, side, V)
