"""examples/wgmma_desc_check.py on the CPU: every case assembles for sm_90a, the descriptors in
its PTX are the builder's, and the host-side models the GPU test relies on are consistent."""
import re

import numpy as np
import pytest

import wgmma_desc_check as ex
from support.asm import assemble
from ptxgen.errors import ArchError
from ptxgen.ir import Buffer, BufferRegion
from ptxgen.dtypes import dtype
from ptxgen.primitives.tcgen05 import canonical_layout, smem_operand


@pytest.mark.parametrize("case", ex.CASES, ids=lambda c: "n%d-%s-%s%s" % c)
def test_assembles_for_sm90a(case):
    k = ex.kernel_for(*case)
    ptx = k.ptx("sm_90a")
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log
    assert "0 bytes spill stores" in log
    N, sw, am, bm = case
    lines = [ln.strip() for ln in ptx.splitlines() if not ln.strip().startswith("//")]
    mma = [ln for ln in lines if ln.startswith("wgmma.mma_async")]
    assert len(mma) == ex.K // 16
    tn = f"{int(am == 'MN')}, {int(bm == 'MN')};"
    preds = [re.search(r", (%p\d+), 1, 1, " + tn + "$", m).group(1) for m in mma]
    assert all(m.startswith(f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.bf16.bf16 {{")
               for m in mma)
    assert f"setp.ne.b32 {preds[0]}, 0, 0;" in lines                  # scale-d false: D = A*B
    assert all(f"setp.eq.b32 {p}, 0, 0;" in lines for p in preds[1:])  # then accumulate
    # the descriptors are the builder's: template OR'ed in, then each step's offset >> 4
    ops = [smem_operand(BufferRegion(Buffer("t", (r, ex.K), dtype("bfloat16"), "shared",
                                            canonical_layout(r, ex.K, "bfloat16", major=mj,
                                                             swizzle=sw), 0, 1024),
                                     ((0, r), (0, ex.K))), k_instr=16)
           for r, mj in ((ex.M, am), (N, bm))]
    ors = [int(ln.rstrip(";").split(", ")[-1]) for ln in lines if ln.startswith("or.b64")]
    assert ors == [op.template("sm_90a") for op in ops]
    adds = [int(x) for x in re.findall(r"add\.u64 %rd\d+, %rd\d+, (\d+);", ptx)]
    assert adds == [o >> 4 for sa, sb in zip(ops[0].step_offsets[1:], ops[1].step_offsets[1:])
                    for o in (sa, sb)]


def test_wgmma_is_rejected_on_sm100a():
    with pytest.raises(ArchError, match=r"needs one of sm_90a; the target is sm_100a"):
        ex.kernel_for(64, "128B", "K", "K").ptx("sm_100a")


@pytest.mark.parametrize("N", [8, 64, 256])
def test_accumulator_fragment_covers_d_once(N):
    seen = np.zeros((64, N), dtype=np.int64)
    for t in range(128):
        for j in range(N // 2):
            r, c = ex.fragment(t, j)
            seen[r, c] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize("sw", ex.SWIZZLES)
@pytest.mark.parametrize("major", ["K", "MN"])
def test_expected_dump_is_where_the_layout_stores(sw, major):
    """The kernel stores A[r, k] at the tile's layout offset; the host check expects the
    canonical offset: the two must agree, else a dump mismatch would be the test's fault."""
    rows = 64
    lay = canonical_layout(rows, ex.K, "bfloat16", major=major, swizzle=sw)
    bits = np.arange(rows * ex.K, dtype=np.uint16).reshape(rows, ex.K)
    placed = np.zeros(rows * ex.K, dtype=np.uint16)
    for r in range(rows):
        for k in range(ex.K):
            placed[lay.apply(r, k, shape=(rows, ex.K))["m"]] = bits[r, k]
    assert np.array_equal(placed, ex.expected_dump(bits, major, sw))


def test_bf16_rounding():
    x = np.array([1.0, -2.5, 1.00390625, 1.01171875, 3.0e38], dtype=np.float32)
    b = ex.bf16_bits(x)
    assert list(b[:2]) == [0x3F80, 0xC020]
    assert ex.bf16_value(b)[2] == np.float32(1.0)            # tie to even
    assert ex.bf16_value(b)[3] == np.float32(1.015625)
    a, bb, ref = ex.inputs(64, seed=3)
    assert a.shape == (64, 64) and bb.shape == (64, 64) and ref.dtype == np.float32
