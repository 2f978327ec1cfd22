"""Copy variants on a real GPU: register <-> shared/global round trips through thread-axis
register layouts in every scope, ldmatrix/stmatrix x1/x2/x4 with and without .trans, and the
forced vec_* forms.  Bit-exact on random data; every output is poisoned before the launch
(inputs never contain the poison byte, so an element nobody wrote always shows).

Marked ``gpu``; skipped without a CUDA device or without torch/cupy for device arrays.
"""
import importlib.util
import warnings

import numpy as np
import pytest

import ptxgen as pg
from ptxgen.layout import (ComposeLayout, S, Swizzle, TileLayout, laneid, tid, tid_in_wg,
                           wid_in_wg)
from ptxgen.runtime import has_gpu

_ARRAYS = any(importlib.util.find_spec(m) is not None for m in ("torch", "cupy"))
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not _ARRAYS, reason="needs torch or cupy for device arrays")]

POISON = 0xFF
BITS = {"int8": 8, "uint8": 8, "float8_e4m3fn": 8, "float8_e5m2": 8, "int16": 16,
        "float16": 16, "bfloat16": 16, "float32": 32, "int32": 32, "float64": 64}
_WEIGHT = {"laneid": 1, "tid": 1, "tid_in_wg": 1, "wid_in_wg": 32, "warpid": 32}


# ---- device arrays (torch if importable, else cupy), moved as raw bytes ---------------------
def _torch():
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def to_device(raw: np.ndarray, dt: str, shape):
    """Device tensor of dtype `dt` and `shape` holding the bytes `raw` (uint8)."""
    torch = _torch()
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if torch is not None:
        tdt = getattr(torch, dt)
        return torch.from_numpy(raw.copy()).cuda().view(tdt).reshape(shape)
    import cupy
    npdt = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "float16": np.float16,
            "float32": np.float32, "int32": np.int32, "float64": np.float64}.get(dt)
    if npdt is None:
        pytest.skip(f"cupy has no {dt} arrays")
    return cupy.asarray(raw).view(npdt).reshape(shape)


def to_bytes(t) -> np.ndarray:
    torch = _torch()
    if torch is not None:
        torch.cuda.synchronize()
        return t.contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
    import cupy
    cupy.cuda.runtime.deviceSynchronize()
    return cupy.asnumpy(t).reshape(-1).view(np.uint8)


def random_bytes(n, seed):
    """Random bytes that never equal the poison."""
    return np.random.default_rng(seed).integers(0, POISON, n, dtype=np.uint8)


