"""The `copy` tile primitive: dst <- src between global, shared and registers.

Each variant is one module in this package that registers itself; they are all
imported here, so adding a variant touches no other file.
"""
from __future__ import annotations

import importlib
import math
import pkgutil
from functools import cached_property

from ...ir import BufferRegion
from ..registry import dispatch, evaluate
from .common import analyze_side


class CopyCall:
    """Everything a copy variant's predicates and emitter may look at."""

    def __init__(self, dst: BufferRegion, src: BufferRegion, scope, target, an, options=None,
                 all_active=(True, ""), where="", stmt=None, block=(1, 1, 1)):
        self.dst, self.src = dst, src
        self.scope = scope
        self.target = target
        self.an = an
        self.options = dict(options or {})
        self.all_active = all_active
        self.where = where
        self.stmt = stmt
        self.block = block

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
                f"[{self.dtype}, {self.scope}]")


def _autoload():
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not m.name.startswith("_") and m.name != "common":
            importlib.import_module(f"{__name__}.{m.name}")


_autoload()

__all__ = ["CopyCall", "dispatch", "evaluate"]
