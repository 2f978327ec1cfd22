"""Tensor maps and cluster launches without a GPU: the arguments ptxgen hands
cuTensorMapEncodeTiled and cuLaunchKernelEx, recorded by the stand-in driver of
support/fakecuda.py (real nvJitLink builds the cubins)."""
import ctypes

import pytest

import ptxgen as pg
from ptxgen.errors import LaunchError
from ptxgen.runtime import clear_memory_cache
from ptxgen.runtime.tensormap import TensorMapBuilder, encode_args
from support.fakecuda import FakeDriver, install

M = pg.var("M")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()


def tma_kernel():
    @pg.kernel(grid=(1,), block=(128,))
    def tma_copy(A: pg.Tensor((M, 96), "float16"), B: pg.Tensor((M, 96), "float16"),
                 r0: pg.int32):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((16, 64), "float16", align=1024, layout=pg.layout.ComposeLayout(
            pg.layout.Swizzle.mma("128B", 16), pg.layout.TileLayout(pg.layout.S[(16, 64)])))
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        with pg.if_(tx == 0):
            pg.tile.thread.copy_async(T, A[r0:r0 + 16, 32:96], mbar=bar)
        pg.ptx.mbarrier.try_wait(bar, 0)
        pg.tile.cta.copy_async(B[r0:r0 + 16, 0:64], T)
        pg.tile.cta.async_commit()
        pg.tile.cta.async_wait(0)
    return tma_copy


def _fake(monkeypatch):
    from cuda.bindings import driver as cb

    fake = install(monkeypatch, FakeDriver(archs=[(9, 0)]))
    fake.encoded = []

    def encode(*args):
        fake.encoded.append(args)
        m = cb.CUtensorMap()
        ctypes.memmove(m.getPtr(), bytes([len(fake.encoded)]) * 128, 128)
        return (cb.CUresult(0), m)
    fake.cuTensorMapEncodeTiled = encode
    return fake


def test_a_tma_launch_encodes_each_map_once_per_buffer(monkeypatch):
    fake = _fake(monkeypatch)
    fake.param_bytes = 384             # A, B, r0, M; the two maps at offsets 128 and 256
    k = tma_kernel()
    p, q = fake.alloc(0), fake.alloc(0)
    k(p, q, 3, M=40)
    assert len(fake.encoded) == 2                # A's map and B's (different boxes)
    a = fake.encoded[0]
    assert a[0].name == "CU_TENSOR_MAP_DATA_TYPE_FLOAT16" and a[1] == 2 and a[2] == p
    assert [int(x) for x in a[3]] == [96, 40] and [int(x) for x in a[4]] == [192]
    assert [int(x) for x in a[5]] == [64, 16] and [int(x) for x in a[6]] == [1, 1]
    assert a[8].name == "CU_TENSOR_MAP_SWIZZLE_128B" and a[7].name.endswith("INTERLEAVE_NONE")
    assert a[10].name.endswith("OOB_FILL_NONE")
    blob = fake.launches[-1].params
    assert blob[16:24] == (3).to_bytes(4, "little") + (40).to_bytes(4, "little")   # r0, M
    assert blob[128:256] == bytes([1]) * 128 and blob[256:384] == bytes([2]) * 128
    k(p, q, 5, M=40)                             # same buffers: cached, no driver call
    assert len(fake.encoded) == 2
    k(p, q, 5, M=48)                             # another extent: a new map per tensor
    assert len(fake.encoded) == 4 and [int(x) for x in fake.encoded[2][3]] == [96, 48]


def test_an_arch_without_tma_packs_zeros(monkeypatch):
    fake = _fake(monkeypatch)
    fake.archs[0] = (8, 0)                         # sm_80: the copies take cp.async

    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((64, 64), "float16"), O: pg.Tensor((64, 64), "float16")):
        T = pg.alloc_shared((64, 64), "float16")
        pg.tile.cta.copy_async(T, A)
        pg.tile.cta.async_commit()
        pg.tile.cta.async_wait(0)
        pg.tile.cta.copy(O, T)
    assert [p.kind for p in k.ir.params] == ["tensor", "tensor", "tmap"]
    assert ".param .align 64 .b8 A_tmap[128]" in k.ptx("sm_80") and "cvta.param" not in k.ptx(
        "sm_80")
    fake.param_bytes = 256
    k(fake.alloc(0), fake.alloc(0))
    assert fake.encoded == [] and fake.launches[-1].params[128:256] == bytes(128)


def test_encode_args_rules():
    class Spec:
        tensor, dtype, data_type = "A", "float16", "FLOAT16"
        dims, strides, box, swizzle = (96, "M"), ((192,),), (64, 16), "128B"

        def describe(self):
            return "tensor map of A"
    s = Spec()
    args = encode_args(s, 1 << 20, {"M": 7})
    assert args == {"tensorDataType": "FLOAT16", "tensorRank": 2, "globalAddress": 1 << 20,
                    "globalDim": [96, 7], "globalStrides": [192], "boxDim": [64, 16],
                    "elementStrides": [1, 1], "interleave": "NONE", "swizzle": "128B",
                    "l2Promotion": "L2_128B", "oobFill": "NONE"}
    with pytest.raises(LaunchError, match="address 0x100008 is not 16-byte aligned"):
        encode_args(s, (1 << 20) + 8, {"M": 7})
    with pytest.raises(LaunchError, match="needs symbol M, which is not bound"):
        encode_args(s, 1 << 20, {})
    s.box = (128, 16)
    with pytest.raises(LaunchError, match="inner 256 bytes must be a multiple of 16 and at most "
                                          "the 128B span"):
        encode_args(s, 1 << 20, {"M": 7})
    built = TensorMapBuilder(Spec(), [type("P", (), {"name": n}) for n in ("A", "M")],
                             encode=lambda a: b"\x01" * 128)
    assert built([1 << 20, 9]) == b"\x01" * 128 and built.cache
    assert TensorMapBuilder(Spec(), [type("P", (), {"name": "A"})], used=False)([0]) == bytes(128)


def test_cluster_launch_uses_the_cluster_attribute(monkeypatch):
    fake = _fake(monkeypatch)
    seen = []

    def launch_ex(cfg, f, params, extra):
        a = cfg.attrs[0]
        seen.append(((cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ), cfg.numAttrs, a.id.name,
                     (a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z),
                     cfg.blockDimX))
        return (0,)
    fake.cuLaunchKernelEx = launch_ex

    @pg.kernel(grid=(4,), block=(64,), cluster=(2, 1, 1))
    def k(O: pg.Tensor((4,), "int32")):
        pg.thread_id(64)
        O[pg.cta_id(4)] = pg.cta_rank_in_cluster()
    k(fake.alloc(0))
    assert seen == [((4, 1, 1), 1, "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION", (2, 1, 1), 64)]
    assert fake.calls["cuLaunchKernel"] == 0

    @pg.kernel(block=(64,), cluster=(2, 1, 1))
    def k2(O: pg.Tensor((4,), "int32")):
        pg.thread_id(64)
        O[pg.cta_id()] = pg.cta_rank_in_cluster()
    with pytest.raises(LaunchError, match=r"grid \(3, 1, 1\) is not a whole number of clusters "
                                          r"\(2, 1, 1\)"):
        k2(fake.alloc(0), grid=(3,))
