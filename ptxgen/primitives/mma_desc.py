"""Descriptors for the tensor-core MMAs: Hopper ``wgmma`` (sm_90a) and Blackwell ``tcgen05.mma``.

Why this exists: descriptor bits travel in registers, so ptxas checks none of them; a wrong
LBO/SBO/swizzle/format assembles and then computes garbage.  Everything here is pure Python so it
can be tested exhaustively.  Sources (PTX ISA): wgmma 9.7.15.5.1.2 "Shared Memory Matrix Layout"
with "Leading Dimension Byte Offset", "Stride Dimension Byte Offset", "Canonical Layouts" and
"Matrix Descriptor Format"; tcgen05 9.7.16.4.1 "Shared memory descriptor" (Tables 40, 41),
9.7.16.4.2 "Instruction descriptor" (Table 42), 9.7.16.2.1 "Matrix Shape" (Table 39).  The worked
values are in /work/shared/ptx-reference.md sections 4, 7, 8.

Coordinates are always ``(row, k)``: ``row`` runs over M (operand A) or N (operand B), ``k`` over K.
"""
from __future__ import annotations

import itertools
from typing import Callable, NamedTuple

from ..errors import ArchError, LayoutError, PtxgenError
from ..layout import MMA_SWIZZLES, Swizzle, index_grid, mma_swizzle_name

# -------- swizzle modes: the table is layout.MMA_SWIZZLES ---------------------------------------
SWIZZLE_MODES = tuple(MMA_SWIZZLES)


def swizzle_mode(name) -> str:
    """The canonical name of an MMA swizzle mode ("none", "32B", ...), or the error listing them."""
    key = mma_swizzle_name(name, base32=True)
    if key is None:
        raise PtxgenError(f"unknown swizzle mode {name!r}; modes are {', '.join(SWIZZLE_MODES)}")
    return key


def apply_swizzle(byte_offset: int, swizzle) -> int:
    """CuTe ``Swizzle<B,4,3>`` on a byte address: ``o ^ ((o >> 3) & (((1<<B)-1) << 4))``."""
    name = swizzle_mode(swizzle)
    if MMA_SWIZZLES[name].cute_b is None:
        raise PtxgenError("swizzle 128B_base32B (Swizzle<2,5,2>) has no modelled byte formula")
    return Swizzle.mma(name, 8).apply(byte_offset)   # 8-bit elements: the byte form


def _arch_family(arch) -> str:
    """'sm90' (wgmma descriptor) or 'sm100' (tcgen05 descriptor)."""
    s = str(arch).lower().removeprefix("sm_").removeprefix("sm")
    digits = "".join(c for c in s if c.isdigit())
    if digits == "90":
        return "sm90"
    if digits in ("100", "101", "103", "110"):
        return "sm100"
    raise ArchError(f"arch {arch!r} has no wgmma/tcgen05 shared-memory descriptor; use sm_90a "
                    f"(wgmma) or sm_100a/sm_100f/sm_103a (tcgen05)")


# -------- shared-memory matrix descriptor (64-bit) ----------------------------------------------

_FIELD_MAX = 0x3FFF << 4  # 14-bit field of (bytes >> 4)


def _enc14(name: str, value) -> int:
    if not isinstance(value, int) or value < 0:
        raise PtxgenError(f"{name}={value!r} must be a non-negative int (bytes)")
    if value % 16:
        raise PtxgenError(f"{name}={value} is not a multiple of 16 bytes (rule: start address, LBO "
                          f"and SBO must be 16-byte aligned; the descriptor drops the 4 low bits)")
    if value > _FIELD_MAX:
        raise PtxgenError(f"{name}={value} does not fit the 14-bit field of (bytes >> 4) "
                          f"(max {_FIELD_MAX} bytes)")
    return value >> 4


