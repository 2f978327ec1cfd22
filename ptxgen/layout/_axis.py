"""Axes of a layout's codomain, and strides bound to them.

A layout maps a logical coordinate to offsets on several *axes* at once: "m" is the element
offset in memory; laneid / warpid / tid / ... say which thread holds the element; TLane / TCol
address tensor memory.  Keeping thread axes separate from "m" lets one layout say both *where*
an element lives and *who* owns it, which is what the copy dispatcher needs to carve a region.
"""
from __future__ import annotations

import os
from numbers import Integral

from ptxgen.errors import LayoutError, caller_src, located_at

_HERE = os.path.dirname(__file__) + os.sep     # ptxgen/layout/, as a frame spells it


def bad(msg: str) -> LayoutError:
    """The LayoutError of a bad argument, at the user's file:line when user code called the
    layout package: a layout built at module level has no trace running to locate it.  A call
    from ptxgen itself stays unlocated (its caller words the error or falls back)."""
    return located_at(LayoutError(msg), caller_src(_HERE))

_AXES: dict[str, "Axis"] = {}
_RANK: dict[str, int] = {}


def _as_int(k, what: str) -> int:
    if type(k) is int:
        return k
    if isinstance(k, bool) or not isinstance(k, Integral):
        raise bad(f"{what} must be an int, got {k!r} ({type(k).__name__})")
    return int(k)


class Axis:
    """A named codomain axis.  Axes are singletons: `Axis("laneid") is laneid`."""

    __slots__ = ("name",)

    def __new__(cls, name: str) -> "Axis":
        return cls.get(name)

    @classmethod
    def _define(cls, name: str) -> "Axis":
        ax = object.__new__(cls)
        ax.name = name
        _AXES[name] = ax
        _RANK[name] = len(_RANK)
        return ax

    @staticmethod
    def get(name) -> "Axis":
        """The axis called `name` (an Axis passes through); unknown names are a LayoutError."""
        if isinstance(name, Axis):
            return name
        ax = _AXES.get(name) if isinstance(name, str) else None
        if ax is None:
            raise bad(f"unknown axis {name!r}; known axes: {', '.join(_AXES)}")
        return ax

    def __rmatmul__(self, k) -> "Stride":
        # `4 @ laneid`: the int sits on the left, so Python asks the axis.
        k = _as_int(k, f"the coefficient in '{k!r} @ {self.name}'")
        return Stride._raw(_norm({self.name: k}))

    def __add__(self, other) -> "Stride":
        return Stride(self) + other

    def __radd__(self, other) -> "Stride":
        return as_stride(other) + Stride(self)

    def __reduce__(self):
        return (Axis.get, (self.name,))

    def __repr__(self) -> str:
        return self.name


def _norm(d: dict) -> tuple:
    """Canonical item tuple: zero coefficients dropped, thread axes in registry order, "m" last."""
    return tuple(sorted(((a, c) for a, c in d.items() if c), key=lambda it: _RANK[it[0]]))


class Stride:
    """An immutable {axis name: int} map: the step one coordinate unit makes on each axis.

    Also used for a layout's constant offset.  `+` joins terms of *one* stride and refuses an
    axis named twice (almost always a typo); offsets combine with `plus`, which adds.
    """

    __slots__ = ("items",)

    def __init__(self, value=0):
        self.items = as_stride(value).items

    @classmethod
    def _raw(cls, items: tuple) -> "Stride":
        s = object.__new__(cls)
        s.items = items
        return s

    def __add__(self, other) -> "Stride":
        o = as_stride(other)
        d = dict(self.items)
        for a, c in o.items:
            if a in d:
                raise bad(
                    f"axis {a!r} appears twice in one stride ({self!r} + {o!r}); "
                    f"write it once with the summed coefficient")
            d[a] = c
        return Stride._raw(_norm(d))

    __radd__ = __add__

    def plus(self, other) -> "Stride":
        """Componentwise sum (for offsets, where an axis may legitimately repeat)."""
        d = dict(self.items)
        for a, c in as_stride(other).items:
            d[a] = d.get(a, 0) + c
        return Stride._raw(_norm(d))

    def scaled(self, k: int) -> "Stride":
        return Stride._raw(tuple((a, c * k) for a, c in self.items) if k else ())

    def get(self, axis, default: int = 0) -> int:
        name = axis.name if isinstance(axis, Axis) else axis
        for a, c in self.items:
            if a == name:
                return c
        return default

    def as_dict(self) -> dict:
        return dict(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stride) and self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __repr__(self) -> str:
        if not self.items:
            return "0"
        return " + ".join(str(c) if a == "m" else f"{c} @ {a}" for a, c in self.items)


def as_stride(x, what: str = "stride") -> Stride:
    """int -> "m" stride, Axis -> 1 @ axis, Stride -> itself, {name: k} -> checked Stride."""
    if isinstance(x, Stride):
        return x
    if isinstance(x, Axis):
        return Stride._raw(((x.name, 1),))
    if isinstance(x, dict):
        return Stride._raw(_norm({Axis.get(a).name: _as_int(c, what) for a, c in x.items()}))
    if isinstance(x, Integral) and not isinstance(x, bool):
        return Stride._raw(_norm({"m": int(x)}))
    raise bad(f"{what} must be an int, an axis term like '1 @ laneid', or a sum of them; "
              f"got {x!r} ({type(x).__name__})")


ZERO = Stride._raw(())

m = Axis._define("m")                  # element offset in memory (always in apply's result)
laneid = Axis._define("laneid")        # lane in warp, 0..31
warpid = Axis._define("warpid")        # warp in CTA
tid = Axis._define("tid")              # thread in CTA
tid_in_wg = Axis._define("tid_in_wg")  # thread in warpgroup, 0..127
wid_in_wg = Axis._define("wid_in_wg")  # warp in warpgroup, 0..3
TLane = Axis._define("TLane")          # tensor-memory lane (row)
TCol = Axis._define("TCol")            # tensor-memory column
_RANK["m"] = 1 << 30                   # print "m" last: `1 @ laneid + 4`
