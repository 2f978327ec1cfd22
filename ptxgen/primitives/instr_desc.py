"""The tcgen05 instruction descriptor (32 bits, PTX ISA 9.7.16.4.2, Table 42) and the wgmma
instruction shapes: which kinds, formats, majors and N a tensor-core MMA takes.

Split from mma_desc.py (the shared-memory matrix descriptors and canonical layouts).  Like
those, these bits travel in a register or an opcode that ptxas checks only in part, so they
are computed and checked here, in pure Python, and tested bit by bit (tests/test_mma_desc.py).
"""
from __future__ import annotations

from ..dtypes import dtype as _dtype
from ..errors import PtxgenError
from .mma_desc import K_BITS, swizzle_mode

_TF32 = "tf32"
# kind -> (A/B format codes, D format codes, K per instruction (Table 39, dense))
_KINDS = {
    "f16": ({"float16": 0, "bfloat16": 1}, {"float16": 0, "float32": 1}, 16),
    "tf32": ({_TF32: 2}, {"float32": 1}, 8),
    "f8f6f4": ({"float8_e4m3fn": 0, "float8_e5m2": 1}, {"float16": 0, "float32": 1}, 32),
}
_KIND_OF = {name: k for k, (ab, _, _) in _KINDS.items() for name in ab}   # A/B type -> kind


def _dt_name(x, kind=None) -> str:
    if isinstance(x, str) and x.lower() == _TF32:
        return _TF32
    name = _dtype(x).name
    return _TF32 if (kind == "tf32" and name == "float32") else name


def mma_kind(a_dtype) -> str | None:
    """The MMA kind ('f16', 'tf32', 'f8f6f4') of an A/B operand type, float32 read as tf32;
    None if no kind takes it."""
    return _KIND_OF.get(_dt_name(a_dtype, "tf32"))


def _kind(kind) -> str:
    k = str(kind).removeprefix("kind::")
    if k not in _KINDS:
        raise PtxgenError(f"unknown MMA kind {kind!r}; supported: kind::f16, kind::tf32, "
                          f"kind::f8f6f4")
    return k


def mma_k(kind) -> int:
    """K of one dense tcgen05.mma: 16 (f16/bf16), 8 (tf32), 32 (f8f6f4) -- PTX ISA Table 39."""
    return _KINDS[_kind(kind)][2]


def _check_major(which: str, major) -> int:
    if major not in ("K", "MN"):
        raise PtxgenError(f"{which}_major={major!r} must be 'K' or 'MN'")
    return int(major == "MN")


def encode_instr_desc(*, kind, a_dtype, b_dtype, d_dtype, M: int, N: int, a_major="K",
                      b_major="K", cta_group: int = 1, negate_a: bool = False,
                      negate_b: bool = False, a_swizzle=None, b_swizzle=None,
                      a_from_tmem: bool = False) -> int:
    """32-bit tcgen05.mma instruction descriptor (dense, no .ws) with the ISA legality rules.

    Shapes (Table 39, "Matrix Shape"): cta_group::1 M in {64, 128}, N = 8..256 step 8;
    cta_group::2 M in {128, 256}, N = 16..256 step 16.  ``a_from_tmem`` adds CUTLASS's stricter
    rules for the A-in-TMEM form (M=128 -> N step 16, cta_group::2 -> N step 32, A K-major).
    Transpose (Table 42 notes): kind::tf32 MN-major only with swizzle 128B_base32B; other kinds
    never with 128B_base32B; checked when ``a_swizzle``/``b_swizzle`` are given.
    """
    k = _kind(kind)
    ab_codes, d_codes, _ = _KINDS[k]
    a, b, d = _dt_name(a_dtype, k), _dt_name(b_dtype, k), _dt_name(d_dtype)
    for which, name in (("A", a), ("B", b)):
        if name not in ab_codes:
            right = _KIND_OF.get(name)
            hint = f"; {name} belongs to kind::{right}" if right else ""
            raise PtxgenError(f"kind::{k} does not take {which} = {name} (rule: Table 42 formats "
                              f"for kind::{k} are {', '.join(ab_codes)}){hint}")
    if k == "f16" and a != b:
        raise PtxgenError(f"kind::f16 needs A and B of the same type, got {a} x {b} "
                          f"(rule: Table 39 pairs f16 x f16 or bf16 x bf16)")
    if d not in d_codes or (k == "f16" and d == "float16" and a != "float16"):
        allowed = "float32" if k == "tf32" or a == "bfloat16" else "float16 or float32"
        raise PtxgenError(f"kind::{k} with A/B {a} cannot accumulate into D = {d} (rule: Table 39 "
                          f"dtype for this pairing is {allowed})")
    if cta_group not in (1, 2):
        raise PtxgenError(f"cta_group={cta_group!r} must be 1 or 2")
    m_ok = (64, 128) if cta_group == 1 else (128, 256)
    if M not in m_ok:
        raise PtxgenError(f"M={M} is illegal for cta_group::{cta_group} "
                          f"(rule: Table 39 M in {m_ok})")
    step = 8 if cta_group == 1 else 16
    if a_from_tmem:
        step = 32 if cta_group == 2 else (16 if M == 128 else 8)
    if not (isinstance(N, int) and step <= N <= 256 and N % step == 0):
        src = "CUTLASS A-from-TMEM rule" if a_from_tmem else "Table 39"
        raise PtxgenError(f"N={N} is illegal for M={M}, cta_group::{cta_group} (rule: {src} N is a "
                          f"multiple of {step} in [{step}, 256])")
    ta, tb = _check_major("a", a_major), _check_major("b", b_major)
    if a_from_tmem and ta:
        raise PtxgenError("A from tensor memory cannot be MN-major (rule: A in TMEM is K-major)")
    for which, t, sw in (("A", ta, a_swizzle), ("B", tb, b_swizzle)):
        if not t or sw is None:
            continue
        sw = swizzle_mode(sw)
        if k == "tf32" and sw != "128B_base32B":
            raise PtxgenError(f"kind::tf32 MN-major {which} needs swizzle 128B_base32B, got {sw} "
                              f"(rule: Table 42 note, tf32 transpose only with 32B atomicity)")
        if k != "tf32" and sw == "128B_base32B":
            raise PtxgenError(f"kind::{k} MN-major {which} cannot use swizzle 128B_base32B (rule: "
                              f"Table 42 note)")
    return ((d_codes[d] << 4) | (ab_codes[a] << 7) | (ab_codes[b] << 10)
            | (int(bool(negate_a)) << 13) | (int(bool(negate_b)) << 14) | (ta << 15) | (tb << 16)
            | ((N >> 3) << 17) | ((M >> 4) << 24))


