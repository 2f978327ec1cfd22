"""copy_async / async_commit / async_wait, clusters and pipelines on the CPU: the PTX forms each
variant emits, explain's verdicts, and every check's message with its fix."""
import numpy as np
import pytest

import ptxgen as pg
from ptxgen.errors import ArchError, DispatchError, PtxgenError, TraceError
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout
from support.async_cases import (bulk_kernel, cp_async_kernel, dsmem_kernel, multicast_kernel,
                                 tma_load_kernel, tma_store_kernel)

M = pg.var("M")


def sw(mode, shape, dt="float16"):
    return ComposeLayout(Swizzle.mma(mode, pg.dtype(dt).bits), TileLayout(S[shape]))


def one(body, block=128, cluster=None, name="k"):
    body.__name__ = name
    return pg.kernel(body, grid=(cluster[0] if cluster else 1,), block=(block,), cluster=cluster)


def trace_error(fn, *args, exc=PtxgenError):
    with pytest.raises(exc) as ei:
        fn(*args)
    return str(ei.value)


def _load(region, tile_shape=(16, 64), dt="float16", mode="none", align=1024, dispatch=None,
          scope="thread", tensor=(64, 128), **kw):
    """A kernel with one copy_async load of `region(A)` into a pool tile."""
    def k(A: pg.Tensor(tensor, dt)):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        lay = sw(mode, tile_shape, dt) if mode != "none" else None
        T = pool.alloc(tile_shape, dt, align=align, layout=lay)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        getattr(pg.tile, scope).copy_async(T, region(A), mbar=bar, dispatch=dispatch, **kw)
    return one(k)


