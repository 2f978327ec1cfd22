"""Unit tests for ptxgen.layout: seed cases, symbolic output, operations, errors."""
import re

import numpy as np
import pytest

import ptxgen.layout as PL
from ptxgen.errors import LayoutError
from ptxgen.layout import (Axis, ComposeLayout, S, Stride, Swizzle, TileLayout, laneid, m,
                           swizzle_32B, swizzle_64B, swizzle_128B, tid, warpid)


class Sym:
    """Fake IR expression: records the expression text (and a value, when given)."""

    def __init__(self, text, val=None):
        self.text, self.val = text, val

    def _op(self, other, op, fn, rev=False):
        ot = other.text if isinstance(other, Sym) else str(other)
        ov = other.val if isinstance(other, Sym) else other
        text = f"({ot} {op} {self.text})" if rev else f"({self.text} {op} {ot})"
        val = None
        if self.val is not None and ov is not None:
            val = fn(ov, self.val) if rev else fn(self.val, ov)
        return Sym(text, val)

    def __add__(self, o): return self._op(o, "+", lambda a, b: a + b)
    def __radd__(self, o): return self._op(o, "+", lambda a, b: a + b, True)
    def __sub__(self, o): return self._op(o, "-", lambda a, b: a - b)
    def __rsub__(self, o): return self._op(o, "-", lambda a, b: a - b, True)
    def __mul__(self, o): return self._op(o, "*", lambda a, b: a * b)
    def __rmul__(self, o): return self._op(o, "*", lambda a, b: a * b, True)
    def __floordiv__(self, o): return self._op(o, "//", lambda a, b: a // b)
    def __rfloordiv__(self, o): return self._op(o, "//", lambda a, b: a // b, True)
    def __mod__(self, o): return self._op(o, "%", lambda a, b: a % b)
    def __rmod__(self, o): return self._op(o, "%", lambda a, b: a % b, True)
    def __xor__(self, o): return self._op(o, "^", lambda a, b: a ^ b)
    def __rxor__(self, o): return self._op(o, "^", lambda a, b: a ^ b, True)
    def __and__(self, o): return self._op(o, "&", lambda a, b: a & b)
    def __rand__(self, o): return self._op(o, "&", lambda a, b: a & b, True)
    def __rshift__(self, o): return self._op(o, ">>", lambda a, b: a >> b)
    def __lshift__(self, o): return self._op(o, "<<", lambda a, b: a << b)

    def __repr__(self):
        return self.text


def ev(x):
    return x.val if isinstance(x, Sym) else x


# ---------------------------------------------------------------------------------------------
# seed cases (the TIRx 4x8 examples)

@pytest.mark.parametrize("spec, fn", [
    (S[(4, 8)], lambda i, j: i * 8 + j),
    (S[(4, 8):(1, 4)], lambda i, j: j * 4 + i),
    (S[(4, 8)] + 64, lambda i, j: i * 8 + j + 64),
    (S[(4, 8):(16, 1)], lambda i, j: i * 16 + j),
])
def test_seed_4x8(spec, fn):
    lay = TileLayout(spec)
    for i in range(4):
        for j in range(8):
            assert lay.apply(i, j) == {"m": fn(i, j)}
            assert lay.apply(i, j, shape=(4, 8)) == {"m": fn(i, j)}


def test_seed_symbolic_text():
    i, j = Sym("i"), Sym("j")
    assert str(TileLayout(S[(4, 8)]).apply(i, j, shape=(4, 8))["m"]) == "((i * 8) + j)"
    assert str(TileLayout(S[(4, 8):(1, 4)]).apply(i, j, shape=(4, 8))["m"]) == "((j * 4) + i)"
    assert str(TileLayout(S[(4, 8)] + 64).apply(i, j, shape=(4, 8))["m"]) == "(((i * 8) + j) + 64)"
    assert str(TileLayout(S[(4, 8):(16, 1)]).apply(i, j, shape=(4, 8))["m"]) == "((i * 16) + j)"


def test_lane_layout():
    lay = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    for ln in range(32):
        for r in range(8):
            assert lay.apply(ln, r) == {"laneid": ln, "m": r}
    assert lay.cosize() == 8 and lay.span("laneid") == 32 and lay.span(laneid) == 32
    assert lay.leaves() == [(32, {"laneid": 1}), (8, {"m": 1})]


def test_symbolic_no_div_mod_when_groupable():
    i, j = Sym("i"), Sym("j")
    out = str(TileLayout(S[(4, 8)]).apply(i, j, shape=(4, 8))["m"])
    assert "//" not in out and "%" not in out and "* 1)" not in out and "+ 0)" not in out


def test_symbolic_flat_coordinate_only_div_mod_64():
    x = Sym("x")
    assert str(TileLayout(S[(32, 64)]).apply(x, shape=(2048,))["m"]) == "x"  # coalesces
    col = str(TileLayout(S[(32, 64):(1, 32)]).apply(x, shape=(2048,))["m"])
    assert col == "(((x % 64) * 32) + (x // 64))"   # largest stride first, like TIRx
    pad = str(TileLayout(S[(32, 64):(72, 1)]).apply(x, shape=(2048,))["m"])
    assert pad == "(((x // 64) * 72) + (x % 64))"
    for s in (col, pad):
        assert set(re.findall(r"(//|%) (\d+)", s)) == {("//", "64"), ("%", "64")}


def test_symbolic_nested_mode_decomposition():
    i, j = Sym("i"), Sym("j")
    lay = TileLayout(S[((2, 4), 8):((16, 1), 4)])
    assert str(lay.apply(i, j)["m"]) == "((((i // 4) * 16) + (j * 4)) + (i % 4))"
    assert lay.apply(5, 3) == {"m": 16 + 1 + 12}


def test_symbolic_fallback_linearizes():
    i, j = Sym("i", 0), Sym("j", 0)
    lay = TileLayout(S[(4, 6):(1, 4)])          # shape (6, 4) does not factor into (4, 6)
    out = lay.apply(i, j, shape=(6, 4))["m"]
    assert str(out) == "(((((i * 4) + j) % 6) * 4) + (((i * 4) + j) // 6))"
    for a in range(6):
        for b in range(4):
            lin = a * 4 + b
            assert lay.apply(a, b, shape=(6, 4))["m"] == (lin // 6) + (lin % 6) * 4
            assert ev(lay.apply(Sym("i", a), Sym("j", b), shape=(6, 4))["m"]) == \
                (lin // 6) + (lin % 6) * 4


def test_constant_coordinates_fold():
    i = Sym("i")
    lay = TileLayout(S[(4, 8)] + 64)
    assert str(lay.apply(i, 3, shape=(4, 8))["m"]) == "((i * 8) + 67)"
    assert lay.apply(np.int64(2), np.int32(3))["m"] == 2 * 8 + 3 + 64
    assert type(lay.apply(np.int64(2), np.int32(3))["m"]) is int


def test_apply_coordinate_forms():
    lay = TileLayout(S[((2, 4), 8):((16, 1), 4)])
    assert lay.apply(1, 3, 3) == lay.apply(7, 3) == lay.apply((7, 3)) == {"m": 16 + 3 + 12}
    assert lay.apply(7 * 8 + 3, shape=(64,)) == lay.apply(7, 3)
    assert lay.apply(1, 23, shape=(2, 32)) == lay.apply(1, 2, 7)


def test_multi_axis_stride():
    lay = TileLayout(S[(4, 8):(1 @ laneid + 4 @ m, 1)])
    assert lay.apply(3, 5) == {"m": 17, "laneid": 3}
    assert lay.apply(Sym("i", 3), 5)["laneid"].val == 3
    lay2 = TileLayout(S[(4, 8):((1 @ laneid) + 4, 1)])
    assert lay2 == lay
    assert repr(lay) == "TileLayout(S[(4, 8):(1 @ laneid + 4, 1)])"


def test_offsets_and_spans():
    lay = TileLayout(S[(4, 8):(1, 4)] + 64)
    assert lay.offset == {"m": 64} and lay.cosize() == 64 + 3 + 28 + 1 and lay.size() == 32
    lay = TileLayout(S[(4,):(-1,)] + 10)
    assert lay.cosize() == 11 and [lay.apply(i)["m"] for i in range(4)] == [10, 9, 8, 7]
    lay = TileLayout(S[(2, 4):(1 @ warpid, 2)] + (3 @ laneid) + 5)
    assert lay.offset == {"laneid": 3, "m": 5}
    assert lay.apply(1, 1) == {"m": 7, "laneid": 3, "warpid": 1}
    assert lay.span("laneid") == 4 and lay.span("tid") == 1 and lay.span(warpid) == 2
    assert TileLayout(shape=(4, 8), stride=(1, 4), offset=64) == TileLayout(S[(4, 8):(1, 4)] + 64)
    assert TileLayout((4, 8)) == TileLayout(S[4, 8]) == TileLayout(S[(4, 8)])
    assert TileLayout(S[8]) == TileLayout(S[8:1]) == TileLayout(S[(8,):(1,)])


def test_canonicalize():
    lay = TileLayout(S[((2, 4), 1, 8):((32, 8), 5, 1)])
    can = lay.canonicalize()
    assert can == TileLayout(S[64:1])
    assert TileLayout(S[(4, 1, 8):(1, 7, 4)]).canonicalize() == TileLayout(S[(4, 8):(1, 4)])
    assert TileLayout(S[(1, 1):(3, 4)] + 2).canonicalize() == TileLayout(S[1:0] + 2)
    # different axes never coalesce
    assert TileLayout(S[(32, 8):(1 @ laneid, 1)]).canonicalize().shape == (32, 8)


def test_group_and_permute():
    lay = TileLayout(S[(32, 64):(72, 1)])
    g = lay.group((8, 4, 64))
    assert g == TileLayout(S[(8, 4, 64):(288, 72, 1)])
    g = lay.group((64, 32))
    assert g == TileLayout(S[((32, 2), 32):((72, 32), 1)])
    t = TileLayout(S[(4, 8):(8, 1)]).permute_dims(1, 0)
    assert t == TileLayout(S[(8, 4):(1, 8)]) and t == TileLayout(S[(4, 8)]).permute_dims((1, 0))


def test_slice():
    lay = TileLayout(S[(32, 64):(72, 1)])
    sub = lay.slice((32, 64), (slice(8, 16), slice(16, 48)))
    assert sub == TileLayout(S[(8, 32):(72, 1)] + (8 * 72 + 16))
    assert lay.slice((32, 64), ((8, 8), (16, 32))) == sub
    assert lay.slice((32, 64), (3, slice(None))) == TileLayout(S[(1, 64):(0, 1)] + 216)
    # a flat view: whole rows are expressible, partial rows of the 64-leaf are not
    flat = lay.slice((2048,), ((128, 256),))
    assert flat == TileLayout(S[((4, 64),):((72, 1),)] + 144)
    lane = TileLayout(S[(32, 8):(1 @ laneid, 1)]).slice((32, 8), (slice(16, 32), slice(4, 8)))
    assert lane == TileLayout(S[(16, 4):(1 @ laneid, 1)] + (16 @ laneid) + 4)


def test_tile_to_and_tile():
    atom = TileLayout(S[(8, 64)])
    big = atom.tile_to((16, 128))
    for i in range(16):
        for j in range(128):
            a = (i // 8) * 2 + j // 64
            assert big.apply(i, j)["m"] == a * 512 + (i % 8) * 64 + j % 64
    assert PL.tile_to(atom, (16, 128)) == big
    vals = TileLayout(S[8:1])
    tv = vals.tile(TileLayout(S[32:1 @ laneid]))
    assert tv == TileLayout(S[((32, 8),):((1 @ laneid, 1),)])
    assert tv.apply(8 * 5 + 3) == {"m": 3, "laneid": 5}
    assert PL.tile(vals, TileLayout(S[4:1])) == TileLayout(S[((4, 8),):((8, 1),)])


def test_repr_roundtrip_examples():
    ns = vars(PL)
    for lay in [TileLayout(S[(4, 8):(1, 4)]), TileLayout(S[8:1]), TileLayout(S[(8,):(0,)]),
                TileLayout(S[((2, 4), 8):((16, 1), 4)] + 64),
                TileLayout(S[(32, 8):(1 @ laneid, 1)] + (2 @ warpid) + 3),
                TileLayout(S[(((2,),),):(((3 @ tid + 1,),),)]),
                ComposeLayout(swizzle_128B(16), TileLayout(S[(8, 64)])),
                ComposeLayout(swizzle_128B(16), TileLayout(S[(8, 64)])).slice((8, 64),
                                                                            (slice(0, 8), (8, 8)))]:
        back = eval(repr(lay), ns)
        assert back == lay and hash(back) == hash(lay) and repr(back) == repr(lay)
    assert repr(TileLayout(S[(4, 8):(1, 4)])) == "TileLayout(S[(4, 8):(1, 4)])"
    assert repr(TileLayout(S[(4, 8)] + 64)) == "TileLayout(S[(4, 8):(8, 1)] + 64)"


def test_axes_and_strides():
    assert Axis.get("laneid") is laneid and Axis("m") is m and Axis.get(tid) is tid
    assert repr(3 @ laneid) == "3 @ laneid" and repr((1 @ laneid) + 4) == "1 @ laneid + 4"
    assert (1 @ laneid) + (4 @ m) == 4 + (1 @ laneid) == Stride({"laneid": 1, "m": 4})
    assert repr(Stride(0)) == "0" and (0 @ laneid) == Stride(0)
    assert (laneid + 4) == (1 @ laneid) + 4


# ---------------------------------------------------------------------------------------------
# swizzles

def test_swizzle_formula_and_presets():
    sw = Swizzle(3, 3, 3)
    assert [sw.apply(x) for x in (0, 8, 64, 72, 511)] == [0, 8, 72, 64, 511 ^ (7 << 3)]
    assert str(sw.apply(Sym("x"))) == "(x ^ ((x >> 3) & 56))"
    assert str(Swizzle(0, 4, 3)(Sym("x"))) == "x"   # identity emits nothing
    assert swizzle_128B(16) == Swizzle.mma(128, elem_bits=16) == Swizzle(3, 3, 3)
    assert swizzle_64B(8) == Swizzle(2, 4, 3) and swizzle_32B(32) == Swizzle(1, 2, 3)
    assert swizzle_128B(4) == Swizzle(3, 5, 3) and swizzle_128B(4).chunk_elems == 32  # fp4
    assert Swizzle.mma("none", 16) == Swizzle(0, 3, 3) and Swizzle.mma("64B", 16) == swizzle_64B(16)
    for sw, mode, mb, rb in [(swizzle_128B(16), "128B", 128, 1024),
                             (swizzle_64B(8), "64B", 64, 512),
                             (swizzle_32B(32), "32B", 32, 256),
                             (Swizzle.mma(0, 16), "none", 0, 16)]:
        assert (sw.mode, sw.mode_bytes, sw.repeat_bytes) == (mode, mb, rb)
    assert swizzle_128B(16).span * 2 == 1024 and swizzle_128B(16).chunk_elems * 2 == 16
    assert swizzle_128B(16).is_mma(16) and not swizzle_128B(16).is_mma(32)
    assert Swizzle(2, 5, 2).mode is None and Swizzle(2, 5, 2).repeat_bytes is None


def test_swizzle_bijection_and_involution_exhaustive():
    for bits in range(0, 4):
        for base in range(0, 4):
            for shift in range(1, 5):
                sw = Swizzle(bits, base, shift)
                n = 1 << (bits + base + shift)
                img = [sw.apply(x) for x in range(2 * n)]
                assert sorted(img[:n]) == list(range(n))
                assert sorted(img[n:]) == list(range(n, 2 * n))
                invol = all(sw.apply(y) == x for x, y in enumerate(img))
                assert invol == sw.is_involution == (bits == 0 or shift >= bits), sw


def test_compose_layout():
    sw = swizzle_128B(16)
    lay = ComposeLayout(sw, TileLayout(S[(16, 64)]))
    assert lay.swizzle is sw and lay.layout == TileLayout(S[(16, 64)])
    for i in range(16):
        for j in range(64):
            assert lay.apply(i, j) == {"m": sw.apply(i * 64 + j)}
    assert lay.size() == 1024 and lay.cosize() == 1024
    sub = lay.slice((16, 64), (slice(8, 16), slice(8, 24)))
    assert sub.view and sub.swizzle == sw and sub.layout == TileLayout(S[(8, 16):(64, 1)] + 520)
    for i in range(8):
        for j in range(16):
            assert sub.apply(i, j) == lay.apply(8 + i, 8 + j)
    assert sub.cosize() >= max(sub.apply(i, j)["m"] for i in range(8) for j in range(16)) + 1
    x = Sym("x")
    assert str(lay.apply(x, shape=(1024,))["m"]) == "(x ^ ((x >> 3) & 56))"
    lane = ComposeLayout(Swizzle(1, 0, 1), TileLayout(S[(32, 4):(1 @ laneid, 1)]))
    assert lane.apply(5, 2) == {"laneid": 5, "m": 3}
    big = ComposeLayout(sw, TileLayout(S[(8, 64)])).tile_to((32, 64))
    assert big == ComposeLayout(sw, TileLayout(S[(8, 64)]).tile_to((32, 64)))
    assert ComposeLayout(sw, S[(8, 64)]) == ComposeLayout(sw, TileLayout(S[(8, 64)]))
    assert ComposeLayout(sw, S[(8, 64)]) != TileLayout(S[(8, 64)])


# ---------------------------------------------------------------------------------------------
# errors (each asserts its message)

@pytest.mark.parametrize("make, msg", [
    (lambda: Axis.get("foo"), "unknown axis 'foo'; known axes: m, laneid"),
    (lambda: (1 @ laneid) + (2 @ laneid), "axis 'laneid' appears twice in one stride"),
    (lambda: S[(4, 8):(1 @ laneid + 2 @ laneid, 1)], "appears twice"),
    (lambda: 1.5 @ laneid, "must be an int"),
    (lambda: S[(4, 8):(1,)], "shape (4, 8) has 2 modes but stride (1,) has 1"),
    (lambda: S[((2, 4), 8):(1, 4)], "mode 0: shape (2, 4) is nested but stride 1 is not"),
    (lambda: S[(4, 8):((1, 2), 4)], "mode 0: extent 4 is a leaf but its stride (1, 2) is a tuple"),
    (lambda: S[(4, 0)], "mode 1: extent 0 must be >= 1"),
    (lambda: S[(4, ())], "mode 1: an empty mode ()"),
    (lambda: S[(4, 8):(1, "x")], "mode 1: stride must be an int, an axis term"),
    (lambda: S[(4, 8):(1, 4):2], "takes one ':'"),
    (lambda: S[:(1, 4)], "needs both a shape and a stride"),
    (lambda: TileLayout("rowmajor"), "TileLayout takes S[shape:stride]"),
    (lambda: TileLayout(S[(4, 8)]).apply(1, 2, 3), "apply got 3 coordinates but"),
    (lambda: TileLayout(S[(4, 8)]).apply(1, 2, shape=(4, 4)), "shape (4, 4) has 16 elements but"),
    (lambda: TileLayout(S[(4, 8)]).apply(1, 2, shape=(32,)),
     "apply got 2 coordinates for shape (32,)"),
    (lambda: TileLayout(S[(4, 8)]).apply(1, 2, shape=("M", 8)), "every extent must be an int"),
    (lambda: TileLayout(S[(4, 8)]).slice((4, 8), (slice(0, 4), slice(4, 12))),
     "slice dim 1: region [4, 12) is outside the shape's extent 8"),
    (lambda: TileLayout(S[(4, 8)]).slice((4, 8), (slice(0, 4), slice(4, 4))),
     "slice dim 1: region [4, 4) is empty"),
    (lambda: TileLayout(S[(4, 8)]).slice((4, 8), (slice(0, 4),)), "region has 1 dims but"),
    (lambda: TileLayout(S[(4, 8)]).slice((4, 8), (slice(0, 4, 2), slice(None))), "step 2"),
    (lambda: TileLayout(S[(4, 8)]).slice((4, 8), (Sym("i"), slice(None))), "must be ints"),
    (lambda: TileLayout(S[(4, 8):(9, 1)]).slice((32,), (slice(4, 12),)),
     "slice dim 0: region [4, 12) of 32 cannot be expressed with the layout's leaves: it wraps"),
    (lambda: TileLayout(S[(4, 8):(9, 1)]).slice((32,), (slice(4, 20),)),
     "start 4 and extent 16 must both be multiples of 8"),
    (lambda: TileLayout(S[(4, 6):(1, 4)]).group((6, 4)), "group: shape (6, 4) does not factor"),
    (lambda: TileLayout(S[(4, 6):(1, 4)]).slice((6, 4), (slice(None), slice(None))),
     "slice: shape (6, 4) does not factor"),
    (lambda: TileLayout(S[(4, 8)]).permute_dims(0, 0), "permute_dims(0, 0) is not a permutation"),
    (lambda: TileLayout(S[(8, 64)]).tile_to((16, 96)), "tile_to: dim 1 of shape (16, 96) (96) "
                                                       "is not a multiple of the atom's 64"),
    (lambda: TileLayout(S[(8, 64)]).tile_to((16,)), "has rank 1 but the atom"),
    (lambda: TileLayout(S[(8, 64)]).tile(TileLayout(S[4])), "tile: outer layout has rank 1"),
    (lambda: ComposeLayout(swizzle_128B(16), TileLayout(S[(4, 64)])),
     "swizzle Swizzle(3, 3, 3) spans 512 elements but the layout spans only 256"),
    (lambda: ComposeLayout(swizzle_128B(16), TileLayout(S[(12, 64)])),
     "spans 512 elements but the layout spans only 768 (not a multiple of 512)"),
    (lambda: ComposeLayout(swizzle_128B(16), "S[(8, 64)]"), "second argument must be a TileLayout"),
    (lambda: ComposeLayout(TileLayout(S[8]), swizzle_128B(16)), "first argument must be a Swizzle"),
    (lambda: Swizzle(2, 3, 0), "shift must be > 0"),
    (lambda: Swizzle(-1, 3, 3), "bits must be an int >= 0"),
    (lambda: Swizzle.mma(256, 16), "one of none/32B/64B/128B"),
    (lambda: Swizzle.mma(128, 6), "elem_bits 6 must be a power of two"),
])
def test_errors(make, msg):
    with pytest.raises(LayoutError) as ei:
        make()
    assert msg in str(ei.value), str(ei.value)


def test_three_level_layout_symbolic_apply_matches_every_coordinate():
    """The 3-level layout emit_speed times: its symbolic offset, evaluated, and its numeric
    apply both equal the offset written out by hand, at all 16 x 64 coordinates."""
    lay = TileLayout(S[(((2, 2), 4), (8, (2, 4))):(((4096, 128), 1024), (8, (4, 1)))])
    assert str(lay.apply(Sym("i"), Sym("j"), shape=(16, 64))["m"]) == \
        "(((((i // 8) * 4096) + ((i % 4) * 1024)) + (((i // 4) % 2) * 128)) + j)"
    for i in range(16):
        for j in range(64):
            want = i // 8 * 4096 + i // 4 % 2 * 128 + i % 4 * 1024 + j
            assert lay.apply(i, j, shape=(16, 64)) == {"m": want}
            assert ev(lay.apply(Sym("i", i), Sym("j", j), shape=(16, 64))["m"]) == want
