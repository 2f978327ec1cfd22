"""Property tests: every layout operation against an independent numpy reference.

Reference model: a layout is the table "row-major linear index over its leaves -> offsets",
built here with np.indices; any logical shape addresses that table via np.ravel_multi_index.
"""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ptxgen.layout as PL
from ptxgen.errors import LayoutError
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

from test_layout import Sym, ev

AXES = ["laneid", "warpid", "tid", "TCol"]
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# ---- strategies ------------------------------------------------------------------------------

@st.composite
def strides(draw, allow_neg=True):
    """A leaf stride as a dict {axis: coeff} (the test's own representation)."""
    lo = -6 if allow_neg else 0
    d = {"m": draw(st.integers(lo, 40))}
    if draw(st.booleans()) and draw(st.booleans()):
        d[draw(st.sampled_from(AXES))] = draw(st.integers(1, 8))
    return d


def to_stride(d):
    """dict -> the user spelling: an int, or `k @ axis + ...`."""
    out = d.get("m", 0)
    for a, k in d.items():
        if a != "m":
            out = (k @ PL.Axis.get(a)) + out
    return out


@st.composite
def trees(draw, depth=0, max_leaves=6):
    """(shape tree, stride tree of dicts) for one mode."""
    if depth >= 2 or draw(st.integers(0, 3)) > 0:
        return draw(st.integers(1, 5)), draw(strides())
    n = draw(st.integers(1, 3))
    subs = [draw(trees(depth=depth + 1)) for _ in range(n)]
    return tuple(s for s, _ in subs), tuple(t for _, t in subs)


def leaves_of(shape, stride):
    if isinstance(shape, int):
        return [(shape, stride)]
    return [lf for s, t in zip(shape, stride) for lf in leaves_of(s, t)]


def spell(tree):
    return tuple(spell(t) for t in tree) if isinstance(tree, tuple) else to_stride(tree)


@st.composite
def layouts(draw, max_size=384):
    rank = draw(st.integers(1, 3))
    modes = [draw(trees()) for _ in range(rank)]
    shape = tuple(s for s, _ in modes)
    stride = tuple(t for _, t in modes)
    lv = [lf for s, t in modes for lf in leaves_of(s, t)]
    assume(int(np.prod([e for e, _ in lv])) <= max_size)
    off = {"m": draw(st.integers(0, 100))}
    if draw(st.booleans()):
        off[draw(st.sampled_from(AXES))] = draw(st.integers(0, 9))
    lay = TileLayout(S[shape:spell(stride)] + to_stride(off))
    return lay, Ref(lv, off, [int(np.prod([e for e, _ in leaves_of(s, t)])) for s, t in modes])


class Ref:
    """Numpy reference table for a layout given as leaves [(extent, {axis: k})] + offset."""

    def __init__(self, leaves, off, mode_sizes):
        self.ext = [e for e, _ in leaves] or [1]
        self.mode_sizes = tuple(mode_sizes)
        self.n = int(np.prod(self.ext))
        idx = np.indices(self.ext).reshape(len(self.ext), -1)
        axes = {"m"} | set(off) | {a for _, d in leaves for a in d}
        self.tab = {}
        for a in axes:
            v = np.full(self.n, off.get(a, 0), dtype=np.int64)
            for t, (_, d) in enumerate(leaves):
                v += idx[t] * d.get(a, 0)
            self.tab[a] = v

    def at(self, lin):
        return {a: int(v[lin]) for a, v in self.tab.items()}


def same(got, want):
    keys = set(got) | set(want)
    return "m" in got and all(ev(got.get(a, 0)) == want.get(a, 0) for a in keys)


@st.composite
def factorizations(draw, n):
    """A random logical shape with product n (prime factors shuffled, then cut; maybe 1s)."""
    primes, k, p = [], n, 2
    while k > 1:
        while k % p == 0:
            primes.append(p)
            k //= p
        p += 1
    primes = draw(st.permutations(primes))
    dims, cur = [], 1
    for q in primes:
        cur *= q
        if draw(st.booleans()):
            dims.append(cur)
            cur = 1
    if cur > 1 or not dims:
        dims.append(cur)
    if draw(st.booleans()):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    return tuple(dims)


def coords(shape):
    return itertools.product(*[range(d) for d in shape])


# ---- apply -------------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_apply_matches_numpy(data):
    lay, ref = data.draw(layouts())
    assert lay.size() == ref.n
    shape = data.draw(factorizations(ref.n))
    for c in coords(shape):
        lin = int(np.ravel_multi_index(c, shape)) if shape else 0
        assert same(lay.apply(*c, shape=shape), ref.at(lin)), (lay, shape, c)
    for c in coords(ref.mode_sizes):                       # one coordinate per top-level mode
        assert same(lay.apply(*c), ref.at(int(np.ravel_multi_index(c, ref.mode_sizes))))
    if len(lay.leaves()) != lay.rank:                      # one coordinate per leaf
        ext = tuple(e for e, _ in lay.leaves())
        for c in coords(ext):
            assert same(lay.apply(*c), ref.at(int(np.ravel_multi_index(c, ext))))


