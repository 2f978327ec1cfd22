"""`pg.tile.<scope>.<op>(dst, *srcs)`: the front ends of the elementwise ops and reductions.

They check what tracing knows (operand kinds, dtypes, shapes, options) with the rules of
primitives/tilemath and record the call; the variant (packed, vector, scalar; redux, shfl,
serial) is chosen at build time.  A source may be a region, a Python number or a traced
scalar expression (broadcast).  Shapes must agree (extent-1 dims aside), except that a
global/shared operand may be shorter than a register tile along its last dimension: the op
then runs over the register tile, reads `pad` where a source ends and writes nothing past
a destination's end (a ragged row).  A cta/warpgroup reduction whose elements span warps
gets a small shared scratch here (warps x outputs of the accumulator dtype).
"""
from __future__ import annotations

from ..errors import PtxgenError, TraceError
from ..ir import INT32, BufferRegion, Const, Expr, Var, as_expr
from ..primitives.scope import make_scope
from ..primitives.tilemath import (ARITY, REDUCE_OPS, MathRecord, ReduceRecord, check_cast,
                                   compute_dtype, scratch_elems)
from ..primitives.tilemath.compute import bits_of
from ..primitives.tilemath.ops import F32, is_16bit_float
from ..primitives.tilemath.rows import coord_vars, reduced_layout
from . import tile_ops
from .context import current, fail, user_site
from .scalar import LocalScalar
from .allocate import alloc_at
from .tensor import TensorHandle
from .tile import located, record_call, region_of

_NUMBER = (int, float, bool)
FTZ_OPS = ("exp", "exp2", "log2", "rsqrt", "silu")      # ops with a .approx.ftz form


def _squeeze(shape):
    return tuple(e for e in shape if e != 1)


def _operand(x, what, op):
    """A region, or a scalar (Python number / traced expression)."""
    if isinstance(x, (TensorHandle, BufferRegion)):
        r = region_of(x, what)
        if r.buffer.scope == "tmem":
            raise fail(f"{op}: {r} is in tensor memory; move it with the tcgen05 primitives first")
        return r
    if isinstance(x, _NUMBER) or isinstance(x, Expr) or isinstance(x, LocalScalar):
        return x
    raise fail(f"{op}: {what} must be a tensor, a region, a number or a traced scalar, got {x!r}")


def _check_options(op, scope, options, allowed):
    extra = sorted(set(options) - set(allowed))
    if extra:
        raise fail(f"pg.tile.{scope}.{op} got unexpected option(s) {', '.join(extra)}; it takes "
                   f"{', '.join(allowed) or 'no options'}")


def _broadcast(ref, r):
    """(own extents aligned to ref's rank, ref's extents) when register tile `r` repeats
    along some of ref's dims: extent 1 there, or missing trailing dims (a (rows,) tile
    against (rows, cols): what a reduction over axis 1 leaves); else None."""
    own = tuple(r.shape) + (1,) * (len(ref.shape) - len(r.shape))
    if len(own) != len(ref.shape) or own == tuple(ref.shape):
        return None
    if all(e == f or e == 1 for e, f in zip(own, ref.shape)):
        return own, tuple(ref.shape)
    return None


def _shapes(op, dst, regions):
    """Ragged operands {arg position: (dim, iteration extent)} and broadcast register
    sources {arg position: (own extents, tile extents)} after checking shapes."""
    regs = [(p, r) for p, r in regions if r.buffer.root.scope == "local"]
    ref_pos, ref = regs[0] if regs else (0, dst)
    want = _squeeze(ref.shape)
    ragged, bcast = {}, {}
    for p, r in regions:
        got = _squeeze(r.shape)
        if got == want:
            continue
        b = _broadcast(ref, r) if p != ref_pos and r.buffer.root.scope == "local" else None
        if b is not None:
            bcast[p] = b
            continue
        name = "dst" if p == 0 else f"src {p}"
        dim = max([d for d, e in enumerate(r.shape) if e != 1] or [len(r.shape) - 1])
        rest = _squeeze(r.shape[:dim] + r.shape[dim + 1:])
        if regs and r.buffer.root.scope != "local" and want and rest == want[:-1] and \
                r.shape[dim] < want[-1]:
            ragged[p] = (dim, want[-1])     # a ragged row: shorter along the tile's last dim
            continue
        raise fail(f"{op} shape mismatch: {'dst' if ref_pos == 0 else 'src ' + str(ref_pos)} "
                   f"{ref} has extents {ref.shape} but {name} {r} has {r.shape}; the operands "
                   f"need one shape (a global/shared operand may be shorter than a register "
                   f"tile along its last dimension; a register source may have extent 1 where "
                   f"the tile has more, or lack its trailing dims: it repeats along them)")
    return ragged, bcast


