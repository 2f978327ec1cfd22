"""`gemm_async`: one tile op, two instruction families, chosen by where D lives.

D in tensor memory -> tcgen05.mma (sm_100a family, primitives/tcgen05); D in registers ->
wgmma.mma_async (sm_90a, primitives/wgmma).  The front end (builder/mma.py) plans one of
them and records it; the record's `require(target)` is the op's arch gate, so each family
fails on the other's GPU with an ArchError that names the target and the fix, before any
variant is judged.  The variants register with `record=` their family's record type.

Shared here: the enable-input-D ("scale-d") predicates both families take per K step.
"""
from __future__ import annotations

from ..ir import BOOL, Alloc, Buffer, Const, Instr, Load
from ..target.forms import opcode
from .registry import tile_op


def _gate(call):
    req = getattr(call.record, "require", None)
    if req is not None:
        req(call.target)


GEMM_ASYNC = tile_op("gemm_async", requires=_gate, explain_arch="sm_100a")


def enable_d(call, acc):
    """(statements, first step's enable-input-d, later steps') as predicate registers -- the
    form CUTLASS uses (`setp` then `p`); a literal 0/1 assembles but is not relied on.
    `acc` is the user's `accumulate` (a bool Expr): false makes the first step D = A * B."""
    e = call.an.simplify(acc) if call.an is not None else acc
    pb = Buffer("enable_d", (2,), BOOL, "local")
    t, f = Load(pb, (Const(0),), BOOL), Load(pb, (Const(1),), BOOL)
    st = [Alloc(pb), Instr(opcode("setp", "eq", "b32"), (t, "0", "0"), form="setp", outs=1)]
    if isinstance(e, Const) and not e.value:
        st.append(Instr(opcode("setp", "ne", "b32"), (f, "0", "0"), form="setp", outs=1))
        return st, f, t
    return st, (t if isinstance(e, Const) else e), t

