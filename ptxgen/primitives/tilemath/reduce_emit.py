"""The statements of a reduction (reduce.py has the partition and the variants).

In order: each thread's elements of each output (a pairwise tree over registers, or the
serial loop over a memory source), the lane butterfly (shfl.sync.bfly, or redux.sync), the
cross-warp step through the shared scratch between two barriers of the scope, then the
destination: registers in every thread (checked against the dst layout's thread axes) or
memory by each output's first thread.
"""
from __future__ import annotations

import itertools
import math

from ...dtypes import dtype
from ...errors import PtxgenError
from ...ir import (Barrier, BinOp, BOOL, Const, For, If, Let, Load, SpecialReg, Store, Var,
                   VecOperand)
from ..copy.common import analyze_side
from ..copy.reg import add_terms, reg_ref
from .compute import Emit, convert

INT32, U32 = dtype("int32"), dtype("uint32")
OPS = {"sum": "add", "reduce_max": "max", "reduce_min": "min"}


# ---- coordinates ----------------------------------------------------------------------------
def _digits(x, leaves, what):
    """sum over leaves of digit_i(x) * what(leaf): x in the leaves' mixed radix."""
    total, div = 0, 1
    for l in leaves:
        w = what(l)
        if w:
            d = x if div == 1 else x // div
            d = d % l.extent
            total = d * w if isinstance(total, int) and total == 0 else total + d * w
        div *= l.extent
    return total


def _kept_linear(coords, src, axes):
    """Row-major index over the kept dims of the source region (= the dst's linear index)."""
    ext = [e for _, e in src.region]
    o, mul = 0, 1
    for d in reversed(range(len(ext))):
        if d in axes:
            continue
        o = add_terms(o, coords[d] * mul if mul != 1 else coords[d])
        mul *= ext[d]
    return o


def _dst_indices(dst, src, axes, coords):
    """dst indices of the output at source coordinates `coords` (kept dims, in order)."""
    kept = [coords[d] for d, (_, e) in enumerate(src.region) if d not in axes and e > 1]
    out, k = [], 0
    for s, e in dst.region:
        if e > 1:
            c = kept[k]
            k += 1
            out.append(c + s if not (isinstance(s, int) and s == 0) else c)
        else:
            out.append(s)
    return tuple(Const(i) if isinstance(i, int) else i for i in out)


def _src_indices(src, coords):
    return tuple(Const(s + c) if isinstance(s, int) and isinstance(c, int) else c + s
                 for (s, _), c in zip(src.region, coords))


# ---- emission -----------------------------------------------------------------------------
def _identity(op, dt):
    if op == "add":
        return Const(0, dt) if dt.is_int else Const(0.0, dt)
    if dt.is_int:
        lo, hi = (0, (1 << dt.bits) - 1) if dt.kind == "uint" else \
            (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1)
        return Const(lo if op == "max" else hi, dt)
    return Const(-math.inf if op == "max" else math.inf, dt)


