"""Casts of two elements per instruction: PTX's x2 conversions, as registered pair forms.

    to    f16x2.f32, bf16x2.f32    two float32 -> two 16-bit floats in a b32 (cvt.rn.f16x2.f32)
    to    e4m3x2.f32, e5m2x2.f32   two float32 -> two float8 in a .b16
                                   (cvt.rn.satfinite.e4m3x2.f32 d, hi, lo)
    to    e2m1x2.f32               two float32 -> two float4_e2m1fn in a .b8
                                   (cvt.rn.satfinite.e2m1x2.f32 d, hi, lo)
    from  f16x2.e4m3x2, .e5m2x2    two float8 in a .b16 -> two float16 (cvt.rn.f16x2.e4m3x2)
    from  f16x2.e2m1x2             two float4_e2m1fn in a .b8 -> two float16

A cast takes the first "from" form whose predicate accepts (the source unpacked in pairs) and
the first "to" form (the results packed in pairs); the `packed` variant applies when one of
them does.  Between the two, each element converts on its own (cast.py): to float32 for a
"to" form (exactly, or rounded to odd from a wider source), or from the source (or the "from"
form's float16) to the destination.  A predicate takes (call, has_from) and returns
(ok, reason), the reason '' where the form does not concern the call's dtypes.

Which two elements pair: where a form's float8 / float4 operand is memory moved in vectors of
two or more, the two of each halfword / byte, moved as one unit (moves.load_units /
store_units); else consecutive elements of the thread (an odd last one converts alone).
In a register the first element is the low half (low byte, low nibble), as in memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...dtypes import dtype
from ...ir import Const
from ...target import has_opcode
from ..copy.reg import reg_ref
from .cast import FP4, FP8, cast_value, f32_of, pair_type
from .compute import Emit, convert, unpair
from .moves import frame, load, load_units, store, store_units, unit_dtype
from .ops import BF16, F16, F32

U32 = dtype("uint32")


@dataclass(frozen=True)
class PairForm:
    name: str              # the cvt's types, "e4m3x2.f32", "f16x2.e2m1x2"
    side: str              # "to": packs two results; "from": unpacks two sources
    narrow: str | None     # the float8 / float4 dtype it packs or unpacks (None: f16x2/bf16x2)
    check: Callable        # (call, has_from) -> (ok, reason)

    @property
    def ptx(self) -> str:
        return pair_type(self.narrow) if self.narrow else self.name.split(".")[0]


FORMS: list = []


def pair_form(name, side, narrow=None):
    """Register a pair form with its predicate (forms of a side are tried in this order)."""
    def deco(check):
        FORMS.append(PairForm(name, side, narrow, check))
        return check
    return deco


def _types(call):
    return call.args[1].dtype, call.args[0].dtype


def _sixteen(dt):
    def check(call, has_from):
        src, dst = _types(call)
        if dst is not dt or has_from and dt is F16:     # f16 from a "from" form: its result
            return False, ""
        if src is not F32 and not has_from:
            return False, (f"packed casts are float32 -> float16/bfloat16 pairs; this is "
                           f"{src} -> {dst}")
        rnd = call.record.rounding
        if rnd not in (None, "rn"):
            return False, f"cvt.{rnd}.*x2 is not used; packed casts round to nearest"
        if not has_opcode(f"cvt.rn.{pair_type(dt)}.f32", call.target):
            return False, f"cvt.rn.{{f16x2,bf16x2}}.f32 need sm_80; the target is {call.target}"
        return True, ""
    return check


def _narrow(name, into: bool):
    """The pair form converting f32 pairs into `name` (into) or `name` pairs to f16x2."""
    op = f"cvt.rn.satfinite.{pair_type(name)}.f32" if into else f"cvt.rn.f16x2.{pair_type(name)}"

    def check(call, has_from):
        src, dst = _types(call)
        if (dst if into else src).name != name or src is dst:
            return False, ""
        if not has_opcode(op, call.target):
            return False, f"{call.target} has no {op}"
        return True, ""
    return check


pair_form("f16x2.f32", "to")(_sixteen(F16))
pair_form("bf16x2.f32", "to")(_sixteen(BF16))
for _n in (*FP8, FP4):
    pair_form(f"{pair_type(_n)}.f32", "to", _n)(_narrow(_n, into=True))
for _n in (*FP8, FP4):
    pair_form(f"f16x2.{pair_type(_n)}", "from", _n)(_narrow(_n, into=False))


@dataclass(frozen=True)
class CastPairs:
    frm: PairForm | None
    to: PairForm | None

    @property
    def legacy(self) -> bool:
        """float32 -> float16/bfloat16 pairs only: elementwise's own `_pairs`."""
        return self.frm is None and self.to.narrow is None

    def lanes(self) -> str:
        if self.legacy:
            return self.to.ptx
        return " + ".join(f"cvt.rn.{'satfinite.' if f.narrow and f.side == 'to' else ''}"
                          f"{f.name}" for f in (self.frm, self.to) if f is not None)


def _first(call, side, has_from):
    why = []
    for f in FORMS:
        if f.side == side:
            ok, reason = f.check(call, has_from)
            if ok:
                return f, ""
            if reason:
                why.append(reason)
    return None, "; ".join(why)


