"""Whole-tile evaluation.  Layouts use only + - * // % ^ >> & on their coordinates, so they
map numpy index arrays elementwise: a build-time check over a whole tile is one layout call
on index_grid() arrays instead of one call per element.

numpy is imported by the first call, not with the package: only the build-time checks of
MMA and TMEM layouts use it, and its import costs more than building a small kernel."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def index_grid(rows: int, cols: int) -> tuple:
    """(row, col) int64 arrays enumerating a rows x cols tile in row-major order."""
    import numpy as np

    return (np.repeat(np.arange(rows, dtype=np.int64), cols),
            np.tile(np.arange(cols, dtype=np.int64), rows))


def per_element(x, like: np.ndarray) -> np.ndarray:
    """An offset from a whole-tile layout call as one int64 value per element: an axis the
    layout does not move comes back as a plain int."""
    import numpy as np

    return np.broadcast_to(np.asarray(x, dtype=np.int64), like.shape)
