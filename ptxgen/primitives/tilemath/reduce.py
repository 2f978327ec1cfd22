"""sum / max / min over axes of a region: in each thread, across lanes, across warps.

Which thread holds which element comes from the source: a register tile's layout (its
thread axes, as copy's reg path reads them), or, for a global/shared source, a synthesized
split of the scope's T threads into Tk groups (one per kept output, round robin) of Tr
consecutive threads that share an output's reduced elements (thread r of a group takes
elements r, r + Tr, ... in a serial loop).  Then:

1. in a thread: its own elements of each output, a pairwise tree (registers) or in order
   (the loop over memory);
2. across lanes: a butterfly of `shfl.sync.bfly` over the lane bits the reduced thread
   leaves occupy (or one `redux.sync` for 32-bit integers when they are all 32 lanes);
3. across warps (leaves at thread strides >= 32): every lane writes its warp's partial to
   the shared scratch the front end allocated, one barrier, every thread reads the
   partials of its output's warps in warp order and reduces them as a tree, a barrier.

Every thread of a group ends with the same bits (each step is symmetric), so a register
destination is written by all and a memory destination by the group's first thread.
Float sums accumulate in float32 (16-bit operands) or the destination's float dtype; the
tree depth D = ceil(log2 R) + log2(lanes) + ceil(log2 W) (R per-thread elements, in order:
R) bounds the error by D * 2^-p * sum|x| (first order; p = 24 for float32).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

from ...errors import PtxgenError
from ...ir import BufferRegion
from ...target import has_opcode
from ..call import RegionCall
from ..copy.common import Leaf, Side, analyze_side, refine
from ..copy.reg import check_reg_side, thread_map, tmap_stride
from ..registry import register
from .reduce_emit import OPS, emit_reduce

@dataclass(frozen=True)
class ReduceRecord:
    op: str                 # "sum" | "max" | "min"
    axes: tuple             # reduced dims of the source region
    acc: object             # accumulation dtype
    scratch: object = None  # BufferRegion of shared scratch (cross-warp stage), or None


class ReduceCall(RegionCall):
    @cached_property
    def structure(self):
        return structure(self.src, self.dst, self.record.axes, self.scope)

    def describe(self) -> str:
        return (f"pg.tile.{self.scope.name}.{self.record.op}({self.dst}, {self.src}, axis="
                f"{self.record.axes}) [{self.src.dtype} -> {self.dst.dtype}, {self.scope}]")


@dataclass
class TLeaf:
    extent: int
    tstride: int            # thread-id stride within the scope
    red: bool               # a reduced dimension's leaf
    coords: list            # coordinate stride per source dim


@dataclass
class Structure:
    kind: str               # "reg" | "mem"
    threads: list           # TLeaf, radix order (innermost first), split at the warp size
    kept: list              # per kept output q: list of (const coords, reg m) of its elements
    T: int
    tr: int = 1             # mem: threads sharing an output
    tk: int = 1             # mem: output groups
    nred: int = 0           # mem: reduced elements per output

    @property
    def lanes(self) -> list:
        return [l for l in self.threads if l.red and l.tstride < 32]

    @property
    def warps(self) -> list:
        return [l for l in self.threads if l.red and l.tstride >= 32]


def _tags(region):
    """One side per source dim whose stride is that dim's coordinate."""
    ext = [e for _, e in region.region]
    return [Side(region, region.buffer, "logical",
                 [Leaf(e, 1 if k == d else 0) for k, e in enumerate(ext)], 0)
            for d in range(len(ext))]


