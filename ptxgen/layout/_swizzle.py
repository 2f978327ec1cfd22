"""Swizzle (CuTe's Swizzle<B, M, S>, in elements) and ComposeLayout (swizzle after a layout).

Shared-memory tiles read by MMA/TMA are stored XOR-swizzled so that a warp's row accesses hit
distinct banks.  The swizzle is applied to the element offset *after* the tile layout, which is
why it is a separate object: copy code needs both the unswizzled chunk (a vector access may not
cross it) and the pre-swizzle layout (to slice regions).
"""
from __future__ import annotations

from functools import lru_cache
from numbers import Integral
from typing import NamedTuple

from ._axis import bad
from ._spec import S, Spec, row_major_strides
from ._tile import TileLayout


# ---- the MMA swizzle modes: the one table (PTX ISA 9.7.15.5.1 wgmma "Shared Memory Matrix
# Layout", 9.7.16.4.1 tcgen05 "Shared memory descriptor", Tables 40-41) ---------------------
class MmaSwizzle(NamedTuple):
    """One shared-memory swizzle mode of wgmma / tcgen05.mma / TMA."""
    name: str
    cute_b: int | None     # B of CuTe Swizzle<B, 4, 3> on byte offsets; None: not that family
    row_bytes: int         # one swizzled row, the atom row (16 for none: a core-matrix row)
    repeat_bytes: int      # 8 rows: the pattern repeats, so tiles start here (Table 41)
    wgmma_code: int | None   # wgmma descriptor layout type, bits [62, 64); None: sm_100 only
    tcgen05_code: int        # tcgen05 descriptor layout type, bits [61, 64)


MMA_SWIZZLES = {m.name: m for m in (
    MmaSwizzle("none", 0, 16, 16, 0, 0),
    MmaSwizzle("32B", 1, 32, 256, 3, 6),
    MmaSwizzle("64B", 2, 64, 512, 2, 4),
    MmaSwizzle("128B", 3, 128, 1024, 1, 2),
    # 128B rows with 32-byte atomicity (CuTe Swizzle<2,5,2>), tcgen05 only; its repeat is not
    # in Table 41 (1024 B assumed) and no Swizzle here models it
    MmaSwizzle("128B_base32B", None, 128, 1024, None, 1),
)}
_MMA_SHIFT = 3             # every MMA swizzle XORs row bits (byte bit 7 on) into 16-byte chunks
_MMA_BY_B = {m.cute_b: m.name for m in MMA_SWIZZLES.values() if m.cute_b is not None}
_MMA_ALIASES = {k.lower(): k for k in MMA_SWIZZLES} | {
    "interleave": "none", None: "none", 0: "none", 32: "32B", 64: "64B", 128: "128B"}


@lru_cache(maxsize=None)    # a handful of spellings, asked per descriptor field
def mma_swizzle_name(mode, *, base32: bool = False) -> str | None:
    """The table's name for an MMA swizzle spelled as "128B"/"128b"/128, "none"/
    "interleave"/0/None, ...; None if it is none of them.  "128B_base32B" counts only with
    `base32` (the tcgen05 descriptor has it; no layout here does)."""
    name = _MMA_ALIASES.get(mode.lower() if isinstance(mode, str) else mode)
    return None if name == "128B_base32B" and not base32 else name


def _nonneg(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, Integral) or v < 0:
        raise bad(f"Swizzle {what} must be an int >= 0, got {v!r}")
    return int(v)