def desc_template(*, lbo: int, sbo: int, swizzle, arch, base_offset: int = 0,
                  lbo_mode: str = "relative") -> int:
    """Every descriptor bit except the start address, so emitted PTX can build the descriptor with
    one ``or.b64 desc, (addr & 0x3FFFF) >> 4, TEMPLATE`` (the address field is the low 14 bits)."""
    sw_name = swizzle_mode(swizzle)
    sw, fam = MMA_SWIZZLES[sw_name], _arch_family(arch)
    if not isinstance(base_offset, int) or not 0 <= base_offset <= 7:
        raise PtxgenError(f"base_offset={base_offset!r} must be 0..7 (3-bit field, bits 49-51)")
    if sw_name == "none" and base_offset:
        raise PtxgenError("base_offset must be 0 with swizzle 'none' (rule: the matrix base offset "
                          "is valid for every swizzling mode except no-swizzle)")
    if lbo_mode not in ("relative", "absolute"):
        raise PtxgenError(f"lbo_mode={lbo_mode!r} must be 'relative' or 'absolute'")
    value = (_enc14("lbo", lbo) << 16) | (_enc14("sbo", sbo) << 32) | (base_offset << 49)
    if fam == "sm90":
        if sw.wgmma_code is None:
            raise ArchError(f"swizzle {sw_name} exists only in the tcgen05 (sm_100) descriptor")
        if lbo_mode != "relative":
            raise ArchError("the absolute LBO mode (bit 52) exists only on sm_103a")
        return value | (sw.wgmma_code << 62)
    if lbo_mode == "absolute" and "103" not in str(arch):
        raise ArchError(f"absolute LBO mode (bit 52) is supported on sm_103a only, not {arch!r} "
                        f"(PTX ISA 9.7.16.4.1.1 Target ISA Note)")
    return value | (1 << 46) | (int(lbo_mode == "absolute") << 52) | (sw.tcgen05_code << 61)


def _check_start(start_addr, sw_name: str, base_offset: int) -> None:
    if not isinstance(start_addr, int) or not 0 <= start_addr < (1 << 18):
        raise PtxgenError(f"start_addr={start_addr!r} must be a shared::cta byte offset below "
                          f"256 KiB (matrix-descriptor-encode keeps (addr & 0x3FFFF) >> 4)")
    _enc14("start_addr", start_addr)
    sw = MMA_SWIZZLES[sw_name]
    rem = start_addr % sw.repeat_bytes
    if sw_name == "none":
        return
    if rem < sw.row_bytes:  # on the repeat boundary, or a K advance inside the first row
        if base_offset:
            raise PtxgenError(f"base_offset={base_offset} but start_addr={start_addr:#x} lies in "
                              f"the first row of a {sw.repeat_bytes}-B swizzle repeat: "
                              f"base_offset must be 0 (rule: PTX ISA Table 41 repeat boundary)")
        return
    want = (start_addr >> 7) & 7
    if base_offset != want:
        raise PtxgenError(
            f"start_addr={start_addr:#x} is {rem} B into a {sw.repeat_bytes}-B swizzle repeat "
            f"({sw_name}); "
            f"rule: tiles start on the repeat boundary (PTX ISA Table 41) or set base_offset = "
            f"(pattern start >> 7) & 7 = {want}; got base_offset={base_offset}")


def encode_smem_desc(*, start_addr: int, lbo: int, sbo: int, swizzle, arch, base_offset: int = 0,
                     lbo_mode: str = "relative") -> int:
    """64-bit wgmma (sm_90) or tcgen05 (sm_100) shared-memory descriptor; bytes in, bits out."""
    tmpl = desc_template(lbo=lbo, sbo=sbo, swizzle=swizzle, arch=arch, base_offset=base_offset,
                         lbo_mode=lbo_mode)
    _check_start(start_addr, swizzle_mode(swizzle), base_offset)
    return tmpl | (start_addr >> 4)


def decode_smem_desc(value: int, arch) -> dict:
    """Fields of a descriptor in bytes; raises if reserved/fixed bits are wrong for the arch."""
    fam = _arch_family(arch)
    if not isinstance(value, int) or not 0 <= value < (1 << 64):
        raise PtxgenError(f"descriptor {value!r} is not a 64-bit unsigned int")

    def bits(lo, n):
        return (value >> lo) & ((1 << n) - 1)

    reserved = [(14, 2), (30, 2)] + ([(46, 3), (52, 10)] if fam == "sm90" else [(53, 8)])
    for lo, n in reserved:
        if bits(lo, n):
            sm100 = fam == "sm90" and lo == 46
            hint = " (bit 46 set: this looks like an sm_100 descriptor)" if sm100 else ""
            raise PtxgenError(f"descriptor {value:#018x}: reserved bits {lo}-{lo + n - 1} are "
                              f"not zero{hint}")
    if fam == "sm90":
        codes = {s.wgmma_code: n for n, s in MMA_SWIZZLES.items() if s.wgmma_code is not None}
        sw_name, lbo_mode = codes[bits(62, 2)], "relative"
    else:
        if bits(46, 3) != 1:
            raise PtxgenError(f"descriptor {value:#018x}: bits 46-48 must be the fixed 0b001 on "
                              f"sm_100 (an sm_90 descriptor needs `| 1 << 46`)")
        codes = {s.tcgen05_code: n for n, s in MMA_SWIZZLES.items()}
        if bits(61, 3) not in codes:
            raise PtxgenError(f"descriptor {value:#018x}: swizzle code {bits(61, 3)} is invalid "
                              f"(3, 5 and 7 are reserved)")
        sw_name, lbo_mode = codes[bits(61, 3)], ("absolute" if bits(52, 1) else "relative")
    return {"start_addr": bits(0, 14) << 4, "lbo": bits(16, 14) << 4, "sbo": bits(32, 14) << 4,
            "base_offset": bits(49, 3), "swizzle": sw_name, "lbo_mode": lbo_mode, "arch": fam}


