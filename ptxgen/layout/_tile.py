"""TileLayout: a (nested) shape:stride map from logical coordinates to per-axis offsets.

Semantics, one rule for everything: a layout is "row-major linear index over its leaves ->
offset + sum(digit * stride)".  A coordinate for any logical shape of the same size is first
row-major linearized in that shape; grouping / slicing / reshaping are exact rewrites of that
rule.  `apply` never emits the linearization when the shape factors into the leaves, so the
index arithmetic is exactly what a hand-written kernel would have.
"""
from __future__ import annotations

from numbers import Integral

from . import _leaves as L
from ._axis import ZERO, Stride, as_stride, bad
from ._spec import Spec, flatten, fmt_spec, row_major, tree_size, unflatten

_MAX_PLANS = 64


def _logical_shape(shape, what: str = "shape") -> tuple:
    if isinstance(shape, Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise bad(f"{what} must be a tuple of ints, got {shape!r}") from None
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, Integral) or d < 1:
            raise bad(f"{what} {shape!r}: every extent must be an int >= 1 (a layout "
                      f"has a fixed size; symbolic extents need a default layout)")
    return tuple(int(d) for d in shape)


def _mode(leaves):
    """Shape/stride trees for one mode built from leaves (extent-1 leaves dropped)."""
    leaves = [lf for lf in leaves if lf[0] != 1] or [(1, ZERO)]
    if len(leaves) == 1:
        return leaves[0]
    return tuple(e for e, _ in leaves), tuple(s for _, s in leaves)


def _linear(coord, mults):
    sym, k0 = None, 0
    for c, k in zip(coord, mults):
        if not k:
            continue
        if type(c) is not int and isinstance(c, Integral):
            c = int(c)
        if type(c) is int:
            k0 += c * k
        else:
            t = c if k == 1 else c * k
            sym = t if sym is None else sym + t
    return k0 if sym is None else (sym + k0 if k0 else sym)


def _run(plan, coord):
    mults, ops, base = plan
    if mults is not None:
        coord = (_linear(coord, mults),)
    out = dict(base)
    sym = None
    for d, div, mod, items in ops:
        c = coord[d]
        if type(c) is not int and isinstance(c, Integral):
            c = int(c)  # numpy ints etc. fold like Python ints
        if type(c) is int:
            v = c // div
            if mod:
                v %= mod
            for a, k in items:
                out[a] += v * k
            continue
        v = c if div == 1 else c // div
        if mod:
            v = v % mod
        for a, k in items:
            t = v if k == 1 else v * k
            if sym is None:
                sym = {}
            p = sym.get(a)
            sym[a] = t if p is None else p + t
    if sym:
        for a, t in sym.items():
            k = out[a]
            out[a] = t + k if k else t
    return out


def _order(dims) -> tuple:
    """Flatten per-dim digit ops into (dim, div, mod, items), largest stride first, so a
    symbolic sum reads like hand-written code (`j*4 + i` for a column-major tile)."""
    flat = [(d,) + op for d, ops in enumerate(dims) for op in ops]

    def key(op):
        items = dict(op[3])
        return -abs(items["m"]) if "m" in items else -max(abs(k) for k in items.values())
    return tuple(sorted(flat, key=key))


