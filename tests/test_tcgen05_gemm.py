"""examples/gemm_sm100.py: assembles for sm_100a with no spills, is rejected for targets without
tcgen05 (naming the arch), keeps the fence rules, and has the pipeline's pieces."""
import re

import pytest

import gemm_sm100 as ex
from support.asm import assemble
from ptxgen.errors import ArchError
from ptxgen.primitives.tcgen05.common import check_fences


@pytest.mark.parametrize("k", ex.KERNELS, ids=lambda k: k.name)
def test_assembles_for_sm100a_without_spills(k):
    res = k.compile("sm_100a")
    assert res.spill_bytes == 0
    assert 0 < res.registers <= 128
    ok, log = assemble(k.ptx("sm_100a"), "sm_100a")
    assert ok, log
    assert "0 bytes spill stores, 0 bytes spill loads" in log


@pytest.mark.parametrize("arch", ["sm_90a", "sm_120a"])
def test_rejected_for_targets_without_tcgen05(arch):
    with pytest.raises(ArchError, match=rf"needs one of sm_100a, .*; the target is {arch}"):
        ex.gemm_sm100.ptx(arch)


def test_resources():
    r = ex.gemm_sm100.resources
    assert r["tmem_cols"] == 256
    tiles = 4 * (128 + 256) * 64 * 2                      # 4 stages of A and B tiles
    assert 0 < r["smem_dynamic_bytes"] - tiles < 128       # + 9 mbarriers and the TMEM slot
    assert r["barriers"] == 9


def test_fence_rules_hold():
    for k in ex.KERNELS:
        assert check_fences(k.ptx("sm_100a")) == []


def test_pipeline_pieces():
    ptx = ex.gemm_sm100.ptx("sm_100a")
    lines = [ln.strip() for ln in ptx.splitlines() if not ln.strip().startswith("//")]
    tma = [ln for ln in lines if ln.startswith("cp.async.bulk.tensor.2d")]
    assert len(tma) == 2 and all(re.search(r"\[%rd\d+, \{%r\d+, %r\d+\}\]", t) for t in tma)
    assert sum(ln.startswith("cvta.global.u64") for ln in lines) == 2
    assert any("mbarrier.arrive.expect_tx.shared.b64" in ln and ln.endswith(", 49152;")
               for ln in lines)
    mma = [ln for ln in lines if ln.startswith("tcgen05.mma")]
    assert len(mma) == 4 and all("0x08400490" in m for m in mma)          # M128 N256 bf16
    first = mma[0].rstrip(";").split(", ")[-1]                         # kt > 0
    assert re.search(rf"setp\.gt\.s32 {first}, %r\d+, 0;", ptx)
    rest = {m.rstrip(";").split(", ")[-1] for m in mma[1:]}
    assert len(rest) == 1 and f"setp.eq.b32 {rest.pop()}, 0, 0;" in ptx     # true
    assert sum(ln.startswith("tcgen05.commit") for ln in lines) == 2      # empty[s], done
    assert [ln.split()[0] for ln in lines if ln.startswith("tcgen05.ld")] == \
        ["tcgen05.ld.sync.aligned.32x32b.x32.b32"]
    assert sum(ln.startswith("cvt.rn.bf16x2.f32") for ln in lines) == 16
    assert sum(ln.startswith("st.global.v4") for ln in lines) == 4        # 128-bit stores
    assert sum(ln.startswith("tcgen05.alloc") for ln in lines) == 1
    assert sum(ln.startswith("tcgen05.dealloc") for ln in lines) == 1