def decode_instr_desc(value: int, kind) -> dict:
    """Fields of a tcgen05 instruction descriptor, with dtype names for ``kind``."""
    k = _kind(kind)
    if not isinstance(value, int) or not 0 <= value < (1 << 32):
        raise PtxgenError(f"instruction descriptor {value!r} is not a 32-bit unsigned int")

    def bits(lo, n):
        return (value >> lo) & ((1 << n) - 1)

    for bit in (6, 23, 29):
        if bits(bit, 1):
            raise PtxgenError(f"instruction descriptor {value:#010x}: reserved bit {bit} is set")
    ab_codes, d_codes, _ = _KINDS[k]
    ab_names = {v: n for n, v in ab_codes.items()}
    d_names = {v: n for n, v in d_codes.items()}
    out = {"kind": k, "sparse_selector": bits(0, 2), "sparse": bits(2, 1), "saturate": bits(3, 1),
           "negate_a": bool(bits(13, 1)), "negate_b": bool(bits(14, 1)),
           "a_major": "MN" if bits(15, 1) else "K", "b_major": "MN" if bits(16, 1) else "K",
           "N": bits(17, 6) << 3, "M": bits(24, 5) << 4, "max_shift": bits(30, 2)}
    for key, code, names in (("d_dtype", bits(4, 2), d_names), ("a_dtype", bits(7, 3), ab_names),
                             ("b_dtype", bits(10, 3), ab_names)):
        if code not in names:
            raise PtxgenError(f"instruction descriptor {value:#010x}: {key} code {code} is not "
                              f"valid for kind::{k}")
        out[key] = names[code]
    return out


def _spell(name: str) -> str:
    """wgmma's operand type: the dtype's PTX spelling, or tf32 (float32 read as tf32)."""
    return name if name == _TF32 else _dtype(name).ptx.spell


# N step of the dense wgmma shapes per operand kind (PTX ISA 9.7.15.5 shape table: every
# f16 / bf16 / tf32 / fp8 shape is m64nNk with N = 8 .. 256 in steps of 8; the integer and
# b1 forms, not supported here, step by 16 above N = 32)
_WGMMA_N_STEP = {"f16": 8, "tf32": 8, "f8f6f4": 8}


def wgmma_shape(*, N: int, dtype, M: int = 64, d_dtype="float32", b_dtype=None, a_major="K",
                b_major="K", a_in_regs: bool = False) -> tuple[str, str]:
    """``("m64nNkK", "D.A.B")`` for wgmma.mma_async, e.g. ``("m64n128k16", "f32.bf16.bf16")``.

    Rules (PTX ISA 9.7.15.5 wgmma): M is 64; N a multiple of 8 in [8, 256]; K = 256 bits of A;
    transpose (MN-major) only for f16/bf16 operands read through descriptors.
    """
    if M != 64:
        raise PtxgenError(f"wgmma M={M}: rule: wgmma has M = 64 only (use more warpgroups)")
    a = _dt_name(dtype, "tf32")  # wgmma reads fp32 operands as tf32
    b = a if b_dtype is None else _dt_name(b_dtype, "tf32")
    d = _dt_name(d_dtype)
    kind_a, kind_b = _KIND_OF.get(a), _KIND_OF.get(b)
    if kind_a is None or kind_a != kind_b or (kind_a != "f8f6f4" and a != b):
        raise PtxgenError(f"wgmma A/B types {a} x {b}: rule: f16 x f16, bf16 x bf16, tf32 x tf32, "
                          f"or any pair of e4m3/e5m2")
    step = _WGMMA_N_STEP[kind_a]
    if not (isinstance(N, int) and step <= N <= 256 and N % step == 0):
        raise PtxgenError(f"wgmma N={N} is illegal for {a} (rule: PTX ISA wgmma shapes: N is a "
                          f"multiple of {step} in [{step}, 256])")
    if d not in ("float32", "float16") or (d == "float16" and a in ("bfloat16", _TF32)):
        raise PtxgenError(f"wgmma {a} cannot accumulate into {d} (rule: D is f32, or f16 for "
                          f"f16/fp8 inputs)")
    ta, tb = _check_major("a", a_major), _check_major("b", b_major)
    if (ta or tb) and a not in ("float16", "bfloat16"):
        raise PtxgenError(f"wgmma MN-major operand with {a}: rule: transpose is only supported "
                          f"for .f16/.bf16")
    if ta and a_in_regs:
        raise PtxgenError("wgmma A from registers cannot be MN-major (rule: no imm-trans-a form)")
    k = K_BITS // _dtype("float32" if a == _TF32 else a).bits
    return f"m64n{N}k{k}", f"{_spell(d)}.{_spell(a)}.{_spell(b)}"
