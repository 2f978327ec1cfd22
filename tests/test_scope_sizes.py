"""A warp or warpgroup primitive needs whole warps / warpgroups of the block
(a partial one would copy part of the tile and skip the rest)."""
import pytest

import ptxgen as pg
from support.located import build, fails


def _copy(scope, shape=(32, 32), dtype="float32"):
    def k(A: pg.Tensor(shape, dtype), B: pg.Tensor(shape, dtype)):
        sm = pg.alloc_shared(shape, dtype)
        getattr(pg.tile, scope).copy(sm, A)                    # at: copy
        pg.cta_sync()
        getattr(pg.tile, scope).copy(B, sm)
    return k


@pytest.mark.parametrize("block,lanes", [((48,), 16), ((16,), 16), ((8, 5), 8)])
def test_partial_warp(block, lanes):
    total = block[0] * (block[1] if len(block) > 1 else 1)
    dims = (tuple(block) + (1, 1))[:3]
    fails(build(_copy("warp"), block=block), "copy",
          f"the warp scope needs whole warps, but the block {dims} has {total} threads: its "
          f"last warp has {lanes} lanes, and the work of the missing ones would be skipped; make "
          f"the block a multiple of 32 threads or use the thread or cta scope", pg.TraceError)


@pytest.mark.parametrize("block,left", [((192,), 64), ((32,), 32), ((320,), 64)])
def test_partial_warpgroup(block, left):
    fails(build(_copy("warpgroup", (64, 64), "float16"), block=block), "copy",
          f"the warpgroup scope needs whole warpgroups, but the block {(block[0], 1, 1)} has "
          f"{block[0]} threads: its last warpgroup has {left}, and the work of the missing ones "
          f"would be skipped; make blockDim.x a multiple of 128 or use the warp or cta scope",
          pg.TraceError)


def test_warpgroup_needs_a_1d_block():
    fails(build(_copy("warpgroup"), block=(128, 2)), "copy",
          "the warpgroup scope needs a 1-D block, but the block is (128, 2, 1); give all threads "
          "to x (a multiple of 128) or use the warp or cta scope", pg.TraceError)


def test_block_set_after_the_call_is_checked_when_built():
    def k(A: pg.Tensor((32, 32), "float32"), B: pg.Tensor((32, 32), "float32")):
        sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(sm, A)                               # at: late
        pg.launch(grid=(1,), block=(40,))

    kk = pg.kernel(k)             # the block is not known at the copy: the build checks it
    fails(lambda: kk.ptx("sm_90a"), "late",
          "the warp scope needs whole warps, but the block (40, 1, 1) has 40 threads: its last "
          "warp has 8 lanes, and the work of the missing ones would be skipped; make the block "
          "a multiple of 32 threads or use the thread or cta scope")


@pytest.mark.parametrize("scope,block", [("warp", (64,)), ("warp", (16, 2)), ("warpgroup", (256,)),
                                         ("cta", (48,)), ("thread", (1,))])
def test_whole_scopes_build(scope, block):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ".entry" in build(_copy(scope, (64, 64), "float16"), block=block)()
