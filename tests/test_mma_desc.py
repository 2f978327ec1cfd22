"""Exact-integer tests for the wgmma / tcgen05 descriptor encoders (ptxgen.primitives.mma_desc)."""
import itertools

import pytest
from hypothesis import given, strategies as st

from ptxgen.errors import ArchError, LayoutError, PtxgenError
from ptxgen.primitives.instr_desc import decode_instr_desc, encode_instr_desc, mma_k, wgmma_shape
from ptxgen.primitives.mma_desc import (
    SmemDescriptor, apply_swizzle, canonical_offset, check_layout_matches, decode_smem_desc,
    desc_template, encode_smem_desc, k_step_offsets, mma_operand_desc_params, smem_base_offset)

SWZ = ("none", "32B", "64B", "128B")
ROW_BYTES = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
REPEAT = {"none": 16, "32B": 256, "64B": 512, "128B": 1024}
CUTE_B = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


# ------------------------------------------------------------------ worked examples (reference §7, §8)
@pytest.mark.parametrize("addr", [0, 0x400, 0x2000, 0x3FC00])
def test_smem_desc_worked_example(addr):
    kw = dict(lbo=16, sbo=1024, swizzle="128B")
    assert encode_smem_desc(start_addr=addr, arch="sm_90a", **kw) == 0x4000004000010000 | addr >> 4
    assert encode_smem_desc(start_addr=addr, arch="sm_100a", **kw) == 0x4000404000010000 | addr >> 4
    assert desc_template(arch="sm_90a", **kw) == 0x4000004000010000
    assert desc_template(arch="sm_100a", **kw) == 0x4000404000010000


def test_worked_example_comes_from_the_canonical_layout():
    lbo, sbo, _ = mma_operand_desc_params(major="K", swizzle="128B", elem_bits=16, rows=128, k_extent=64)
    assert (lbo, sbo) == (16, 1024)
    assert k_step_offsets("K", "128B", 16, 128, 64) == [0, 32, 64, 96]  # "+32 B inside the SW128 atom"


@pytest.mark.parametrize("kw,value", [
    (dict(M=128, N=128), 0x08200490),
    (dict(M=128, N=256), 0x08400490),
    (dict(M=64, N=64), 0x04100490),
    (dict(M=256, N=256, cta_group=2), 0x10400490),
])
def test_instr_desc_worked_examples(kw, value):
    assert encode_instr_desc(kind="f16", a_dtype="bf16", b_dtype="bf16", d_dtype="f32", **kw) == value


def test_instr_desc_tf32_example():
    assert encode_instr_desc(kind="kind::tf32", a_dtype="tf32", b_dtype="float32", d_dtype="float32",
                             M=128, N=128) == 0x08200910


def test_mma_k():
    assert (mma_k("f16"), mma_k("kind::tf32"), mma_k("f8f6f4")) == (16, 8, 32)


# ------------------------------------------------------------------ smem descriptor round trips
CASES = [(major, sw, bits) for major in ("K", "MN") for sw in SWZ for bits in (8, 16, 32)]


@pytest.mark.parametrize("major,sw,bits", CASES)
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_smem_desc_round_trip(major, sw, bits, arch):
    rows, kext = 128, 1024 // bits
    lbo, sbo, _ = mma_operand_desc_params(major=major, swizzle=sw, elem_bits=bits, rows=rows,
                                          k_extent=kext)
    for base in (0, 4096, 0x30000):
        for off in k_step_offsets(major, sw, bits, rows, kext):
            v = encode_smem_desc(start_addr=base + off, lbo=lbo, sbo=sbo, swizzle=sw, arch=arch)
            f = decode_smem_desc(v, arch)
            assert (f["start_addr"], f["lbo"], f["sbo"], f["swizzle"], f["base_offset"]) == \
                (base + off, lbo, sbo, sw, 0)
            assert v == desc_template(lbo=lbo, sbo=sbo, swizzle=sw, arch=arch) | ((base + off) >> 4)
            d = SmemDescriptor.decode(v, arch)
            assert d.encode() == v and d.template() | (d.start_addr >> 4) == v


