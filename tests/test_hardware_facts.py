"""Hardware facts live in one table each: arch gates and TMA's 16-byte unit in
target/table.py (the primitives ask has_opcode, never an SM number), dtype spellings and
tensor-map types in dtypes.py, swizzle spans in layout's MMA_SWIZZLES; what reads them gets
the values the hardware has."""
import os
import re

import pytest

from ptxgen.dtypes import ALL_SCALARS, E2M1X2, dtype, tensor_map_bytes
from ptxgen.target import MIN_PTX, arch_specific, has_opcode, parse_target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_primitives_compare_no_sm_numbers():
    """`target.sm < 80` beside a gate of the same instruction is a second copy of the fact."""
    hits = []
    for d, _, files in os.walk(os.path.join(ROOT, "ptxgen", "primitives")):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(d, f)) as fh:
                    for n, line in enumerate(fh, 1):
                        if re.search(r"\.sm [<>=]", line):
                            hits.append(f"{f}:{n}: {line.strip()}")
    assert hits == []


@pytest.mark.parametrize("opcode,min_sm", [
    ("cp.async", 80), ("cp.async.bulk", 90), ("cp.async.bulk.commit_group", 90),
    ("cp.async.bulk.wait_group", 90), ("redux.sync", 80), ("cvt.rn.f16x2.f32", 80),
    ("cvt.rn.bf16x2.f32", 80),
])
def test_gates_the_primitives_ask_are_the_sm_thresholds(opcode, min_sm):
    for arch in MIN_PTX:
        t = parse_target(arch)
        assert has_opcode(opcode, t) == (t.sm >= min_sm), (opcode, arch)


@pytest.mark.parametrize("arch,same_gpu", [
    ("sm_100", "sm_100a"), ("sm_90", "sm_90a"), ("sm_90a", "sm_90a"), ("sm_80", "sm_80"),
    ("sm_120", "sm_120a"), ("sm_100f", "sm_100a"),
])
def test_arch_specific_is_the_a_target_of_the_same_sm(arch, same_gpu):
    assert arch_specific(parse_target(arch)).arch == same_gpu


def test_operand_spellings():
    spell = {n: dtype(n).ptx.spell for n in ALL_SCALARS}
    assert spell == {
        "bool": None, "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
        "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16",
        "bfloat16": "bf16", "float32": "f32", "float64": "f64", "float8_e4m3fn": "e4m3",
        "float8_e5m2": "e5m2", "float4_e2m1fn": "e2m1"}
    assert E2M1X2.ptx.spell == "e2m1x2"
    assert dtype("bfloat16x2").ptx.spell == "bf16"      # a vector spells its lanes
    # floats compute in the type instructions name them by
    assert all(dtype(n).ptx.arith == s for n, s in spell.items() if dtype(n).is_float)


def test_operand_spellings_reach_the_instructions():
    from ptxgen.primitives.instr_desc import wgmma_shape
    from ptxgen.primitives.tilemath.cast import pair_type
    from ptxgen.target.forms import opcode

    assert wgmma_shape(N=64, dtype="float8_e4m3fn", b_dtype="float8_e5m2") == \
        ("m64n64k32", "f32.e4m3.e5m2")
    assert wgmma_shape(N=8, dtype="float32") == ("m64n8k8", "f32.tf32.tf32")
    assert wgmma_shape(N=16, dtype="bfloat16") == ("m64n16k16", "f32.bf16.bf16")
    assert [pair_type(n) for n in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
                                   "float16", "bfloat16")] == \
        ["e4m3x2", "e5m2x2", "e2m1x2", "f16x2", "bf16x2"]
    assert opcode("mma_sync", "m16n8k32", "s32", "s8", "u8", "s32") == \
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32"


def test_tensor_map_types():
    from ptxgen.primitives.async_copy import DATA_TYPES

    assert DATA_TYPES == {
        "bool": "UINT8", "int8": "UINT8", "int16": "UINT16", "int32": "INT32",
        "int64": "INT64", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
        "uint64": "UINT64", "float16": "FLOAT16", "bfloat16": "BFLOAT16",
        "float32": "FLOAT32", "float64": "FLOAT64", "float8_e4m3fn": "UINT8",
        "float8_e5m2": "UINT8"}
    assert {t: tensor_map_bytes(t) for t in sorted(set(DATA_TYPES.values()))} == {
        "BFLOAT16": 2, "FLOAT16": 2, "FLOAT32": 4, "FLOAT64": 8, "INT32": 4, "INT64": 8,
        "UINT16": 2, "UINT32": 4, "UINT64": 8, "UINT8": 1}
    assert tensor_map_bytes("FLOAT16_RZ") is None


