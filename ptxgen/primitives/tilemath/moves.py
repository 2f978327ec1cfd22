"""How the elementwise variants move memory operands and wrap their statements.

A memory operand moves in the vectors of its `Access` (plan.py): each vector is loaded into
(or stored from) u8/u16/u32 containers of a temp buffer, whose bits copy's `unpack` / `pack`
move to and from one register per element.  The two-element casts (cast_pairs.py) move the
containers' bits to and from the registers of their cvt operands instead (`load_units`,
`store_units`): two float8 in a .b16, two float4_e2m1fn in a .b8, with movs only.
"""
from __future__ import annotations

from ...dtypes import E2M1X2, dtype
from ...ir import BinOp, BOOL, Cast, Const, For, If, Let, VecOperand
from ..copy.common import CONTAINERS, flat_pointer, ld_st_pair
from ..copy.reg import pack, unpack
from .compute import bits_of, convert
from .ops import BOOL as _B, F16, U8

U32 = dtype("uint32")


def storage(dt):
    """The dtype of an element register of a memory operand (bool moves as a byte)."""
    return U8 if dt is _B else dt


def _pad_containers(E, conts, cdt, o, V, pad):
    sdt = storage(o.dtype)
    b = sdt.bits
    pattern = 0
    pb = bits_of(pad, sdt) if pad is not None else 0
    for j in range(V):
        pattern |= pb << (b * j)
    cbits = min(32, V * b)
    for i, c in enumerate(conts):
        E.instr("mov", ("b32",), (c, Const((pattern >> (cbits * i)) & ((1 << cbits) - 1), cdt)))


def _vectors(E, o, acc):
    """Per vector of memory operand `o`: (element ids, fresh containers, their dtype, the
    vector's offset, its bits, its guard)."""
    bits = acc.V * storage(o.dtype).bits
    _, n, cname = CONTAINERS[bits]
    cdt = dtype(cname)
    for ids, off, guard in acc.vectors:
        yield ids, [E.tmp(cdt) for _ in range(n)], cdt, off, bits, guard


def _loaded(E, o, acc, pad):
    """Per vector of memory source `o`: (its element ids, its containers, loaded)."""
    for ids, conts, cdt, off, bits, guard in _vectors(E, o, acc):
        if guard is not None:
            _pad_containers(E, conts, cdt, o, acc.V, pad)
        ptr = flat_pointer(o.side, off)
        ld, _ = ld_st_pair(ptr, ptr, bits, o.side.space, o.side.space, conts)
        ld.guard = guard
        E.stmts.append(ld)
        yield ids, conts


def _stored(E, o, acc, fill):
    """Per vector of memory destination `o`: `fill(ids, containers)` packs the containers'
    bits, then they are stored."""
    for ids, conts, _, off, bits, guard in _vectors(E, o, acc):
        fill(ids, conts)
        ptr = flat_pointer(o.side, off)
        _, st = ld_st_pair(ptr, ptr, bits, o.side.space, o.side.space, conts)
        st.guard = guard
        E.stmts.append(st)


def load(E, o, acc, pad):
    """Element registers of memory source `o`, by element id."""
    sdt = storage(o.dtype)
    out = {}
    for ids, conts in _loaded(E, o, acc, pad):
        elems = [E.tmp(sdt) for _ in ids]
        E.stmts += unpack(conts, elems, sdt)
        for k, r in zip(ids, elems):
            out[k] = r if o.dtype is not _B else BinOp("ne", r, Const(0, U8), BOOL)
    return out


def store(E, o, acc, results):
    sdt = storage(o.dtype)

    def fill(ids, conts):
        elems = [convert(results[k], sdt) if o.dtype is not _B else Cast(results[k], U8)
                 for k in ids]          # expressions: pack's moves evaluate them in place
        E.stmts.extend(pack(conts, elems, sdt))
    _stored(E, o, acc, fill)


# ---- two-element units: the registers of the x2 cvt forms ------------------------------------
def unit_dtype(dt):
    """The register dtype of two elements of a float8 (.b16) or float4_e2m1fn (.b8)."""
    return E2M1X2 if dt.bits == 4 else F16


def load_units(E, o, acc, pad):
    """{first element id: its pair's unit register} of memory source `o` (float8 / float4,
    vectors of two or more elements: each pair two adjacent elements of a byte / halfword)."""
    udt = unit_dtype(o.dtype)
    out = {}
    for ids, conts in _loaded(E, o, acc, pad):
        units = [E.tmp(udt) for _ in range(len(ids) // 2)]
        _split(E, conts, units)
        for j, u in enumerate(units):
            out[ids[2 * j]] = u
    return out


def store_units(E, o, acc, units):
    """Store memory destination `o` from {first element id: unit register}."""
    _stored(E, o, acc, lambda ids, conts: _join(E, conts, [units[k] for k in ids[::2]]))


def _split(E, conts, units):
    """Unit registers from containers: a cvt where one unit fills one, else a vector mov
    (a b16 container of two .b8 units through a b16)."""
    per = len(units) // len(conts)
    for i, c in enumerate(conts):
        part = units[i * per:(i + 1) * per]
        ty = "u8" if part[0].dtype is E2M1X2 else "u16"
        if per == 1:
            E.instr("convert", (ty, "u32"), (part[0], c))
        elif per * part[0].dtype.bits == 32:
            E.instr("mov", ("b32",), (VecOperand(tuple(part)), c))
        else:                    # two bytes in a 16-bit container
            h = E.op("convert", ("u16", "u32"), F16, c)
            E.instr("mov", ("b16",), (VecOperand(tuple(part)), h))


def _join(E, conts, units):
    per = len(units) // len(conts)
    for i, c in enumerate(conts):
        part = units[i * per:(i + 1) * per]
        ty = "u8" if part[0].dtype is E2M1X2 else "u16"
        if per == 1:
            E.instr("convert", ("u32", ty), (c, part[0]))
        elif per * part[0].dtype.bits == 32:
            E.instr("mov", ("b32",), (c, VecOperand(tuple(part))))
        else:
            h = E.tmp(F16)
            E.instr("mov", ("b16",), (h, VecOperand(tuple(part))))
            E.instr("convert", ("u32", "u16"), (c, h))


# ---- the frame of an elementwise call ------------------------------------------------------------
def frame(call, plan, E) -> list:
    """The prologue, the temporaries and E's statements, in the partition's loop / guard."""
    body = E.stmts
    if plan.linear is not None:
        i, value, nvec = plan.linear
        T = call.scope.nthreads
        body = [Let(i, value, (0, plan.rounds * T - 1))] + (
            [If(BinOp("lt", i, Const(nvec), BOOL), body)] if nvec else body)
    if plan.kind == "mem" and plan.rounds > 1:
        body = [For(plan.loop_var, Const(0), Const(plan.rounds), 1, "serial", body)]
    return list(plan.prologue) + E.allocs() + body