@pytest.mark.parametrize("sw", SWZ)
def test_sm90_to_sm100_is_or_bit_46(sw):
    for lbo, sbo, addr in [(16, 1024, 0), (2048, 128, 0x1400), (8192, 1024, 0x8000), (0x3FFF0, 0x3FFF0, 0x3FC00)]:
        v90 = encode_smem_desc(start_addr=addr, lbo=lbo, sbo=sbo, swizzle=sw, arch="sm_90a")
        v100 = encode_smem_desc(start_addr=addr, lbo=lbo, sbo=sbo, swizzle=sw, arch="sm_100a")
        assert v100 == v90 | (1 << 46)


def test_swizzle_codes():
    codes90 = {sw: desc_template(lbo=0, sbo=0, swizzle=sw, arch="sm_90a") >> 62 for sw in SWZ}
    codes100 = {sw: desc_template(lbo=0, sbo=0, swizzle=sw, arch="sm_100a") >> 61 for sw in SWZ}
    assert codes90 == {"none": 0, "128B": 1, "64B": 2, "32B": 3}
    assert codes100 == {"none": 0, "128B": 2, "64B": 4, "32B": 6}
    assert desc_template(lbo=0, sbo=0, swizzle="128B_base32B", arch="sm_100a") == (1 << 61) | (1 << 46)


@given(addr=st.integers(0, (1 << 14) - 1), lbo=st.integers(0, 0x3FFF), sbo=st.integers(0, 0x3FFF),
       sw=st.sampled_from(SWZ + ("128B_base32B",)), arch=st.sampled_from(["sm_90a", "sm_100a", "sm_103a"]),
       absolute=st.booleans())
def test_smem_desc_field_round_trip(addr, lbo, sbo, sw, arch, absolute):
    if arch == "sm_90a" and sw == "128B_base32B":
        return
    mode = "absolute" if absolute and arch == "sm_103a" else "relative"
    start = (addr << 4) - (addr << 4) % REPEAT.get(sw, 1024)  # repeat-aligned: base_offset 0
    v = encode_smem_desc(start_addr=start, lbo=lbo << 4, sbo=sbo << 4, swizzle=sw, arch=arch, lbo_mode=mode)
    assert v & 0x3FFF == start >> 4 and (v >> 16) & 0x3FFF == lbo and (v >> 32) & 0x3FFF == sbo
    f = decode_smem_desc(v, arch)
    assert f["lbo_mode"] == mode and f["swizzle"] == sw
    assert encode_smem_desc(start_addr=f["start_addr"], lbo=f["lbo"], sbo=f["sbo"], swizzle=f["swizzle"],
                            arch=arch, base_offset=f["base_offset"], lbo_mode=mode) == v


def test_base_offset():
    # tile starting 256 B into a 1024-B repeat: base_offset = (start >> 7) & 7 = 2
    assert smem_base_offset(0x1100, "128B") == 2 and smem_base_offset(0x1000, "128B") == 0
    v = encode_smem_desc(start_addr=0x1100, lbo=16, sbo=1024, swizzle="128B", arch="sm_100a", base_offset=2)
    assert (v >> 49) & 7 == 2 and decode_smem_desc(v, "sm_100a")["base_offset"] == 2
    # K advance inside the first row keeps the pattern start, so base_offset stays 0
    assert (encode_smem_desc(start_addr=0x1060, lbo=16, sbo=1024, swizzle="128B", arch="sm_90a") >> 49) & 7 == 0
    with pytest.raises(PtxgenError, match="repeat boundary"):
        encode_smem_desc(start_addr=0x1100, lbo=16, sbo=1024, swizzle="128B", arch="sm_90a")
    with pytest.raises(PtxgenError, match="repeat boundary"):
        encode_smem_desc(start_addr=0x1100, lbo=16, sbo=1024, swizzle="128B", arch="sm_90a", base_offset=3)
    with pytest.raises(PtxgenError, match="first row"):
        encode_smem_desc(start_addr=0x1000, lbo=16, sbo=1024, swizzle="128B", arch="sm_90a", base_offset=1)
    with pytest.raises(PtxgenError, match="except no-swizzle"):
        desc_template(lbo=16, sbo=128, swizzle="none", arch="sm_90a", base_offset=1)
    with pytest.raises(PtxgenError, match="0..7"):
        desc_template(lbo=16, sbo=128, swizzle="64B", arch="sm_90a", base_offset=8)