def smem_base_offset(pattern_start: int, swizzle) -> int:
    """ISA formula: 0 on the repeat boundary, else ``(pattern_start >> 7) & 7``."""
    sw = MMA_SWIZZLES[swizzle_mode(swizzle)]
    return 0 if pattern_start % sw.repeat_bytes == 0 else (pattern_start >> 7) & 7


class SmemDescriptor(NamedTuple):
    """Value object over encode/decode; ``template()`` is the constant to OR the address into."""
    start_addr: int
    lbo: int
    sbo: int
    swizzle: str
    arch: str
    base_offset: int = 0
    lbo_mode: str = "relative"

    def encode(self) -> int:
        return encode_smem_desc(**self._asdict())

    def template(self) -> int:
        kw = self._asdict()
        del kw["start_addr"]
        return desc_template(**kw)

    @classmethod
    def decode(cls, value: int, arch) -> "SmemDescriptor":
        f = decode_smem_desc(value, arch)
        return cls(f["start_addr"], f["lbo"], f["sbo"], f["swizzle"], str(arch), f["base_offset"],
                   f["lbo_mode"])


# -------- canonical layouts -> LBO / SBO, K-step advance, offset functions ----------------------
#
# PTX ISA "Canonical Layouts" (CuTe notation, element units, T = 128 / elem_bits):
#   K-major  none : ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
#   K-major  S    : Sw o ((8,m),(T,2k)) : ((S/16*T,SBO),(1,T))          LBO unused ("assumed 1")
#   MN-major none : ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
#   MN-major S    : Sw o ((T,S/16,m),(8,k)) : ((1,T,LBO),(S/16*T,SBO))
# Every mode is a grid of *units* of 8 x S contiguous bytes (S = 16 for none: one core matrix of
# 8 rows x 16 B).  A K-major unit is 8 M/N rows x S bytes of K; an MN-major unit is 8 K rows x
# S bytes of M/N.  With "unit stride" = bytes between neighbouring units:
#   none (both majors): LBO = K unit stride,  SBO = M/N unit stride
#   K-major swizzled:   LBO unused (16),      SBO = M/N unit stride (8-row groups)
#   MN-major swizzled:  LBO = M/N unit stride, SBO = K unit stride (the ISA swaps the names)


class DescParams(NamedTuple):
    lbo_bytes: int
    sbo_bytes: int
    notes: str


K_BITS = 256  # every dense MMA step reads 256 bits of K per row: 16 f16, 8 tf32, 32 fp8 (Table 39)


class _Canon(NamedTuple):
    major: str
    swizzle: str
    elem_bits: int
    rows: int
    k_extent: int
    order: str       # units stacked along "mn" or "k" first
    unit_rows: int   # unit extent along M/N (elements)
    unit_k: int      # unit extent along K (elements)
    mn_stride: int   # bytes between units along M/N
    k_stride: int    # bytes between units along K
    k_instr: int     # K elements per MMA instruction


