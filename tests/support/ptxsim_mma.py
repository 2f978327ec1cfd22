"""mma.sync for tests/support/ptxsim.py: one warp's m16n8k16 / m16n8k32 (.row.col) as a mixin of Sim.

Written from the PTX ISA's fragment tables (groupID g = lane // 4, t = lane % 4), not from
ptxgen's own tables, so a wrong fragment layout in ptxgen shows up as a wrong product:
  m16n8k16 A a_i: row g + 8*(i//2 % 2), col 2t + i%2 + 8*(i//4);  B b_i: row 2t + i%2 + 8*(i//2)
  m16n8k32 A a_i: row g + 8*(i//4 % 2), col 4t + i%4 + 16*(i//8); B b_i: row 4t + i%4 + 16*(i//4)
  C/D c_i: row g + 8*(i//2), col 2t + i%2;  B's column is g.
Elements pack low bits first (a0 in bits 0..15 of the first register).  Integer products are
exact and wrap mod 2^32 (no .satfinite); float products are exact and summed in float64,
then rounded once to float32: within fp32 accumulation error of the hardware, whose summation
order is not specified.
"""
from __future__ import annotations

import numpy as np

from .ptxsim_alu import Unsupported, _bf16, _f16, _f32, _f32_bits, _mask, _signed


def _e4m3(b):
    b = int(b)
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return float("nan")
    v = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def _e5m2(b):
    b = int(b)
    s, e, m = b >> 7, (b >> 2) & 31, b & 3
    if e == 31:
        v = float("inf") if m == 0 else float("nan")
    else:
        v = (m / 4) * 2.0 ** -14 if e == 0 else (1 + m / 4) * 2.0 ** (e - 15)
    return -v if s else v


_DECODE = {"f16": (16, _f16), "bf16": (16, _bf16), "s8": (8, lambda b: _signed(b, 8)),
           "u8": (8, lambda b: b), "e4m3": (8, _e4m3), "e5m2": (8, _e5m2)}


def _a_at(shape, lane, i):
    g, t = lane // 4, lane % 4
    if shape == "m16n8k16":
        return g + 8 * (i // 2 % 2), 2 * t + i % 2 + 8 * (i // 4)
    return g + 8 * (i // 4 % 2), 4 * t + i % 4 + 16 * (i // 8)


def _b_at(shape, lane, i):
    g, t = lane // 4, lane % 4
    if shape == "m16n8k16":
        return 2 * t + i % 2 + 8 * (i // 2), g
    return 4 * t + i % 4 + 16 * (i // 4), g


def _c_at(lane, i):
    return lane // 4 + 8 * (i // 2), 2 * (lane % 4) + i % 2


class MmaOps:
    """Needs the host's _read/_write and the parsed instruction list self.k.instrs."""

    def _mma(self, lanes, ctx, pc):
        guard, op, ops = self.k.instrs[pc]
        parts = op.split(".")
        if parts[:3] != ["mma", "sync", "aligned"] or parts[4:6] != ["row", "col"] or \
                parts[3] not in ("m16n8k16", "m16n8k32") or len(parts) != 10:
            raise Unsupported(op)
        shape, (td, ta, tb, _) = parts[3], parts[6:]
        K = 16 if shape == "m16n8k16" else 32
        regs = [[x.strip() for x in o.strip("{}").split(",")] for o in ops]
        A, B = np.zeros((16, K)), np.zeros((K, 8))
        ints = td == "s32"
        C = np.zeros((16, 8), dtype=object if ints else np.float64)
        for l, th in enumerate(lanes):
            for mat, tok, ty, at in ((A, regs[1], ta, _a_at), (B, regs[2], tb, _b_at)):
                bits, dec = _DECODE[ty]
                per = 32 // bits
                for j, r in enumerate(tok):
                    v = self._read(th, ctx, r)
                    for h in range(per):
                        mat[at(shape, l, j * per + h)] = dec((v >> (bits * h)) & ((1 << bits) - 1))
            for i, r in enumerate(regs[3]):
                v = self._read(th, ctx, r)
                C[_c_at(l, i)] = _signed(v, 32) if ints else _f32(_mask(v, 32))
        if ints:
            D = C + (A.astype(np.int64) @ B.astype(np.int64)).astype(object)
        else:
            D = np.float32(C + A @ B)
        for l, th in enumerate(lanes):
            for i, r in enumerate(regs[0]):
                x = D[_c_at(l, i)]
                self._write(th, r, _mask(int(x), 32) if ints else _f32_bits(x), 32)