@pytest.mark.parametrize("kw,match", [
    (dict(start_addr=8), "16-byte aligned"),
    (dict(lbo=24), "16-byte aligned"),
    (dict(sbo=1 << 18), "14-bit field"),
    (dict(lbo=-16), "non-negative"),
    (dict(start_addr=1 << 18), "256 KiB"),
    (dict(swizzle="96B"), "unknown swizzle"),
])
def test_smem_desc_rejects(kw, match):
    args = dict(start_addr=0, lbo=16, sbo=1024, swizzle="128B", arch="sm_100a") | kw
    with pytest.raises(PtxgenError, match=match):
        encode_smem_desc(**args)


def test_smem_desc_arch_rules():
    with pytest.raises(ArchError, match="tcgen05"):
        desc_template(lbo=16, sbo=1024, swizzle="128B_base32B", arch="sm_90a")
    with pytest.raises(ArchError, match="sm_103a"):
        desc_template(lbo=16, sbo=1024, swizzle="128B", arch="sm_100a", lbo_mode="absolute")
    assert desc_template(lbo=16, sbo=1024, swizzle="128B", arch="sm_103a", lbo_mode="absolute") >> 52 & 1
    with pytest.raises(ArchError):
        desc_template(lbo=16, sbo=1024, swizzle="128B", arch="sm_80")
    assert desc_template(lbo=16, sbo=1024, swizzle="128B", arch=100) == 0x4000404000010000


def test_decode_rejects_bad_bits():
    v90 = 0x4000004000010000
    with pytest.raises(PtxgenError, match="0b001"):
        decode_smem_desc(v90, "sm_100a")
    with pytest.raises(PtxgenError, match="sm_100 descriptor"):
        decode_smem_desc(v90 | 1 << 46, "sm_90a")
    with pytest.raises(PtxgenError, match="reserved bits 14-15"):
        decode_smem_desc(v90 | 1 << 14, "sm_90a")
    for code in (3, 5, 7):
        with pytest.raises(PtxgenError, match="invalid"):
            decode_smem_desc((code << 61) | (1 << 46), "sm_100a")


