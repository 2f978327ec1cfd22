"""Random small kernels (layouts, regions, scopes, dtypes, guards,
loops) either build and run bit-exact in tests/support/ptxsim.py against a numpy model of the same
program, or raise a ptxgen error.  Never a bare exception, never an out-of-bounds access in
the interpreter (it traps on one: red zones around every array).  Element programs are
decidable (every index is a function of the thread id and a constant-range loop), so there the
model also says which ones must be rejected: exactly those that index out of bounds."""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen as pg
from support import ptxsim
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

NP = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "int8": np.int8,
      "uint16": np.uint16}
DTYPES = list(NP)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


# ---- layouts of the 2-D input, as the model reads them ----------------------------------------
def layout_of(kind, R, C, pad):
    """(TileLayout or None, element offset of logical (i, j), storage elements)."""
    if kind == "row":
        return None, (lambda i, j: i * C + j), R * C
    if kind == "col":
        return TileLayout(S[(R, C):(1, R)]), (lambda i, j: j * R + i), R * C
    stride = C + pad
    return TileLayout(S[(R, C):(stride, 1)]), (lambda i, j: i * stride + j), (R - 1) * stride + C


def raw_input(rng, n, dt):
    npdt = np.dtype(NP[dt])
    if npdt.kind == "f":   # finite values: bit-exact float compares need no NaN payloads
        return (rng.integers(-64, 64, n) / 4).astype(npdt)
    return rng.integers(np.iinfo(npdt).min, np.iinfo(npdt).max, n, dtype=np.int64).astype(npdt)


def poison(n, dt):
    return np.frombuffer(b"\xa5" * (n * np.dtype(NP[dt]).itemsize), NP[dt]).copy()


