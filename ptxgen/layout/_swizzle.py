"""Swizzle (CuTe's Swizzle<B, M, S>, in elements) and ComposeLayout (swizzle after a layout).

Shared-memory tiles read by MMA/TMA are stored XOR-swizzled so that a warp's row accesses hit
distinct banks.  The swizzle is applied to the element offset *after* the tile layout, which is
why it is a separate object: copy code needs both the unswizzled chunk (a vector access may not
cross it) and the pre-swizzle layout (to slice regions).
"""
from __future__ import annotations

from numbers import Integral

from ptxgen.errors import LayoutError

from ._spec import Spec
from ._tile import TileLayout

_MMA_MODES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}
_MMA_BITS = {0: 0, "none": 0, 32: 1, "32B": 1, 64: 2, "64B": 2, 128: 3, "128B": 3}


def _nonneg(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, Integral) or v < 0:
        raise LayoutError(f"Swizzle {what} must be an int >= 0, got {v!r}")
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
            raise LayoutError(f"Swizzle({bits}, {base}, 0) clears bits instead of permuting them; "
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
    def mma(cls, swizzle_bytes, elem_bits: int) -> "Swizzle":
        """The wgmma/tcgen05/TMA swizzle mode (0 or "none", 32, 64, 128 bytes) for elements of
        `elem_bits`: byte form Swizzle<b, 4, 3> over 16-byte chunks, in elements base =
        log2(128 / elem_bits) (fp16: 3, fp8: 4, fp4: 5, fp32: 2)."""
        if swizzle_bytes not in _MMA_BITS:
            raise LayoutError(f"MMA swizzle must be one of none/32B/64B/128B, got "
                              f"{swizzle_bytes!r}")
        return cls(_MMA_BITS[swizzle_bytes], _chunk_log2(elem_bits), 3)

    @property
    def mode(self) -> str | None:
        """"none" / "32B" / "64B" / "128B" when this is an MMA-shaped swizzle (shift 3 over
        16-byte chunks), else None.  Check `is_mma(elem_bits)` for the element width."""
        if self.bits == 0:
            return "none"
        return _MMA_MODES.get(self.bits) if self.shift == 3 else None

    @property
    def mode_bytes(self) -> int | None:
        """Swizzle width in bytes (0 for none, 32/64/128), None if not an MMA swizzle."""
        md = self.mode
        return None if md is None else (0 if md == "none" else 16 << self.bits)

    @property
    def repeat_bytes(self) -> int | None:
        """Bytes after which the MMA pattern repeats (align tiles to it): 16/256/512/1024."""
        md = self.mode
        return None if md is None else (16 if md == "none" else 128 << self.bits)

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
        raise LayoutError(f"elem_bits {elem_bits!r} must be a power of two in 1..128 (pass the "
                          f"storage width for packed types, e.g. 8 for fp6 in bytes)")
    return 7 - (int(elem_bits).bit_length() - 1)


def swizzle_32B(elem_bits: int) -> Swizzle:
    return Swizzle.mma(32, elem_bits)


def swizzle_64B(elem_bits: int) -> Swizzle:
    return Swizzle.mma(64, elem_bits)


def swizzle_128B(elem_bits: int) -> Swizzle:
    return Swizzle.mma(128, elem_bits)


class ComposeLayout:
    """`swizzle(layout.apply(...)["m"])`; other axes pass through.

    `view=True` marks a region of a larger swizzled buffer (what `slice` returns): the swizzle
    still acts on the full pre-swizzle offset, so the span check is skipped.  Otherwise the
    layout must cover whole swizzle periods (its cosize a multiple of `swizzle.span`).
    `view` is bookkeeping, not part of equality: equal swizzle and layout map identically."""

    __slots__ = ("swizzle", "layout", "view", "_hash")

    def __init__(self, swizzle: Swizzle, layout, *, view: bool = False):
        if not isinstance(swizzle, Swizzle):
            raise LayoutError(f"ComposeLayout's first argument must be a Swizzle, got {swizzle!r}")
        if isinstance(layout, Spec):
            layout = TileLayout(layout)
        if not isinstance(layout, TileLayout):
            raise LayoutError(f"ComposeLayout's second argument must be a TileLayout, got "
                              f"{layout!r}")
        self.swizzle, self.layout, self.view, self._hash = swizzle, layout, bool(view), None
        if not view and swizzle.bits:
            n, cos = swizzle.span, layout.cosize()
            if n > cos or cos % n:
                raise LayoutError(
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
