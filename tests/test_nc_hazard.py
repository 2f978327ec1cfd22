"""A read-only-path (.nc) load of storage the same kernel writes is an error:
the non-coherent cache may serve data from before the kernel's own writes."""
import warnings

import pytest

import ptxgen as pg
from support.located import at, fails, kernel

MSG = ("'{buf}' is loaded through the read-only data path (cache_hint 'nc', ld.global.nc) but "
       "this kernel also writes it (at {w}); that cache is not coherent with the kernel's own "
       "writes and may return stale data: drop the 'nc' hint or write another buffer")


@pytest.mark.parametrize("hint", ["nc", ["nc", "L1::no_allocate"], ["L2::128B", "nc"]])
def test_vload_nc_of_a_written_tensor(hint):
    def k(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(32)
        v = A.vload([tx * 4], "float32x4", cache_hint=hint)    # at: load
        A.vstore([tx * 4], v)                                  # at: store

    fails(lambda: kernel(k), "load", MSG.format(buf="A", w=at("store")), pg.TraceError)


def test_write_through_a_view_before_the_load():
    def k(A: pg.Tensor((4, 32), "float16")):
        tx = pg.thread_id(32)
        flat = A.view(128)
        flat[tx] = pg.float16(0.0)                             # at: store
        x = A.vload([1, 0], "float16x8", cache_hint="nc")      # at: load
        flat[tx + 32] = flat[tx]

    fails(lambda: kernel(k), "load", MSG.format(buf="A", w=at("store")), pg.TraceError)


def test_tile_copy_nc_and_raw_store():
    def k(A: pg.Tensor((32, 32), "float32")):
        sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(sm, A, cache_hint="nc")              # at: copy
        pg.cta_sync()
        pg.tile.warp.copy(A, sm)                               # at: back

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fails(lambda: kernel(k), "copy", MSG.format(buf="A", w=at("back")), pg.TraceError)

    def k2(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        r = pg.alloc_local((1,), "float32")
        pg.ptx["ld.global.nc.f32"](r[0], A.ptr_to([tx]))      # at: raw
        pg.ptx["st.global.f32"](A.ptr_to([tx]), r[0])         # at: st

    fails(lambda: kernel(k2), "raw", MSG.format(buf="A", w=at("st")), pg.TraceError)


def test_nc_of_a_read_only_input_is_fine():
    import numpy as np
    from support import ptxsim

    def k(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(32)
        B.vstore([tx * 4], A.vload([tx * 4], "float32x4", cache_hint="nc"))

    kk = kernel(k)
    assert "ld.global.nc.v4" in kk.ptx("sm_90a")
    a, b = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    ptxsim.run(kk, [a, b])
    assert (a == b).all()


def test_a_write_nested_in_loops_and_branches_is_found():
    """The check walks every loop and branch body, an else_ included."""
    def k(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(32)
        v = A.vload([tx * 4], "float32x4", cache_hint="nc")    # at: load
        for i in pg.serial(2):
            with pg.if_(tx < 16):
                pass
            with pg.else_():
                for j in pg.serial(2):
                    A[tx + i + j] = pg.float32(0.0)            # at: store

    fails(lambda: kernel(k), "load", MSG.format(buf="A", w=at("store")), pg.TraceError)
