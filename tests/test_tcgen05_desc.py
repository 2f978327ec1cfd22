"""Descriptors derived from buffer layouts (ptxgen.primitives.tcgen05.desc).

The check that matters: decode every derived descriptor and recompute, with an independent
model of the PTX ISA address formulas (written here, not imported), the shared-memory byte
the MMA reads for each (row, k) of each K step; it must be the byte the buffer's own layout
put that element at.  Plus the worked example, every swizzle x major x dtype on sm_90 and
sm_100, and the build-time rejections with their rules.
"""
import pytest

from ptxgen.dtypes import dtype
from ptxgen.errors import LayoutError
from ptxgen.ir import Buffer, BufferRegion, Var
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout
from ptxgen.primitives.mma_desc import decode_smem_desc
from ptxgen.primitives.tcgen05.desc import canonical_layout, smem_operand

SWZ = ("none", "32B", "64B", "128B")
SPAN = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
DTYPES = {"bfloat16": 16, "float16": 16, "float32": 32, "float8_e4m3fn": 8}


def buf(shape, dt, layout, align=1024, elem_offset=0, scope="shared"):
    return Buffer("t", tuple(shape), dtype(dt), scope, layout, elem_offset, align)


def region(b, *reg):
    return BufferRegion(b, tuple(reg) if reg else tuple((0, e) for e in b.shape))


def swz(addr, sw):
    b = {"none": 0, "32B": 1, "64B": 2, "128B": 3}[sw]
    return addr ^ ((addr >> 3) & (((1 << b) - 1) << 4))


