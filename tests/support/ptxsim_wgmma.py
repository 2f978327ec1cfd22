"""wgmma.mma_async for the PTX interpreter (tests/support/ptxsim.py), modelled from the PTX ISA alone.

An independent oracle for the library's wgmma lowering: it decodes the 64-bit descriptors bit
by bit (ISA "Matrix Descriptor Format"), reads each element at the address the ISA's
canonical layouts give for it (then swizzles the byte address), and reads / writes the
register fragments by the ISA's fragment tables -- none of it through ptxgen code.  The MMA
completes at issue (the model has no asynchrony: fence / commit / wait are no-ops), so a
kernel that reads its accumulator before wait_group still gets a result here; the GPU
tests are what check the protocol.  Arithmetic is float64, rounded once per instruction:
tests use inputs whose products and sums are exact.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from .ptxsim_alu import Trap, Unsupported

_SWZ = {0: 0, 1: 128, 2: 64, 3: 32}           # descriptor bits 62-63 -> swizzle span (bytes)
_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}
_K = {2: 16, 4: 8, 1: 32}                      # element bytes -> K per instruction


def _fp8(bits: int, e: int, m: int) -> float:
    s, ex, mant = bits >> 7, (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)
    bias = (1 << (e - 1)) - 1
    if e == 4 and ex == 15 and mant == 7 or e == 5 and ex == 31:
        return float("nan") if e == 4 or mant else (-1) ** s * float("inf")
    v = mant / (1 << m) * 2.0 ** (1 - bias) if ex == 0 else \
        (1 + mant / (1 << m)) * 2.0 ** (ex - bias)
    return -v if s else v


def value(bits: int, ty: str) -> float:
    if ty == "bf16":
        return float(np.uint32(bits << 16).view(np.float32))
    if ty == "f16":
        return float(np.uint16(bits).view(np.float16))
    if ty == "tf32":                         # the low 13 mantissa bits are not used
        return float(np.uint32(bits & 0xFFFFE000).view(np.float32))
    if ty == "e4m3":
        return _fp8(bits, 4, 3)
    if ty == "e5m2":
        return _fp8(bits, 5, 2)
    raise Unsupported(ty)


def _desc(v: int) -> dict:
    if (v >> 46) & 7 or (v >> 14) & 3 or (v >> 30) & 3:
        raise Trap(f"wgmma descriptor {v:#x}: reserved bits set (an sm_100 descriptor?)")
    return {"start": (v & 0x3FFF) << 4, "lbo": ((v >> 16) & 0x3FFF) << 4,
            "sbo": ((v >> 32) & 0x3FFF) << 4, "base": (v >> 49) & 7, "span": _SWZ[v >> 62]}


def _address(d: dict, r: int, k: int, nb: int, mn_major: bool) -> int:
    """Byte address of element (row r of M/N, k) of the matrix a descriptor describes."""
    if d["base"]:
        raise Unsupported("descriptor base offset")
    t, span = 16 // nb, d["span"]
    if not mn_major:
        if span == 0:   # core matrices of 8 rows x 16 B
            a = d["start"] + (r % 8) * 16 + (r // 8) * d["sbo"] + (k % t) * nb + \
                (k // t) * d["lbo"]
        else:           # 8 rows of `span` bytes; K inside the row
            a = d["start"] + (r % 8) * span + (r // 8) * d["sbo"] + k * nb
    elif span == 0:
        a = d["start"] + (r % t) * nb + (k % 8) * 16 + (r // t) * d["sbo"] + (k // 8) * d["lbo"]
    else:
        per = span // nb
        a = d["start"] + (r % per) * nb + (r // per) * d["lbo"] + (k % 8) * span + \
            (k // 8) * d["sbo"]
    if span:
        b = {32: 1, 64: 2, 128: 3}[span]
        a ^= (a >> 3) & (((1 << b) - 1) << 4)
    return a


def _smem_matrix(shared, desc, rows, K, ty, mn_major):
    nb = _BYTES[ty]
    d = _desc(desc)
    out = np.zeros((rows, K))
    for r in range(rows):
        for k in range(K):
            a = _address(d, r, k, nb, mn_major)
            if not 0 <= a <= len(shared) - nb:
                raise Trap(f"wgmma operand address {a} outside shared memory")
            out[r, k] = value(int.from_bytes(shared[a:a + nb], "little"), ty)
    return out


def _pos(t, j, E):
    """(row, col) of fragment element j of thread t, E elements per 32-bit unit (the ISA's
    tables: D uses the 16-bit pattern; A: E = 2 f16/bf16, 1 tf32, 4 fp8)."""
    w, lane = divmod(t, 32)
    g, q = lane // 4, lane % 4
    unit, e = divmod(j, E)
    return 16 * w + g + 8 * (unit % 2), 4 * E * (unit // 2) + E * q + e


@functools.lru_cache(maxsize=None)
def _f32_fragment(N):
    """(rows, cols): the D element of f32 accumulator register r of thread t at [t, r]."""
    return np.array([[_pos(t, r, 2) for r in range(N // 2)] for t in range(128)]).transpose(2, 0, 1)


def _regs(tok):
    return [x.strip() for x in tok.strip("{}").split(",")]


def mma_async(sim, lanes, ctx, pc):
    """Execute one wgmma.mma_async for the 128 threads of a warpgroup (`lanes`, in order)."""
    _, op, ops = sim.k.instrs[pc]
    m = re.fullmatch(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k(\d+)\.(\w+)\.(\w+)\.(\w+)",
                     op)
    if not m:
        raise Unsupported(op)
    N, K, dty, aty, bty = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4), m.group(5)
    if _K[_BYTES[aty]] != K:
        raise Trap(f"{op}: K={K} is not the instruction K of {aty}")
    a_regs = ops[1].startswith("{")
    scale = [int(x) for x in ops[4:6]]
    tn = [int(x) for x in ops[6:]]
    tn_a, tn_b = (0, tn[0]) if a_regs and tn else (tn + [0, 0])[:2]
    th0 = lanes[0]
    shared = ctx["shared"]
    B = _smem_matrix(shared, sim._read(th0, ctx, ops[2]), N, K, bty, bool(tn_b))
    if a_regs:
        nb = _BYTES[aty]
        E = 4 // nb
        A = np.full((64, K), np.nan)
        for t, th in enumerate(lanes):
            regs = _regs(ops[1])
            if len(regs) != 4:
                raise Trap(f"{op}: A from registers takes 4 registers, got {len(regs)}")
            for r, tok in enumerate(regs):
                v = sim._read(th, ctx, tok)
                for e in range(E):
                    row, col = _pos(t, r * E + e, E)
                    A[row, col] = value((v >> (8 * nb * e)) & ((1 << (8 * nb)) - 1), aty)
    else:
        A = _smem_matrix(shared, sim._read(th0, ctx, ops[1]), 64, K, aty, bool(tn_a))
    prod = (scale[0] * A) @ (scale[1] * B).T
    half = dty == "f16"
    regs = _regs(ops[0])
    if len(regs) != (N // 4 if half else N // 2):
        raise Trap(f"{op}: {len(regs)} accumulator registers for N={N}")
    if not half:      # f32: the whole fragment at once, in the same float64 sum and rounding
        rows, cols = _f32_fragment(N)
        acc = np.array([bool(sim._read(th, ctx, ops[3])) for th in lanes])[:, None]
        old = np.array([[sim._read(th, ctx, tok) for tok in regs] for th in lanes], np.uint32)
        prev = np.where(acc, old.view(np.float32).astype(np.float64), 0.0)
        new = (prod[rows, cols] + prev).astype(np.float32).view(np.uint32).tolist()
        for th, vals in zip(lanes, new):
            for tok, v in zip(regs, vals):
                sim._write(th, tok, v, 32)
        return
    for t, th in enumerate(lanes):
        acc = bool(sim._read(th, ctx, ops[3]))
        for r, tok in enumerate(regs):
            old = sim._read(th, ctx, tok)
            out = 0
            for h in range(2):
                row, col = _pos(t, 2 * r + h, 2)
                prev = float(np.uint16((old >> (16 * h)) & 0xFFFF).view(np.float16))
                v = np.float16(prod[row, col] + (prev if acc else 0.0))
                out |= int(v.view(np.uint16)) << (16 * h)
            sim._write(th, tok, out, 32)