def canonical_plan(major, swizzle, elem_bits, rows, k_extent, atom_order=None,
                   k_instr=None) -> _Canon:
    """How a (rows, k_extent) operand tiles into the canonical core-matrix units of its
    major-ness and swizzle: unit extents, their order and byte strides (checked against the
    shape), which both the wgmma and the tcgen05 descriptors encode."""
    if major not in ("K", "MN"):
        raise PtxgenError(f"major={major!r} must be 'K' or 'MN'")
    sw_name = swizzle_mode(swizzle)
    if MMA_SWIZZLES[sw_name].cute_b is None:
        raise PtxgenError(f"canonical layout for swizzle {sw_name} is not modelled; use 128B, 64B, "
                          f"32B or none")
    if elem_bits not in (8, 16, 32):
        raise PtxgenError(f"elem_bits={elem_bits!r}: MMA operands here are 8-, 16- or 32-bit")
    order = atom_order or ("mn" if major == "K" else "k")
    if order not in ("mn", "k"):
        raise PtxgenError(f"atom_order={atom_order!r} must be 'mn' or 'k'")
    k_instr = k_instr or K_BITS // elem_bits
    s = MMA_SWIZZLES[sw_name].row_bytes
    per_row = s * 8 // elem_bits  # elements in one S-byte span
    unit_rows, unit_k = (8, per_row) if major == "K" else (per_row, 8)
    if not (isinstance(rows, int) and rows > 0 and rows % unit_rows == 0):
        raise LayoutError(f"rows={rows!r} must be a positive multiple of {unit_rows} for a "
                          f"{major}-major {sw_name} operand ({unit_rows} x {unit_k} element unit)")
    k_mult = max(unit_k, k_instr)
    if not (isinstance(k_extent, int) and k_extent > 0 and k_extent % k_mult == 0):
        hint = " (or pick a narrower swizzle)" if major == "K" and unit_k > k_instr else ""
        raise LayoutError(f"k_extent={k_extent!r} must be a positive multiple of {k_mult} for a "
                          f"{major}-major {sw_name} {elem_bits}-bit operand{hint}")
    n_mn, n_k, unit = rows // unit_rows, k_extent // unit_k, 8 * s
    mn_stride, k_stride = (unit, n_mn * unit) if order == "mn" else (n_k * unit, unit)
    return _Canon(major, sw_name, elem_bits, rows, k_extent, order, unit_rows, unit_k,
                  mn_stride, k_stride, k_instr)