# ---- the forms ----------------------------------------------------------------------------
def test_tma_load_form_and_tensor_map_parameter():
    k = tma_load_kernel("float16", (40, 96), (16, 64), "128B")
    ptx = k.ptx("sm_90a")
    assert ".param .align 64 .b8 A_tmap[128]" in ptx
    assert "mov.u64 %rd3, A_tmap;\n    cvta.param.u64 %rd3, %rd3;" in ptx
    assert "mbarrier.arrive.expect_tx.shared.b64 _, [" in ptx and "], 2048;" in ptx
    assert ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[%r") in ptx
    assert "[%rd3, {%r" in ptx        # coordinates innermost first: the runtime column start
    p = [x for x in k.ir.params if x.kind == "tmap"]
    assert [x.spec for x in p] == [p[0].spec] and p[0].spec.box == (64, 16)
    assert p[0].spec.dims == (96, 40) and p[0].spec.strides == ((192,),)
    assert p[0].spec.swizzle == "128B" and p[0].spec.data_type == "FLOAT16"
    assert "A_tmap: <tensor map of A: box 64x16 float16, swizzle 128B>" in str(k.ir)


def test_three_d_box_and_symbolic_strides():
    def k(A: pg.Tensor((M, 20, 48), "bfloat16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((2, 8, 24), "bfloat16", align=128)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.tile.thread.copy_async(T, A[1:3, 4:12, 16:40], mbar=bar)
    k = one(k)
    ptx = k.ptx("sm_90a")
    assert "cp.async.bulk.tensor.3d.shared::cluster.global" in ptx and "{16, 4, 1}" in ptx
    spec = next(p.spec for p in k.ir.params if p.kind == "tmap")
    assert spec.dims == (48, 20, "M") and spec.strides == ((96,), (1920,))
    assert spec.box == (24, 8, 2) and spec.data_type == "BFLOAT16"


def test_column_major_tensor_maps_its_contiguous_dim_first():
    def k(A: pg.Tensor((64, 32), "float32", layout=TileLayout(S[(64, 32):(1, 64)]))):
        pool = pg.SMEMPool()
        T = pool.alloc((32, 16), "float32", align=128)     # the box lands dim 0 fastest
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        pg.tile.thread.copy_async(T.permute(1, 0), A[0:16, 0:32], mbar=bar)
    spec = next(p.spec for p in one(k).ir.params if p.kind == "tmap")
    assert spec.dims == (64, 32) and spec.box == (16, 32) and spec.strides == ((256,),)


def test_multicast_forms():
    ptx = multicast_kernel(2).ptx("sm_90a")
    assert ".explicitcluster\n.reqnctapercluster 2, 1, 1" in ptx
    assert "mbarrier::complete_tx::bytes.multicast::cluster [%r" in ptx and "], 3;" in ptx
    assert "mov.u32 %r3, %cluster_ctarank;" in ptx and "barrier.cluster.arrive;" in ptx
    # slice form: every CTA of the mask issues its slice, each expects them all
    ptx = multicast_kernel(4, rows=32, how="slice").ptx("sm_90a")
    assert "mbarrier.arrive.expect_tx.shared.b64 _, [%r5+4096], 4096;" in ptx


def test_tma_store_reduce_and_cache_hint_forms():
    ptx = tma_store_kernel("float32", (40, 96), (16, 32), "128B", reduce="add").ptx("sm_90a")
    assert "fence.proxy.async.shared::cta;\n    // pg.cta_sync()\n    bar.sync 0;" in ptx
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%rd" in ptx
    assert "cp.async.bulk.commit_group;" in ptx and "cp.async.bulk.wait_group 0;" in ptx
    k = _load(lambda A: A[0:16, 0:64], cache_hint="evict_first")
    ptx = k.ptx("sm_90a")
    assert "createpolicy.fractional.L2::evict_first.b64 %rd" in ptx
    assert "complete_tx::bytes.L2::cache_hint [%r" in ptx


def test_bulk_and_cp_async_forms():
    ptx = bulk_kernel("float16", 4096, 512).ptx("sm_90a")
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd3], " \
           "1024, [%r3+1024];" in ptx
    assert "cp.async.bulk.global.shared::cta.bulk_group [%rd" in ptx
    for width, cols, cache, nbytes in ((16, 16, "cg", 16), (6, 2, "ca", 8), (3, 3, "ca", 4)):
        ptx = cp_async_kernel("float32", (300, width), 128, cols, "warpgroup").ptx("sm_80")
        assert f"cp.async.{cache}.shared.global [%r" in ptx and f"], {nbytes};" in ptx
        assert "cp.async.commit_group;" in ptx and "cp.async.wait_group 0;" in ptx
        assert "cp.async.bulk" not in ptx                  # sm_80: no bulk groups
    ptx = cp_async_kernel("float16", (64, 64), 16, 64, "thread", use_mbar=True).ptx("sm_90a")
    assert "cp.async.mbarrier.arrive.noinc.shared.b64 [%r" in ptx


def test_cp_async_l2_hint_and_group_kinds():
    def k(A: pg.Tensor((64, 64), "float16")):
        tx = pg.thread_id(128)
        T = pg.alloc_shared((64, 64), "float16")
        pg.tile.cta.copy_async(T, A[0:64, 0:64], cache_hint=["cg", "L2::128B"])
        pg.tile.cta.async_commit(kind="cp_async")
        pg.tile.cta.async_wait(1, kind="cp_async", sync=False)
    ptx = one(k).ptx("sm_90a")
    assert "cp.async.cg.shared.global.L2::128B [" in ptx and "cp.async.wait_group 1;" in ptx
    assert "bulk" not in ptx and "bar.sync" not in ptx


def test_dsmem_forms():
    ptx = dsmem_kernel(2).ptx("sm_90a")
    assert "mapa.shared::cluster.u32 %r5, %r4, %r7;" in ptx
    assert "st.shared::cluster.s32 [%r" in ptx
    with pytest.raises(ArchError, match="needs sm_90"):
        dsmem_kernel(2).ptx("sm_80")


def test_cluster_ids_and_sync():
    def k(O: pg.Tensor((8,), "int32")):
        pg.thread_id(32)
        r = pg.cta_rank_in_cluster()
        c = pg.cluster_id()
        x = pg.cta_id_in_cluster()
        pg.cluster_sync()
        O[pg.cta_id(8)] = r + c * 10 + x * 100
    k = pg.kernel(k, grid=(8,), block=(32,), cluster=(4, 1, 1))
    ptx = k.ptx("sm_90a")
    for s in ("%cluster_ctarank", "%clusterid.x", "%cluster_ctaid.x", ".reqnctapercluster 4, 1, 1"):
        assert s in ptx
    with pytest.raises(ArchError, match="cluster"):
        k.ptx("sm_80")
    from support import ptxsim
    o = np.zeros(8, np.int32)
    ptxsim.run(k, [o])
    assert list(o) == [r + c * 10 + r * 100 for c in range(2) for r in range(4)]


# ---- explain --------------------------------------------------------------------------------
def test_explain_lists_every_variant():
    rows = {}

    def k(A: pg.Tensor((64, 128), "float16")):
        pool = pg.SMEMPool()
        T = pool.alloc((16, 64), "float16", align=1024, layout=sw("128B", (16, 64)))
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        rows["thread"] = pg.tile.explain("copy_async", T, A[0:16, 0:64], scope="thread",
                                         mbar=bar)
        rows["sm80"] = pg.tile.explain("copy_async", T, A[0:16, 0:64], scope="cta",
                                       arch="sm_80")
    k = one(k)
    t = rows["thread"]
    assert t.chosen == "tma" and [r.name for r in t] == ["tma", "tma_store", "bulk", "cp_async"]
    assert "2-D box 64x16 = 2048 B, swizzle 128B" in str(t)
    assert "bulk copy moves one contiguous run" in str(t)
    e = rows["sm80"]
    assert e.chosen == "cp_async" and "needs sm_90 or newer; the target is sm_80" in str(e)
    assert "16-byte cp.async.cg, 128 thread(s) x 1 round(s)" in str(e)
    assert not [p for p in k.ir.params if p.kind == "tmap"]      # explain declares no map


# ---- checks, each with its fix ----------------------------------------------------------------
def test_box_over_256_per_dimension():
    msg = trace_error(lambda: _load(lambda A: A[0:512, 0:16], (512, 16), tensor=(1024, 64),
                                    dispatch="tma"))
    assert "the box is 512 elements along dim 0 of 'A'; TMA boxes are at most 256 per dimension"\
        in msg and "split the copy" in msg


def test_inner_box_not_a_multiple_of_16_bytes():
    msg = trace_error(lambda: _load(lambda A: A[0:16, 0:12], (16, 12), dispatch="tma"))
    assert "inner extent is 12 x 2 B = 24 B, not a multiple of 16 B: make dim 1's extent a " \
           "multiple of 8 elements" in msg


def test_inner_box_wider_than_the_swizzle_span():
    msg = trace_error(lambda: _load(lambda A: A[0:16, 0:32], (16, 32), mode="32B",
                                    dispatch="tma"))
    assert "inner extent is 64 B, wider than the 32B swizzle span (32 B): copy 16-element " \
           "columns" in msg


def test_global_strides_not_multiples_of_16():
    msg = trace_error(lambda: _load(lambda A: A[0:16, 0:64], tensor=(64, 100), dispatch="tma"))
    assert "dim 0 has a byte stride of 200, not a multiple of 16 below 2^40 (TMA global " \
           "strides); pad the tensor's rows to a multiple of 8 elements" in msg
    from ptxgen.runtime.tensormap import encode_args

    def k(A: pg.Tensor((64, M), "float16")):
        pool = pg.SMEMPool()
        T = pool.alloc((16, 64), "float16", align=128)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        pg.tile.thread.copy_async(T, A[0:16, 0:64], mbar=bar)
    spec = next(p.spec for p in one(k).ir.params if p.kind == "tmap")
    assert encode_args(spec, 1 << 20, {"M": 64})["globalStrides"] == [128]
    with pytest.raises(pg.LaunchError, match="byte stride of 200, but TMA global strides are "
                                             "multiples of 16 below 2.40: pad the tensor's rows"):
        encode_args(spec, 1 << 20, {"M": 100})


def test_misaligned_shared_destinations():
    k = _load(lambda A: A[0:16, 0:64], align=16, dispatch="tma")
    msg = trace_error(lambda: k.ptx("sm_90a"), exc=DispatchError)
    assert "misaligned shared TMA destination" in msg and "align=128" in msg
    k = _load(lambda A: A[0:16, 0:64], mode="128B", align=512, dispatch="tma")
    msg = trace_error(lambda: k.ptx("sm_90a"), exc=DispatchError)
    assert "needs the tile at a 1024-byte boundary (the 128B swizzle repeats every 1024 B): " \
           "allocate it with align=1024" in msg


def test_multicast_without_a_cluster():
    msg = trace_error(lambda: _load(lambda A: A[0:16, 0:64], multicast=0b11))
    assert "multicast= needs a thread-block cluster: declare the kernel with " \
           "@pg.kernel(..., cluster=(2, 1, 1))" in msg


def test_mbar_on_a_store():
    def k(B: pg.Tensor((64, 64), "float16")):
        pool = pg.SMEMPool()
        T = pool.alloc((16, 64), "float16", align=128)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        pg.tile.cta.copy_async(B[0:16, 0:64], T, mbar=bar)
    msg = trace_error(lambda: one(k), exc=TraceError)
    assert "mbar= is for copies into shared memory; a store to global memory completes through " \
           "bulk groups: call pg.tile.<scope>.async_commit() and then async_wait(0)" in msg


def test_cp_async_below_sm80_and_tma_below_sm90():
    k = cp_async_kernel("float32", (64, 16), 32, 16, "warp")
    with pytest.raises(ArchError, match="copy_async needs sm_80 or newer .cp.async.*; the "
                                        "target is sm_75: use pg.tile.\\*.copy"):
        k.ptx("sm_75")
    k = _load(lambda A: A[0:16, 0:64], dispatch="tma")
    msg = trace_error(lambda: k.ptx("sm_80"), exc=DispatchError)
    assert "tma: TMA (cp.async.bulk.tensor) needs sm_90 or newer; the target is sm_80 (the " \
           "cp_async variant copies global -> shared from sm_80)" in msg


def test_more_rules_at_the_users_line():
    def store_mc(B: pg.Tensor((64, 64), "float16")):
        T = pg.alloc_shared((16, 64), "float16")
        pg.tile.cta.copy_async(B[0:16, 0:64], T, reduce="max")
    assert "TMA stores reduce with 'add' only" in trace_error(lambda: one(store_mc))

    def both_global(A: pg.Tensor((64,), "float16"), B: pg.Tensor((64,), "float16")):
        pg.tile.thread.copy_async(B, A)
    assert "copy_async moves a tile between global and shared memory" in \
        trace_error(lambda: one(both_global))

    def cl(A: pg.Tensor((64, 64), "float16")):
        T = pg.alloc_shared((16, 64), "float16")
        bar = pg.alloc_shared((1,), "uint64")
        pg.tile.cluster.copy_async(T, A[0:16, 0:64], mbar=bar, multicast=1)
    assert "pg.tile.cluster needs a thread-block cluster" in trace_error(lambda: one(cl))
    with pytest.raises(PtxgenError, match="clusters hold at most 8"):
        pg.kernel(cl, grid=(32,), block=(32,), cluster=(32, 1, 1))   # 16: sm_90 non-portable
    with pytest.raises(TraceError, match="not a multiple of the cluster's 2 CTAs"):
        pg.kernel(lambda O: None, grid=(3,), block=(32,), cluster=(2, 1, 1)) if False else \
            pg.kernel(_grid3, grid=(3,), block=(32,), cluster=(2, 1, 1))


def _grid3(O: pg.Tensor((3,), "int32")):
    O[pg.cta_id(3)] = 1


def test_cp_async_mbar_needs_thread_scope():
    k = cp_async_kernel("float32", (64, 16), 32, 16, "thread", use_mbar=True)
    assert "cp.async.mbarrier.arrive.noinc" in k.ptx("sm_90a")

    def k2(A: pg.Tensor((64, 16), "float32")):
        pg.thread_id(32)
        T = pg.alloc_shared((32, 16), "float32")
        bar = pg.alloc_shared((1,), "uint64")
        pg.tile.warp.copy_async(T, A[0:32, 0:16], mbar=bar, dispatch="cp_async")
    msg = trace_error(lambda: one(k2, 32).ptx("sm_80"), exc=DispatchError)
    assert "cp.async completes per thread: mbar= would arrive once per thread of the warp" in msg


def test_proxy_fence_missing_is_reported():
    def k(S_: pg.Tensor((16, 64), "float16"), B: pg.Tensor((64, 64), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((16, 64), "float16", align=1024, name="T")
        pool.commit()
        pg.tile.cta.copy(T, S_)
        pg.cta_sync()
        with pg.if_(tx == 0):
            pg.tile.thread.copy_async(B[0:16, 0:64], T)
    msg = trace_error(lambda: one(k).ptx("sm_90a"))
    assert "this store reads shared tile 'T', written by plain stores at test_async.py:" in msg
    assert "with no fence.proxy.async in between" in msg and \
        "pg.ptx.fence.proxy_async() in every writing thread" in msg
    # fenced: accepted; a cta-scope store fences itself
    tma_store_kernel("float16", (64, 64), (16, 64), "none", scope="thread").ptx("sm_90a")


def test_pipeline_rules():
    def k():
        pool = pg.SMEMPool()
        pg.Pipeline(pool, stages=0)
    with pytest.raises(PtxgenError, match="Pipeline stages=0 must be a positive int"):
        one(k)

    def k2():
        pool = pg.SMEMPool()
        p = pg.Pipeline(pool, stages=2)
        pool.commit()
        with pg.if_(pg.thread_id(32) == 0):
            p.init()
    with pytest.raises(PtxgenError, match="Pipeline.init.. must be called at the top level"):
        one(k2, 32)


def test_tma_declines_an_unaligned_constant_inner_start():
    """The innermost box start must be a multiple of 16 bytes (an unaligned one faults on the
    H200); a constant start says so at build time and names the fix."""
    seen = {}

    def k(A: pg.Tensor((40, 96), "float32"), O: pg.Tensor((16, 16), "float32")):
        pool = pg.SMEMPool()
        t = pool.alloc((16, 16), "float32", align=1024)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        seen["t"] = pg.tile.explain("copy_async", t, A[0:16, 5:21], mbar=bar[0],
                                    scope="thread")
    pg.kernel(k, grid=(1,), block=(32,))
    row = {r.name: r.reason for r in seen["t"]}["tma"]
    assert row == ("the box starts 20 B into the innermost dimension (element 5); TMA needs a "
                   "multiple of 16 B there (on the H200 an unaligned start faults with an "
                   "illegal instruction): start the region at a multiple of 4 elements, or use "
                   "dispatch='cp_async'")


def test_tma_declines_a_provably_unaligned_runtime_inner_start():
    """A runtime start whose remainder the facts know (x * 8 + 1 float16 elements) is the same
    build error; one they cannot decide (a plain scalar parameter) builds."""
    from ptxgen.errors import DispatchError

    def make(start):
        def k(A: pg.Tensor((40, 96), "float16"), x: pg.int32):
            tx = pg.thread_id(32)
            pool = pg.SMEMPool()
            t = pool.alloc((16, 16), "float16", align=1024)
            bar = pool.alloc_mbarrier(1)
            pool.commit()
            c = pg.let(start(x))
            with pg.if_(tx == 0):
                pg.tile.thread.copy_async(t, A[0:16, c:c + 16], mbar=bar[0])
        return pg.kernel(k, grid=(1,), block=(32,))

    with pytest.raises(DispatchError) as e:
        make(lambda x: x * 8 + 1).ptx("sm_90a")
    assert ("tma: the box's innermost start " in str(e.value) and
            " is 1 elements past a multiple of 8 (16 B; on the H200 an unaligned start faults "
            "with an illegal instruction): start the region at a multiple of 8 elements, or "
            "use dispatch='cp_async'" in str(e.value))
    assert "cp.async.bulk.tensor" in make(lambda x: x * 8).ptx("sm_90a")
    assert "cp.async.bulk.tensor" in make(lambda x: x).ptx("sm_90a")
