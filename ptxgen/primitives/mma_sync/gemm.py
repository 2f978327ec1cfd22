"""`gemm` (pg.tile.warp.gemm): C += A @ B with mma.sync from register fragments, as lowering rules.

Why a primitive: one warp's mma.sync reads 32 lanes' registers in a fixed arrangement
(fragments.py), packed two 16-bit or four 8-bit elements per 32-bit register, and a tile
larger than one instruction is a grid of them.  Here the fragments' layouts are read element
by element against that arrangement (so a wrong layout is an error naming the element, not
a wrong product), and the instructions are laid out: for each K step, A and B of that step
packed once into 32-bit registers, then one mma.sync per (M tile, N tile) with C in place.

Variants are the instruction shapes: m16n8k16 (float16 / bfloat16 -> float32) and m16n8k32
(int8 / uint8 -> int32, float8_e4m3fn / float8_e5m2 -> float32, sm_89+).  `accumulate=False`
(or a runtime bool) zeroes C first.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...errors import ArchError
from ...ir import BOOL, Alloc, Buffer, BufferRegion, Const, Instr, Not, VecOperand
from ...layout import index_grid, per_element
from ...target import check_opcode
from ...target.forms import opcode
from ..call import Call
from ..copy import reg as _reg
from ..copy.common import analyze_side, reg_elems
from ..registry import register
from .fragments import SHAPES, operand

_U32 = _dtype("uint32")
_FLOATS16 = ("float16", "bfloat16")
_INTS8 = ("int8", "uint8")
_FP8 = ("float8_e4m3fn", "float8_e5m2")


class GemmCall(Call):
    """A gemm call: args (C, A, B, accumulate)."""

    def describe(self) -> str:
        c, a, b, _ = self.args
        return (f"pg.tile.{self.scope.name}.gemm({c}, {a}, {b}) [{a.buffer.dtype} x "
                f"{b.buffer.dtype} -> {c.buffer.dtype}, {self.target}]")


def accumulator_dtype(a_name: str, b_name: str, shape: str):
    """(C dtype name, '') of an A x B product on `shape`, or (None, why)."""
    bits = SHAPES[shape][0]
    if bits == 16:
        if a_name in _FLOATS16 and a_name == b_name:
            return "float32", ""
        return None, (f"{shape} multiplies float16 x float16 or bfloat16 x bfloat16 fragments; "
                      f"A is {a_name}, B is {b_name}")
    if a_name in _INTS8 and b_name in _INTS8:
        return "int32", ""
    if a_name in _FP8 and b_name in _FP8:
        return "float32", ""
    return None, (f"{shape} multiplies 8-bit fragments (int8/uint8 -> int32, float8_e4m3fn/"
                  f"float8_e5m2 -> float32); A is {a_name}, B is {b_name}")


@dataclass(frozen=True)
class SyncPlan:
    """Register offsets ("m") of every instruction's fragments, in fragment order."""
    shape: str
    opcode: str
    tiles: tuple       # (M tiles, N tiles, K tiles)
    a: dict            # (mi, ki) -> offsets of a0, a1, ...
    b: dict            # (ki, ni) -> offsets of b0, b1, ...
    c: dict            # (mi, ni) -> offsets of c0..c3

    @property
    def count(self) -> int:
        mt, nt, kt = self.tiles
        return mt * nt * kt


def _fix(which, shape, rows, cols, bits):
    fix = f"mma_sync_layout({which!r}, {shape!r}, tile=({rows}, {cols}))"
    if which == "A" and bits == 16:
        fix += f" (ldmatrix_layout({rows}, {cols}) is the same arrangement)"
    elif which == "B" and bits == 16:
        fix += (f" (ldmatrix_layout({rows}, {cols}, trans=True) is the same arrangement)")
    return f"declare it with layout={fix}"