def _offset(c: _Canon, row: int, k: int) -> int:
    s = MMA_SWIZZLES[c.swizzle].row_bytes
    if c.major == "K":
        inner = (row % 8) * s + (k % c.unit_k) * c.elem_bits // 8
    else:
        inner = (k % 8) * s + (row % c.unit_rows) * c.elem_bits // 8
    lin = (row // c.unit_rows) * c.mn_stride + (k // c.unit_k) * c.k_stride + inner
    return apply_swizzle(lin, c.swizzle)


def canonical_offset(major, swizzle, elem_bits, rows, k_extent, atom_order=None
                     ) -> Callable[[int, int], int]:
    """``(row, k) -> byte offset`` of the canonical tile, relative to a repeat-aligned tile base.

    ``atom_order`` says which way units are stacked first: 'mn' (default for K-major) or 'k'
    (default for MN-major).  The defaults are what one TMA box per unit column writes.
    """
    c = canonical_plan(major, swizzle, elem_bits, rows, k_extent, atom_order)

    def offset(row: int, k: int) -> int:
        if not (0 <= row < c.rows and 0 <= k < c.k_extent):
            raise LayoutError(f"coordinate (row={row}, k={k}) is outside the "
                              f"{c.rows} x {c.k_extent} tile")
        return _offset(c, row, k)
    return offset


def k_step_offsets(major, swizzle, elem_bits, rows, k_extent, atom_order=None, k_instr=None
                   ) -> list[int]:
    """Byte offset of the descriptor start address for each MMA K step across the tile.

    Add ``offset >> 4`` to the descriptor (its low 14 bits are the address).  Inside a K-major
    swizzled unit the step is ``k_instr * elem_bits / 8`` (32 B); when a step reaches the next unit
    it jumps by the K unit stride instead.  Row 0 of an aligned unit is never permuted, so these are
    plain (unswizzled) offsets.
    """
    c = canonical_plan(major, swizzle, elem_bits, rows, k_extent, atom_order, k_instr)
    return [_offset(c, 0, i * c.k_instr) for i in range(c.k_extent // c.k_instr)]


def mma_operand_desc_params(*, major, swizzle, elem_bits, rows, k_extent, atom_order=None,
                            k_instr=None) -> DescParams:
    """LBO/SBO in bytes for a canonical tile of ``rows x k_extent`` elements (see module notes)."""
    c = canonical_plan(major, swizzle, elem_bits, rows, k_extent, atom_order, k_instr)
    sw = MMA_SWIZZLES[c.swizzle]
    if c.swizzle == "none":
        lbo, sbo = c.k_stride, c.mn_stride
        meaning = (f"LBO = {lbo} B between core matrices (8 x 16 B) along K, SBO = {sbo} B "
                   f"between core matrices along M/N")
    elif major == "K":
        lbo, sbo = 16, c.mn_stride
        meaning = (f"LBO unused for swizzled K-major (ISA: 'assumed 1', encoded 1); SBO = {sbo} B "
                   f"between 8-row groups")
    else:
        lbo, sbo = c.mn_stride, c.k_stride
        meaning = (f"LBO = {lbo} B between {sw.row_bytes}-B MN spans (units along M/N), "
                   f"SBO = {sbo} B between 8-row K groups")
    steps = k_step_offsets(major, swizzle, elem_bits, rows, k_extent, atom_order, k_instr)
    deltas = sorted({b - a for a, b in zip(steps, steps[1:])})
    notes = (f"{major}-major {c.swizzle}, {elem_bits}-bit, {rows}x{k_extent}, units of "
             f"{c.unit_rows}x{c.unit_k} elements ({8 * sw.row_bytes} B) stacked along "
             f"{c.order.upper()} first; {meaning}; K step = {c.k_instr} elements, start-address "
             f"offsets per step {steps} (deltas {deltas}); tile base alignment {sw.repeat_bytes} B"
             f"{'' if c.swizzle == 'none' else ' (else base_offset)'}")
    if major == "MN":
        notes += ("; MN-major: wgmma transposes only f16/bf16, tcgen05 kind::tf32 transposes only "
                  "with swizzle 128B_base32B (not modelled here)")
    return DescParams(lbo, sbo, notes)


def _grid_values(fn, rows: int, cols: int):
    """((rows, cols) index arrays, fn over them) for the whole tile in one call when `fn` is
    array-generic (layouts and the canonical formula are: + - * // % ^ >> & only), else None
    and the caller goes element by element.  A 128x64 tile is 8192 Python calls otherwise."""
    import numpy as np
    r, k = index_grid(rows, cols)
    try:
        out = fn(r, k)
    except (TypeError, ValueError, PtxgenError):
        return None
    if not (isinstance(out, np.ndarray) and out.shape == r.shape and out.dtype.kind in "iu"):
        return None
    return (r, k), out


def check_layout_matches(offset_fn_elems: Callable[[int, int], int], *, major, swizzle, elem_bits,
                         rows, k_extent, atom_order=None, explain=True) -> DescParams:
    """Check a buffer layout (``(row, k) -> element offset``) against the canonical layout the
    descriptor will describe; return its DescParams, or raise LayoutError naming the first
    mismatching coordinate and any other (major, swizzle, atom_order) that does match.

    With ``atom_order=None`` either unit order is accepted (the returned LBO/SBO follow the match).
    ``explain=False`` leaves out the search for other matching modes (for callers that probe
    several modes and report only when none fits).
    """
    import numpy as np
    grid = _grid_values(offset_fn_elems, rows, k_extent)

    def first_mismatch(c: _Canon):
        if grid is not None:   # the whole tile at once
            r, k = grid[0]
            got = grid[1] * c.elem_bits
            bad = np.flatnonzero(got != _offset(c, r, k) * 8)
            if bad.size == 0:
                return None
            i = int(bad[0])
            return int(r[i]), int(k[i]), got[i] / 8
        for r in range(c.rows):
            for k in range(c.k_extent):
                got = offset_fn_elems(r, k) * c.elem_bits
                if got != _offset(c, r, k) * 8:
                    return r, k, got / 8
        return None

    default = canonical_plan(major, swizzle, elem_bits, rows, k_extent, atom_order).order
    tried = [default] if atom_order else [default, {"mn": "k", "k": "mn"}[default]]
    misses = []
    for order in tried:
        c = canonical_plan(major, swizzle, elem_bits, rows, k_extent, order)
        miss = first_mismatch(c)
        if miss is None:
            return mma_operand_desc_params(major=major, swizzle=swizzle, elem_bits=elem_bits,
                                           rows=rows, k_extent=k_extent, atom_order=order)
        misses.append((c, miss))
    c, (r, k, got) = misses[0]
    matches = []
    modelled = [n for n, m in MMA_SWIZZLES.items() if m.cute_b is not None]
    for mj, sw, o in itertools.product(("K", "MN"), modelled, ("mn", "k")):
        if not explain:
            break
        if (mj, sw) == (major, c.swizzle) and o in tried:
            continue
        try:
            alt = canonical_plan(mj, sw, elem_bits, rows, k_extent, o)
        except PtxgenError:
            continue
        if first_mismatch(alt) is None:
            matches.append(f"major={mj!r}, swizzle={sw!r}, atom_order={o!r}")
    hint = "" if not explain else ("; the buffer matches " + " or ".join(matches)) if matches \
        else "; no other canonical mode matches either"
    raise LayoutError(
        f"buffer layout does not match the {major}-major {c.swizzle} canonical layout (PTX ISA "
        f"'Canonical Layouts', units stacked along {c.order.upper()} first): first mismatch at "
        f"(row={r}, k={k}): buffer byte offset {got:g}, descriptor expects "
        f"{_offset(c, r, k)}{hint}")