@SETTINGS
@given(st.data())
def test_symbolic_path_matches_ints(data):
    lay, ref = data.draw(layouts())
    shape = data.draw(factorizations(ref.n))
    for c in coords(shape):
        syms = [Sym(f"c{k}", v) if data.draw(st.booleans()) else v for k, v in enumerate(c)]
        got = lay.apply(*syms, shape=shape)
        assert same(got, ref.at(int(np.ravel_multi_index(c, shape)))), (lay, shape, c)
        for v in got.values():
            if isinstance(v, Sym):
                assert "* 1)" not in v.text and "+ 0)" not in v.text and "// 1)" not in v.text


@SETTINGS
@given(st.data())
def test_span_size_and_repr(data):
    lay, ref = data.draw(layouts())
    for a, v in ref.tab.items():
        assert lay.span(a) == int(v.max()) + 1
    assert lay.cosize() == int(ref.tab["m"].max()) + 1
    back = eval(repr(lay), vars(PL))
    assert back == lay and hash(back) == hash(lay)


# ---- rewrites preserve the mapping ------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_canonicalize_group_permute(data):
    lay, ref = data.draw(layouts())
    shape = data.draw(factorizations(ref.n))
    can = lay.canonicalize()
    assert all(e > 1 for e, _ in can.leaves()) or can.size() == 1
    for c in coords(shape):
        lin = int(np.ravel_multi_index(c, shape))
        assert same(can.apply(*c, shape=shape), ref.at(lin))
    try:
        g = lay.group(shape)
    except LayoutError as e:
        assert "does not factor" in str(e)
    else:
        assert g.rank == len(shape)
        for c in coords(shape):
            assert same(g.apply(*c), ref.at(int(np.ravel_multi_index(c, shape))))
    perm = data.draw(st.permutations(range(lay.rank)))
    p = lay.permute_dims(*perm)
    for c in coords(ref.mode_sizes):
        pc = [c[d] for d in perm]
        assert same(p.apply(*pc), ref.at(int(np.ravel_multi_index(c, ref.mode_sizes))))


@st.composite
def regions(draw, shape):
    out = []
    for d in shape:
        a = draw(st.integers(0, d - 1))
        x = draw(st.integers(1, d - a))
        out.append((a, x))
    return out


def check_slice(sub, shape, box, ref):
    ext = tuple(x for _, x in box)
    for c in coords(ext):
        full = tuple(a + k for (a, _), k in zip(box, c))
        assert same(sub.apply(*c, shape=ext), ref.at(int(np.ravel_multi_index(full, shape))))
    assert tuple(flat_size(md) for md in sub.shape) == ext


def flat_size(md):
    return int(np.prod(md)) if isinstance(md, int) else int(np.prod([flat_size(x) for x in md]))


@SETTINGS
@given(st.data())
def test_slice_matches_numpy(data):
    lay, ref = data.draw(layouts())
    shape = data.draw(factorizations(ref.n))
    box = data.draw(regions(shape))
    region = tuple(slice(a, a + x) if data.draw(st.booleans()) else (a, x) for a, x in box)
    try:
        sub = lay.slice(shape, region)
    except LayoutError as e:
        assert "cannot be expressed" in str(e) or "does not factor" in str(e), str(e)
        return
    check_slice(sub, shape, box, ref)


@st.composite
def flat_layouts(draw):
    """One leaf per dim: every box region of the layout's own shape must be expressible."""
    rank = draw(st.integers(1, 3))
    ext = [draw(st.integers(1, 9)) for _ in range(rank)]
    sds = [draw(strides()) for _ in range(rank)]
    off = {"m": draw(st.integers(0, 50))}
    lay = TileLayout(S[tuple(ext):tuple(to_stride(d) for d in sds)] + off["m"])
    return lay, Ref(list(zip(ext, sds)), off, ext), tuple(ext)


@SETTINGS
@given(st.data())
def test_slice_always_works_on_own_dims(data):
    lay, ref, shape = data.draw(flat_layouts())
    box = data.draw(regions(shape))
    check_slice(lay.slice(shape, tuple(box)), shape, box, ref)