class Swizzle:
    """`apply(x) = x ^ ((x >> shift) & (((1 << bits) - 1) << base))` on element offsets.

    Bits [base+shift, base+shift+bits) are XORed into bits [base, base+bits).  Only bits below
    base+bits change, and the map is triangular over GF(2) when shift > 0, so it is a bijection
    on every aligned block of `span` = 1 << (bits+base+shift) elements (indeed on any aligned
    power-of-two block of at least 1 << (bits+base) elements).  It is an involution
    (apply(apply(x)) == x) exactly when shift >= bits or bits == 0: then the source bits are not
    among the bits it changes.  With 0 < shift < bits it is a bijection but not an involution.
    """

    __slots__ = ("bits", "base", "shift", "_mask")

    def __init__(self, bits: int, base: int, shift: int):
        self.bits = _nonneg(bits, "bits")
        self.base = _nonneg(base, "base")
        self.shift = _nonneg(shift, "shift")
        if self.bits and not self.shift:
            raise bad(f"Swizzle({bits}, {base}, 0) clears bits instead of permuting them; "
                      f"shift must be > 0 (MMA swizzles use 3)")
        self._mask = ((1 << self.bits) - 1) << self.base

    @property
    def chunk_elems(self) -> int:
        """Unswizzled run of elements: a vector access must stay inside one chunk."""
        return 1 << self.base

    @property
    def span(self) -> int:
        """Period of the pattern in elements (1 for the identity)."""
        return 1 << (self.bits + self.base + self.shift) if self.bits else 1

    @property
    def is_involution(self) -> bool:
        return self.bits == 0 or self.shift >= self.bits

    def apply(self, x):
        """Swizzle an int or a symbolic offset (uses ^ >> & with int right operands)."""
        if not self.bits:
            return x
        return x ^ ((x >> self.shift) & self._mask)

    __call__ = apply

    # ---- MMA / TMA presets ----------------------------------------------------------------
    @classmethod
    @lru_cache(maxsize=None)
    def mma(cls, swizzle_bytes, elem_bits: int) -> "Swizzle":
        """The wgmma/tcgen05/TMA swizzle mode (0 or "none", 32, 64, 128 bytes) for elements of
        `elem_bits`: byte form Swizzle<b, 4, 3> over 16-byte chunks, in elements base =
        log2(128 / elem_bits) (fp16: 3, fp8: 4, fp4: 5, fp32: 2).  One object per mode and
        width (the descriptor checks ask per element)."""
        name = mma_swizzle_name(swizzle_bytes)
        if name is None:
            raise bad(f"MMA swizzle must be one of none/32B/64B/128B, got "
                      f"{swizzle_bytes!r}")
        return cls(MMA_SWIZZLES[name].cute_b, _chunk_log2(elem_bits), _MMA_SHIFT)

    @property
    def mode(self) -> str | None:
        """"none" / "32B" / "64B" / "128B" when this is an MMA-shaped swizzle (shift 3 over
        16-byte chunks), else None.  Check `is_mma(elem_bits)` for the element width."""
        if self.bits == 0:
            return "none"
        return _MMA_BY_B.get(self.bits) if self.shift == _MMA_SHIFT else None

    @property
    def mode_bytes(self) -> int | None:
        """Swizzle width in bytes (0 for none, 32/64/128), None if not an MMA swizzle."""
        md = self.mode
        return None if md is None else (0 if md == "none" else MMA_SWIZZLES[md].row_bytes)

    @property
    def repeat_bytes(self) -> int | None:
        """Bytes after which the MMA pattern repeats (align tiles to it): 16/256/512/1024."""
        md = self.mode
        return None if md is None else MMA_SWIZZLES[md].repeat_bytes

    def is_mma(self, elem_bits: int) -> bool:
        """True if this is an MMA swizzle for elements of `elem_bits` (16-byte chunks)."""
        return self.mode is not None and (self.bits == 0 or self.base == _chunk_log2(elem_bits))

    def __eq__(self, other) -> bool:
        return isinstance(other, Swizzle) and \
            (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash(("Swizzle", self.bits, self.base, self.shift))

    def __repr__(self) -> str:
        return f"Swizzle({self.bits}, {self.base}, {self.shift})"


def _chunk_log2(elem_bits) -> int:
    if isinstance(elem_bits, bool) or not isinstance(elem_bits, Integral) or elem_bits < 1 \
            or elem_bits > 128 or elem_bits & (elem_bits - 1):
        raise bad(f"elem_bits {elem_bits!r} must be a power of two in 1..128 (pass the "
                  f"storage width for packed types, e.g. 8 for fp6 in bytes)")
    return 7 - (int(elem_bits).bit_length() - 1)


def swizzle_32B(elem_bits: int) -> Swizzle:
    return Swizzle.mma(32, elem_bits)


def swizzle_64B(elem_bits: int) -> Swizzle:
    return Swizzle.mma(64, elem_bits)


def swizzle_128B(elem_bits: int) -> Swizzle:
    return Swizzle.mma(128, elem_bits)


def mma_canonical_grid(rows: int, k: int, elem_bits: int, mode: str, major: str,
                       atom_order: str, lead=()) -> TileLayout:
    """A PTX canonical MMA operand layout ("Canonical Layouts") before its swizzle, for a
    (*lead, rows, K) tile; compose `Swizzle.mma(mode, elem_bits)` after it.

    Units are 8 rows x one swizzle row of K (K-major) or 8 K-rows x one swizzle row of rows
    (MN-major); they stack along `atom_order` ('mn' or 'k') first; `lead` dims stack whole
    tiles.  The shape is the caller's to check (whole units; see alloc.swizzle, tcgen05.desc)."""
    per = MMA_SWIZZLES[mode].row_bytes * 8 // elem_bits       # elements in one swizzle row
    unit_rows, unit_k = (8, per) if major == "K" else (per, 8)
    n_mn, n_k, unit = rows // unit_rows, k // unit_k, 8 * per
    mn_s, k_s = (unit, n_mn * unit) if atom_order == "mn" else (n_k * unit, unit)
    # (units, within a unit) along rows, then along K; a mode of one unit is flat
    (a, b, sa, sb), (c, d, sc, sd) = ((n_mn, 8, mn_s, per), (n_k, per, k_s, 1)) \
        if major == "K" else ((n_mn, per, mn_s, 1), (n_k, 8, k_s, per))
    shape = (b if a == 1 else (a, b), d if c == 1 else (c, d))
    stride = (sb if a == 1 else (sa, sb), sd if c == 1 else (sc, sd))
    return TileLayout(S[tuple(lead) + shape:row_major_strides(lead, rows * k) + stride])


class ComposeLayout:
    """`swizzle(layout.apply(...)["m"])`; other axes pass through.

    `view=True` marks a region of a larger swizzled buffer (what `slice` returns): the swizzle
    still acts on the full pre-swizzle offset, so the span check is skipped.  Otherwise the
    layout must cover whole swizzle periods (its cosize a multiple of `swizzle.span`).
    `view` is bookkeeping, not part of equality: equal swizzle and layout map identically."""

    __slots__ = ("swizzle", "layout", "view", "_hash")

    def __init__(self, swizzle: Swizzle, layout, *, view: bool = False):
        if not isinstance(swizzle, Swizzle):
            raise bad(f"ComposeLayout's first argument must be a Swizzle, got {swizzle!r}")
        if isinstance(layout, Spec):
            layout = TileLayout(layout)
        if not isinstance(layout, TileLayout):
            raise bad(f"ComposeLayout's second argument must be a TileLayout, got "
                      f"{layout!r}")
        self.swizzle, self.layout, self.view, self._hash = swizzle, layout, bool(view), None
        if not view and swizzle.bits:
            n, cos = swizzle.span, layout.cosize()
            if n > cos or cos % n:
                raise bad(
                    f"swizzle {swizzle!r} spans {n} elements but the layout spans only {cos}"
                    + ("" if n > cos else f" (not a multiple of {n})")
                    + "; tile the layout to whole swizzle periods (tile_to) or use a narrower "
                      "swizzle")

    def _wrap(self, inner: TileLayout, view=None) -> "ComposeLayout":
        return ComposeLayout(self.swizzle, inner, view=self.view if view is None else view)

    @property
    def shape(self):
        return self.layout.shape

    @property
    def rank(self) -> int:
        return self.layout.rank

    @property
    def offset(self) -> dict:
        """The pre-swizzle constant offset."""
        return self.layout.offset

    def leaves(self) -> list:
        """The inner layout's leaves (pre-swizzle)."""
        return self.layout.leaves()

    def axes(self) -> tuple:
        return self.layout.axes()

    def size(self) -> int:
        return self.layout.size()

    def span(self, axis="m") -> int:
        """Footprint on `axis`.  For "m": the inner span rounded up to the aligned block of
        1 << (bits+base) elements, the only bits the swizzle can change; exact whenever the
        inner layout covers whole swizzle periods."""
        n = self.layout.span(axis)
        if getattr(axis, "name", axis) != "m" or not self.swizzle.bits:
            return n
        blk = 1 << (self.swizzle.bits + self.swizzle.base)
        return -(-n // blk) * blk

    def cosize(self) -> int:
        return self.span("m")

    def apply(self, *coord, shape=None) -> dict:
        out = self.layout.apply(*coord, shape=shape)
        out["m"] = self.swizzle.apply(out["m"])
        return out

    def slice(self, shape, region) -> "ComposeLayout":
        """Region view: the inner layout sliced (its offset absorbs the start) under the same
        swizzle, so element addresses are unchanged."""
        return self._wrap(self.layout.slice(shape, region), view=True)

    def canonicalize(self) -> "ComposeLayout":
        return self._wrap(self.layout.canonicalize())

    def group(self, shape) -> "ComposeLayout":
        return self._wrap(self.layout.group(shape))

    def permute_dims(self, *dims) -> "ComposeLayout":
        return self._wrap(self.layout.permute_dims(*dims))

    def tile(self, outer) -> "ComposeLayout":
        """Tile the inner atom; the swizzle acts on the whole result, which equals swizzling
        each atom when the atom covers whole swizzle periods."""
        return ComposeLayout(self.swizzle, self.layout.tile(outer), view=self.view)

    def tile_to(self, shape) -> "ComposeLayout":
        return ComposeLayout(self.swizzle, self.layout.tile_to(shape), view=self.view)

    def __eq__(self, other) -> bool:
        return isinstance(other, ComposeLayout) and self.swizzle == other.swizzle and \
            self.layout == other.layout

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.swizzle, self.layout))
        return self._hash

    def __repr__(self) -> str:
        v = ", view=True" if self.view else ""
        return f"ComposeLayout({self.swizzle!r}, {self.layout!r}{v})"