def pair_plan(call):
    """(CastPairs, '') when a pair form converts this cast, else (None, why)."""
    frm, why_from = _first(call, "from", False)
    to, why_to = _first(call, "to", frm is not None)
    if frm is None and to is None:
        src, dst = _types(call)
        return None, ("; ".join(w for w in (why_from, why_to) if w) or
                      f"no two-element cvt converts {src} -> {dst} (PTX pairs float32 -> "
                      f"float16/bfloat16/float8/float4_e2m1fn and float8/float4_e2m1fn -> "
                      f"float16)")
    return CastPairs(frm, to), ""


# ---- emission ------------------------------------------------------------------------------
def _unit_of(E, lo, hi, dt):
    """The cvt operand of two element registers of float8 / float4 dt (lo in the low bits)."""
    b = str(dt.bits)
    t = E.op("bfi", ("b32",), U32, hi, lo, b, b)
    return E.op("convert", ("u8" if dt.bits == 4 else "u16", "u32"), unit_dtype(dt), t)


def _unpack(E, form, u):
    """cvt.rn.f16x2.<narrow>x2: the pair's two float16 (lo, hi)."""
    both = E.op("convert", ("f16x2", form.ptx, "rn"), U32, u)
    lo, hi = E.tmp(F16), E.tmp(F16)
    unpair(E, both, lo, hi)
    return lo, hi


def _pack(E, form, hi, lo, saturate):
    """The pair's cvt from two float32: d packs hi into its upper half, lo into the lower."""
    if form.narrow is None:
        return E.op("convert", (form.ptx, "f32", "rn", bool(saturate)), U32, hi, lo)
    return E.op("convert", (form.ptx, "f32", "rn", True), unit_dtype(dtype(form.narrow)),
                hi, lo)


def _elements(E, form, u, dt, regs):
    """The two elements of dt (into `regs` when given) from the pair's cvt result."""
    lo, hi = regs if regs is not None else (E.tmp(dt), E.tmp(dt))
    if form.narrow is None:
        unpair(E, u, lo, hi)
        return lo, hi
    bits = dt.bits
    t = E.op("convert", ("u32", "u8" if bits == 4 else "u16"), U32, u)   # zero-extended
    E.instr("binary", ("and", "b32"), (lo, t, Const((1 << bits) - 1, U32)))
    E.instr("binary", ("shr", "b32"), (hi, t, Const(bits, U32)))
    return lo, hi


def _pairs(plan, units_side, n):
    """[(first, second)] element ids: a memory operand's halfwords / bytes, else k, k + 1."""
    if units_side is not None:
        return [(ids[j], ids[j + 1]) for ids, _, _ in plan.mem[units_side].vectors
                for j in range(0, len(ids), 2)]
    return [(k, k + 1) for k in range(0, n - 1, 2)]


def emit_cast_pairs(call, plan, cp: CastPairs):
    """A cast whose float8 / float4 side converts two elements per cvt."""
    E = Emit()
    rec = call.record
    n = plan.nelem
    od, os_ = (next(o for o in call.opnds if o.pos == p) for p in (0, 1))
    sdt, ddt = os_.dtype, od.dtype
    src_units = cp.frm is not None and not os_.reg and plan.mem[1].V >= 2
    dst_units = cp.to is not None and cp.to.narrow is not None and not od.reg and \
        plan.mem[0].V >= 2
    pairs = _pairs(plan, 1 if src_units else 0 if dst_units else None, n)
    units, vals = {}, {}
    if os_.reg:
        vals = dict(enumerate(reg_ref(os_.side, m) for m in plan.regs[1]))
    elif src_units:
        units = load_units(E, os_, plan.mem[1], rec.pad)
    else:
        vals = load(E, os_, plan.mem[1], rec.pad)
    dregs = [reg_ref(od.side, m) for m in plan.regs[0]] if od.reg else None
    results, out_units = {}, {}
    for k0, k1 in pairs:
        if cp.frm is not None:
            u = units[k0] if src_units else _unit_of(E, vals[k0], vals[k1], sdt)
            lo, hi = _unpack(E, cp.frm, u)
            stage = F16
        else:
            lo, hi, stage = vals[k0], vals[k1], sdt
        if cp.to is None:
            for k, x in ((k0, lo), (k1, hi)):
                results[k] = cast_value(E, x, stage, ddt, rec.rounding, rec.saturate)
            continue
        u = _pack(E, cp.to, f32_of(E, hi, stage), f32_of(E, lo, stage), rec.saturate)
        if dst_units:
            out_units[k0] = u
            continue
        regs = (dregs[k0], dregs[k1]) if dregs is not None else None
        results[k0], results[k1] = _elements(E, cp.to, u, ddt, regs)
    for k in sorted(set(range(n)) - {k for p in pairs for k in p}):    # an odd last one
        results[k] = cast_value(E, vals[k], sdt, ddt, rec.rounding, rec.saturate)
    if od.reg:
        for k in range(n):
            if results[k] is not dregs[k]:
                E.put(dregs[k], convert(results[k], ddt))
    elif dst_units:
        store_units(E, od, plan.mem[0], out_units)
    else:
        store(E, od, plan.mem[0], results)
    return frame(call, plan, E)