# ------------------------------------------------------------------ canonical layouts
def isa_layout(major, sw, bits, lbo, sbo, row, k):
    """The PTX ISA 'Canonical Layouts' table, written out in bytes (T = 128 / bits)."""
    T, e, S = 128 // bits, bits // 8, ROW_BYTES[sw]
    if major == "K" and sw == "none":   # ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
        return (row % 8) * 16 + (row // 8) * sbo + (k % T) * e + (k // T) * lbo
    if major == "K":                    # ((8,m),(T,2k)) : ((S/16 T,SBO),(1,T))
        return (row % 8) * S + (row // 8) * sbo + (k % T) * e + (k // T) * 16
    if sw == "none":                    # ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
        return (row % T) * e + (row // T) * sbo + (k % 8) * 16 + (k // 8) * lbo
    # ((T,S/16,m),(8,k)) : ((1,T,LBO),(S/16 T,SBO))
    return (row % T) * e + ((row // T) % (S // 16)) * 16 + (row // (T * S // 16)) * lbo + \
        (k % 8) * S + (k // 8) * sbo


def cute_swizzle(o, sw):
    b = CUTE_B[sw]
    return o ^ ((o & (((1 << b) - 1) << 7)) >> 3)   # CuTe form: (o & yyy_msk) >> S


GEOMS = [(major, sw, bits, rows, kext, order)
         for major in ("K", "MN") for sw in SWZ for bits in (8, 16, 32)
         for rows, kext in ((128, 1024 // bits), (256, 2048 // bits)) for order in ("mn", "k")]


@pytest.mark.parametrize("major,sw,bits,rows,kext,order", GEOMS)
def test_descriptor_plus_k_steps_reproduce_the_tile(major, sw, bits, rows, kext, order):
    """start(step) + ISA canonical layout(LBO, SBO), swizzled as a byte address == canonical_offset."""
    off = canonical_offset(major, sw, bits, rows, kext, order)
    lbo, sbo, _ = mma_operand_desc_params(major=major, swizzle=sw, elem_bits=bits, rows=rows,
                                          k_extent=kext, atom_order=order)
    kin = 256 // bits
    for step, start in enumerate(k_step_offsets(major, sw, bits, rows, kext, order)):
        assert start % 16 == 0 and start == off(0, step * kin)
        for r in range(rows):
            for k in range(kin):
                lin = start + isa_layout(major, sw, bits, lbo, sbo, r, k)
                assert cute_swizzle(lin, sw) == off(r, step * kin + k), (step, r, k)


@pytest.mark.parametrize("major,sw,bits,rows,kext,order", GEOMS)
def test_canonical_offset_is_a_bijection_of_core_matrices(major, sw, bits, rows, kext, order):
    off = canonical_offset(major, sw, bits, rows, kext, order)
    e, T, S = bits // 8, 128 // bits, ROW_BYTES[sw]
    table = {(r, k): off(r, k) for r in range(rows) for k in range(kext)}
    assert sorted(table.values()) == list(range(0, rows * kext * e, e))   # bijective onto the span
    for (r, k), o in table.items():
        assert o == apply_swizzle(apply_swizzle(o, sw), sw)                 # swizzle is an involution
        assert apply_swizzle(o, sw) == cute_swizzle(o, sw)
    # 16-B chunks of T consecutive contiguous-dim elements stay whole and aligned; the 8 rows of a
    # core matrix sit S bytes apart before swizzling
    for r in range(0, rows, 8 if major == "K" else T):
        for k in range(0, kext, T if major == "K" else 8):
            lin = [apply_swizzle(table[(r + i, k) if major == "K" else (r, k + i)], sw) for i in range(8)]
            assert lin[0] % 16 == 0 and [x - lin[0] for x in lin] == [i * S for i in range(8)]
            for j in range(T):
                rr, kk = (r, k + j) if major == "K" else (r + j, k)
                assert table[(rr, kk)] - table[(r, k)] == j * e


def test_k_step_crosses_the_atom():
    # bf16 SW64 K-major, 128 rows, K=128: a 64-B row holds 2 K steps, then jump a whole unit column
    assert k_step_offsets("K", "64B", 16, 128, 128) == [0, 32, 8192, 8224, 16384, 16416, 24576, 24608]
    assert k_step_offsets("K", "32B", 16, 64, 64) == [0, 2048, 4096, 6144]
    assert k_step_offsets("K", "128B", 16, 64, 64, atom_order="k") == [0, 32, 64, 96]
    assert k_step_offsets("K", "128B", 8, 128, 256) == [0, 32, 64, 96, 16384, 16416, 16448, 16480]
    assert k_step_offsets("K", "none", 16, 128, 32) == [0, 4096]      # 2 core matrices = 2 * LBO
    assert k_step_offsets("MN", "128B", 16, 128, 64) == [0, 2048, 4096, 6144]  # 2 x SBO
    assert k_step_offsets("MN", "128B", 32, 128, 32) == [0, 1024, 2048, 3072]  # tf32 K=8: 1 x SBO


@pytest.mark.parametrize("major,sw,bits,rows,kext,order,lbo,sbo", [
    ("K", "128B", 16, 128, 64, "mn", 16, 1024),
    ("K", "64B", 16, 128, 64, "mn", 16, 512),
    ("K", "32B", 16, 128, 64, "mn", 16, 256),
    ("K", "128B", 16, 128, 128, "k", 16, 2048),
    ("K", "none", 16, 128, 64, "mn", 2048, 128),
    ("K", "none", 16, 128, 64, "k", 128, 1024),
    ("K", "none", 32, 16, 16, "mn", 256, 128),    # ISA tf32 example ((8,2),(4,4)):((4,32),(1,64))
    ("MN", "none", 16, 16, 16, "mn", 256, 128),   # ISA example: LBO 128*2 B, SBO 64*2 B
    ("MN", "32B", 16, 32, 16, "mn", 256, 512),    # ISA example: LBO 128*2 B, SBO 256*2 B
    ("MN", "64B", 16, 64, 16, "mn", 512, 1024),   # ISA example: LBO 256*2 B, SBO 512*2 B
    ("MN", "128B", 16, 128, 64, "k", 8192, 1024),  # ISA tcgen05 text: SBO 1024, LBO (K/8)*SBO
    ("MN", "none", 16, 128, 64, "k", 128, 1024),   # ... and LBO 128, SBO (K/8)*LBO (swapped)
])
def test_lbo_sbo_values(major, sw, bits, rows, kext, order, lbo, sbo):
    p = mma_operand_desc_params(major=major, swizzle=sw, elem_bits=bits, rows=rows, k_extent=kext,
                                atom_order=order)
    assert (p.lbo_bytes, p.sbo_bytes) == (lbo, sbo) and isinstance(p.notes, str)


@pytest.mark.parametrize("kw,match", [
    (dict(rows=60), "multiple of 8"),
    (dict(major="MN", rows=96), "multiple of 64"),
    (dict(k_extent=32), "narrower swizzle"),
    (dict(elem_bits=4), "8-, 16- or 32-bit"),
    (dict(major="T"), "'K' or 'MN'"),
    (dict(swizzle="128B_base32B"), "not modelled"),
    (dict(atom_order="x"), "'mn' or 'k'"),
])
def test_canonical_rejects(kw, match):
    args = dict(major="K", swizzle="128B", elem_bits=16, rows=128, k_extent=64) | kw
    with pytest.raises(PtxgenError, match=match):
        mma_operand_desc_params(**args)


def test_canonical_offset_rejects_out_of_range():
    with pytest.raises(LayoutError, match="outside"):
        canonical_offset("K", "128B", 16, 64, 64)(64, 0)


# ------------------------------------------------------------------ check_layout_matches
def as_elems(off, bits):
    return lambda r, k: off(r, k) * 8 // bits


def test_check_layout_matches_accepts_and_returns_params():
    fn = as_elems(canonical_offset("K", "128B", 16, 128, 64), 16)
    assert check_layout_matches(fn, major="K", swizzle="128B", elem_bits=16, rows=128,
                                k_extent=64)[:2] == (16, 1024)
    # the other unit order is accepted when atom_order is left open, with its own LBO/SBO
    fn = as_elems(canonical_offset("K", "none", 16, 64, 32, "k"), 16)
    assert check_layout_matches(fn, major="K", swizzle="none", elem_bits=16, rows=64,
                                k_extent=32)[:2] == (128, 512)
    with pytest.raises(LayoutError, match="units stacked along MN.*swizzle='none', atom_order='k'"):
        check_layout_matches(fn, major="K", swizzle="none", elem_bits=16, rows=64, k_extent=32,
                             atom_order="mn")


def test_check_layout_matches_suggests_swizzle():
    fn = as_elems(canonical_offset("K", "64B", 16, 64, 64), 16)
    with pytest.raises(LayoutError) as ei:
        check_layout_matches(fn, major="K", swizzle="128B", elem_bits=16, rows=64, k_extent=64)
    msg = str(ei.value)
    # rows 0 agree inside the first 64 B; the first 128B unit row continues where SW64 wraps
    assert "(row=0, k=32)" in msg and "swizzle='64B'" in msg and "Canonical Layouts" in msg


def test_check_layout_matches_row_major_buffer():
    # a plain row-major 64 x 64 bf16 tile (row pitch 128 B) is not canonical for any mode
    with pytest.raises(LayoutError, match=r"first mismatch at \(row=1, k=0\).*no other"):
        check_layout_matches(lambda r, k: r * 64 + k, major="K", swizzle="128B", elem_bits=16,
                             rows=64, k_extent=64)
    # an 8-row tile with a 128-B pitch is the *unswizzled* SW128 atom: row 1 is already permuted
    with pytest.raises(LayoutError, match="first mismatch at \\(row=1, k=0\\).*expects 144"):
        check_layout_matches(lambda r, k: r * 64 + k, major="K", swizzle="128B", elem_bits=16,
                             rows=8, k_extent=64)


def test_check_layout_matches_mn_major():
    fn = as_elems(canonical_offset("MN", "128B", 16, 128, 64), 16)
    p = check_layout_matches(fn, major="MN", swizzle="128B", elem_bits=16, rows=128, k_extent=64)
    assert (p.lbo_bytes, p.sbo_bytes) == (8192, 1024)
    with pytest.raises(LayoutError, match="major='MN', swizzle='128B'"):
        check_layout_matches(fn, major="K", swizzle="128B", elem_bits=16, rows=128, k_extent=64)


# ------------------------------------------------------------------ instruction descriptor
KIND_TYPES = {
    "f16": [("float16", "float16", "float16"), ("float16", "float16", "float32"),
            ("bfloat16", "bfloat16", "float32")],
    "tf32": [("tf32", "tf32", "float32")],
    "f8f6f4": [(a, b, d) for a in ("float8_e4m3fn", "float8_e5m2")
               for b in ("float8_e4m3fn", "float8_e5m2") for d in ("float16", "float32")],
}
CODES = {"float16": 0, "bfloat16": 1, "tf32": 2, "float8_e4m3fn": 0, "float8_e5m2": 1}
SHAPES = [(1, 64, n) for n in (8, 24, 64, 136, 256)] + [(1, 128, n) for n in (8, 16, 120, 256)] + \
         [(2, 128, n) for n in (16, 48, 256)] + [(2, 256, n) for n in (16, 128, 256)]
NEGS = ((False, False), (True, False), (False, True))
IDESC = [(kind, t, s, am, bm, neg) for kind, ts in KIND_TYPES.items() for t in ts for s in SHAPES
         for am, bm in itertools.product(("K", "MN"), repeat=2) for neg in NEGS]


@pytest.mark.parametrize("kind,types,shape,am,bm,neg", IDESC)
def test_instr_desc_table(kind, types, shape, am, bm, neg):
    (a, b, d), (cg, M, N) = types, shape
    v = encode_instr_desc(kind=kind, a_dtype=a, b_dtype=b, d_dtype=d, M=M, N=N, a_major=am,
                          b_major=bm, cta_group=cg, negate_a=neg[0], negate_b=neg[1])
    expect = ({"float16": 0, "float32": 1}[d] << 4 | CODES[a] << 7 | CODES[b] << 10 | neg[0] << 13
              | neg[1] << 14 | (am == "MN") << 15 | (bm == "MN") << 16 | (N >> 3) << 17 | (M >> 4) << 24)
    assert v == expect and v < 1 << 32
    f = decode_instr_desc(v, kind)
    assert (f["a_dtype"], f["b_dtype"], f["d_dtype"], f["M"], f["N"], f["a_major"], f["b_major"],
            f["negate_a"], f["negate_b"], f["sparse"], f["max_shift"]) == (a, b, d, M, N, am, bm, *neg, 0, 0)


BF16 = dict(kind="f16", a_dtype="bf16", b_dtype="bf16", d_dtype="f32", M=128, N=128)


@pytest.mark.parametrize("kw,match", [
    (dict(a_dtype="e4m3", b_dtype="e4m3"), r"kind::f16 does not take A = float8_e4m3fn.*kind::f8f6f4"),
    (dict(b_dtype="f16"), "same type"),
    (dict(d_dtype="f16"), "dtype for this pairing is float32"),
    (dict(kind="tf32", a_dtype="bf16", b_dtype="bf16"), "kind::tf32 does not take"),
    (dict(kind="tf32", a_dtype="tf32", b_dtype="tf32", d_dtype="f16"), "Table 39"),
    (dict(kind="f8f6f4", a_dtype="float4_e2m1fn", b_dtype="e4m3"), "kind::f8f6f4 does not take"),
    (dict(kind="f8f6f4", a_dtype="e4m3", b_dtype="e4m3", d_dtype="int32"), "Table 39"),
    (dict(kind="i8"), "unknown MMA kind"),
    (dict(M=256), r"M=256 is illegal for cta_group::1"),
    (dict(M=64, cta_group=2), r"M=64 is illegal for cta_group::2"),
    (dict(M=32), "Table 39"),
    (dict(N=4), r"multiple of 8 in \[8, 256\]"),
    (dict(N=264), r"multiple of 8 in \[8, 256\]"),
    (dict(N=100), "multiple of 8"),
    (dict(N=8, cta_group=2), r"multiple of 16 in \[16, 256\]"),
    (dict(N=40, cta_group=2), r"multiple of 16"),
    (dict(N=24, a_from_tmem=True), "CUTLASS A-from-TMEM rule"),
    (dict(N=48, M=256, cta_group=2, a_from_tmem=True), r"multiple of 32"),
    (dict(a_major="MN", a_from_tmem=True), "A in TMEM is K-major"),
    (dict(cta_group=4), "must be 1 or 2"),
    (dict(a_major="T"), "'K' or 'MN'"),
    (dict(kind="tf32", a_dtype="tf32", b_dtype="tf32", a_major="MN", a_swizzle="128B"),
     "128B_base32B"),
    (dict(b_major="MN", b_swizzle="128B_base32B"), "Table 42 note"),
])
def test_instr_desc_illegal(kw, match):
    with pytest.raises(PtxgenError, match=match) as ei:
        encode_instr_desc(**(BF16 | kw))
    msg = str(ei.value)
    assert "rule" in msg or "unknown" in msg or "must be" in msg


def test_instr_desc_legal_edge_cases():
    assert encode_instr_desc(**(BF16 | dict(M=64, N=8)))
    assert encode_instr_desc(**(BF16 | dict(M=128, N=16, a_from_tmem=True)))
    assert encode_instr_desc(kind="tf32", a_dtype="float32", b_dtype="tf32", d_dtype="f32", M=128,
                             N=64, a_major="MN", a_swizzle="128B_base32B") >> 15 & 1
    assert encode_instr_desc(**(BF16 | dict(a_major="MN", a_swizzle="128B"))) >> 15 & 1


def test_decode_instr_desc_rejects():
    with pytest.raises(PtxgenError, match="reserved bit 23"):
        decode_instr_desc(0x08200490 | 1 << 23, "f16")
    with pytest.raises(PtxgenError, match="a_dtype code 2"):
        decode_instr_desc(0x08200910, "f16")
    with pytest.raises(PtxgenError, match="32-bit"):
        decode_instr_desc(1 << 32, "f16")
    assert decode_instr_desc(0x08200910, "tf32")["a_dtype"] == "tf32"


# ------------------------------------------------------------------ wgmma shapes
@pytest.mark.parametrize("kw,out", [
    (dict(N=64, dtype="bf16"), ("m64n64k16", "f32.bf16.bf16")),
    (dict(N=8, dtype="f16", d_dtype="f16"), ("m64n8k16", "f16.f16.f16")),
    (dict(N=256, dtype="f16", a_major="MN", b_major="MN"), ("m64n256k16", "f32.f16.f16")),
    (dict(N=24, dtype="tf32"), ("m64n24k8", "f32.tf32.tf32")),
    (dict(N=128, dtype="float32"), ("m64n128k8", "f32.tf32.tf32")),
    (dict(N=128, dtype="e4m3", b_dtype="e5m2"), ("m64n128k32", "f32.e4m3.e5m2")),
    (dict(N=200, dtype="e5m2", d_dtype="f16"), ("m64n200k32", "f16.e5m2.e5m2")),
])
def test_wgmma_shape(kw, out):
    assert wgmma_shape(**kw) == out


@pytest.mark.parametrize("kw,match", [
    (dict(N=12), "multiple of 8"), (dict(N=264), "multiple of 8"), (dict(N=0), "multiple of 8"),
    (dict(M=128), "M = 64"),
    (dict(dtype="f16", b_dtype="bf16"), "A/B types"),
    (dict(dtype="e4m3", b_dtype="f16"), "A/B types"),
    (dict(dtype="int8"), "A/B types"),
    (dict(d_dtype="f16"), "accumulate"),
    (dict(dtype="tf32", d_dtype="f16"), "accumulate"),
    (dict(dtype="e4m3", b_major="MN"), "only supported for .f16/.bf16"),
    (dict(dtype="tf32", a_major="MN"), "only supported for .f16/.bf16"),
    (dict(a_major="MN", a_in_regs=True), "no imm-trans-a"),
])
def test_wgmma_shape_illegal(kw, match):
    with pytest.raises(PtxgenError, match=match):
        wgmma_shape(**(dict(N=64, dtype="bf16") | kw))


# ------------------------------------------------------------------ whole-tile (numpy) check
def _outcome(fn, **kw):
    try:
        return tuple(check_layout_matches(fn, **kw)[:2])
    except LayoutError as e:
        return str(e)


@pytest.mark.parametrize("have", [("K", "128B", "mn"), ("K", "none", "k"), ("MN", "64B", "k"),
                                  ("MN", "32B", "mn")])
@pytest.mark.parametrize("want", [("K", "128B"), ("K", "none"), ("MN", "64B"), ("K", "32B")])
def test_check_layout_matches_whole_tile_equals_per_element(have, want):
    """An array-generic offset function is checked on the whole tile in one numpy call; the
    verdict and the message must be exactly those of the element-by-element check."""
    from ptxgen.primitives import mma_desc

    c = mma_desc.canonical_plan(*have[:2], 16, 64, 64, have[2])
    vectorized = lambda r, k: mma_desc._offset(c, r, k) // 2           # noqa: E731
    per_element = lambda r, k: vectorized(int(r), int(k))               # noqa: E731
    kw = dict(major=want[0], swizzle=want[1], elem_bits=16, rows=64, k_extent=64)
    assert mma_desc._grid_values(vectorized, 64, 64) is not None
    assert mma_desc._grid_values(per_element, 64, 64) is None
    assert _outcome(vectorized, **kw) == _outcome(per_element, **kw)