def elems(raw, dt, shape):
    """Bytes viewed as same-width unsigned ints of `shape` (for element bookkeeping)."""
    return raw.view({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[BITS[dt]]) \
        .reshape(shape)


def launch(k, inputs, outputs):
    """inputs/outputs: [(raw bytes, dtype, shape)]; outputs start poisoned.  Returns the
    outputs' bytes after the launch."""
    devs = [to_device(r, d, s) for r, d, s in inputs]
    outs = [to_device(np.full(r.size, POISON, np.uint8), d, s) for r, d, s in outputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k(*devs, *outs)
    return [to_bytes(o) for o in outs]


def device_sm():
    from ptxgen.runtime import device_arch
    return int(device_arch()[3:].rstrip("af"))


def nbytes(shape, dt):
    return int(np.prod(shape)) * BITS[dt] // 8


def assert_same(got, want, what):
    bad = int(np.sum(got != want))
    assert bad == 0, f"{what}: {bad} of {want.size} bytes differ"


# ---- register <-> global / shared round trips -------------------------------------------------
LANE_ROWS = TileLayout(S[(32, 8):(1 @ laneid, 1)])
REG_CASES = {   # scope, block, register shape, dtype, layout
    "warp-rows-f16": ("warp", 32, (32, 8), "float16", LANE_ROWS),
    "warp-cols-f32": ("warp", 32, (8, 32), "float32", TileLayout(S[(8, 32):(1, 1 @ laneid)])),
    "warp-pairs-bf16": ("warp", 32, (4, 64), "bfloat16",
                        TileLayout(S[(4, (32, 2)):(2, (1 @ laneid, 1))])),
    "warp-f64": ("warp", 32, (32, 2), "float64", TileLayout(S[(32, 2):(1 @ laneid, 1)])),
    "warp-int16": ("warp", 32, (32, 8), "int16", LANE_ROWS),
    "warpgroup-f32": ("warpgroup", 128, (128, 4), "float32",
                      TileLayout(S[(128, 4):(1 @ tid_in_wg, 1)])),
    "warpgroup-lanes-int8": ("warpgroup", 128, (128, 16), "int8",
                             TileLayout(S[((4, 32), 16):((1 @ wid_in_wg, 1 @ laneid), 1)])),
    "cta-fp8": ("cta", 256, (256, 16), "float8_e4m3fn", TileLayout(S[(256, 16):(1 @ tid, 1)])),
    "cta-interleaved-f16": ("cta", 256, (4, 256), "float16",
                            TileLayout(S[(4, (64, 4)):(1, (1 @ tid, 64 @ tid))])),
}


def reg_roundtrip_kernel(scope, block, shape, dt, layout, mem, s_layout=None):
    @pg.kernel(grid=(1,), block=(block,), name=f"reg_rt_{scope}_{mem}")
    def k(A: pg.Tensor(shape, dt), B: pg.Tensor(shape, dt)):
        R = pg.alloc_local(shape, dt, layout=layout)
        cp = getattr(pg.tile, scope).copy
        if mem == "global":
            cp(R[:, :], A[:, :])
            cp(B[:, :], R[:, :])
        else:
            sa = pg.alloc_shared(shape, dt, layout=s_layout, align=128)
            sb = pg.alloc_shared(shape, dt, layout=s_layout, align=128)
            pg.tile.cta.copy(sa[:, :], A[:, :])
            pg.cta_sync()
            cp(R[:, :], sa[:, :])
            cp(sb[:, :], R[:, :])
            pg.cta_sync()
            pg.tile.cta.copy(B[:, :], sb[:, :])
    return k


@pytest.mark.parametrize("mem", ["global", "shared"])
@pytest.mark.parametrize("case", list(REG_CASES))
def test_reg_roundtrip(case, mem):
    scope, block, shape, dt, layout = REG_CASES[case]
    k = reg_roundtrip_kernel(scope, block, shape, dt, layout, mem)
    a = random_bytes(nbytes(shape, dt), 1)
    (b,) = launch(k, [(a, dt, shape)], [(a, dt, shape)])
    assert_same(b, a, f"{case} via {mem}")


@pytest.mark.parametrize("swz,dt", [(32, "float16"), (64, "int8"), (128, "float32"),
                                    (128, "bfloat16")])
def test_reg_roundtrip_swizzled_shared(swz, dt):
    cols = 1024 // BITS[dt]            # lane l holds row l: 128 bytes
    shape = (32, cols)
    layout = TileLayout(S[shape:(1 @ laneid, 1)])
    s_layout = ComposeLayout(Swizzle.mma(swz, BITS[dt]), TileLayout(S[shape]))
    k = reg_roundtrip_kernel("warp", 32, shape, dt, layout, "shared", s_layout)
    a = random_bytes(nbytes(shape, dt), 2)
    (b,) = launch(k, [(a, dt, shape)], [(a, dt, shape)])
    assert_same(b, a, f"{swz}B swizzle {dt}")


def test_reg_thread_scope_rows():
    shape, dt = (64, 12), "float16"

    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor(shape, dt), B: pg.Tensor(shape, dt)):
        tx = pg.thread_id(64)
        R = pg.alloc_local((12,), dt)
        pg.tile.thread.copy(R[0:12], A[tx, 0:12])
        pg.tile.thread.copy(B[tx, 0:12], R[0:12])
    a = random_bytes(nbytes(shape, dt), 3)
    (b,) = launch(k, [(a, dt, shape)], [(a, dt, shape)])
    assert_same(b, a, "thread scope rows")


# ---- ldmatrix / stmatrix ------------------------------------------------------------------------
def ldsm_kernel(rows, cols, trans, scope, block, warps, dt="float16", swz=None, store=True):
    """A -> shared -> R (ldmatrix) -> {C via registers->global, D = raw register dump,
    B via stmatrix -> shared -> global}."""
    from ptxgen.primitives.copy.ldstmatrix import ldmatrix_layout

    lay = ldmatrix_layout(rows, cols, trans, warps=warps)
    span = lay.span("m")
    shape = (rows, cols)
    s_layout = None if swz is None else ComposeLayout(Swizzle.mma(swz, 16), TileLayout(S[shape]))

    @pg.kernel(grid=(1,), block=(block,), name=f"ldsm_{scope}_{rows}x{cols}{'_t' * trans}")
    def k(A: pg.Tensor(shape, dt), B: pg.Tensor(shape, dt), C: pg.Tensor(shape, dt),
          D: pg.Tensor((block, span), dt)):
        tx = pg.thread_id(block)
        cp = getattr(pg.tile, scope).copy
        sa = pg.alloc_shared(shape, dt, layout=s_layout, align=128)
        sb = pg.alloc_shared(shape, dt, layout=s_layout, align=128)
        R = pg.alloc_local(shape, dt, layout=lay)
        pg.tile.cta.copy(sa[:, :], A[:, :])
        pg.cta_sync()
        cp(R[:, :], sa[:, :], dispatch="ldstmatrix")
        regs = R.local()
        for m in pg.unroll(span):
            D[tx, m] = regs[m]
        cp(C[:, :], R[:, :])
        if store:
            cp(sb[:, :], R[:, :], dispatch="ldstmatrix")
        else:
            cp(sb[:, :], R[:, :])
        pg.cta_sync()
        pg.tile.cta.copy(B[:, :], sb[:, :])
    return k, lay, span


def fragment_dump(a, lay, shape, block, span):
    """What thread t's register m must hold: A[c] for the c the layout sends to (t, m)."""
    d = np.zeros((block, span), a.dtype)
    seen = np.zeros((block, span), bool)
    for c in np.ndindex(*shape):
        r = lay.apply(*c, shape=shape)
        t = sum(v * _WEIGHT[ax] for ax, v in r.items() if ax != "m")
        d[t, r["m"]] = a[c]
        seen[t, r["m"]] = True
    assert seen.all()
    return d


LDSM_CASES = [(8, 8, False), (8, 8, True), (16, 8, False), (8, 16, True), (16, 16, False),
              (16, 16, True), (32, 32, False), (64, 16, True)]


def run_ldsm(rows, cols, trans, scope="warp", block=32, warps=1, swz=None, seed=5):
    shape, dt = (rows, cols), "float16"
    store = device_sm() >= 90
    k, lay, span = ldsm_kernel(rows, cols, trans, scope, block, warps, dt, swz, store)
    a = random_bytes(nbytes(shape, dt), seed)
    b, c, d = launch(k, [(a, dt, shape)], [(a, dt, shape), (a, dt, shape),
                                           (np.zeros(block * span * 2, np.uint8), dt,
                                            (block, span))])
    want_d = fragment_dump(elems(a, dt, shape), lay, shape, block, span)
    assert_same(elems(d, dt, (block, span)), want_d, "ldmatrix registers")
    assert_same(c, a, "ldmatrix -> registers -> global")
    assert_same(b, a, "stmatrix -> shared -> global" if store else "registers -> shared")


@pytest.mark.parametrize("rows,cols,trans", LDSM_CASES)
def test_ldstmatrix_warp(rows, cols, trans):
    run_ldsm(rows, cols, trans)


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("scope,block,warps", [("warpgroup", 128, 4), ("cta", 256, 8)])
def test_ldstmatrix_per_warp_scopes(scope, block, warps, trans):
    run_ldsm(16 * warps, 16, trans, scope, block, warps)


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("swz", [32, 64, 128])
def test_ldstmatrix_swizzled(swz, trans):
    run_ldsm(16, swz // 2, trans, swz=swz, seed=swz)


# ---- forced vec_* forms ------------------------------------------------------------------------
VEC_CASES = [(16, "int8", None), (16, "float16", None), (32, "bfloat16", "L1::no_allocate"),
             (32, "uint8", None), (64, "float32", "L2::128B"), (64, "int16", None),
             (128, "float16", "nc"), (128, "float64", ["nc", "L1::evict_last"]),
             (128, "float8_e5m2", None), (256, "float32", ["nc", "L2::256B"]),
             (256, "bfloat16", None)]


@pytest.mark.parametrize("via", ["registers", "shared"])
@pytest.mark.parametrize("bits,dt,hint", VEC_CASES)
def test_vec_fixed(bits, dt, hint, via):
    if bits == 256 and (device_sm() < 100 or via == "shared"):
        pytest.skip("256-bit vectors: global memory on sm_100+ only")
    n = bits // BITS[dt]
    shape, c0 = (64, 64), 32          # columns c0..c0+n: 32-byte aligned for every dtype
    kw = {"cache_hint": hint} if hint else {}
    name, variant = f"vec{bits}", f"vec_{bits}b"

    @pg.kernel(grid=(1,), block=(64,), name=name)
    def k(A: pg.Tensor(shape, dt, align=32), B: pg.Tensor(shape, dt, align=32)):
        tx = pg.thread_id(64)
        R = pg.alloc_local((n,), dt)
        if via == "shared":     # global -> shared -> registers -> global, all vec_Nb
            sm = pg.alloc_shared(shape, dt, align=32)
            pg.tile.thread.copy(sm[tx, c0:c0 + n], A[tx, c0:c0 + n], dispatch=variant, **kw)
            pg.tile.thread.copy(R[0:n], sm[tx, c0:c0 + n], dispatch=variant)
        else:
            pg.tile.thread.copy(R[0:n], A[tx, c0:c0 + n], dispatch=variant, **kw)
        pg.tile.thread.copy(B[tx, c0:c0 + n], R[0:n], dispatch=variant)
    a = random_bytes(nbytes(shape, dt), bits)
    (b,) = launch(k, [(a, dt, shape)], [(a, dt, shape)])
    want = np.full_like(a, POISON)
    eb = BITS[dt] // 8
    av, wv = a.reshape(64, -1), want.reshape(64, -1)
    lo = c0 * eb
    wv[:, lo:lo + n * eb] = av[:, lo:lo + n * eb]
    assert_same(b, want, f"vec_{bits}b {dt} via {via}")
