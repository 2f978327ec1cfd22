"""TMEM <-> registers (`tmem_load` / `tmem_store`: tcgen05.ld / tcgen05.st) and shared ->
TMEM (`tmem_copy`: tcgen05.cp).

Why: the register side of tcgen05.ld/st is fixed by the instruction shape, so the shape and
`.xN` are *chosen from the register layout*: each variant (32x32b, 16x256b) models its
fragment (ptxgen.primitives.tmem_layout) and accepts only a register layout that puts every
element exactly where that fragment delivers it; otherwise it says which element disagrees.

    regs = pg.alloc_local((128, 32), "float32", layout=register_layout("32x32b", 128, 32))
    pg.tile.cta.tmem_load(regs, acc[0:128, 0:32])       # 4 warps x tcgen05.ld...32x32b.x32

Scopes: warp (a 32- or 16-row region; the region must lie in the warp's TMEM lane quarter,
which is warp_id % 4 -- not checkable at trace time), warpgroup or a 128-thread cta (128 rows;
warp w reads lanes 32*(w % 4)...).  Registers are 32-bit elements of a local buffer.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...errors import LayoutError, PtxgenError
from ...layout import index_grid, per_element
from ...ir import Instr, Let, SpecialReg, Var, VecOperand, cast
from ...target.forms import opcode
from .. import tmem_layout as TL
from ..registry import predicate, register
from . import common as C
from .desc import desc_stmts, smem_operand

_U32 = _dtype("uint32")
_AXES = {"warp": {"laneid": 1}, "warpgroup": {"tid_in_wg": 1, "laneid": 1, "wid_in_wg": 32},
         "cta": {"tid": 1, "laneid": 1, "warpid": 32}}


def _thread_of(o, scope):
    """Thread index of register-layout offsets `o` (ints, or numpy arrays of them)."""
    import numpy as np
    w = _AXES[scope]
    bad = [a for a in o if a not in w and a != "m" and np.any(o[a])]
    if bad:
        raise PtxgenError(f"the register layout uses the {bad[0]} axis, which does not number "
                          f"the threads of the {scope} scope")
    return sum(o.get(a, 0) * k for a, k in w.items())


@dataclass(frozen=True)
class IoRecord:
    """What tmem_load/tmem_store derive at trace time: every element's (row, col, lane,
    column, thread, register), and the fragment plan per candidate shape."""
    table: object
    plans: dict        # shape -> (plan, why) from fragment_plan
    max_regs: int
    fence: bool


def plan_tmem_io(op, r, t, scope, block, fence=True, dispatch=None, max_regs=128) -> IoRecord:
    """Check a tcgen05.ld/st between registers `r` and TMEM `t` (PtxgenError with the rule);
    the fragment check needs no target, so it runs now, at the user's line."""
    if t.buffer.scope != "tmem":
        raise PtxgenError(f"{op}: {t} is in {t.buffer.root.scope} memory, not tensor memory")
    if r.buffer.root.scope != "local":
        raise PtxgenError(f"{op}: {r} must be registers (a local buffer with a thread-axis "
                          f"layout), not {r.buffer.root.scope} memory")
    if r.buffer.dtype.bits != 32 or t.buffer.dtype.bits != 32:
        raise PtxgenError(f"{op}: 32-bit elements only (registers {r.buffer.dtype}, TMEM "
                          f"{t.buffer.dtype}); .pack::16b is not modelled")
    if len(r.shape) != 2 or r.shape != t.shape[-2:]:
        raise PtxgenError(f"{op}: the register region {r.shape} must be the 2-D shape of the "
                          f"TMEM region {t.shape}")
    if scope == "thread":
        raise PtxgenError(f"{op} is a warp collective (.sync.aligned): use the warp, "
                          f"warpgroup or cta scope")
    rows = t.shape[-2]
    nthreads = {"warp": 32, "warpgroup": 128}.get(scope, block[0])
    if scope == "cta" and (nthreads != 128 or block[1] * block[2] != 1):
        raise PtxgenError(f"{op} at cta scope needs a 1-D block of 128 threads (one per TMEM "
                          f"lane); use the warpgroup scope in larger blocks")
    if not all(isinstance(s, int) for s in r.starts):
        raise PtxgenError(f"{op}: register region {r} needs constant starts (registers "
                          f"are numbered at build time)")
    lanes, cols = _extent(t)
    want = 32 if scope == "warp" else 128
    if lanes not in ((16, 32) if scope == "warp" else (128,)):
        got = f"{rows} rows" + ("" if lanes == rows else f" on {lanes} lanes")
        raise PtxgenError(f"{op}: a {scope} reads {want} TMEM lanes; the region has {got}")
    table = _element_table(r, t, scope)
    why = {}
    for sh in TL.SHAPES:
        if dispatch is None or dispatch == sh:
            why[sh] = fragment_plan(table, sh, scope, lanes, cols, max_regs)
    if not any(p for p, _ in why.values()):
        raise PtxgenError(f"{op}: no tcgen05 shape delivers the register layout "
                          f"{r.buffer.layout!r}: " + "; ".join(
                              f"{sh}: {w}" for sh, (_, w) in why.items()) +
                          " (build it with tmem_layout.register_layout(shape, rows, cols))")
    return IoRecord(table, why, max_regs, fence)


