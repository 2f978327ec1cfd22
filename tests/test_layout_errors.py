"""Layout constructors called outside any kernel: a bad argument is a LayoutError located at
the user's file:line (the first frame outside ptxgen), as the tracer locates errors inside a
kernel; a layout ptxgen builds for itself keeps its message unlocated (its caller words it)."""
import importlib
import os
import sys

import pytest

import ptxgen as pg
from ptxgen.errors import LayoutError
from ptxgen.layout import (S, ComposeLayout, Stride, Swizzle, TileLayout, laneid,
                           mma_canonical_grid, swizzle_128B, tile_to)
from support.located import fails


def test_a_zero_extent_in_s_is_located():
    fails(lambda: S[(4, 0):(1, 4)],  # at: s
          "s", "mode 1: extent 0 must be >= 1", LayoutError)


def test_a_stride_of_the_wrong_rank_is_located():
    fails(lambda: TileLayout(S[(4, 8):(1, 4, 32)]),  # at: rank
          "rank", "layout: shape (4, 8) has 2 modes but stride (1, 4, 32) has 3", LayoutError)


def test_a_tilelayout_of_something_else_is_located():
    fails(lambda: TileLayout("4x8"),  # at: spec
          "spec", "TileLayout takes S[shape:stride], got '4x8'; write TileLayout(S[...])",
          LayoutError)


def test_shape_and_spec_together_are_located():
    fails(lambda: TileLayout(S[4, 8], shape=(4, 8)),  # at: both
          "both", "pass either S[...] or shape=/stride=, not both", LayoutError)


def test_a_float_coefficient_on_an_axis_is_located():
    fails(lambda: 1.5 @ laneid,  # at: coef
          "coef", "the coefficient in '1.5 @ laneid' must be an int, got 1.5 (float)", LayoutError)


def test_an_axis_named_twice_in_a_stride_is_located():
    fails(lambda: Stride(laneid) + 2 @ laneid,  # at: twice
          "twice", "axis 'laneid' appears twice in one stride (1 @ laneid + 2 @ laneid); write it "
                   "once with the summed coefficient", LayoutError)


def test_a_swizzle_with_no_shift_is_located():
    fails(lambda: Swizzle(3, 3, 0),  # at: shift
          "shift", "Swizzle(3, 3, 0) clears bits instead of permuting them; shift must be > 0 "
                   "(MMA swizzles use 3)", LayoutError)


def test_an_mma_swizzle_of_an_unknown_mode_is_located():
    fails(lambda: Swizzle.mma("96B", 16),  # at: mode
          "mode", "MMA swizzle must be one of none/32B/64B/128B, got '96B'", LayoutError)
    fails(lambda: swizzle_128B(12),  # at: bits
          "bits", "elem_bits 12 must be a power of two in 1..128 (pass the storage width for "
                  "packed types, e.g. 8 for fp6 in bytes)", LayoutError)


def test_a_compose_layout_shorter_than_its_swizzle_is_located():
    fails(lambda: ComposeLayout(Swizzle.mma("128B", 16), TileLayout(S[8, 8])),  # at: span
          "span", "swizzle Swizzle(3, 3, 3) spans 512 elements but the layout spans only 64; "
                  "tile the layout to whole swizzle periods (tile_to) or use a narrower "
                  "swizzle", LayoutError)


def test_tile_to_a_shape_the_atom_does_not_divide_is_located():
    fails(lambda: tile_to(TileLayout(S[8, 8]), (12, 8)),  # at: tile_to
          "tile_to", "tile_to: dim 0 of shape (12, 8) (12) is not a multiple of the atom's 8",
          LayoutError)


def test_a_method_building_a_layout_is_located():
    lay = TileLayout(S[4, 8])
    fails(lambda: lay.slice((4, 8), (slice(0, 2), slice(0, 9))),  # at: slice
          "slice", "slice dim 1: region [0, 9) is outside the shape's extent 8 (valid: 0..8)",
          LayoutError)


def test_a_canonical_grid_is_located_at_its_caller():
    fails(lambda: mma_canonical_grid(64, 64, 16, "none", "K", "k", lead=(0,)),  # at: grid
          "grid", "mode 0: extent 0 must be >= 1", LayoutError)


def test_a_layout_built_at_module_level_is_located_in_its_module(tmp_path, monkeypatch):
    (tmp_path / "user_layouts.py").write_text(
        "from ptxgen.layout import S, TileLayout\n"
        "\n"
        "ATOM = TileLayout(S[(8, 0):(1, 8)])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(LayoutError) as e:
        importlib.import_module("user_layouts")
    sys.modules.pop("user_layouts", None)
    assert str(e.value) == "user_layouts.py:3: mode 1: extent 0 must be >= 1"


def test_inside_a_kernel_the_same_error_names_the_same_line():
    def k(A: pg.Tensor((32,), "float32")):
        TileLayout(S[(4, 0)])  # at: kernel
        A[0] = 1.0
    fails(lambda: pg.kernel(k, grid=(1,), block=(32,)),
          "kernel", "mode 1: extent 0 must be >= 1", LayoutError)


def test_a_layout_ptxgen_builds_for_itself_stays_unlocated():
    """A caller inside ptxgen (a primitive's fallback, a dispatch reason) words the error
    itself: here a function compiled as if it were a file of the package."""
    ns = {"S": S, "TileLayout": TileLayout}
    exec(compile("def internal():\n    return TileLayout(S[(4, 0)])\n",
                 os.path.join(os.path.dirname(pg.__file__), "internal_caller.py"), "exec"), ns)
    with pytest.raises(LayoutError) as e:
        ns["internal"]()
    assert str(e.value) == "mode 1: extent 0 must be >= 1"