def _split_at_warp(leaves, T):
    out = []
    for l in leaves:
        s, e = l.tstride, l.extent
        if s < 32 < s * e:
            if 32 % s or e % (32 // s):
                raise PtxgenError(f"a thread leaf of {e} threads at stride {s} straddles warps "
                                  f"unevenly; use a layout whose thread extents are powers of 2")
            k = 32 // s
            out.append(TLeaf(k, s, l.red, l.coords))
            out.append(TLeaf(e // k, 32, l.red, [c * k for c in l.coords]))
        else:
            out.append(l)
    for l in out:
        if l.red and l.tstride < 32 and (l.extent & (l.extent - 1) or l.tstride & (l.tstride - 1)):
            raise PtxgenError(f"{l.extent} lanes at stride {l.tstride} cannot be reduced with a "
                              f"butterfly; use power-of-2 thread extents")
    return out


def structure(src: BufferRegion, dst: BufferRegion, axes, scope) -> Structure:
    """Who holds which element and which output (PtxgenError naming the fix)."""
    T = scope.nthreads
    side = analyze_side(src)
    if side.space == "local":
        return _reg_structure(src, side, set(axes), scope)
    if side.space not in ("global", "shared"):
        raise PtxgenError(f"{src.buffer.name} is in {side.space} memory")
    return _mem_structure(src, set(axes), T)


def _reg_structure(src, side, axes, scope):
    why = check_reg_side(side)
    if why:
        raise PtxgenError(why)
    tags = _tags(src)
    common = refine([side] + tags)
    if common is None:
        raise PtxgenError(f"the layout of {src.buffer.name} does not split along its dimensions")
    nd = len(tags)
    tl, rl = [], []
    for k in range(len(common[0])):
        lf = common[0][k]
        if lf.extent == 1:
            continue
        coords = [common[1 + d][k].stride for d in range(nd)]
        red = any(coords[d] for d in axes)
        if lf.axes:
            if lf.stride:
                raise PtxgenError("a register-layout leaf has both a thread and a register stride")
            tl.append((lf.extent, lf.axes, red, coords))
        else:
            rl.append((lf.extent, lf.stride, red, coords))
    tmap, why = thread_map([(e, a) for e, a, _, _ in tl], scope)
    if tmap is None:
        raise PtxgenError(why)
    threads = sorted((TLeaf(e, tmap_stride(a, scope), red, c) for e, a, red, c in tl),
                     key=lambda l: l.tstride)
    threads = _split_at_warp(threads, scope.nthreads)
    kept_l = [l for l in rl if not l[2]]
    red_l = [l for l in rl if l[2]]
    kept = []
    for kd in itertools.product(*[range(l[0]) for l in kept_l]):
        elems = []
        for rd in itertools.product(*[range(l[0]) for l in red_l]):
            m = side.base + sum(d * l[1] for d, l in zip(kd + rd, kept_l + red_l))
            c = [sum(d * l[3][i] for d, l in zip(kd + rd, kept_l + red_l)) for i in range(nd)]
            elems.append((c, m))
        kept.append(elems)
    return Structure("reg", threads, kept, scope.nthreads)


def _mem_structure(src, axes, T):
    ext = [e for _, e in src.region]
    K = math.prod(e for d, e in enumerate(ext) if d not in axes)
    R = math.prod(e for d, e in enumerate(ext) if d in axes)
    tk = None
    for c in sorted((d for d in range(1, T + 1) if T % d == 0 and K % d == 0), reverse=True):
        tr = T // c
        if tr & (tr - 1) == 0 or tr % 32 == 0:
            tk = c
            break
    if tk is None:
        raise PtxgenError(f"a {T}-thread scope cannot share reductions; use a power of 2 or a "
                          f"multiple of 32 threads")
    tr = T // tk
    if K // tk > 256:
        raise PtxgenError(f"each thread would accumulate {K // tk} outputs; reduce a smaller "
                          f"region per call or use a larger scope")
    nd = len(ext)
    threads = _split_at_warp([TLeaf(tr, 1, True, [0] * nd), TLeaf(tk, tr, False, [0] * nd)]
                             if T > 1 else [], T)
    threads = [l for l in threads if l.extent > 1]
    return Structure("mem", threads, [[] for _ in range(K // tk)], T, tr, tk, R)


def scratch_elems(src, dst, axes, scope, block) -> int:
    """Shared scratch elements the cross-warp stage needs (0: none): the CTA's warps x
    outputs (every warpgroup of a warpgroup-scope call has its own four warps' part)."""
    st = structure(src, dst, axes, scope)
    if not st.warps:
        return 0
    return -(-math.prod(block) // 32) * math.prod(dst.shape)


# ---- variants ------------------------------------------------------------------------------
def _struct(call):
    try:
        return call.structure, ""
    except PtxgenError as e:
        return None, str(e)


def _serial_ok(call):
    st, why = _struct(call)
    if st is None:
        return False, why
    if st.lanes or st.warps:
        return False, "the reduced elements are spread over threads"
    return True, f"in each thread ({len(st.kept)} output(s))"


def _shfl_ok(call):
    st, why = _struct(call)
    if st is None:
        return False, why
    if not (st.lanes or st.warps):
        return False, "nothing to reduce across threads"
    dt = call.record.acc
    if dt.bits > 64:
        return False, f"{dt} accumulators have no shuffle form"
    lanes = math.prod(l.extent for l in st.lanes)
    w = math.prod(l.extent for l in st.warps)
    return True, (f"{lanes} lane(s) by shfl.sync.bfly" + (f", {w} warp(s) through shared "
                                                         f"memory" if st.warps else ""))


def _redux_ok(call):
    ok, why = _shfl_ok(call)
    if not ok:
        return False, why
    st, dt = call.structure, call.record.acc
    if not (dt.is_int and dt.bits == 32):
        return False, f"redux.sync reduces 32-bit integers; the accumulator is {dt}"
    if not has_opcode("redux.sync", call.target):
        return False, f"redux.sync needs sm_80; the target is {call.target}"
    if math.prod(l.extent for l in st.lanes) != 32:
        return False, "redux.sync reduces whole warps; the reduced lanes are fewer than 32"
    return True, "redux.sync over 32 lanes" + (", warps through shared memory" if st.warps else "")


for _op in OPS:
    register(_op, "redux", 20, when=[_redux_ok])(
        lambda call: emit_reduce(call, use_redux=True))
    register(_op, "shfl", 10, when=[_shfl_ok])(lambda call: emit_reduce(call))
    register(_op, "serial", 0, when=[_serial_ok])(lambda call: emit_reduce(call))


__all__ = ["ReduceCall", "ReduceRecord", "structure", "scratch_elems"]