# ---- tile / tile_to ---------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_tile_to_matches_numpy(data):
    lay, ref = data.draw(layouts(max_size=64))
    grid = tuple(data.draw(st.integers(1, 3)) for _ in range(lay.rank))
    shape = tuple(g * a for g, a in zip(grid, ref.mode_sizes))
    big = lay.tile_to(shape)
    cos = {a: int(v.max()) + 1 for a, v in ref.tab.items()}
    for c in coords(shape):
        atom = tuple(k // a for k, a in zip(c, ref.mode_sizes))
        inner = tuple(k % a for k, a in zip(c, ref.mode_sizes))
        which = int(np.ravel_multi_index(atom, grid))
        want = ref.at(int(np.ravel_multi_index(inner, ref.mode_sizes)))
        want["m"] += which * cos["m"]
        assert same(big.apply(*c), want), (lay, shape, c)


@SETTINGS
@given(st.data())
def test_tile_with_thread_outer(data):
    lay, ref = data.draw(layouts(max_size=64))
    n = data.draw(st.integers(1, 4))
    outer = TileLayout(S[(n,) + (1,) * (lay.rank - 1):(1 @ PL.laneid,) + (0,) * (lay.rank - 1)])
    t = lay.tile(outer)
    span_lane = int(ref.tab["laneid"].max()) + 1 if "laneid" in ref.tab else 1
    for c in coords((n * ref.mode_sizes[0],) + ref.mode_sizes[1:]):
        w, c0 = divmod(c[0], ref.mode_sizes[0])
        want = ref.at(int(np.ravel_multi_index((c0,) + c[1:], ref.mode_sizes)))
        want["laneid"] = want.get("laneid", 0) + w * span_lane
        assert same(t.apply(*c), want)


# ---- swizzles ---------------------------------------------------------------------------------

swizzles = st.builds(Swizzle, st.integers(0, 3), st.integers(0, 4), st.integers(1, 4))


@SETTINGS
@given(swizzles, st.integers(0, 3))
def test_swizzle_bijection_involution(sw, block):
    n = 1 << (sw.bits + sw.base + sw.shift)
    xs = np.arange(block * n, (block + 1) * n)
    img = np.array([sw.apply(int(x)) for x in xs])
    assert sorted(img.tolist()) == xs.tolist()
    mask = ((1 << sw.bits) - 1) << sw.base
    assert (img == (xs ^ ((xs >> sw.shift) & mask))).all()
    back = np.array([sw.apply(int(y)) for y in img])
    assert ((back == xs).all()) == (sw.bits == 0 or sw.shift >= sw.bits) == sw.is_involution
    for x in xs[:: max(1, n // 16)].tolist():
        assert ev(sw.apply(Sym("x", x))) == sw.apply(x)


@SETTINGS
@given(st.data())
def test_compose_layout_matches_numpy(data):
    lay, ref = data.draw(layouts(max_size=256))
    bits, base = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    sw = Swizzle(bits, base, data.draw(st.integers(max(1, bits), 4)))
    try:
        comp = ComposeLayout(sw, lay)
    except LayoutError as e:
        assert "spans" in str(e)
        assert sw.span > lay.cosize() or lay.cosize() % sw.span
        comp = ComposeLayout(sw, lay, view=True)
    shape = data.draw(factorizations(ref.n))
    table = {a: v.copy() for a, v in ref.tab.items()}
    table["m"] = np.array([sw.apply(int(v)) for v in table["m"]])
    for c in coords(shape):
        lin = int(np.ravel_multi_index(c, shape))
        assert same(comp.apply(*c, shape=shape), {a: int(v[lin]) for a, v in table.items()})
    assert comp.cosize() >= int(table["m"].max()) + 1
    assert eval(repr(comp), vars(PL)) == comp
    box = data.draw(regions(shape))
    try:
        sub = comp.slice(shape, tuple(box))
    except LayoutError:
        return
    assert sub.swizzle == sw and sub.view
    ext = tuple(x for _, x in box)
    for c in coords(ext):
        full = tuple(a + k for (a, _), k in zip(box, c))
        lin = int(np.ravel_multi_index(full, shape))
        assert same(sub.apply(*c, shape=ext), {a: int(v[lin]) for a, v in table.items()})


@pytest.mark.parametrize("elem_bits", [4, 8, 16, 32])
@pytest.mark.parametrize("mode", [32, 64, 128])
def test_mma_swizzle_matches_byte_formula(elem_bits, mode):
    """Element-space preset == CuTe's byte-space Swizzle<b, 4, 3> on the byte address."""
    sw = Swizzle.mma(mode, elem_bits)
    byte_sw = Swizzle({32: 1, 64: 2, 128: 3}[mode], 4, 3)
    per_byte = 8 // elem_bits if elem_bits < 8 else 1
    elem_bytes = max(1, elem_bits // 8)
    for e in range(0, 4 * sw.span, max(1, per_byte)):
        byte = e // per_byte if elem_bits < 8 else e * elem_bytes
        got = sw.apply(e)
        want = byte_sw.apply(byte)
        assert (got // per_byte if elem_bits < 8 else got * elem_bytes) == want
    assert sw.repeat_bytes == sw.span * elem_bits // 8
