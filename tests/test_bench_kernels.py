"""The streaming copy kernels of `ptxgen bench copy` build and assemble for every default
scope x dtype x tile (the sweep itself needs a GPU)."""
import warnings

import pytest

import ptxgen as pg

from _asm import assemble
from ptxgen.bench.copy_kernels import streaming_copy_kernel


@pytest.mark.parametrize("scope", ["warp", "warpgroup", "cta"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16", "int8"])
@pytest.mark.parametrize("tile", [(32, 32), (64, 64), (128, 64)])
def test_streaming_kernels_assemble(scope, dtype, tile):
    k, grid = streaming_copy_kernel(dtype, scope, tile, nsm=132)
    ebytes = {"int8": 1, "float32": 4}.get(dtype, 2)
    groups = 256 // {"warp": 32, "warpgroup": 128, "cta": 256}[scope]
    if groups * tile[0] * tile[1] * ebytes > 227 * 1024:
        with pytest.raises(pg.ResourceError, match="static shared memory is"):
            k.ptx("sm_90a")
        return
    ptx = k.ptx("sm_90a")
    per = {"warp": 32, "warpgroup": 128, "cta": 256}[scope]
    bits = min(128, tile[0] * tile[1] * {"int8": 8, "float32": 32}.get(dtype, 16) // per)
    form = {128: "v4.u32", 64: "v2.u32", 32: "u32"}[bits]
    assert f"ld.global.{form}" in ptx and f"st.shared.{form}" in ptx
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    assert grid == 264


def test_fallback_streaming_kernel_assembles():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k, _ = streaming_copy_kernel("float16", "warpgroup", (64, 64), dispatch="fallback")
        ptx = k.ptx("sm_90a")
    assert "ld.global.u16" in ptx and "bar.sync %r" in ptx
    assert assemble(ptx, "sm_90a")[0]
