"""Every name in shared/API.md exists and works at the level the contract states."""
import ptxgen as pg
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout, laneid, tid, warpid


def test_names():
    for name in ["kernel", "Kernel", "Tensor", "var", "launch", "cta_id", "thread_id", "lane_id",
                 "warp_id", "warpgroup_id", "serial", "unroll", "if_", "else_", "while_", "let",
                 "local_scalar", "alloc_local", "alloc_buffer", "alloc_shared", "decl_buffer",
                 "min", "max", "select", "cast", "float32", "int32", "cta_sync", "SMEMPool",
                 "TMEMPool", "tile", "ptx", "debug_bounds", "named_barrier"]:
        assert hasattr(pg, name), name
    assert callable(pg.tile.warp.copy) and callable(pg.tile.explain)
    assert callable(pg.ptx.tcgen05.alloc) and callable(pg.ptx.mbarrier.init)


def test_contract_example_traces_and_emits():
    @pg.kernel(grid=(1,), block=(128,))
    def smem_demo(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        sm = pg.alloc_shared((128,), "float32")
        sm[tx] = A[tx]
        pg.cta_sync()
        B[tx] = sm[tx] * pg.float32(2.0)

    assert "def smem_demo(" in str(smem_demo.ir)
    res = smem_demo.compile(arch="sm_90a")
    assert res.cubin and res.registers > 0 and res.spill_bytes == 0 and res.log is not None


def test_expressions_and_layout_spellings():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32, 8), "float32", layout=TileLayout(S[(32, 8):(8, 1)])),
          B: pg.Tensor((32,), "int32"), n: pg.int32):
        t = pg.thread_id(32)
        x = pg.let((t << 1) ^ (t >> 1) | (t & 3))
        y = pg.select(x % 3 == 0, pg.min(x, n), pg.max(x // 2, n))
        B[t] = y + pg.cast(A[t, 0], "int32")

    assert "selp" in k.ptx("sm_90a")
    assert TileLayout(S[(32, 8):(1 @ laneid, 1)]).apply(3, 5) == {"laneid": 3, "m": 5}
    ComposeLayout(Swizzle(3, 3, 3), TileLayout(S[(8, 64)]))
    assert {warpid.name, tid.name} == {"warpid", "tid"}


def test_pyproject_lists_every_package():
    """The wheel ships the packages pyproject names: a subpackage missing there installs
    without its modules (the wheel test then fails far from the cause)."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    text = (root / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(ptxgen(?:\.\w+)*)"', text.split("packages = [", 1)[1].split("]", 1)[0]))
    found = {".".join(p.relative_to(root).parent.parts) for p in (root / "ptxgen").rglob("*.py")
             if "__pycache__" not in p.parts}
    assert found - listed == set(), f"add to pyproject's packages: {sorted(found - listed)}"