def _tree(E, op, acc, vals):
    """Pairwise reduction of expressions into register `acc` (the order is the tree's)."""
    vals = list(vals)
    while len(vals) > 1:
        nxt = [E.reg(BinOp(op, vals[i], vals[i + 1], acc.dtype), acc.dtype)
               for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    E.put(acc, vals[0])


def _lane_stage(E, st, accs, op, use_redux):
    dt = accs[0].dtype
    if use_redux:
        for a in accs:
            E.instr("redux", (op, "s32" if dt.kind == "int" else "u32"), (a, a, Const(-1)))
        return
    members = -1 if st.T >= 32 else (1 << st.T) - 1     # a CTA of fewer than 32 threads
    for l in st.lanes:
        s = l.tstride
        while s < l.tstride * l.extent:
            for a in accs:
                E.put(a, BinOp(op, a, _shfl(E, a, s, members), dt))
            s *= 2


def _shfl(E, a, mask, members):
    """The partner's value of register `a` (32 bits, or 64 as two halves) across lane mask."""
    dt = a.dtype
    args = (Const(mask), Const(31), Const(members))
    if dt.bits == 64:
        lo, hi, plo, phi = (E.tmp(U32) for _ in range(4))
        E.instr("mov", ("b64",), (VecOperand((lo, hi)), a))
        E.instr("shfl", ("bfly",), (plo, lo) + args)
        E.instr("shfl", ("bfly",), (phi, hi) + args)
        return E.op("mov", ("b64",), dt, VecOperand((plo, phi)))
    return E.op("shfl", ("bfly",), dt, a, *args)


def _warp_stage(E, call, st, accs, outs, op, tid):
    """Partials through shared scratch: warp w (of the CTA) writes scratch[w * K + o]; each
    thread reads its output's warps in order (a tree), between two barriers of the scope."""
    scratch = call.record.scratch
    if scratch is None:
        raise PtxgenError("internal: a cross-warp reduction without its shared scratch")
    K = math.prod(call.dst.shape)
    sbuf = scratch.buffer
    w = Var("wid", INT32)
    E.stmts.append(Let(w, tid // 32, (0, (st.T - 1) // 32)))
    first = 0
    if call.scope.name == "warpgroup":      # each warpgroup its own four warps of scratch
        first = SpecialReg("tid.x") // 128 * 4
    for a, o in zip(accs, outs):
        E.stmts.append(Store(sbuf, ((w + first) * K + o if not isinstance(first, int) else
                                    w * K + o,), a))
    E.stmts.append(_barrier(call))
    wl = [(l.extent, l.tstride // 32) for l in st.warps]
    base = w
    for e, sw in wl:
        base = base - (w // sw % e) * sw
    wb = Var("wbase", INT32)
    E.stmts.append(Let(wb, base + first if not isinstance(first, int) else base))
    dt = accs[0].dtype
    for a, o in zip(accs, outs):
        parts = []
        for digits in itertools.product(*[range(e) for e, _ in wl]):
            off = sum(d * sw for d, (_, sw) in zip(digits, wl))
            parts.append(Load(sbuf, ((wb + off) * K + o,), dt))
        _tree(E, op, a, parts)
    E.stmts.append(_barrier(call))


def _barrier(call):
    if call.scope.name == "warpgroup":   # named barrier 8 + warpgroup index, 128 threads
        return Barrier("cta", 8 + SpecialReg("tid.x") // 128, 128)
    return Barrier("cta")


def emit_reduce(call, use_redux=False):
    st = call.structure
    rec = call.record
    op = OPS[call.op]
    src = call.src
    axes = set(rec.axes)
    E = Emit()
    pre, tid = [], None
    if st.T > 1:
        tid = Var("tid", INT32)
        pre.append(Let(tid, call.scope.tid, (0, st.T - 1)))
    accs = [E.tmp(rec.acc) for _ in st.kept]
    if st.kind == "reg":
        nd = len(src.region)
        tpart = [_digits(tid, st.threads, lambda l, d=d: l.coords[d]) if tid is not None
                 else 0 for d in range(nd)]
        side = analyze_side(src)
        coords = []
        for a, elems in zip(accs, st.kept):
            _tree(E, op, a, [convert(reg_ref(side, m), rec.acc) for _, m in elems])
            coords.append([add_terms(t, c) for t, c in zip(tpart, elems[0][0])])
    else:
        coords = _mem_accumulate(E, call, st, accs, op, tid, axes)
    if st.lanes:
        _lane_stage(E, st, accs, op, use_redux)
    if st.warps:
        outs = [_kept_linear(c, src, axes) for c in coords]
        _warp_stage(E, call, st, accs, [Const(o) if isinstance(o, int) else o for o in outs],
                    op, tid)
    _write(E, call, st, accs, coords, tid, axes)
    return pre + E.allocs() + E.stmts


def _mem_accumulate(E, call, st, accs, op, tid, axes):
    """This thread's reduced elements of each output, in order, in a serial loop; returns
    the outputs' source coordinates (kept dims; expressions of tid)."""
    src = call.src
    ext = [e for _, e in src.region]
    nd = len(ext)
    kd = [d for d in range(nd) if d not in axes]
    rd = [d for d in range(nd) if d in axes]
    acc_dt = accs[0].dtype
    for a in accs:
        E.put(a, _identity(op, acc_dt))
    tr_i = tid % st.tr if tid is not None and st.tr > 1 else 0
    tk_i = tid // st.tr if tid is not None and st.tk > 1 else 0
    v = Var("v", INT32)
    rounds = -(-st.nred // st.tr)
    r = (v * st.tr + tr_i if st.tr > 1 else v) if rounds > 1 else tr_i
    upd, coords = [], []
    for u, a in enumerate(accs):
        c = [0] * nd
        _unravel(add_terms(tk_i, u * st.tk), [ext[d] for d in kd], kd, c)
        coords.append(list(c))
        _unravel(r, [ext[d] for d in rd], rd, c)
        x = Load(src.buffer, _src_indices(src, c), src.dtype)
        upd.append(Store(a.buffer, a.indices, BinOp(op, a, convert(x, acc_dt), acc_dt)))
    if st.nred % st.tr:
        upd = [If(BinOp("lt", r if not isinstance(r, int) else Const(r), Const(st.nred), BOOL),
                  upd)]
    E.stmts += [For(v, Const(0), Const(rounds), 1, "serial", upd)] if rounds > 1 else upd
    return coords


def _unravel(i, exts, dims, c):
    """c[dims] = the row-major coordinates of linear index i over extents `exts`."""
    div = 1
    for k in reversed(range(len(exts))):
        e = exts[k]
        if isinstance(i, int):
            c[dims[k]] = i // div % e
        else:
            x = i if div == 1 else i // div
            c[dims[k]] = x % e if k else x
        div *= e


def _write(E, call, st, accs, coords, tid, axes):
    dst, src = call.dst, call.src
    dside = analyze_side(dst)
    if dside.space == "local":
        for a, m in zip(accs, _dst_registers(call, st, coords, axes)):
            E.put(reg_ref(dside, m), convert(a, dst.dtype))
        return
    stores = [Store(dst.buffer, _dst_indices(dst, src, axes, c), convert(a, dst.dtype))
              for a, c in zip(accs, coords)]
    if tid is not None and any(l.red for l in st.threads):
        if st.kind == "mem":
            red = tid % st.tr
        else:
            red = _digits(tid, st.threads, lambda l: 1 if l.red else 0)
        stores = [If(BinOp("eq", red, Const(0), BOOL), stores)]
    E.stmts += stores


_MINE = {"thread": lambda t: {}, "warp": lambda t: {"laneid": t},
         "warpgroup": lambda t: {"tid_in_wg": t, "laneid": t % 32, "wid_in_wg": t // 32},
         "cta": lambda t: {"tid": t, "laneid": t % 32, "warpid": t // 32}}


def _dst_registers(call, st, coords, axes):
    """The register of each output in a register dst, checked: each thread must hold (by
    dst's thread axes) the outputs it computed, in the same register in every thread."""
    import numpy as np
    dst, src = call.dst, call.src
    lay, shape = dst.buffer.layout, dst.buffer.shape
    masks = _covered_bits(analyze_side(dst))
    out = []
    for q, c in enumerate(coords):
        ms = set()
        for t in range(st.T):
            idx = [_eval(i, t) for i in _dst_indices(dst, src, axes, [_eval(x, t) for x in c])]
            if lay is None:
                m, held = int(np.ravel_multi_index(idx, shape)), {}
            else:
                held = dict(lay.apply(*idx, shape=shape))
                m = held.pop("m")
            mine = _MINE[call.scope.name](t)
            for ax, val in held.items():
                have = mine.get(ax, 0 if not val else None)
                if have is not None and ax in masks:
                    have &= masks[ax]      # a replicated tile: the other bits share the value
                if have != val:
                    raise PtxgenError(
                        f"the register dst {dst} puts output {tuple(idx)} in another thread "
                        f"than thread {t} of the {call.scope.name} scope, which computes it; give "
                        f"it the thread axes of the source's kept dimensions, or none")
            ms.add(m)
        if len(ms) != 1:
            raise PtxgenError(f"the register dst {dst} keeps output {q} in different registers "
                              f"in different threads; give it the source's kept thread axes")
        out.append(ms.pop())
    return out


def _covered_bits(side) -> dict:
    """Per thread axis of a register layout, the id bits it decides, where its leaves are
    disjoint powers of two (a tile replicated over the other bits); axes without that
    shape are left out (compared whole)."""
    bits: dict = {}
    for lf in side.leaves:
        for ax, v in lf.axes.items():
            e = lf.extent
            if e & (e - 1) or v & (v - 1) or bits.get(ax, 0) & ((e - 1) * v):
                bits[ax] = None
            elif bits.get(ax, 0) is not None:
                bits[ax] = bits.get(ax, 0) | (e - 1) * v
    return {ax: b for ax, b in bits.items() if b is not None}


def _eval(x, t):
    """A coordinate expression's value at tid = t (the only variable in it)."""
    if isinstance(x, int):
        return x
    if isinstance(x, Const):
        return x.value
    if isinstance(x, Var):
        return t
    return _EVAL[x.op](_eval(x.a, t), _eval(x.b, t))


_EVAL = {"add": int.__add__, "sub": int.__sub__, "mul": int.__mul__, "floordiv": int.__floordiv__,
         "floormod": int.__mod__}