def run_case(make, arrays, want, must_fail, may_fail=True):
    """Build and run; compare bit for bit.  A ptxgen error is an allowed outcome (required
    when `must_fail`); anything else raised is a failure of the property."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the scalar fallback warns
        try:
            k = make()
            k.ptx("sm_90a")
        except pg.PtxgenError as e:
            assert must_fail or may_fail, f"a correct program was rejected: {e}"
            return "rejected"
    assert not must_fail, "an out-of-bounds program was accepted"
    ptxsim.run(k, arrays)        # ptxsim.Trap on any out-of-bounds access fails the test
    for got, exp in zip(arrays, want):
        if exp is not None:
            assert got.tobytes() == exp.tobytes()
    return "ran"


# ---- element programs ------------------------------------------------------------------------
SRC_MAPS = ["id", "shift", "rev", "mul3"]
DST_MAPS = ["id", "shift", "rev"]
GUARDS = ["none", "n", "dst", "tx", "tx_else"]


@st.composite
def element_programs(draw):
    T = draw(st.sampled_from([16, 32, 48, 64]))
    BY = draw(st.sampled_from([1, 1, 2, 3]))          # a second block dimension
    R, C = draw(st.integers(1, 6)), draw(st.sampled_from([4, 8, 12]))
    T, R = T * BY, R * BY           # the model's T: threads of the block
    return dict(
        dt=draw(st.sampled_from(DTYPES)), T=T, BY=BY, R=R, C=C,
        V=draw(st.sampled_from([1, 1, 2, 4])),       # vector width (vload/vstore)
        lay=draw(st.sampled_from(["row", "col", "pad"])), pad=draw(st.integers(1, 3)),
        K=draw(st.integers(0, (R * C + T - 1) // T + 1)), loop=draw(st.sampled_from(
            ["serial", "unroll"])), src=draw(st.sampled_from(SRC_MAPS)),
        dst=draw(st.sampled_from(DST_MAPS)), s=draw(st.integers(-2, 2)),
        guard=draw(st.sampled_from(GUARDS)), g=draw(st.integers(0, T)),
        c=draw(st.integers(-3, 3)), seed=draw(st.integers(0, 2**16)))


def _maps(p, N):
    s = p["s"]
    src = {"id": lambda i: i, "shift": lambda i: i + s, "rev": lambda i: N - 1 - i,
           "mul3": lambda i: (i * 3) % N}[p["src"]]
    dst = {"id": lambda i: i, "shift": lambda i: i - s, "rev": lambda i: N - 1 - i}[p["dst"]]
    return src, dst


def _guard(p, idx, tx, N):
    """(then-condition, whether the access sits in the else branch)."""
    return {"none": (True, False), "n": (idx < N, False), "dst": (None, False),
            "tx": (tx < p["g"], False), "tx_else": (tx < p["g"], True)}[p["guard"]]


def make_element(p):
    dt, T, R, C, K, BY, V = (p[k] for k in ("dt", "T", "R", "C", "K", "BY", "V"))
    N = R * C // V if V > 1 else R * C       # vector programs index whole vectors of a 1-D A
    lay, _, _ = layout_of(p["lay"], R, C, p["pad"])
    src, dst = _maps(p, N)
    A_t = pg.Tensor((R * C,), dt) if V > 1 else pg.Tensor((R, C), dt, layout=lay)

    def body(A: A_t, B: pg.Tensor((R * C,), dt)):
        tx = pg.thread_id(T // BY)
        if BY > 1:
            ty = pg.thread_id(BY, "y")
            tx = pg.let(ty * (T // BY) + tx)
        for k in getattr(pg, p["loop"])(K):
            idx = pg.let(k * T + tx)
            si, di = src(idx), dst(idx)

            def move():
                if V > 1:
                    B.vstore([di * V], A.vload([si * V], f"{dt}x{V}"))
                    return
                v = A[si // C, si % C]
                c = p["c"]
                B[di] = v + (c % 65536 if dt == "uint16" else c if dt.startswith("int") else
                             float(c))
            if p["guard"] == "none":
                move()
            elif p["guard"] == "n":
                with pg.if_(idx < N):
                    move()
            elif p["guard"] == "dst":
                with pg.if_((di >= 0) & (di < N) & (si >= 0) & (si < N)):
                    move()
            elif p["guard"] == "tx":
                with pg.if_(tx < p["g"]):
                    move()
            else:
                with pg.if_(tx < p["g"]):
                    pass
                with pg.else_():
                    move()
    return lambda: pg.kernel(body, grid=(1,), block=(T // BY, BY))


def model_element(p, a_raw):
    """B after the program, and whether some executed access is out of bounds."""
    dt, T, R, C, K, V = (p[k] for k in ("dt", "T", "R", "C", "K", "V"))
    N = R * C // V if V > 1 else R * C
    _, off, _ = layout_of(p["lay"], R, C, p["pad"])
    src, dst = _maps(p, N)
    b = poison(R * C, dt)
    oob = False
    npdt = NP[dt]
    with np.errstate(over="ignore"):
        for k in range(K):
            for tx in range(T):
                idx = k * T + tx
                si, di = src(idx), dst(idx)
                run = {"none": True, "n": idx < N, "dst": 0 <= si < N and 0 <= di < N,
                       "tx": tx < p["g"], "tx_else": not tx < p["g"]}[p["guard"]]
                if not run:
                    continue
                # the row/column of a negative flat index is still computed (floor), so the
                # load is out of bounds exactly when si is
                if not (0 <= si < N and 0 <= di < N):
                    oob = True
                    continue
                if V > 1:
                    b[di * V:di * V + V] = a_raw[si * V:si * V + V]
                    continue
                v = a_raw[off(si // C, si % C)]
                b[di] = (v + npdt(p["c"] % 65536 if dt == "uint16" else p["c"])).astype(npdt)
    return b, oob


@SETTINGS
@given(element_programs())
def test_element_programs(p):
    N = p["R"] * p["C"]
    _, _, n_raw = layout_of(p["lay"], p["R"], p["C"], p["pad"])
    if p["V"] > 1:
        n_raw = N
    rng = np.random.default_rng(p["seed"])
    a = raw_input(rng, n_raw, p["dt"])
    want, oob = model_element(p, a)
    b = poison(N, p["dt"])
    # a vector program may also be refused for alignment it cannot prove (N not a multiple
    # of the width, a width past 128 bits)
    run_case(make_element(p), [a, b], [a.copy(), want], must_fail=oob,
             may_fail=p["V"] > 1 and (N % p["V"] or p["V"] * pg.dtype(p["dt"]).bits > 128))


# ---- tile copies -------------------------------------------------------------------------------
@st.composite
def copy_programs(draw):
    R, C = draw(st.sampled_from([8, 16, 32])), draw(st.sampled_from([8, 16, 32, 64]))
    h, w = draw(st.integers(1, R)), draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
    inside = draw(st.integers(0, 4)) > 0      # one region in five may leave the tensor
    return dict(
        dt=draw(st.sampled_from(DTYPES)), R=R, C=C, h=h, w=w,
        r0=draw(st.integers(0, R - h if inside else R)),
        c0=draw(st.integers(0, max(0, C - w) if inside else C)),
        lay=draw(st.sampled_from(["row", "col", "pad"])), pad=draw(st.integers(1, 4)),
        smem=draw(st.sampled_from(["row", "pad", "col", "swizzle"])),
        scope1=draw(st.sampled_from(["thread", "warp", "warpgroup", "cta"])),
        scope2=draw(st.sampled_from(["thread", "warp", "warpgroup", "cta"])),
        T=draw(st.sampled_from([32, 64, 96, 128, 256])),
        loop=draw(st.booleans()), seed=draw(st.integers(0, 2**16)))


def make_copy(p):
    dt, R, C, h, w, r0, c0, T = (p[k] for k in ("dt", "R", "C", "h", "w", "r0", "c0", "T"))
    lay, _, _ = layout_of(p["lay"], R, C, p["pad"])

    def body(A: pg.Tensor((R, C), dt, layout=lay), B: pg.Tensor((h, w), dt)):
        pg.thread_id(T)
        bits = pg.dtype(dt).bits
        s_lay = {"row": lambda: None, "pad": lambda: TileLayout(S[(h, w):(w + p["pad"], 1)]),
                 "col": lambda: TileLayout(S[(h, w):(1, h)]),
                 "swizzle": lambda: ComposeLayout(Swizzle.mma(min(128, max(32, w * bits // 8)),
                                                              bits), TileLayout(S[(h, w)]))
                 }[p["smem"]]()
        sm = pg.alloc_shared((h, w), dt, layout=s_lay, align=128)
        if p["loop"]:    # the region start as a loop variable with one value
            for i in pg.serial(r0, r0 + 1):
                getattr(pg.tile, p["scope1"]).copy(sm, A[i:i + h, c0:c0 + w])
        else:
            getattr(pg.tile, p["scope1"]).copy(sm, A[r0:r0 + h, c0:c0 + w])
        pg.cta_sync()
        getattr(pg.tile, p["scope2"]).copy(B, sm)
    return lambda: pg.kernel(body, grid=(1,), block=(T,))


@SETTINGS
@given(copy_programs())
def test_copy_programs(p):
    dt, R, C, h, w, r0, c0 = (p[k] for k in ("dt", "R", "C", "h", "w", "r0", "c0"))
    _, off, n_raw = layout_of(p["lay"], R, C, p["pad"])
    rng = np.random.default_rng(p["seed"])
    a = raw_input(rng, n_raw, dt)
    oob = r0 + h > R or c0 + w > C
    want = None
    if not oob:
        want = np.array([[a[off(r0 + i, c0 + j)] for j in range(w)] for i in range(h)],
                        dtype=NP[dt]).reshape(-1)
    b = poison(h * w, dt)
    run_case(make_copy(p), [a, b], [a.copy(), want], must_fail=oob)


def test_the_interpreter_traps_out_of_bounds():
    """The property relies on it: an access past an array's end traps, also between arrays."""
    def k(A: pg.Tensor((32,), "float32"), B: pg.Tensor((32,), "float32"), n: pg.int32):
        tx = pg.thread_id(32)
        B[tx] = A[tx + n]          # n is a runtime value: not provable, so accepted

    kk = pg.kernel(k, grid=(1,), block=(32,))
    a, b = np.zeros(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(ptxsim.Trap, match="out of bounds"):
        ptxsim.run(kk, [a, b], [1])