class TileLayout:
    """shape:stride (+ offset) layout.  Build with `TileLayout(S[(4, 8):(1, 4)] + 64)` or
    `TileLayout(shape=(4, 8), stride=(1, 4), offset=64)`; immutable and hashable."""

    __slots__ = ("shape", "stride", "_off", "_leaves", "_canon", "_plans", "_hash")

    def __init__(self, spec=None, *, shape=None, stride=None, offset=0):
        if isinstance(spec, TileLayout):
            if shape is not None or stride is not None:
                raise bad("pass either a layout or shape=/stride=, not both")
            self._init(spec.shape, spec.stride, spec._off.plus(as_stride(offset, "offset")))
            return
        if spec is None:
            if shape is None:
                raise bad("TileLayout needs S[shape:stride] or shape=...")
            spec = Spec(shape, stride)
        elif not isinstance(spec, Spec):
            if isinstance(spec, (tuple, list, Integral)) and not isinstance(spec, bool):
                spec = Spec(spec, stride)
            else:
                raise bad(f"TileLayout takes S[shape:stride], got {spec!r}; "
                          f"write TileLayout(S[...])")
        elif stride is not None or shape is not None:
            raise bad("pass either S[...] or shape=/stride=, not both")
        self._init(spec.shape, spec.stride, spec.offset.plus(as_stride(offset, "offset")))

    def _init(self, shape, stride, off):
        self.shape, self.stride, self._off = shape, stride, off
        self._leaves = tuple(zip(flatten(shape), flatten(stride)))
        self._canon = None
        self._plans = {}
        self._hash = None

    @classmethod
    def _make(cls, shape, stride, off) -> "TileLayout":
        lay = object.__new__(cls)
        lay._init(tuple(shape), tuple(stride), off)
        return lay

    @classmethod
    def _from_modes(cls, modes, off) -> "TileLayout":
        return cls._make([md[0] for md in modes], [md[1] for md in modes], off)

    # ---- queries ------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def offset(self) -> dict:
        """Constant offset per axis ({"m": 64}); axes with 0 are omitted."""
        return self._off.as_dict()

    def leaves(self) -> list:
        """[(extent, {axis: stride})] for every leaf, row-major (outermost first)."""
        return [(e, s.as_dict()) for e, s in self._leaves]

    def size(self) -> int:
        return tree_size(self.shape)

    def span(self, axis="m") -> int:
        """One past the largest offset on `axis` over the domain (offset included)."""
        name = getattr(axis, "name", axis)
        return L.max_offset(self._leaves, self._off, name) + 1

    def cosize(self) -> int:
        return self.span("m")

    def axes(self) -> tuple:
        """Axis names this layout maps onto, "m" first."""
        names = {"m": 0}
        for _, s in self._leaves:
            names.update(s.items)
        names.update(self._off.items)
        return tuple(names)

    def _canonical(self) -> list:
        if self._canon is None:
            self._canon = L.coalesce(self._leaves)
        return self._canon

    # ---- apply --------------------------------------------------------------------------
    def apply(self, *coord, shape=None) -> dict:
        """Offsets {axis: value} ("m" always present) of a coordinate.  Coordinates are ints or
        symbolic expressions.  Without `shape`: one per top-level mode (a nested mode's
        coordinate is decomposed row-major inside it) or one per leaf.  With `shape` (the
        buffer's logical shape, same size): one per dim of `shape`."""
        if len(coord) == 1 and isinstance(coord[0], (tuple, list)):
            coord = tuple(coord[0])
        key = len(coord) if shape is None else (shape if type(shape) is tuple else tuple(shape))
        try:
            plan = self._plans.get(key)
        except TypeError:  # an unhashable (symbolic) extent: _plan reports it
            plan = None
        if plan is None:
            plan = self._plan(key)
        if shape is not None and len(coord) != len(key):
            raise bad(f"apply got {len(coord)} coordinates for shape {key}")
        return _run(plan, coord)

    def _plan(self, key):
        if isinstance(key, int):
            if key == len(self.shape):
                shape = tuple(tree_size(md) for md in self.shape)
            elif key == len(self._leaves):
                shape = tuple(e for e, _ in self._leaves)
            else:
                raise bad(
                    f"apply got {key} coordinates but {self!r} has {len(self.shape)} modes and "
                    f"{len(self._leaves)} leaves; pass one per mode, one per leaf, or shape=")
        else:
            shape = self._check_size(key)
        canon = [lf for lf in self._canonical() if lf[0] > 1]
        groups = L.group(canon, shape)
        if groups is not None:
            plan_mults, dims = None, tuple(L.digit_ops(g) for g in groups)
        else:  # no factorization: linearize row-major, then decompose over all leaves
            mults, p = [], 1
            for d in reversed(shape):
                mults.append(p if d > 1 else 0)
                p *= d
            plan_mults, dims = tuple(reversed(mults)), (L.digit_ops(canon),)
        base = dict.fromkeys(self.axes(), 0)
        base.update(self._off.items)
        plan = (plan_mults, _order(dims), base)
        if len(self._plans) >= _MAX_PLANS:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def _check_size(self, shape) -> tuple:
        shape = _logical_shape(shape)
        n = 1
        for d in shape:
            n *= d
        if n != self.size():
            raise bad(f"shape {shape} has {n} elements but {self!r} has {self.size()}; "
                      f"the buffer shape and the layout must have the same size")
        return shape

    def _groups(self, shape, what: str) -> list:
        groups = L.group([lf for lf in self._canonical() if lf[0] > 1], shape)
        if groups is None:
            ext = [e for e, _ in self._canonical()]
            raise bad(f"{what}: shape {shape} does not factor into the leaves of "
                      f"{self!r} (coalesced extents {ext}); each dim must be a product "
                      f"of consecutive leaves")
        return groups

    # ---- rewrites (all preserve the row-major-linear-index -> offset mapping) --------------
    def canonicalize(self) -> "TileLayout":
        """Flat layout: extent-1 leaves dropped, adjacent linear leaves coalesced."""
        return TileLayout._from_modes([_mode([lf]) for lf in self._canonical()] or
                                      [(1, ZERO)], self._off)

    def group(self, shape) -> "TileLayout":
        """Same mapping with one top-level mode per dim of `shape` (a reshape)."""
        shape = self._check_size(shape)
        return TileLayout._from_modes([_mode(g) for g in self._groups(shape, "group")],
                                      self._off)

    def permute_dims(self, *dims) -> "TileLayout":
        """Reorder top-level modes: new mode i is old mode dims[i] (a transposed view)."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if sorted(dims) != list(range(len(self.shape))):
            raise bad(f"permute_dims{tuple(dims)} is not a permutation of "
                      f"0..{len(self.shape) - 1}")
        return TileLayout._make([self.shape[d] for d in dims], [self.stride[d] for d in dims],
                                self._off)

    def slice(self, shape, region) -> "TileLayout":
        """The sub-layout of `region` (per dim a slice, a (start, extent) pair or an index) of
        a buffer of logical `shape`: shape = the extents, offset absorbs the start."""
        shape = self._check_size(shape)
        box = _region(shape, region)
        groups = self._groups(shape, "slice")
        modes, off = [], self._off
        for k, (g, (a, x)) in enumerate(zip(groups, box)):
            leaves, delta = L.slice_group(g, a, x)
            if leaves is None:
                raise bad(f"slice dim {k}: region [{a}, {a + x}) of {shape[k]} cannot be "
                                  f"expressed with the layout's leaves: {delta}")
            modes.append(_mode(leaves))
            off = off.plus(delta)
        return TileLayout._from_modes(modes, off)

    def tile(self, outer) -> "TileLayout":
        """Blocked product: `outer` (same rank) lays out copies of this atom.  Dim k becomes
        the nested mode (outer_k, atom_k), so a coordinate c splits into c // atom_size_k
        (which atom) and c % atom_size_k (inside it).  Outer strides count atoms: each axis's
        stride is scaled by the atom's span on that axis (thread axes the atom lacks stay)."""
        outer = outer if isinstance(outer, TileLayout) else TileLayout(outer)
        if outer.rank != self.rank:
            raise bad(f"tile: outer layout has rank {outer.rank} but the atom has "
                      f"{self.rank}; give one outer mode per atom mode")
        scale = {a: self.span(a) for a in outer.axes()}

        def sc(st: Stride) -> Stride:
            return Stride._raw(tuple((a, c * scale[a]) for a, c in st.items))
        shp, strd = [], []
        for os_, ost, as_, ast in zip(outer.shape, outer.stride, self.shape, self.stride):
            if tree_size(os_) == 1:
                shp.append(as_)
                strd.append(ast)
            else:
                shp.append((os_, as_))
                strd.append((unflatten(os_, [sc(s) for s in flatten(ost)]), ast))
        return TileLayout._make(shp, strd, self._off.plus(sc(outer._off)))

    def tile_to(self, shape) -> "TileLayout":
        """Replicate this atom over `shape` (each dim a multiple of the atom's), atoms placed
        row-major at multiples of the atom's cosize: `atom.tile(S[shape / atom_shape])`."""
        shape = _logical_shape(shape, "tile_to shape")
        atom = tuple(tree_size(md) for md in self.shape)
        if len(shape) != len(atom):
            raise bad(f"tile_to: shape {shape} has rank {len(shape)} but the atom "
                      f"{atom} has rank {len(atom)}")
        for k, (d, a) in enumerate(zip(shape, atom)):
            if d % a:
                raise bad(f"tile_to: dim {k} of shape {shape} ({d}) is not a multiple "
                          f"of the atom's {a}")
        grid = tuple(d // a for d, a in zip(shape, atom))
        return self.tile(TileLayout._make(grid, row_major(grid), ZERO))

    # ---- identity -----------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        return type(other) is TileLayout and self.shape == other.shape and \
            self.stride == other.stride and self._off == other._off

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.shape, self.stride, self._off))
        return self._hash

    def __repr__(self) -> str:
        return f"TileLayout({fmt_spec(self.shape, self.stride, self._off)})"


