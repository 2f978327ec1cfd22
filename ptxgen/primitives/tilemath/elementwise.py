"""The variants of every elementwise op, and the statements they emit.

    packed  30  two 16-bit lanes per instruction (f16x2 / bf16x2 arithmetic and ex2), or
                two elements per cvt (the x2 conversions of cast_pairs.py), on the `vector`
                partition
    vector  20  each memory operand in the widest aligned vectors its offsets allow
    scalar   0  one element per access; applies wherever the partition does

Each thread loads its elements of every memory source (vectors in u8/u16/u32 containers,
unpacked into element registers with copy's `unpack`), computes per element (compute.py,
cast.py) and stores (copy's `pack`).  Register operands are read and written in place.
The register partition is straight-line code; the memory one is a serial loop.
"""
from __future__ import annotations

from ...dtypes import dtype
from ...ir import BufferRegion, Const
from ..copy.reg import reg_ref
from ..registry import register
from .cast import cast_value
from .cast_pairs import emit_cast_pairs, pair_plan
from .compute import Emit, PACKED, convert, packed, packed_form, scalar, unpair
from .moves import frame, load, storage, store
from .ops import ELEMENTWISE, F16, F32, is_16bit_float
from .plan import describe_plan, plan_mem, plan_reg
from .rows import with_coords

U32 = dtype("uint32")


def _plan(call, vectors: bool):
    opnds = call.opnds
    if any(o.reg for o in opnds):
        return plan_reg(call, opnds, vectors=vectors)
    return plan_mem(call, opnds, max_bits=128 if vectors else 0)


def plan_vector(call):
    return _plan(call, True)


def plan_scalar(call):
    return _plan(call, False)


# ---- predicates ----------------------------------------------------------------------------
def _packed_lanes(call) -> tuple[str | None, str]:
    """(two-lane type, '') when the op has a packed form for these dtypes, else (None, why)."""
    rec, op = call.record, call.op
    dts = [o.dtype for o in call.opnds]
    if op == "cast":
        pairs, why = call.plan(pair_plan)
        return (pairs.lanes(), "") if pairs is not None else (None, why)
    ct = rec.compute
    if op not in PACKED:
        return None, f"{op} has no two-lane form (16-bit {op} computes in float32)"
    if not is_16bit_float(ct) or any(d is not ct for d in dts):
        names = "/".join(map(str, dict.fromkeys(dts)))
        return None, f"packed forms need every operand in one 16-bit float dtype ({names})"
    if packed_form(op, ct, call.target) is None:
        return None, f"{call.target} has no two-lane {op} on {ct}"
    return ("f16x2" if ct is F16 else "bf16x2"), ""


def _packed_ok(call):
    lanes, why = _packed_lanes(call)
    if lanes is None:
        return False, why
    plan, why = call.plan(plan_vector)
    if plan is None:
        return False, why
    if plan.nelem < 2:
        return False, "each thread handles one element per round: nothing to pair"
    form = packed_form(call.op, call.record.compute, call.target) if call.op != "cast" else None
    how = f" (fma.rn.bf16x2: {call.target} has no bf16x2 {call.op})" if form and form[2] else ""
    return True, f"{lanes} pairs{how}, {describe_plan(plan, call.opnds, call.scope.nthreads)}"


def _vector_ok(call):
    plan, why = call.plan(plan_vector)
    if plan is None:
        return False, why
    if not plan.mem:
        return False, "every operand is registers: no memory to move in vectors"
    if all(a.V == 1 for a in plan.mem.values()):
        return False, "no operand moves in vectors" + (f": {why}" if why else "")
    return True, describe_plan(plan, call.opnds, call.scope.nthreads)


def _scalar_ok(call):
    plan, why = call.plan(plan_scalar)
    if plan is None:
        return False, why
    per = "two elements (a float4_e2m1fn byte)" if any(o.ebits < 8 for o in call.opnds) \
        else "one element"
    return True, f"{per} per access, " + describe_plan(plan, call.opnds, call.scope.nthreads)


# ---- emission ------------------------------------------------------------------------------
def _element(E, call, args, dst_dt):
    """One element's result, in dst's dtype."""
    rec, op = call.record, call.op
    if op == "cast":
        return cast_value(E, args[0], call.args[1].dtype, dst_dt, rec.rounding, rec.saturate)
    if op == "fill":
        v = args[0]
        if dst_dt.kind == "storage":
            return cast_value(E, convert(v, F32), F32, dst_dt)
        return convert(v, dst_dt)
    if op in ("zero", "memset"):
        byte = 0 if op == "zero" else int(args[0].value)
        return _memset_value(E, byte, dst_dt)
    return convert(scalar(E, op, rec.compute, list(args), rec.ftz), dst_dt)


