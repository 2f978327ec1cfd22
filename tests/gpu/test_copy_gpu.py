"""Copy round trips global -> shared -> global, bit-exact on random data, poisoned outputs."""
import warnings

import numpy as np
import pytest

import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout

pytestmark = pytest.mark.gpu

DTYPES = {"int8": np.int8, "uint8": np.uint8, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
          "float16": np.float16, "bfloat16": np.uint16, "float32": np.float32}


def run_roundtrip(shape, dtype, region, scope, block, smem_layout=None, a_kw=None):
    from _xp import same_bits, xp
    from test_copy import roundtrip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = roundtrip(shape, dtype, region=region, scope=scope, block=block,
                      smem_layout=smem_layout, a_kw=a_kw, name=f"rt_{scope}")
        k.ptx("sm_90a")
    rng = np.random.default_rng(7)
    npdt = DTYPES[dtype]
    eo = (a_kw or {}).get("elem_offset", 0)
    n = int(np.prod(shape)) + eo
    a = rng.integers(0, 256, n * np.dtype(npdt).itemsize, dtype=np.uint8).view(npdt)
    b = np.full(n, 0xFF, np.uint8).view(npdt) if npdt == np.uint8 else \
        np.frombuffer(b"\xff" * (n * np.dtype(npdt).itemsize), npdt).copy()
    want = b.copy()
    av = a[eo:].reshape(shape)
    wv = want[eo:].reshape(shape)
    wv[region] = av[region]
    A, B = xp.asarray(a), xp.asarray(b)
    if eo:   # elem_offset views: the parameter is the storage base (a raw pointer)
        k(xp.ptr(A), xp.ptr(B))
    else:
        k(A.reshape(shape) if hasattr(A, "reshape") else A, B.reshape(shape))
    got = xp.asnumpy(B)
    assert same_bits(got, want), f"{dtype} {scope} {shape} {region}: mismatch"


SCOPES = [("warp", 32), ("warpgroup", 128), ("cta", 256)]


@pytest.mark.parametrize("scope,block", SCOPES)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_full_tile(scope, block, dtype):
    run_roundtrip((64, 64), dtype, (slice(0, 64), slice(0, 64)), scope, block)


@pytest.mark.parametrize("scope,block", SCOPES)
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32"])
def test_subregion_3d(scope, block, dtype):
    run_roundtrip((3, 48, 160), dtype, (slice(1, 2), slice(16, 48), slice(32, 96)), scope, block)


@pytest.mark.parametrize("swz", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "float32"])
def test_swizzled_smem(swz, dtype):
    bits = pg.dtype(dtype).bits
    cols = swz * 8 // bits
    lay = ComposeLayout(Swizzle.mma(swz, bits), TileLayout(S[(32, cols)]))
    run_roundtrip((40, cols * 2), dtype, (slice(8, 40), slice(cols, 2 * cols)), "cta", 128,
                  smem_layout=lay)


def test_k_tiled_smem():
    lay = TileLayout(S[(64, (2, 32)):(32, (2048, 1))])
    run_roundtrip((64, 64), "float16", (slice(0, 64), slice(0, 64)), "cta", 128, smem_layout=lay)


def test_unaligned_paths():
    run_roundtrip((32, 20), "float16", (slice(0, 32), slice(0, 16)), "warp", 32)      # v2
    run_roundtrip((32, 64), "float16", (slice(0, 32), slice(3, 35)), "warp", 32)      # scalar
    run_roundtrip((32, 32), "float16", (slice(0, 32), slice(0, 32)), "warp", 32,
                  a_kw={"elem_offset": 3})                                            # scalar


def test_fallback_not_divisible():
    run_roundtrip((10, 10), "float32", (slice(0, 10), slice(0, 10)), "warp", 32)
    run_roundtrip((7, 9), "int8", (slice(0, 7), slice(0, 9)), "cta", 64)