def fragment_offsets(region: BufferRegion, which: str, shape: str, what: str):
    """({tile: offsets}, '') of one operand region against the fragment of `shape`, or
    (None, why) naming the first element in the wrong lane or register."""
    import numpy as np
    op = operand(shape, which)
    bits = SHAPES[shape][0] if which != "C" else 32
    buf = region.buffer
    rows, cols = region.shape
    if buf.root.scope != "local":
        return None, (f"{what} {region} is in {buf.root.scope} memory; mma.sync reads register "
                      f"fragments: copy it into a local tensor first (pg.tile.warp.copy)")
    side = analyze_side(region)
    why = _reg.check_reg_side(side)
    if why:
        return None, why
    fix = _fix(which, shape, rows, cols, bits)
    if buf.layout is None:
        return None, (f"{what} {region} has no thread axes, so every lane would hold all of it; "
                      f"{fix}")
    axes = buf.layout.axes()
    if "laneid" not in axes:
        return None, (f"{what} {region}: its layout has no laneid axis, so every lane would "
                      f"hold all of it; {fix}")
    for ax in axes:
        if ax not in ("m", "laneid"):
            return None, (f"{what} {region}: its layout uses the {ax} axis; an mma.sync fragment "
                          f"is one warp's, spread over laneid only: {fix}")
    r, c = index_grid(rows, cols)
    r0, c0 = region.starts
    got = buf.layout.apply(r + r0, c + c0, shape=buf.shape)
    lane, m = per_element(got["laneid"], r), per_element(got["m"], r)
    want = op.layout((rows // op.rows, cols // op.cols)).apply(r, c, shape=(rows, cols))
    wlane, wm = per_element(want["laneid"], r), per_element(want["m"], r)
    slot = wm                        # instruction-major: tile * regs + fragment element
    name = {"C": "c"}.get(which, which.lower())
    bad = np.nonzero(lane != wlane)[0]
    if len(bad):
        k = int(bad[0])
        return None, (f"{what} {region}: element ({r[k]}, {c[k]}) is in lane {lane[k]}, but "
                      f"mma.sync {shape} reads it as {name}{wm[k] % op.regs} of lane {wlane[k]}; "
                      f"{fix}")
    regs = np.full(int(slot.max()) + 1, -1, dtype=np.int64)
    regs[slot] = m
    bad = np.nonzero(regs[slot] != m)[0]
    if len(bad):
        k = int(bad[0])
        other = int(np.nonzero((slot == slot[k]) & (m != m[k]))[0][0])
        return None, (f"{what} {region}: {name}{wm[k] % op.regs} is register {m[k]} in lane "
                      f"{lane[k]} (element ({r[k]}, {c[k]})) but register {m[other]} in lane "
                      f"{lane[other]} (element ({r[other]}, {c[other]})); one instruction "
                      f"names the same register in every lane: {fix}")
    if len(np.unique(regs)) != len(regs):
        return None, (f"{what} {region}: its layout puts two fragment elements in one "
                      f"register: {fix}")
    tc = cols // op.cols
    out = {}
    for t in range(len(regs) // op.regs):
        out[(t // tc, t % tc)] = tuple(int(x) for x in regs[t * op.regs:(t + 1) * op.regs])
    return out, ""


def plan_sync(c, a, b, shape: str, fragments=True):
    """(SyncPlan, '') for C += A @ B on `shape` instructions, or (None, why).  With
    fragments=False only dtypes and extents are checked ((True, '') when they fit)."""
    ta, tb, tc = a.buffer.dtype, b.buffer.dtype, c.buffer.dtype
    want_c, why = accumulator_dtype(ta.name, tb.name, shape)
    if want_c is None:
        return None, why
    if tc.name != want_c:
        return None, (f"the accumulator C {c} is {tc}; {ta} x {tb} accumulates into {want_c} "
                      f"fragments")
    ops = SHAPES[shape][1]
    (M, K), N = a.shape, b.shape[1]
    im, ik, in_ = ops["A"].rows, ops["A"].cols, ops["B"].cols
    if M % im or N % in_ or K % ik:
        return None, (f"{shape} tiles need M a multiple of {im}, N of {in_} and K of {ik}; the "
                      f"product is {M} x {N} x {K}")
    if not fragments:
        return True, ""
    tables = {}
    for which, reg in (("A", a), ("B", b), ("C", c)):
        t, why = fragment_offsets(reg, which, shape, which)
        if t is None:
            return None, why
        tables[which] = t
    code = opcode("mma_sync", shape, tc.ptx.spell, ta.ptx.spell, tb.ptx.spell, tc.ptx.spell)
    return SyncPlan(shape, code, (M // im, N // in_, K // ik), tables["A"], tables["B"],
                    tables["C"]), ""


def check_shapes(c, a, b) -> str:
    """'' when C (M, N) += A (M, K) @ B (K, N) have consistent 2-D extents, else why."""
    for name, r in (("C", c), ("A", a), ("B", b)):
        if len(r.shape) != 2:
            return f"gemm {name} {r} must be a 2-D region, got extents {r.shape}"
    (M, K), (K2, N), (M2, N2) = a.shape, b.shape, c.shape
    if K != K2 or (M, N) != (M2, N2):
        return (f"gemm computes C (M, N) += A (M, K) @ B (K, N); got C {c.shape}, A {a.shape}, "
                f"B {b.shape}")
    return ""


# ---- variants ---------------------------------------------------------------------------------
def _plan(call, shape):
    c, a, b, _ = call.args
    return plan_sync(c, a, b, shape)


def _predicates(shape):
    def fragments(call):
        plan, why = call.plan(_plan, shape)
        if plan is None:
            return False, why
        try:
            check_opcode(plan.opcode, call.target)
        except ArchError as e:
            return False, f"{e} (build for a newer target, or use 16-bit fragments)"
        return True, f"{plan.count} x {plan.opcode}"
    return [fragments]


def _emit(call, shape):
    c, a, b, acc = call.args
    plan = call.plan(_plan, shape)[0]
    sides = {k: analyze_side(r) for k, r in (("A", a), ("B", b), ("C", c))}
    mt, nt, kt = plan.tiles
    out = []

    def regs(which, offsets):
        return [_reg.reg_ref(sides[which], m) for m in offsets]

    e = call.an.simplify(acc) if call.an is not None else acc
    if not (isinstance(e, Const) and e.value):
        guard = None if isinstance(e, Const) else Not(e, BOOL)
        for t in sorted(plan.c):
            for r in regs("C", plan.c[t]):
                out.append(Instr(opcode("mov", "b32"), (r, "0"), form="mov", outs=1, guard=guard))
    temps = {}
    for which, reg, n in (("A", a, mt), ("B", b, nt)):
        per = len(next(iter(getattr(plan, which.lower()).values())))
        words = per * reg.buffer.dtype.bits // 32
        tmp = Buffer(f"mma_{which.lower()}", (n * words,), _U32, "local")
        out.append(Alloc(tmp))
        temps[which] = (reg_elems(tmp, 0, n * words), words)
    for ki in range(kt):
        packed = {}
        for which, n, key in (("A", mt, lambda i: (i, ki)), ("B", nt, lambda i: (ki, i))):
            conts, words = temps[which]
            dt = (a if which == "A" else b).buffer.dtype
            table = getattr(plan, which.lower())
            for i in range(n):
                mine = conts[i * words:(i + 1) * words]
                out += _reg.pack(mine, regs(which, table[key(i)]), dt)
                packed[which, i] = VecOperand(tuple(mine))
        for mi in range(mt):
            for ni in range(nt):
                d = VecOperand(tuple(regs("C", plan.c[mi, ni])))
                out.append(Instr(plan.opcode, (d, packed["A", mi], packed["B", ni], d),
                                 form="mma_sync", outs=1))
    return out


def _make(shape, priority):
    def emit(call):
        return _emit(call, shape)
    emit.__doc__ = f"mma.sync.aligned.{shape}: one warp, register fragments."
    register("gemm", shape, priority, when=_predicates(shape))(emit)


_make("m16n8k16", 20)
_make("m16n8k32", 10)