def _region(shape, region) -> list:
    """Normalize a region to [(start, extent)] per dim, checking it lies inside `shape`."""
    if not isinstance(region, (tuple, list)):
        region = (region,)
    if len(region) != len(shape):
        raise bad(f"region has {len(region)} dims but the shape {shape} has {len(shape)}")
    out = []
    for k, (r, d) in enumerate(zip(region, shape)):
        if isinstance(r, slice):
            if r.step not in (None, 1):
                raise bad(f"slice dim {k}: step {r.step!r} is not supported; "
                          f"a strided view needs a new layout")
            a = 0 if r.start is None else r.start
            b = d if r.stop is None else r.stop
            x = b - a if isinstance(a, int) and isinstance(b, int) else None
        elif isinstance(r, (tuple, list)) and len(r) == 2:
            a, x = r
        else:
            a, x = r, 1
        if not (isinstance(a, Integral) and isinstance(x, Integral)):
            raise bad(f"slice dim {k}: start/extent must be ints, got {r!r}; for a "
                      f"symbolic start, slice at 0 and add apply(*start, shape=...)")
        a, x = int(a), int(x)
        if x < 1:
            raise bad(f"slice dim {k}: region [{a}, {a + x}) is empty")
        if a < 0 or a + x > d:
            raise bad(f"slice dim {k}: region [{a}, {a + x}) is outside the shape's "
                              f"extent {d} (valid: 0..{d})")
        out.append((a, x))
    return out