def _scalar(x, dt, op):
    """A scalar operand as an expression of dtype dt."""
    if isinstance(x, LocalScalar):
        x = x.__ptxgen_expr__()
    try:
        e = as_expr(x, dt)
    except PtxgenError as err:
        raise fail(f"{op}: {err}") from None
    if e.dtype is not dt and not (e.dtype.is_float and dt.is_float):
        raise fail(f"{op} dtype mismatch: the scalar {x!r} is {e.dtype} but the op computes in "
                   f"{dt}; use pg.cast(x, '{dt}')")
    return e


def elementwise(op):
    def front(scope, dst, *srcs, dispatch=None, **options):
        if op in ("max", "min") and ("axis" in options or len(srcs) == 1):
            return _reduce(REDUCE_OPS[op], op, scope, dst, *srcs, dispatch=dispatch, **options)
        try:
            _elementwise(op, scope, dst, srcs, dispatch, options)
        except PtxgenError as e:
            raise located(e) from None
    front.__name__ = op
    front.__doc__ = f"pg.tile.<scope>.{op}(dst, {', '.join(f's{i}' for i in range(ARITY[op]))})"
    return front


def _elementwise(op, scope, dst, srcs, dispatch, options):
    n = ARITY[op]
    if len(srcs) != n:
        raise TraceError(f"pg.tile.{scope}.{op} takes dst and {n} source(s), got {len(srcs)}")
    allowed = ["pad"] + (["rounding", "saturate"] if op == "cast" else []) + \
        (["ftz"] if op in FTZ_OPS else [])
    _check_options(op, scope, options, allowed)
    d = _operand(dst, "dst", op)
    if not isinstance(d, BufferRegion):
        raise TraceError(f"{op}: dst must be a tensor or a region, got {dst!r}")
    args = [d] + [_operand(s, f"src {i + 1}", op) for i, s in enumerate(srcs)]
    regions = [(p, a) for p, a in enumerate(args) if isinstance(a, BufferRegion)]
    for _, r in regions:     # a cast moves float4_e2m1fn in bytes of two (primitives/tilemath)
        if r.dtype.bits < 8 and r.dtype.name != "bool" and op != "cast":
            raise TraceError(f"{op}: {r} holds {r.dtype}; of the tile-math ops only cast takes "
                             f"4-bit elements (convert with pg.tile.{scope}.cast first, or view "
                             f"the storage as uint8)")
    ragged, bcast = _shapes(op, d, regions)
    pad = options.get("pad")
    short = [p for p in ragged if p > 0]
    if short and pad is None:
        p = short[0]
        raise TraceError(f"{op}: src {p} {args[p]} has {args[p].shape[ragged[p][0]]} elements "
                         f"along its last dimension where the register tile has {ragged[p][1]}; "
                         f"pass pad=<value> for the elements it lacks")
    if pad is not None:
        if not short:
            raise TraceError(f"{op}: pad= is for a source shorter than the register tile; no "
                             f"source is")
        for p in short:
            try:
                bits_of(pad, args[p].dtype)
            except (ValueError, OverflowError):
                raise TraceError(f"{op}: pad={pad!r} has no {args[p].dtype} value") from None
    ct, rounding, saturate = None, options.get("rounding"), options.get("saturate")
    if op == "cast":
        src = args[1]
        if not isinstance(src, BufferRegion):
            raise TraceError("cast: the source must be a region (cast a scalar with pg.cast)")
        check_cast(src.dtype, d.dtype, rounding, saturate, scope)
    elif op == "fill":
        v = args[1]
        dt = d.dtype if d.dtype.kind != "storage" else F32
        if isinstance(v, BufferRegion):
            raise TraceError("fill: the value must be a number or a traced scalar; copy a region "
                             "with pg.tile.*.copy")
        args[1] = _scalar(v, dt, op)
    elif op == "memset":
        v = args[1]
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 255:
            raise TraceError(f"memset: the value is a byte, an int in 0..255, got {v!r}")
        if d.dtype.name == "bool":
            raise TraceError("memset: dst is bool; use fill(dst, True/False)")
        args[1] = Const(v)
    elif op != "zero":
        ct = _typecheck(op, scope, args)
    record_call(op, scope, tuple(args), {},
                MathRecord(op, ct, tuple(isinstance(a, BufferRegion) for a in args), ragged,
                           pad, rounding, saturate, bcast, _coords_used(op, d, args),
                           _ftz(op, options)),
                dispatch=dispatch)


