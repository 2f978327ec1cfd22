"""`S[shape:stride] + offset`: the spelling of a layout, parsed into checked nested trees.

A shape tree is a tuple of modes; a mode is an int extent (a leaf) or a tuple of modes (a
hierarchical, CuTe-like mode).  The stride tree has the same structure with a Stride at each
leaf.  Parsing checks the structure once, so the algebra never has to.
"""
from __future__ import annotations

from numbers import Integral

from ._axis import ZERO, Stride, as_stride, bad


def _sub(path: str, i: int) -> str:
    return f"{path}.{i}" if path != "layout" else f"mode {i}"


def _is_int(x) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


def _check_shape(s, path: str):
    if _is_int(s):
        if s < 1:
            raise bad(f"{path}: extent {s} must be >= 1")
        return int(s)
    if isinstance(s, (tuple, list)):
        if not s:
            raise bad(f"{path}: an empty mode () has no extent; drop it or use 1")
        return tuple(_check_shape(x, _sub(path, i)) for i, x in enumerate(s))
    raise bad(f"{path}: extent must be an int or a tuple of modes, got {s!r}")


def _check_stride(shape, stride, path: str):
    if isinstance(shape, int):
        if isinstance(stride, (tuple, list)):
            raise bad(f"{path}: extent {shape} is a leaf but its stride {stride!r} is a "
                      f"tuple; give one stride per leaf")
        return as_stride(stride, f"{path}: stride")
    if not isinstance(stride, (tuple, list)):
        raise bad(f"{path}: shape {shape!r} is nested but stride {stride!r} is not; give "
                  f"one stride per sub-mode, e.g. {row_major(shape)!r}")
    if len(stride) != len(shape):
        raise bad(f"{path}: shape {shape!r} has {len(shape)} modes but stride "
                  f"{tuple(stride)!r} has {len(stride)}")
    return tuple(_check_stride(s, d, _sub(path, i)) for i, (s, d) in enumerate(zip(shape, stride)))


def flatten(tree) -> list:
    """Leaves of a (nested) tree, outermost first."""
    if not isinstance(tree, tuple):
        return [tree]
    out = []
    for t in tree:
        out.extend(flatten(t))
    return out


def unflatten(shape, values: list):
    """Rebuild `values` (one per leaf of `shape`) into the structure of `shape`."""
    it = iter(values)

    def rec(s):
        return next(it) if isinstance(s, int) else tuple(rec(x) for x in s)
    return rec(shape)


def tree_size(shape) -> int:
    n = 1
    for e in flatten(shape):
        n *= e
    return n


def row_major_strides(shape, inner=1, mul=None) -> tuple:
    """Compact row-major strides of a flat shape, last dim fastest with stride `inner`:
    (4, 8) -> (8, 1).  The one place this is computed.  Each stride is `extent * next
    stride`, in that operand order, so symbolic extents give the expressions callers have
    always built; `mul(extent, stride)` replaces that product once either is not an int.
    The outermost extent multiplies nothing."""
    if not shape:
        return ()
    out, acc = [inner], inner
    for e in reversed(shape[1:]):
        acc = e * acc if mul is None or (type(e) is int and type(acc) is int) else mul(e, acc)
        out.append(acc)
    out.reverse()
    return tuple(out)


def row_major(shape):
    """Compact row-major strides (last leaf fastest) for a shape tree."""
    return unflatten(shape, [Stride(p) for p in row_major_strides(flatten(shape))])


def fmt_tree(tree) -> str:
    if not isinstance(tree, tuple):
        return repr(tree)
    body = ", ".join(fmt_tree(t) for t in tree)
    return f"({body},)" if len(tree) == 1 else f"({body})"


def fmt_spec(shape: tuple, stride: tuple, offset: Stride) -> str:
    if len(shape) == 1 and isinstance(shape[0], int):
        text = f"S[{shape[0]}:{stride[0]!r}]"
    else:
        text = f"S[{fmt_tree(shape)}:{fmt_tree(stride)}]"
    if offset:
        text += f" + {offset!r}" if len(offset.items) == 1 and offset.items[0][0] == "m" \
            else f" + ({offset!r})"
    return text


class Spec:
    """A checked shape:stride (+ offset) triple; `TileLayout(spec)` turns it into a layout."""

    __slots__ = ("shape", "stride", "offset")

    def __init__(self, shape, stride=None, offset=0):
        shp = _check_shape(shape, "layout")
        if isinstance(shp, int):
            shp = (shp,)
            if isinstance(stride, (tuple, list)) and len(stride) == 1:
                stride = stride[0]
            stride = None if stride is None else (stride,)
        elif len(shp) == 1 and stride is not None and not isinstance(stride, (tuple, list)):
            stride = (stride,)
        self.shape = shp
        self.stride = row_major(shp) if stride is None else _check_stride(shp, stride, "layout")
        self.offset = as_stride(offset, "offset")

    def __add__(self, other) -> "Spec":
        out = object.__new__(Spec)
        out.shape, out.stride = self.shape, self.stride
        out.offset = self.offset.plus(as_stride(other, "offset"))
        return out

    __radd__ = __add__

    def __eq__(self, other):
        return isinstance(other, Spec) and (self.shape, self.stride, self.offset) == \
            (other.shape, other.stride, other.offset)

    def __hash__(self):
        return hash((self.shape, self.stride, self.offset))

    def __repr__(self) -> str:
        return fmt_spec(self.shape, self.stride, self.offset)


class _SBuilder:
    """`S[(4, 8):(1, 4)]` is shape:stride; `S[4, 8]`, `S[(4, 8)]`, `S[8]` are row-major."""

    def __getitem__(self, key) -> Spec:
        if isinstance(key, slice):
            if key.step is not None:
                raise bad(f"S[shape:stride] takes one ':', got a step {key.step!r}")
            if key.start is None or key.stop is None:
                raise bad("S[shape:stride] needs both a shape and a stride; "
                          "write S[shape] for row-major")
            return Spec(key.start, key.stop)
        return Spec(key)

    def __repr__(self) -> str:
        return "S"


S = _SBuilder()
__all__ = ["S", "Spec", "ZERO", "flatten", "unflatten", "tree_size", "row_major",
           "row_major_strides", "fmt_spec"]
