"""Tile-math kernels with their inputs and expected outputs, run by the simulator tests
(tests/test_tile_math.py, test_tile_reduce.py) and by the GPU tests (tests/gpu/): one
definition, two executions.

A case is (kernel, arrays, checks): `arrays` are every tensor argument in order (outputs
poisoned with 0xA5 bytes), a check is (label, array index, expected, bound): bound None is
bit-exact, ("ulp", k, dt) allows k ulps of dt, ("abs", eps) an absolute error.
"""


from dataclasses import dataclass, field

import numpy as np

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout, laneid, tid
from . import tilemath_ref as R

BLOCK = {"thread": 1, "warp": 32, "warpgroup": 128, "cta": 96}


@dataclass
class Case:
    name: str
    kernel: object
    arrays: list
    checks: list = field(default_factory=list)
    arch: str = "sm_90a"


def poison(shape, dt):
    if dt == R.FP4:                     # packed: two elements a byte (see R.fp4_pack)
        shape = tuple(shape[:-1]) + (shape[-1] // 2,) if shape[-1] % 2 == 0 else \
            (int(np.prod(shape)) // 2,)
        dt = "uint8"
    return np.full(int(np.prod(shape)) * np.dtype(R.NP[dt]).itemsize, 0xA5,
                   np.uint8).view(R.NP[dt]).reshape(shape)


def check(case, results):
    """Yield (label, ok, detail) per check of `case` on its output arrays."""
    for label, idx, want, bound in case.checks:
        got = results[idx[0]][idx[1]] if isinstance(idx, tuple) else results[idx]
        if callable(want):
            want = want()
        if bound is None:
            ok = np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
            bad = np.flatnonzero(np.ascontiguousarray(got).view(np.uint8) !=
                                 np.ascontiguousarray(want).view(np.uint8)) if not ok else []
            yield label, ok, (f"{len(bad)} bytes differ, first at byte {bad[0]}" if not ok else "")
        elif bound[0] == "ulp":
            err = R.ulp_error(got, want, bound[2])
            ok = bool(np.all(err <= bound[1]))
            yield label, ok, f"max {float(np.max(err)):.2f} ulp (bound {np.max(bound[1]):.3g})"
        else:
            g = np.asarray(R.values(got, bound[2]) if len(bound) > 2 else got, np.float64)
            err = np.abs(g - np.asarray(want, np.float64))
            ok = bool(np.all(err <= bound[1]))
            yield label, ok, (f"max abs error {float(np.max(err)):.3g} (bound "
                              f"{float(np.min(bound[1])):.3g})")


# ---- elementwise: every op of one dtype, global operands at offsets ---------------------------
ARITH = ("add", "sub", "mul", "max", "min", "fma", "select", "fill", "zero", "memset")
FLOAT = ("fdiv", "sqrt", "reciprocal", "exp", "exp2", "log2", "rsqrt", "silu")


def ops_case(dt, scope="warp", n=64, off=8, rng=None, arch="sm_90a"):
    """Each applicable op of dt writes its own row of OUT; sources A, B, C are regions at
    element offset `off` (8: vector-aligned, 3: scalar accesses)."""
    rng = rng or np.random.default_rng(0)
    ops = list(ARITH) + ([o for o in FLOAT if not (dt == "float64" and o in
                          ("exp", "exp2", "log2", "silu"))] if dt in R.FLOATS else [])
    T = BLOCK[scope]
    L = n + off
    nops = len(ops)

    @pg.kernel(grid=(1,), block=(T,), name=f"ops_{dt}_{scope}_{off}")
    def k(A: pg.Tensor((L,), dt), B: pg.Tensor((L,), dt), C: pg.Tensor((L,), dt),
          P: pg.Tensor((L,), dt), OUT: pg.Tensor((nops, n), dt)):
        if T > 1:
            pg.thread_id(T)
        t = getattr(pg.tile, scope)
        a, b, c, p = (X[off:off + n] for X in (A, B, C, P))
        for i, op in enumerate(ops):
            o = OUT[i, 0:n]
            if op in ("add", "sub", "mul", "max", "min", "fdiv"):
                getattr(t, op)(o, a, b)
            elif op == "fma":
                t.fma(o, a, b, c)
            elif op == "select":
                t.select(o, p, a, b)
            elif op == "fill":
                t.fill(o, 3 if dt in R.INTS else 1.25)
            elif op == "zero":
                t.zero(o)
            elif op == "memset":
                t.memset(o, 0x5A)
            else:
                getattr(t, op)(o, p if op in ("sqrt", "log2", "rsqrt") else a)

    gen = R.small_ints if dt in R.INTS else R.random
    a, b, c = (gen(rng, dt, (L,)) for _ in range(3))
    p = R.random(rng, dt, (L,), "positive") if dt in R.FLOATS else gen(rng, dt, (L,))
    if dt in R.INTS:
        p[::3] = 0                      # select: nonzero is true
    out = poison((nops, n), dt)
    case = Case(k.name, k, [a, b, c, p, out], arch=arch)
    sl = slice(off, off + n)
    A_, B_, C_, P_ = a[sl], b[sl], c[sl], p[sl]
    for i, op in enumerate(ops):
        case.checks.append((f"{op}[{dt}, {scope}, off {off}]", (4, i),
                            _expect(op, dt, A_, B_, C_, P_, n), _bound(op, dt, A_, P_)))
    return case


def _expect(op, dt, A, B, C, P, n):
    if op in ("add", "sub", "mul", "max", "min", "fdiv"):
        return lambda: R.binary(op, A, dt, B, dt, dt)
    if op == "fma":
        return lambda: R.fma(A, B, C, dt)
    if op == "select":
        cond = R.values(P, dt) != 0
        return lambda: np.where(cond, A, B)
    if op == "fill":
        return lambda: R.to_bits(np.full(n, 3) if dt in R.INTS else np.full(n, 1.25, np.float32),
                                 dt)
    if op == "zero":
        return lambda: np.zeros(n, R.NP[dt])
    if op == "memset":
        return lambda: np.full(n * np.dtype(R.NP[dt]).itemsize, 0x5A, np.uint8).view(R.NP[dt])
    if op in ("sqrt", "reciprocal"):
        return lambda: R.unary_exact(op, P if op == "sqrt" else A, dt, dt)
    return lambda: R.unary_approx(op, P if op in ("log2", "rsqrt") else A, dt)


def _bound(op, dt, A, P):
    """None (bit-exact) or the stated bound of an approximation."""
    if op not in ("exp", "exp2", "log2", "rsqrt", "silu"):
        return None
    if dt in ("float16", "bfloat16"):   # float32 error far below a 16-bit ulp: one rounding;
        return ("ulp", 3 if op == "exp2" else 1, dt)   # exp2: ex2.approx.{f16,bf16}x2 pairs
    # float32: ex2.approx.f32 2^-22.5 relative (< 3 ulp), rsqrt.approx.f32 2^-22.9; exp(x)
    # = ex2(x * log2 e) adds the rounding of x * log2 e: |x| 2^-24 relative (up to 2|x| ulp)
    x = np.abs(np.asarray(R.values(A, dt), np.float64))
    if op in ("exp", "silu"):
        return ("ulp", (4 if op == "exp" else 6) + 2.5 * x, dt)
    if op == "exp2":
        return ("ulp", 4, dt)
    if op == "log2":                    # lg2.approx.f32: 2^-22.6 absolute near 1, relative else
        return ("abs", 2.0 ** -21 * (1 + np.abs(np.log2(np.asarray(R.values(P, dt),
                                                                   np.float64)))), dt)
    return ("ulp", 4, dt)               # rsqrt


# ---- casts: one source dtype to every dtype ------------------------------------------------
ALL = ("bool",) + R.INTS + R.FLOATS + ("float8_e4m3fn", "float8_e5m2")
# float4_e2m1fn's ties (to even), its saturation edges and a few near misses: inputs of the
# casts into it (beside SPECIALS' NaN, infinities, -0, huge and tiny values)
FP4_SPECIALS = [0.25, -0.25, 0.75, -0.75, 1.25, 1.75, -1.75, 2.5, 3.5, -3.5, 5.0, -5.0, 6.0,
                -6.0, 6.5, 7.0, -7.0, 5.999, 8.0, 0.2500001, 0.7499, 4.0, 1.5, -0.5, 12.0]
FP4_INTS = [2, 3, 4, 5, -5, 6, -6, 7, -7, 8]


def cast_inputs(rng, src, n, extra=()):
    if src == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if src == R.FP4:                    # every code, then random ones; packed
        codes = np.concatenate([np.arange(16), rng.integers(0, 16, n - 16)])
        return R.fp4_pack(codes.astype(np.uint8))
    if src in R.INTS:
        info = np.iinfo(R.NP[src])
        sp = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, 65535, 65536, 2**24 + 1,
              2**24 + 3, 2**31 - 1, -2**31, 2**32 - 1, 2**53 + 1, 2**63 - 1, -2**63, 2**64 - 1,
              16777217, 33554435, 1 << 40 | 1, 16842753, -16842753, (1 << 40) + (1 << 32) + 1]
        sp = [v for v in list(extra) + sp if info.min <= v <= info.max]
        r = rng.integers(info.min, info.max, n - len(sp), dtype=R.NP[src], endpoint=True)
        return np.concatenate([np.array(sp, R.NP[src]), r])
    sp = list(extra) + R.SPECIALS
    vals = np.array(sp + list(rng.standard_normal(n - len(sp)) *
                              np.exp(rng.uniform(-8, 12, n - len(sp)))))
    if src in ("float8_e4m3fn", "float8_e5m2", "bfloat16"):
        return R.to_bits(np.where(np.isfinite(vals) | np.isnan(vals), vals, vals)
                         .astype(np.float32 if src == "bfloat16" else np.float64), src) \
            if src != "bfloat16" else R.bf16_bits(vals.astype(np.float32))
    with np.errstate(all="ignore"):
        return vals.astype(R.NP[src])


def cast_case(src, n=96, rng=None, dsts=ALL, rounding=None, saturate=None, arch="sm_90a",
              scope="cta", tag="", extra=()):
    """SRC cast to every dst of `dsts` (each its own output), n elements, cta scope; `extra`
    inputs come first (float or int sources)."""
    rng = rng or np.random.default_rng(2)
    dsts = [d for d in dsts if d != src]
    T = BLOCK[scope]
    kw = {}
    if rounding:
        kw["rounding"] = rounding
    if saturate is not None:
        kw["saturate"] = saturate
    params = ", ".join(f"O{i}: pg.Tensor(({n},), {d!r})" for i, d in enumerate(dsts))
    src_code = f'''
def body(SRC: pg.Tensor(({n},), {src!r}), {params}):
    if T > 1:
        pg.thread_id(T)
    t = getattr(pg.tile, scope)
    for o in ({", ".join(f"O{i}" for i in range(len(dsts)))},):
        t.cast(o[0:{n}], SRC[0:{n}], **kw)
'''
    ns = {"pg": pg, "T": T, "scope": scope, "kw": kw}
    exec(src_code, ns)
    name = f"cast_{src}{tag}"
    k = pg.kernel(grid=(1,), block=(T,), name=name)(ns["body"])
    a = cast_inputs(rng, src, n, extra)
    arrays = [a] + [poison((n,), d) for d in dsts]
    case = Case(name, k, arrays, arch=arch)
    for i, d in enumerate(dsts):
        case.checks.append((f"cast {src} -> {d}{tag}", 1 + i,
                            (lambda d=d: R.cast(a, src, d, rounding, saturate)), None))
    return case


# ---- scopes x operand kinds ---------------------------------------------------------------
SHAPE = {"thread": (4, 6), "warp": (8, 24), "warpgroup": (8, 32), "cta": (8, 24)}


def reg_layout(scope, H, W):
    """A register layout of an (H, W) tile over the scope's threads: rows x column groups
    on the thread axis, two (warp: W/4) registers per thread in each row."""
    if scope == "thread":
        return TileLayout(S[(H, W)])
    if scope == "warp":
        return TileLayout(S[(H, (4, W // 4)):(4 @ laneid, (1 @ laneid, 1))])
    ax, T = (tid, 96) if scope == "cta" else (pg.layout.tid_in_wg, 128)
    g = T // H
    return TileLayout(S[(H, (g, W // g)):(g @ ax, (1 @ ax, 1))])


def scope_case(scope, kind, rng=None, arch="sm_90a", aligned=True):
    """add / bf16 fma / f32->bf16 cast / exp on (H, W) tiles of `kind`: global regions at
    offsets, shared, swizzled shared, registers (read from and written to memory by the ops
    themselves), ragged (global rows 4 shorter than the register tile)."""
    rng = rng or np.random.default_rng(3)
    H, W = SHAPE[scope]
    T = 256 if scope == "warpgroup" else BLOCK[scope]
    G = 2 if scope == "warpgroup" else 1            # warpgroups: one tile each, rows apart
    r0, c0 = 2, (8 if aligned else 3)
    RS, CS = G * H + 3, W + (16 if aligned else 5)
    w = W - 4 if kind == "ragged" else W
    lay = reg_layout(scope, H, W)
    f32, bf = "float32", "bfloat16"
    swz = None
    if kind == "swizzled":     # 16-byte chunks XORed by row bits (the 128B MMA mode at W=32)
        swz = ComposeLayout(Swizzle.mma(128, 32), TileLayout(S[(G * H, 32)])) if W == 32 else \
            ComposeLayout(Swizzle(1, 2, 3), TileLayout(S[(G * H, W)]))

    @pg.kernel(grid=(1,), block=(T,), name=f"scope_{scope}_{kind}_{int(aligned)}")
    def k(A: pg.Tensor((RS, CS), f32), B: pg.Tensor((RS, CS), f32),
          X: pg.Tensor((RS, CS), bf), Y: pg.Tensor((RS, CS), bf),
          D1: pg.Tensor((RS, CS), f32), D2: pg.Tensor((RS, CS), bf),
          D3: pg.Tensor((RS, CS), bf), D4: pg.Tensor((RS, CS), f32)):
        if T > 1:
            pg.thread_id(T)
        t = getattr(pg.tile, scope)
        row = r0 if G == 1 else pg.let(pg.warpgroup_id() * H + r0)
        reg = lambda M: M[row:row + H, c0:c0 + w]       # noqa: E731
        if kind == "global":
            t.add(reg(D1), reg(A), reg(B))
            t.fma(reg(D2), reg(X), reg(Y), 0.5)
            t.cast(reg(D3), reg(A))
            t.exp(reg(D4), reg(A))
            return
        if kind in ("register", "ragged"):
            ra, rd = (pg.alloc_local((H, W), f32, layout=lay) for _ in range(2))
            rx, ry = (pg.alloc_local((H, W), bf, layout=lay) for _ in range(2))
            pad = {"pad": 0.0} if kind == "ragged" else {}
            t.cast(ra, reg(A), **pad)            # f32 -> f32: the memory -> register path
            t.fma(rx, reg(X), 1.0, 0.0, **pad)   # bf16 memory -> registers, exact
            t.fill(ry, 0.0)
            t.add(ry, ry, reg(Y), **pad)
            t.add(rd, ra, reg(B), **pad)
            t.cast(reg(D1), rd)
            t.fma(reg(D2), rx, ry, 0.5)          # registers -> memory, packed
            rc = pg.alloc_local((H, W), bf, layout=lay)
            t.cast(rc, ra)                        # f32 registers -> bf16 registers, packed
            t.cast(reg(D3), rc)
            t.exp(ra, ra)
            t.cast(reg(D4), ra)
            return
        sh = [pg.alloc_shared((G * H, W), d, layout=swz if d == f32 else None, align=128)
              for d in (f32, f32, bf, bf, f32, bf)]
        sa, sb, sx, sy, s1, s2 = sh
        s0 = 0 if G == 1 else pg.let(pg.warpgroup_id() * H)      # each warpgroup its rows
        tile = lambda M: M[s0:s0 + H, 0:W]                       # noqa: E731
        for s, M in zip(sh[:4], (A, B, X, Y)):
            t.copy(tile(s), reg(M))
        pg.cta_sync() if scope != "warp" else pg.warp_sync()
        t.add(tile(s1), tile(sa), tile(sb))
        t.fma(tile(s2), tile(sx), tile(sy), 0.5)
        t.cast(reg(D3), tile(sa))
        t.exp(reg(D4), tile(sa))
        pg.cta_sync() if scope != "warp" else pg.warp_sync()
        t.copy(reg(D1), tile(s1))
        t.copy(reg(D2), tile(s2))

    a, b = (rng.standard_normal((RS, CS)).astype(np.float32) for _ in range(2))
    x, y = (R.bf16_bits(rng.standard_normal((RS, CS)).astype(np.float32)) for _ in range(2))
    outs = [poison((RS, CS), d) for d in (f32, bf, bf, f32)]
    case = Case(k.name, k, [a, b, x, y] + outs, arch=arch)
    rows = [slice(g * H + r0, g * H + r0 + H) for g in range(G)]
    sl = [(r, slice(c0, c0 + w)) for r in rows]

    def region(out, fn):
        def want():
            o = outs[out].copy()
            for s in sl:
                o[s] = fn(s)
            return o
        return want

    case.checks += [       # bit-exact
        (f"add[{scope}, {kind}]", 4,
         region(0, lambda s: R.binary("add", a[s], f32, b[s], f32, f32)), None),
        (f"fma bf16[{scope}, {kind}]", 5, region(1, lambda s: R.fma(x[s], y[s], 0.5, bf)), None),
        (f"cast f32->bf16[{scope}, {kind}]", 6, region(2, lambda s: R.bf16_bits(a[s])), None),
    ]
    want4 = region(3, lambda s: np.exp(a[s].astype(np.float64)))
    x4 = np.abs(np.where(np.isfinite(want4()), np.log(np.abs(want4()) + 1e-300), 0))
    case.checks.append((f"exp[{scope}, {kind}]", 7, want4, ("ulp", 4 + 2.5 * x4, f32)))
    return case


# ---- reductions -----------------------------------------------------------------------------
RSHAPE = {"thread": (4, 6), "warp": (8, 24), "warpgroup": (4, 64), "cta": (3, 64)}


def red_layout(scope, H, W):
    """thread: row-major; warp: rows on lane bits 2..4, columns on bits 0..1 and registers;
    warpgroup / cta: a row per warp, columns over the lanes and 2 registers."""
    if scope == "thread":
        return TileLayout(S[(H, W)])
    if scope == "warp":
        return TileLayout(S[(H, (4, W // 4)):(4 @ laneid, (1 @ laneid, 1))])
    w = pg.layout.wid_in_wg if scope == "warpgroup" else pg.layout.warpid
    return TileLayout(S[(H, (32, W // 32)):(1 @ w, (1 @ laneid, 1))])


def reduce_case(scope, src_kind, dst_kind, op, sdt, ddt, axis, rng=None, arch="sm_90a",
                block=None):
    """op over `axis` of an (H, W) tile of `src_kind` (register / global / shared) into
    `dst_kind`: "global", or "register" (every thread holds every output: thread 0 stores
    them), or "warp_register" (cta, axis 1: a row's output in its warp, lane 0 stores it).
    `block`: more threads than the scope (warpgroups: each reduces the same tile)."""
    rng = rng or np.random.default_rng(4)
    H, W = RSHAPE[scope]
    T = block or (128 if scope == "warpgroup" else BLOCK[scope])
    axes = (0, 1) if axis is None else (axis,)
    kshape = tuple(e for d, e in enumerate((H, W)) if d not in axes) or (1,)
    lay = red_layout(scope, H, W)
    name = f"red_{op}_{scope}_{src_kind}_{dst_kind}_{sdt}_{ddt}_{axis}_{T}"

    @pg.kernel(grid=(1,), block=(T,), name=name)
    def k(A: pg.Tensor((H + 2, W + 8), sdt), OUT: pg.Tensor(kshape, ddt)):
        tx = pg.thread_id(T) if T > 1 else 0
        t = getattr(pg.tile, scope)
        src = A[1:1 + H, 8:8 + W]
        if src_kind == "register":
            r = pg.alloc_local((H, W), sdt, layout=lay)
            t.copy(r, src)
            src = r
        elif src_kind == "shared":
            s = pg.alloc_shared((H, W), sdt)
            t.copy(s[0:H, 0:W], src)
            pg.cta_sync() if scope != "warp" else pg.warp_sync()
            src = s
        red = getattr(t, op)
        if dst_kind == "register":
            d = pg.alloc_local(kshape, ddt)
            red(d, src, axis=axis)
            with pg.if_(tx == 0):
                for i in range(int(np.prod(kshape))):
                    OUT[i] = d[i]
        elif dst_kind == "warp_register":
            d = pg.alloc_local((H,), ddt, layout=TileLayout(S[(H,):(1 @ pg.layout.warpid,)]))
            red(d, src, axis=axis)
            with pg.if_(pg.lane_id() == 0):
                OUT[pg.warp_id()] = d.local()[0]
        else:
            red(OUT[tuple(slice(0, e) for e in kshape)], src, axis=axis)

    a = R.small_ints(rng, sdt, (H + 2, W + 8)) if sdt in R.INTS else \
        R.random(rng, sdt, (H + 2, W + 8))
    if sdt in R.INTS and op == "sum" and ddt == sdt:
        a = R.random(rng, sdt, (H + 2, W + 8))          # full range: the sum wraps
    case = Case(name, k, [a, poison(kshape, ddt)], arch=arch)
    sub = a[1:1 + H, 8:8 + W]
    n = int(np.prod([(H, W)[d] for d in axes]))
    case.checks.append((name, 1) + _reduce_expect(op, sub, sdt, ddt, axes, kshape, n, T,
                                                  src_kind))
    return case


def _reduce_expect(op, sub, sdt, ddt, axes, kshape, n, T, src_kind):
    """(expected, bound): float sums within depth * u * sum|x| (+ half an ulp of a 16-bit
    dst), everything else exact."""
    if sdt in R.INTS:
        with np.errstate(over="ignore"):
            x = sub.astype(R.NP[ddt])
            w = np.sum(x, axis=axes, dtype=R.NP[ddt]) if op == "sum" else \
                (np.max if op == "max" else np.min)(x, axis=axes)
        return np.asarray(w, R.NP[ddt]).reshape(kshape), None
    v = np.asarray(R.values(sub, sdt), np.float64)
    if op != "sum":
        w = (np.max if op == "max" else np.min)(v, axis=axes).reshape(kshape)
        return R.to_bits(w.astype(np.float32) if ddt != "float64" else w, ddt), None
    exact = np.sum(v, axis=axes).reshape(kshape)
    mag = np.sum(np.abs(v), axis=axes).reshape(kshape)
    depth = int(np.ceil(np.log2(n))) + 2 + (n // T if src_kind != "register" else 0)
    u = 2.0 ** -53 if ddt == "float64" else 2.0 ** -24
    half = 0.5 * R.ulp(exact, ddt) if ddt in ("float16", "bfloat16") else 0
    return exact, ("abs", depth * u * mag + half, ddt)