def _ftz(op, options) -> bool:
    """ftz=True: the special-function approximations flush subnormal inputs and results to
    zero (.approx.ftz), which is how the unit computes anyway: the non-ftz forms add
    instructions around it.  For softmax weights below 2^-126 that is what one wants."""
    v = options.get("ftz", False)
    if not isinstance(v, bool):
        raise TraceError(f"{op}: ftz= takes True or False, got {v!r}")
    return v


def _coords_used(op, d, args):
    """(uid, dim, start) of each element coordinate the scalar sources use, checked
    against the destination tile."""
    known = current().element_coords
    used = {}
    for a in args[1:]:
        if isinstance(a, Expr):
            coord_vars(a, known, used)
    out = []
    for uid, (region, dim) in sorted(used.items()):
        if tuple(region.shape) != tuple(d.shape):
            raise TraceError(f"{op}: the coordinates of {region} ({region.shape}) index a tile "
                             f"of that shape, but dst {d} has {d.shape}")
        out.append((uid, dim, region.region[dim][0]))
    return tuple(out)


def coords(scope, tile):
    """One int32 variable per dimension of `tile`: in a tile op on a tile of that shape,
    each element's index (the region's start added).  Build masks from them, e.g.
    `select(s, col > row + off, -inf, s)`."""
    r = region_of(tile, "coords")
    ctx = current()
    out = []
    for dim, name in zip(range(len(r.shape)), ("row", "col", "z", "w")):
        v = Var(f"{r.buffer.name}_{name}", INT32)
        ctx.element_coords[v.uid] = (r, dim)
        out.append(v)
    return tuple(out)


