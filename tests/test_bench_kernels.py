"""The streaming copy kernels of `ptxgen bench copy` build and assemble for every default
scope x dtype x tile (the sweep itself needs a GPU)."""
import warnings

import pytest

import ptxgen as pg

from support.asm import assemble
from ptxgen.bench.copy_kernels import (forced_vec_copy_kernel, ldstmatrix_copy_kernel,
                                       register_copy_kernel, register_tile_layout,
                                       streaming_copy_kernel)
from ptxgen.bench.sweep import SkipReason

GROUPS = {"warp": 8, "warpgroup": 2, "cta": 1}


@pytest.mark.parametrize("scope", ["warp", "warpgroup", "cta"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16", "int8"])
@pytest.mark.parametrize("tile", [(32, 32), (64, 64), (128, 64)])
def test_streaming_kernels_assemble(scope, dtype, tile):
    k, ctas = streaming_copy_kernel(dtype, scope, tile, nsm=132)
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
    assert ctas is None     # one tile per scope instance: the grid follows ROWS
    assert k._grid_fn({"ROWS": tile[0] * 1000}) == (-(-1000 // GROUPS[scope]),)
    assert k._grid_fn({"ROWS": 0}) == (1,)


def test_persistent_grid_option():
    k, ctas = streaming_copy_kernel("float16", "cta", (64, 64), nsm=132, ctas_per_sm=2)
    assert ctas == 264 and k.ir.grid == (264, 1, 1)


def test_fallback_streaming_kernel_assembles():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k, _ = streaming_copy_kernel("float16", "warpgroup", (64, 64), dispatch="fallback")
        ptx = k.ptx("sm_90a")
    assert "ld.global.u16" in ptx and "bar.sync %r" in ptx
    assert assemble(ptx, "sm_90a")[0]


@pytest.mark.parametrize("scope", ["warp", "warpgroup", "cta"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
@pytest.mark.parametrize("tile", [(32, 32), (64, 64), (128, 64)])
def test_register_kernels_assemble_with_16_byte_vectors(scope, dtype, tile):
    ebytes = {"int8": 1, "float32": 4}.get(dtype, 2)
    lay = register_tile_layout(scope, tile, 16 // ebytes)
    if isinstance(lay, SkipReason):     # e.g. a 32x32 f16 tile over 256 threads: 4 each
        assert tile[0] * tile[1] * ebytes < {"warp": 32, "warpgroup": 128, "cta": 256}[scope] * 16
        return
    k, _ = register_copy_kernel(dtype, scope, tile, 16 // ebytes)
    ptx = k.ptx("sm_90a")
    assert "ld.global.v4.u32" in ptx and "st.global.v4.u32" in ptx
    assert "shared" not in ptx
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log


def test_register_tile_layout_refusals():
    assert register_tile_layout("cta", (32, 32), 8) == SkipReason(
        "a 32x32 tile holds 4 elements per thread of a cta; a 8-element vector per thread "
        "needs 64 rows per pass")
    assert register_tile_layout("warp", (8, 30), 4) == SkipReason(
        "30 columns are not whole 4-element vectors")
    assert register_tile_layout("warp", (8, 24), 1) == SkipReason(
        "a row of 24 vectors does not split over the 32 threads of a warp")


@pytest.mark.parametrize("bits,dtype,form", [(128, "float16", "v4.u32"), (64, "float32", "v2.u32"),
                                             (32, "int8", "u32"), (16, "int8", "u16")])
def test_forced_vec_kernels_use_the_forced_form(bits, dtype, form):
    k, _ = forced_vec_copy_kernel(dtype, "warp", (32, 64), bits)
    ptx = k.ptx("sm_90a")
    assert f"ld.global.{form} " in ptx and f"st.global.{form} " in ptx
    assert assemble(ptx, "sm_90a")[0]


def test_forced_vec_kernel_refusals():
    r, _ = forced_vec_copy_kernel("float32", "cta", (64, 64), 16)
    assert r == SkipReason("a 16-bit vector is not a whole number of float32 elements")
    with pytest.raises(pg.DispatchError, match="vec_256b: 256-bit loads/stores need sm_100 or newer"):
        forced_vec_copy_kernel("float32", "cta", (64, 64), 256)[0].ptx("sm_90a")


def test_ldstmatrix_kernel_uses_ldmatrix_and_stmatrix():
    k, _ = ldstmatrix_copy_kernel("bfloat16", "warpgroup", (64, 64))
    ptx = k.ptx("sm_90a")
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert assemble(ptx, "sm_90a")[0]
    r, _ = ldstmatrix_copy_kernel("float16", "cta", (32, 32))
    assert isinstance(r, SkipReason) and "multiple of 8*warps" in r.reason


def test_bulk_kernel_forms_and_refusals():
    from ptxgen.bench.copy_kernels import bulk_copy_kernel

    k, _ = bulk_copy_kernel("float16", (64, 64))
    ptx = k.ptx("sm_90a")
    assert ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd4], "
            "8192, [%r4];") in ptx
    assert "cp.async.bulk.global.shared::cta.bulk_group [%rd6], [%r3], 8192;" in ptx
    assert "mbarrier.arrive.expect_tx.shared.b64 %rd3, [%r4], 8192;" in ptx
    for arch in ("sm_90a", "sm_100a"):
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, log
    with pytest.raises(pg.ArchError, match="needs sm_90 or newer; the target is sm_80"):
        k.ptx("sm_80")
    r, _ = bulk_copy_kernel("int8", (3, 5))
    assert r == SkipReason("a bulk copy moves a multiple of 16 bytes, at most 1048560; a 3x5 "
                           "int8 tile is 15")