def test_tensor_map_swizzles_read_the_swizzle_table():
    from ptxgen.primitives.async_copy.tmap import MODE_BYTES, REPEAT
    from ptxgen.runtime.tensormap import SWIZZLE_BYTES

    assert SWIZZLE_BYTES == MODE_BYTES == {"none": 0, "32B": 32, "64B": 64, "128B": 128}
    assert REPEAT == {"none": 16, "32B": 256, "64B": 512, "128B": 1024}


def test_an_unknown_tensor_map_type_is_a_launch_error():
    from ptxgen.errors import LaunchError
    from ptxgen.primitives.async_copy.tmap import TensorMapSpec
    from ptxgen.runtime.tensormap import encode_args

    spec = TensorMapSpec("A", "float32", "FLOAT16_RZ", (64,), (), (64,), "none")
    with pytest.raises(LaunchError, match="unknown tensor-map data type FLOAT16_RZ"):
        encode_args(spec, 1 << 20, {})
    ok = TensorMapSpec("A", "float16", "FLOAT16", (64, 64), ((128,),), (64, 8), "128B")
    args = encode_args(ok, 1 << 20, {})
    assert args["globalStrides"] == [128] and args["swizzle"] == "128B"


def test_tma_unit_is_read_from_the_target_table():
    """TMA's 16-byte unit (and its box limit) is one fact: the code that checks or pads for it
    names TMA_ALIGN / TMA_MAX_BOX instead of repeating the number."""
    files = ["ptxgen/runtime/tensormap.py", "ptxgen/primitives/async_copy/tmap.py",
             "ptxgen/primitives/async_copy/bulk.py", "ptxgen/kernels/_torch.py",
             "ptxgen/kernels/gemm.py", "ptxgen/kernels/gemm_small_m.py",
             "ptxgen/kernels/gemm_blockscaled.py", "ptxgen/kernels/attention.py"]
    hits = []
    for f in files:
        with open(os.path.join(ROOT, f)) as fh:
            for n, line in enumerate(fh, 1):
                code = line.split("#")[0]
                if re.search(r"% 16\b|// 16\b", code):
                    hits.append(f"{f}:{n}: {line.strip()}")
    assert hits == []


def test_vector_width_is_read_from_the_target_table():
    """The 16-byte vector access is one fact (VECTOR_BITS): the row kernels size their vectors
    and test their tensors' alignment by it, never by a literal."""
    import importlib

    from ptxgen.target import VECTOR_BITS

    rmsnorm = importlib.import_module("ptxgen.kernels.rmsnorm")   # the module, not the op
    assert VECTOR_BITS == 128 and rmsnorm.VEC_BYTES == 16
    assert [rmsnorm.plan(4096, bits=b)[0] for b in (16, 32)] == [8, 4]
    assert rmsnorm.plan(4100, bits=16)[0] == 4        # the widest vector that divides a row
    hits = []
    for f in ("ptxgen/kernels/rmsnorm.py", "ptxgen/kernels/softmax.py"):
        with open(os.path.join(ROOT, f)) as fh:
            for n, line in enumerate(fh, 1):
                if re.search(r"% 16\b|\b128 //", line.split("#")[0]):
                    hits.append(f"{f}:{n}: {line.strip()}")
    assert hits == []


@pytest.mark.parametrize("stride,box,ok", [
    (16, (64, 8), True), (8, (64, 8), False), (24, (64, 8), False), (48, (16, 256), True),
    (48, (16, 257), False),
])
def test_tensor_map_launch_checks_follow_the_tma_unit(stride, box, ok):
    """A byte stride must be a whole number of TMA units and a box at most TMA_MAX_BOX."""
    from ptxgen.errors import LaunchError
    from ptxgen.primitives.async_copy.tmap import TensorMapSpec
    from ptxgen.runtime.tensormap import encode_args
    from ptxgen.target import TMA_ALIGN, TMA_MAX_BOX

    assert (TMA_ALIGN, TMA_MAX_BOX) == (16, 256)
    spec = TensorMapSpec("A", "uint8", "UINT8", (256, 512), ((stride,),), box, "none")
    if ok:
        assert encode_args(spec, 1 << 20, {})["globalStrides"] == [stride]
    else:
        with pytest.raises(LaunchError, match=r"multiples of 16 below 2\^40|outside \[1, 256\]"):
            encode_args(spec, 1 << 20, {})