def _memset_value(E, byte, dt):
    sdt = storage(dt)
    pattern = int.from_bytes(bytes([byte]) * max(1, sdt.bits // 8), "little")
    if sdt.is_int:
        neg = sdt.kind == "int" and pattern >> (sdt.bits - 1)
        return Const(pattern - (1 << sdt.bits) if neg else pattern, sdt)
    w = 16 if sdt.bits == 16 else 64 if sdt.bits == 64 else 32
    return E.op("mov", (f"b{w}",), sdt, Const(pattern, dtype(f"uint{w}")))


def _pairs(E, call, vals, n, dst_dt, dst_regs):
    """Results of a packed call: two elements per instruction (an odd last one alone)."""
    rec, op = call.record, call.op
    results = {}
    for k in range(0, n - 1, 2):
        if op == "cast":
            lo, hi = vals[1][k], vals[1][k + 1]
            t = "f16x2" if dst_dt is F16 else "bf16x2"
            v = E.op("convert", (t, "f32", "rn", bool(rec.saturate)), U32, hi, lo)
        else:
            v = packed(E, op, rec.compute, [(a[k], a[k + 1]) for a in
                                            (vals[p] for p in range(1, len(call.args)))],
                       call.target)
        ct = dst_dt
        if dst_regs is not None and dst_regs[0].dtype is ct:
            lo, hi = dst_regs[k], dst_regs[k + 1]
        else:
            lo, hi = E.tmp(ct), E.tmp(ct)
        unpair(E, v, lo, hi)
        results[k], results[k + 1] = lo, hi
    if n % 2:
        k = n - 1
        results[k] = _element(E, call, [vals[p][k] for p in range(1, len(call.args))], dst_dt)
    return results


def emit_elementwise(call, plan, use_pairs=False):
    E = Emit()
    rec = call.record
    n = plan.nelem
    opnds = {o.pos: o for o in call.opnds}
    dst = opnds[0]
    dst_dt = dst.dtype
    vals = {}
    for pos, a in enumerate(call.args):
        if pos == 0:
            continue
        if isinstance(a, BufferRegion):
            o = opnds[pos]
            if o.reg:
                vals[pos] = [reg_ref(o.side, m) for m in plan.regs[pos]]
            else:
                got = load(E, o, plan.mem[pos], rec.pad)
                vals[pos] = [got[k] for k in range(n)]
        elif plan.coords:
            vals[pos] = [with_coords(a, {u: v[k] for u, v in plan.coords.items()})
                         for k in range(n)]
        else:
            vals[pos] = [a] * n
    dst_regs = [reg_ref(dst.side, m) for m in plan.regs[0]] if dst.reg else None
    if use_pairs:
        results = _pairs(E, call, vals, n, dst_dt, dst_regs)
    else:
        results = {k: _element(E, call, [vals[p][k] for p in range(1, len(call.args))], dst_dt)
                   for k in range(n)}
    if dst.reg:
        for k in range(n):
            if results[k] is not dst_regs[k]:
                E.put(dst_regs[k], convert(results[k], dst_dt))
    else:
        store(E, dst, plan.mem[0], results)
    return frame(call, plan, E)


def _register(op):
    def emit_packed(call):
        plan = call.plan(plan_vector)[0]
        if call.op == "cast" and not call.plan(pair_plan)[0].legacy:
            return emit_cast_pairs(call, plan, call.plan(pair_plan)[0])
        return emit_elementwise(call, plan, use_pairs=True)

    def emit_vector(call):
        return emit_elementwise(call, call.plan(plan_vector)[0])

    def emit_scalar(call):
        return emit_elementwise(call, call.plan(plan_scalar)[0])

    emit_packed.__doc__ = "Two 16-bit lanes per instruction."
    emit_vector.__doc__ = "Vector loads/stores, one element per instruction."
    emit_scalar.__doc__ = "One element per access and instruction."
    if op in PACKED or op == "cast":
        register(op, "packed", 30, when=[_packed_ok])(emit_packed)
    register(op, "vector", 20, when=[_vector_ok])(emit_vector)
    register(op, "scalar", 0, when=[_scalar_ok])(emit_scalar)


for _op in ELEMENTWISE:
    _register(_op)

__all__ = ["emit_elementwise", "plan_vector", "plan_scalar", "storage"]