def _extent(t):
    """(lanes, columns) the TMEM region covers: its (rows, columns) in layout D, (128, N/2)
    for layout B's (64, N), a CTA pair's M=128 half."""
    import numpy as np
    i, j = index_grid(t.shape[-2], t.shape[-1])
    lane, col, _ = C.tmem_cell(t, i, j)
    return int(np.max(per_element(lane, i))) + 1, int(np.max(per_element(col, i))) + 1


def _element_table(r, t, scope):
    """Rows (row, col, lane, column, thread, register) for every element of the region, as
    an int64 array.  The layouts are evaluated on whole index arrays (they only use
    + - * // %), so a 128x256 accumulator costs three layout calls, not three per element."""
    import numpy as np
    rb, (r0, c0) = r.buffer, r.starts
    rows, cols = t.shape[-2], t.shape[-1]
    i, j = index_grid(rows, cols)
    o = rb.layout.apply(r0 + i, c0 + j, shape=rb.shape) if rb.layout is not None else \
        {"m": (r0 + i) * rb.shape[1] + c0 + j}
    lane, col, _ = C.tmem_cell(t, i, j)
    cells = [i, j, lane, col, _thread_of(o, scope), o["m"]]
    return np.stack([per_element(x, i) for x in cells], axis=1)


def fragment_plan(table, shape_name, scope, rows, cols, max_regs=128):
    """(instrs, regmap) if every element sits where .shape_name delivers it, else (None, why).
    regmap[p] is the register ("m") of fragment position p (the same in every thread).
    `table` is _element_table's (or any sequence of its 6-tuples); checked as arrays."""
    import numpy as np
    shape = TL.SHAPES[shape_name]
    per_warp = min(rows, 32)
    try:
        instrs = TL.warp_instrs(shape, per_warp, cols, max_regs)
    except LayoutError as e:
        return None, str(e)
    # (thread, fragment position) that delivers each (lane within the warp's quarter, column)
    where_t = np.full((32, cols), -1, dtype=np.int64)
    where_p = np.full((32, cols), -1, dtype=np.int64)
    p0 = 0
    for ins in instrs:
        n = len(ins.cells[0])
        cells = np.asarray(ins.cells, dtype=np.int64)          # [thread][register] -> (lane, col)
        where_t[cells[..., 0], cells[..., 1]] = np.arange(32)[:, None]
        where_p[cells[..., 0], cells[..., 1]] = p0 + np.arange(n)[None, :]
        p0 += n
    i, j, lane, col, thread, m = np.asarray(table, dtype=np.int64).reshape(-1, 6).T
    w, lw = np.divmod(lane, 32)
    delivered = 32 * w + where_t[lw, col]
    p = where_p[lw, col]
    positions, first = np.unique(p, return_index=True)
    first_m = np.zeros(max(p0, 1), dtype=np.int64)
    first_m[positions] = m[first]
    bad = np.flatnonzero((thread != delivered) | (m != first_m[p]))
    if bad.size:
        k = int(bad[0])
        if thread[k] != delivered[k]:
            return None, (f"element ({i[k]}, {j[k]}) (TMEM lane {lane[k]}, column {col[k]}) is "
                          f"in thread {thread[k]} of the register layout, but .{shape_name} "
                          f"delivers it to thread {delivered[k]}")
        return None, (f"the register layout uses register {m[k]} for element ({i[k]}, {j[k]}) "
                      f"but register {first_m[p[k]]} for another thread's element at the same "
                      f".{shape_name} fragment position {p[k]}")
    regmap = {int(positions[x]): int(m[first[x]]) for x in np.argsort(first)}
    return (instrs, regmap), f"{len(instrs)} x .{shape_name}.x{instrs[0].x} per warp"


def _shape_plan(call, shape_name):
    """The fragment plan of `shape_name` (traced already unless dispatch forced another)."""
    rec = call.record
    if shape_name in rec.plans:
        return rec.plans[shape_name]
    lanes, cols = _extent(call.args[1])
    return fragment_plan(rec.table, shape_name, call.scope.name, lanes, cols, rec.max_regs)


def _fits(shape_name):
    def pred(call):
        plan, why = call.plan(_shape_plan, shape_name)
        return plan is not None, why
    return predicate(f"fits_{shape_name}", pred)