def reduced(scope, src, axis=1, dtype=None):
    """A register tile for `src` reduced over `axis`: laid out as src's kept dims, each
    value in every thread that holds a part of its row (the reduction writes all of them),
    so it broadcasts back onto src in elementwise ops without moving."""
    r = region_of(src, "reduced")
    nd = len(r.shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if not axes or any(not isinstance(a, int) or not -nd <= a < nd for a in axes):
        raise fail(f"reduced: axis {axis!r} is out of range for {r} ({nd} dims)")
    try:
        shape, layout = reduced_layout(r, {a % nd for a in axes})
    except PtxgenError as e:
        raise located(e) from None
    return alloc_at(user_site(), "rows", None, shape, dtype or r.dtype.name, "local", layout)



def _typecheck(op, scope, args):
    """The compute dtype; scalar sources become expressions of it."""
    named = []
    first = 1
    if op == "select":
        c = args[1]
        if isinstance(c, BufferRegion):
            if not (c.dtype.is_int or c.dtype.is_float or c.dtype.name == "bool"):
                raise TraceError(f"select: the condition {c} is {c.dtype}; it must be bool or a "
                                 f"number (nonzero is true)")
        else:
            e = as_expr(c.__ptxgen_expr__() if isinstance(c, LocalScalar) else c)
            if e.dtype.name != "bool":
                raise TraceError(f"select: the condition is {e.dtype}; it must be bool (compare "
                                 f"it, e.g. x > 0)")
            args[1] = e
        first = 2
    for p in range(first, len(args)):
        a = args[p]
        if isinstance(a, BufferRegion):
            named.append((f"src {p} {a}", a.dtype))
        elif isinstance(a, (Expr, LocalScalar)):
            e = a.__ptxgen_expr__() if isinstance(a, LocalScalar) else a
            args[p] = e
            named.append((f"the scalar {e}", e.dtype))
    d = args[0]
    ct = compute_dtype(op, scope, f"dst {d}", d.dtype, named)
    for p in range(first, len(args)):
        if not isinstance(args[p], (BufferRegion, Expr)):
            args[p] = _scalar(args[p], ct, op)
        elif isinstance(args[p], Expr) and args[p].dtype is not ct and not \
                (args[p].dtype.is_float and ct.is_float):
            raise TraceError(f"{op}: scalar {args[p]} is {args[p].dtype}, the op computes in {ct}")
    return ct


# ---- reductions --------------------------------------------------------------------------------
def reduction(name):
    def front(scope, dst, src, axis=None, dispatch=None, **options):
        return _reduce(REDUCE_OPS[name], name, scope, dst, src, axis=axis, dispatch=dispatch,
                       **options)
    front.__name__ = name
    return front


def _reduce(op, name, scope, dst, src=None, axis=None, dispatch=None, **options):
    try:
        _check_options(name, scope, options, ["axis"])
        if src is None:
            raise TraceError(f"pg.tile.{scope}.{name} takes dst, src and axis=")
        d, s = region_of(dst, "dst"), region_of(src, "src")
        nd = len(s.shape)
        axes = tuple(range(nd)) if axis is None else (axis,) if isinstance(axis, int) \
            else tuple(axis)
        norm = []
        for a in axes:
            if not isinstance(a, int) or not -nd <= a < nd:
                raise TraceError(f"{name}: axis {a!r} is out of range for {s} ({nd} dims)")
            norm.append(a % nd)
        if len(set(norm)) != len(norm):
            raise TraceError(f"{name}: axis {axis!r} names a dimension twice")
        axes = tuple(sorted(norm))
        want = _squeeze(tuple(e for k, e in enumerate(s.shape) if k not in axes))
        if _squeeze(d.shape) != want:
            raise TraceError(f"{name} shape mismatch: reducing {s} over axis {axes} leaves "
                             f"extents {want or (1,)} but dst {d} has {d.shape}")
        acc = _acc_dtype(name, scope, s, d)
        ctx = current()
        sc = make_scope(scope, ctx.func.block)
        n = scratch_elems(s, d, axes, sc, ctx.func.block)
        scratch = None
        if n:
            h = alloc_at(user_site(), "red_scratch", "red_scratch", (n,), acc, "shared")
            scratch = h.region()
        record_call(op, scope, (d, s), {}, ReduceRecord(name, axes, acc, scratch),
                    dispatch=dispatch)
    except PtxgenError as e:
        raise located(e) from None


def _acc_dtype(name, scope, s, d):
    for r in (s, d):
        if r.dtype.kind in ("storage", "bool", "handle"):
            raise TraceError(f"{name}: {r} is {r.dtype}; convert it with pg.tile.{scope}.cast "
                             f"first")
    if s.dtype.is_int != d.dtype.is_int:
        raise TraceError(f"{name} dtype mismatch: src {s} is {s.dtype} but dst {d} is {d.dtype}; "
                         f"integer and float operands do not mix (convert with "
                         f"pg.tile.{scope}.cast first)")
    if d.dtype.is_int:
        return d.dtype
    return F32 if is_16bit_float(d.dtype) else d.dtype


for _op in ARITY:
    tile_ops.register(_op, elementwise(_op))
tile_ops.register("sum", reduction("sum"))
tile_ops.register("coords", coords)
tile_ops.register("reduced", reduced)
