"""Launch geometry is checked when the kernel is traced, from the decorator,
pg.launch or the declared extents: at most 1024 threads a CTA, (1024, 1024, 64) per dimension,
positive grid dimensions with x < 2**31 and y, z < 65536."""
import pytest

import ptxgen as pg
from support.located import fails


def _k(A: pg.Tensor((32,), "float32")):
    pass


@pytest.mark.parametrize("grid,block,msg", [
    ((1,), (2048,), "a CTA holds at most 1024 threads; blockDim (2048, 1, 1) has 2048 (ptxas "
                    "would accept it and the launch would fail)"),
    ((1,), (32, 33), "a CTA holds at most 1024 threads; blockDim (32, 33, 1) has 1056 (ptxas "
                     "would accept it and the launch would fail)"),
    ((1,), (1, 1, 65), "blockDim.z is at most 64, got 65; give the threads to x and y"),
    ((0,), (32,), "gridDim.x must be a positive int, got 0"),
    ((2**31,), (32,), "gridDim.x is at most 2147483647, got 2147483648; loop over the rest in "
                      "each CTA"),
    ((1, 65536), (32,), "gridDim.y is at most 65535, got 65536; give the large extent to x (up "
                        "to 2**31 - 1)"),
    ((1, 1, 70000), (32,), "gridDim.z is at most 65535, got 70000; give the large extent to x "
                           "(up to 2**31 - 1)"),
    ((2.0,), (32,), "gridDim.x must be a positive int, got 2.0"),
    ((1,), (0,), "blockDim.x must be a positive int, got 0"),
    ((1, 1, 1, 1), (32,), "grid must have 1 to 3 dimensions, got (1, 1, 1, 1)"),
])
def test_decorator(grid, block, msg):
    def k(A: pg.Tensor((32,), "float32")):                     # at: deco
        pass

    fails(lambda: pg.kernel(grid=grid, block=block)(k), "deco", msg, pg.TraceError)


@pytest.mark.parametrize("launch,msg", [
    (dict(block=(33, 33)), "a CTA holds at most 1024 threads; blockDim (33, 33, 1) has 1089 "
                           "(ptxas would accept it and the launch would fail)"),
    (dict(grid=(1, 1, 0)), "gridDim.z must be a positive int, got 0"),
    (dict(dynamic_smem_bytes=-1), "dynamic_smem_bytes must be a non-negative int, got -1"),
])
def test_pg_launch(launch, msg):
    def k(A: pg.Tensor((32,), "float32")):
        pg.launch(**launch)                                    # at: launch

    fails(lambda: pg.kernel(k), "launch", msg, pg.TraceError)


def test_declared_extents():
    def k2(A: pg.Tensor((32,), "float32")):
        pg.cta_id(2**31)                                       # at: cta

    fails(lambda: pg.kernel(k2), "cta", "gridDim.x is at most 2147483647, got 2147483648; loop "
          "over the rest in each CTA", pg.TraceError)

    def k3(A: pg.Tensor((32,), "float32")):
        pg.thread_id(32, "x")
        pg.thread_id(65, "z")                                  # at: z

    fails(lambda: pg.kernel(k3), "z", "a CTA holds at most 1024 threads; blockDim (32, 1, 65) "
          "has 2080 (ptxas would accept it and the launch would fail)", pg.TraceError)


def test_limits_themselves_are_accepted():
    for grid, block in (((2**31 - 1, 65535, 65535), (1024,)), ((1,), (16, 1, 64)),
                        ((1,), (1, 1024))):
        assert pg.kernel(grid=grid, block=block)(_k).ir.block == (tuple(block) + (1, 1))[:3]
