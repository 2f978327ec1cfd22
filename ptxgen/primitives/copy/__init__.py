"""The `copy` tile primitive: dst <- src between global, shared and registers.

Each variant is one module in this package that registers itself; they are all
imported here, so adding a variant touches no other file.
"""
from __future__ import annotations

import importlib
import math
import pkgutil
from functools import cached_property

from ...errors import TraceError
from ...ir import BufferRegion
from ..call import RegionCall
from ..registry import dispatch, evaluate, tile_op
from .common import analyze_side


class CopyCall(RegionCall):
    """A copy's call: the two sides, analysed once from the regions' layout metadata."""

    @property
    def dtype(self):
        return self.src.buffer.dtype

    @property
    def numel(self) -> int:
        return math.prod(self.src.shape)

    @cached_property
    def src_side(self):
        return analyze_side(self.src)

    @cached_property
    def dst_side(self):
        return analyze_side(self.dst)

    def spaces(self):
        return self.src_side.space, self.dst_side.space

    def describe(self) -> str:
        return (f"pg.tile.{self.scope.name}.copy({self.dst}, {self.src}) "
                f"[{self.dtype}, {self.active_scope}]")


def _squeeze(shape):
    return tuple(e for e in shape if e != 1)


def validate_copy(dst: BufferRegion, src: BufferRegion):
    """The trace-time rules of a copy (TraceError without a location; the front end adds it)."""
    if dst.dtype != src.dtype:
        raise TraceError(f"copy dtype mismatch: dst {dst} is {dst.dtype}, src {src} is "
                         f"{src.dtype}; copy moves bits, so both sides need one dtype (view one "
                         f"side with .view(..., dtype=...) to reinterpret)")
    ds, ss = dst.shape, src.shape
    if ds != ss and _squeeze(ds) != _squeeze(ss):
        raise TraceError(f"copy extent mismatch: dst {dst} has extents {ds}, src {src} has {ss}")
    for r in (dst, src):
        if r.buffer.scope == "tmem":
            raise TraceError(f"{r} is in tensor memory; use tcgen05 ld/st/cp primitives")


tile_op("copy", CopyCall)


def _autoload():
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not m.name.startswith("_") and m.name != "common":
            importlib.import_module(f"{__name__}.{m.name}")


_autoload()

__all__ = ["CopyCall", "validate_copy", "dispatch", "evaluate"]