def hw_byte(d, major, nbytes, row, kk):
    """Byte the MMA reads for (row, kk) of one instruction, from decoded descriptor fields d
    (PTX ISA 'Shared Memory Matrix Layout' / 'Canonical Layouts'), swizzled on the address."""
    s, sw, lbo, sbo = d["start_addr"], d["swizzle"], d["lbo"], d["sbo"]
    kb = kk * nbytes
    if major == "K" and sw == "none":      # core matrices 8 rows x 16 B; LBO along K, SBO along M
        return s + (row // 8) * sbo + (kb // 16) * lbo + (row % 8) * 16 + kb % 16
    if major == "K":                       # 8-row groups at SBO; rows of S bytes; K inside
        return swz(s + (row // 8) * sbo + (row % 8) * SPAN[sw] + kb, sw)
    rb = row * nbytes
    if sw == "none":                       # 16 B of M/N per core-matrix row; SBO along M, LBO K
        return s + (rb // 16) * sbo + (kk // 8) * lbo + (kk % 8) * 16 + rb % 16
    return swz(s + (rb // SPAN[sw]) * lbo + (kk // 8) * sbo + (kk % 8) * SPAN[sw]
               + rb % SPAN[sw], sw)


def check_reads(op, b, base_addr, arch):
    nbytes = op.dtype.bits // 8
    lay = b.layout
    for i in range(op.n_steps):
        d = decode_smem_desc(op.value(base_addr, i, arch), arch)
        for row in range(op.rows):
            for kk in range(op.k_instr):
                k = op.region.starts[-1] + i * op.k_instr + kk
                r = op.region.starts[-2] + row
                want = base_addr + lay.apply(*op.base_index[:-2], r, k, shape=b.shape)["m"] * \
                    nbytes - lay.apply(*op.base_index, shape=b.shape)["m"] * nbytes
                assert hw_byte(d, op.major, nbytes, row, kk) == want, (i, row, kk)


# ---------------------------------------------------------------- worked example (reference §8)
@pytest.mark.parametrize("addr", [0, 0x400, 0x2000])
def test_worked_example_from_a_pool_tile_layout(addr):
    from ptxgen.alloc.swizzle import mma_layout

    b = buf((128, 64), "bfloat16", mma_layout((128, 64), "bfloat16", "128B"))
    op = smem_operand(region(b), k_instr=16)
    assert (op.major, op.swizzle, op.lbo, op.sbo) == ("K", "128B", 16, 1024)
    assert op.step_offsets == [0, 32, 64, 96]           # +32 B inside the SW128 atom
    assert op.value(addr, 0, "sm_90a") == 0x4000004000010000 | addr >> 4
    assert op.value(addr, 0, "sm_100a") == 0x4000404000010000 | addr >> 4
    assert op.value(addr, 1, "sm_100a") == 0x4000404000010000 | (addr + 32) >> 4


# ---------------------------------------------------------------- every swizzle x major x dtype
@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("sw", SWZ)
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_descriptor_reads_the_buffer(major, sw, dt, arch):
    bits = DTYPES[dt]
    rows, k = 128, 1024 // bits               # 128 B of K and of rows: >= 1 atom either way
    b = buf((rows, k), dt, canonical_layout(rows, k, dt, major=major, swizzle=sw))
    op = smem_operand(region(b), k_instr=256 // bits)
    assert (op.major, op.swizzle) == (major, sw)
    t = op.template(arch)
    assert t >> 46 & 1 == (arch == "sm_100a")
    code = (t >> 61) if arch == "sm_100a" else (t >> 62)
    assert code == {"sm_90a": {"none": 0, "32B": 3, "64B": 2, "128B": 1},
                    "sm_100a": {"none": 0, "32B": 6, "64B": 4, "128B": 2}}[arch][sw]
    check_reads(op, b, 0x2000, arch)


@pytest.mark.parametrize("order", ["mn", "k"])
@pytest.mark.parametrize("major,sw", [("K", "128B"), ("K", "none"), ("MN", "64B"), ("MN", "none")])
def test_both_atom_orders_and_several_atoms(order, major, sw):
    b = buf((128, 128), "bfloat16",
            canonical_layout(128, 128, "bfloat16", major=major, swizzle=sw, atom_order=order))
    op = smem_operand(region(b), k_instr=16)
    check_reads(op, b, 0, "sm_100a")


def test_sub_region_and_symbolic_stage():
    """A K slice of one stage of a (stages, rows, K) tile: physical LBO/SBO, steps from k0."""
    from ptxgen.alloc.swizzle import mma_layout

    b = buf((4, 128, 128), "bfloat16", mma_layout((4, 128, 128), "bfloat16", "128B"))
    s = Var("s")
    op = smem_operand(region(b, (s, 1), (0, 128), (64, 32)), k_instr=16)
    assert op.sbo == 2048 and op.lead_terms == [(s, 32768)]
    assert op.step_offsets == [1024, 1056]              # second 64-wide atom along K
    op2 = smem_operand(region(b, (2, 1), (0, 128), (0, 128)), k_instr=16)
    check_reads(op2, b, 0, "sm_100a")


def test_alloc_tcgen05_mma_AB_layouts_all_derive():
    from ptxgen.alloc.swizzle import mma_layout

    for shape, dt, mode in [((128, 64), "bfloat16", "128B"), ((256, 32), "float16", "64B"),
                            ((64, 8), "float32", "32B"), ((128, 16), "bfloat16", "none"),
                            ((2, 128, 128), "float8_e4m3fn", "128B")]:
        b = buf(shape, dt, mma_layout(shape, dt, mode))
        op = smem_operand(region(b, *((0, 1),) * (len(shape) - 2), (0, shape[-2]),
                                 (0, shape[-1])), k_instr=256 // DTYPES[dt])
        assert op.swizzle == mode and op.major == "K"
        check_reads(op, b, 0, "sm_100a")


# ---------------------------------------------------------------- rejections, with the rule
def test_reject_swizzle_not_matching_compose_layout():
    from ptxgen.alloc.swizzle import mma_layout

    b = buf((128, 64), "bfloat16", mma_layout((128, 64), "bfloat16", "128B"))
    with pytest.raises(LayoutError, match=r"swizzle='64B' is declared but the buffer's "
                       r"ComposeLayout swizzles 128B \(rule: the descriptor's swizzle must match"):
        smem_operand(region(b), k_instr=16, swizzle="64B")


def test_reject_unswizzled_layout_with_declared_swizzle():
    b = buf((128, 64), "bfloat16", None)
    with pytest.raises(LayoutError, match=r"swizzle='128B' is declared but the buffer's layout "
                       r"is not swizzled"):
        smem_operand(region(b), k_instr=16, swizzle="128B")


def test_reject_neither_k_nor_mn_major():
    b = buf((128, 64), "bfloat16", None)                   # plain row-major: 128-B rows
    with pytest.raises(LayoutError, match=r"neither K-major- nor MN-major-compatible .*"
                       r"PTX ISA 'Canonical Layouts'.*K-major: .*first mismatch at "
                       r"\(row=0, k=8\).*MN-major: "):
        smem_operand(region(b), k_instr=16)


def test_reject_declared_major_that_does_not_match():
    b = buf((64, 64), "bfloat16", canonical_layout(64, 64, "bfloat16", major="MN",
                                                   swizzle="128B"))
    with pytest.raises(LayoutError, match=r"is not K-major-compatible"):
        smem_operand(region(b), k_instr=16, major="K")


@pytest.mark.parametrize("reg,what", [(((0, 128), (0, 24)), "K extent 24"),
                                      (((0, 128), (8, 16)), "K start 8")])
def test_reject_k_step_misalignment(reg, what):
    from ptxgen.alloc.swizzle import mma_layout

    b = buf((128, 64), "bfloat16", mma_layout((128, 64), "bfloat16", "128B"))
    with pytest.raises(LayoutError, match=rf"K-step misalignment: {what} is not a multiple of "
                       rf"the instruction K = 16"):
        smem_operand(region(b, *reg), k_instr=16)


def test_reject_tile_off_the_swizzle_repeat():
    from ptxgen.alloc.swizzle import mma_layout

    b = buf((128, 64), "bfloat16", mma_layout((128, 64), "bfloat16", "128B"), elem_offset=256)
    with pytest.raises(LayoutError, match=r"does not start on the 1024-B repeat of the 128B "
                       r"swizzle \(512\) \(rule: PTX ISA Table 41"):
        smem_operand(region(b), k_instr=16)
    b = buf((128, 64), "bfloat16", mma_layout((128, 64), "bfloat16", "128B"), align=128)
    with pytest.raises(LayoutError, match=r"storage aligned to 128"):
        smem_operand(region(b), k_instr=16)


def test_reject_non_mma_swizzle():
    lay = ComposeLayout(Swizzle(3, 4, 3), TileLayout(S[(128, 64):(64, 1)]))   # fp8's, on bf16
    b = buf((128, 64), "bfloat16", lay)
    with pytest.raises(LayoutError, match=r"not an MMA swizzle for 16-bit elements"):
        smem_operand(region(b), k_instr=16)


def test_reject_symbolic_stage_not_on_the_repeat():
    lay = canonical_layout(8, 64, "bfloat16", major="K", swizzle="128B")
    inner = TileLayout(S[(3, 8, 64):(768, 64, 1)])                   # stages 1536 B apart
    b = buf((3, 8, 64), "bfloat16", ComposeLayout(lay.swizzle, inner))
    with pytest.raises(LayoutError, match=r"leading dim 0 moves 1536 bytes per index"):
        smem_operand(region(b, (Var("s"), 1), (0, 8), (0, 64)), k_instr=16)


def test_reject_global_and_partial_rows():
    b = buf((128, 64), "bfloat16", None, scope="global")
    with pytest.raises(LayoutError, match=r"in global memory; a matrix descriptor addresses "
                       r"shared memory"):
        smem_operand(region(b), k_instr=16)
    b = buf((128, 64), "bfloat16", canonical_layout(128, 64, "bfloat16", swizzle="128B"))
    with pytest.raises(LayoutError, match=r"rows 4:20 do not cover whole 8-row units"):
        smem_operand(region(b, (4, 16), (0, 64)), k_instr=16)


@pytest.mark.parametrize("major,sw,rows", [("K", "128B", (64, 64)), ("MN", "64B", (32, 96)),
                                           ("K", "none", (8, 16)), ("MN", "none", (64, 64))])
def test_row_block_of_a_larger_tile(major, sw, rows):
    b = buf((128, 64), "bfloat16", canonical_layout(128, 64, "bfloat16", major=major,
                                                    swizzle=sw))
    op = smem_operand(region(b, rows, (16, 32)), k_instr=16)
    assert op.rows == rows[1] and op.n_steps == 2
    check_reads(op, b, 0x4000, "sm_100a")