def _emit_io(call, shape_name, store):
    r, t = call.args
    instrs, regmap = call.plan(_shape_plan, shape_name)[0]
    out = []
    addr = Var("taddr", _U32)
    base = C.tmem_addr(t)
    if call.scope.name != "warp":      # warp w reads its lane quarter 32 * (w % 4)
        base = base + _quarter()
    out.append(Let(addr, base))
    if call.record.fence:
        out.append(C.fence("after"))
    p0 = 0
    name = "tcgen05_st" if store else "tcgen05_ld"
    for ins in instrs:
        n = len(ins.cells[0])
        regs = VecOperand(tuple(C.reg_ref(r.buffer, regmap[p0 + j]) for j in range(n)))
        p0 += n
        mem = C.AddrOperand(addr, (ins.lane0 << 16) + ins.col0)
        out.append(Instr(opcode(name, shape_name, ins.x), (mem, regs) if store else (regs, mem),
                         form=name, outs=0 if store else 1))
    out.append(Instr(opcode("tcgen05_wait", "st" if store else "ld"), (), form="tcgen05_wait"))
    if call.record.fence:
        out.append(C.fence("before"))
    return out


def _quarter():
    return cast(((SpecialReg("tid.x") >> 5) & 3) << 21, _U32)


for _op, _store in (("tmem_load", False), ("tmem_store", True)):
    for _pri, _sh in ((20, "32x32b"), (10, "16x256b")):
        def _mk(sh=_sh, st=_store):
            def emit(call):
                return _emit_io(call, sh, st)
            emit.__doc__ = f"tcgen05.{'st' if st else 'ld'}.sync.aligned.{sh}.xN.b32"
            return emit
        register(_op, _sh, _pri, when=[C.has_tcgen05, _fits(_sh)])(_mk())


# ---- tcgen05.cp: shared -> TMEM ---------------------------------------------------------------
_CP = {"128x256b": 256, "128x128b": 128}


@dataclass(frozen=True)
class CpRecord:
    """What tmem_copy derives at trace time: a descriptor per tcgen05.cp shape that fits."""
    ops: dict          # shape -> SmemOperand
    why: dict          # shape -> why no descriptor
    fence: bool


def plan_tmem_copy(t, s, fence=True) -> CpRecord:
    """Check TMEM region `t` (128 rows) <- shared tile `s` through a descriptor."""
    if t.buffer.scope != "tmem":
        raise PtxgenError(f"tmem_copy: destination {t} is not in tensor memory")
    if t.buffer.dtype != s.buffer.dtype:
        raise PtxgenError(f"tmem_copy: TMEM {t.buffer.dtype} vs shared {s.buffer.dtype}")
    if t.shape[-2:] != s.shape[-2:] or t.shape[-2] != 128:
        raise PtxgenError(f"tmem_copy: regions {t.shape} / {s.shape} must both be (128, K)")
    bits = s.buffer.dtype.bits
    per = 32 // bits
    for r, c in ((1, 0), (0, 1), (127, t.shape[-1] - 1)):
        if C.tmem_cell(t, r, c) != (r, c // per, c % per):
            raise PtxgenError(f"tmem_copy: TMEM element ({r}, {c}) is at "
                              f"{C.tmem_cell(t, r, c)}; tcgen05.cp writes row r to lane r "
                              f"and packs K {per} per column")
    ops, why = {}, {}
    for name, cbits in _CP.items():
        try:
            ops[name] = smem_operand(s, k_instr=cbits // bits, role="src", major="K")
        except (PtxgenError, LayoutError) as e:
            why[name] = str(e)
    if not ops:
        raise PtxgenError("; ".join(f"{k}: {v}" for k, v in why.items()))
    return CpRecord(ops, why, fence)


def _cp_ok(name):
    def pred(call):
        op = call.record.ops.get(name)
        if op is None:
            return False, call.record.why.get(name, "no descriptor")
        return True, f"{op.n_steps} x tcgen05.cp.{name} ({op.swizzle}, SBO {op.sbo} B)"
    return predicate(f"cp_{name}_descriptor", pred)


def _emit_cp(call, name):
    t, s = call.args
    op = call.record.ops[name]
    st, descs = desc_stmts(op, call.target.arch, "cp_desc")
    addr = Var("cp_tmem", _U32)
    body = st + [Let(addr, C.tmem_addr(t))]
    if call.record.fence:
        body.append(C.fence("after"))
    cols = _CP[name] // 32
    for i, dsc in enumerate(descs):
        body.append(Instr(opcode("tcgen05_cp", name), (C.AddrOperand(addr, i * cols), dsc),
                          form="tcgen05_cp"))
    return C.guarded(call.scope, body)


for _pri, _nm in ((20, "128x256b"), (10, "128x128b")):
    def _mkcp(nm=_nm):
        def emit(call):
            return _emit_cp(call, nm)
        emit.__doc__ = f"tcgen05.cp.cta_group::1.{nm}"
        return emit
    register("tmem_copy", _nm, _pri, when=[C.has_tcgen05, _cp_ok(_nm)])(_mkcp())
