"""Per-kernel memory bookkeeping shared by the pools and the checked PTX helpers.

One `AllocState` hangs off each TraceContext.  It exists so that facts that span several
calls (one arena, one tcgen05 granularity, a relinquished permit, TMEM columns live at once,
every pool committed and every TMEM allocation freed) are checked while tracing, at the
user's line, instead of surfacing as a hang or a poisoned CUDA context at run time.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..analysis.uniform import uniform_within
from .context import current, user_src
from ..errors import ResourceError
from ..target import TMEM_COLS
from ..ir import Alloc, BinOp, Cast, Var, walk



def resource_error(msg: str, src: str | None = None) -> ResourceError:
    """A ResourceError located at `src` (default: the user's current line)."""
    return ResourceError(f"{src or user_src()}: {msg}")


class Resources(NamedTuple):
    """What a kernel (or a part of it) needs, composable like JAX Mosaic's `Resources`.

    `a + b`: both are live at once (sizes add).  `a | b`: alternatives that reuse the same
    space, e.g. regions rewound with `move_base_to` (sizes take the max).  A NamedTuple
    (immutable, compared by value) rather than a frozen dataclass, whose generated methods
    slow `import ptxgen` (benchmarks/RESULTS-archive.md, seventh session)."""
    smem_static_bytes: int = 0
    smem_dynamic_bytes: int = 0
    barriers: int = 0
    tmem_cols: int = 0

    @property
    def smem_bytes(self) -> int:
        return self.smem_static_bytes + self.smem_dynamic_bytes

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(*(a + b for a, b in zip(self, other)))

    def __or__(self, other: "Resources") -> "Resources":
        return Resources(*(max(a, b) for a, b in zip(self, other)))

    def as_dict(self) -> dict:
        d = self._asdict()
        d["smem_bytes"] = self.smem_bytes
        return d

    def __str__(self) -> str:
        return (f"smem {self.smem_bytes} B ({self.smem_static_bytes} static + "
                f"{self.smem_dynamic_bytes} dynamic), {self.barriers} mbarrier(s), "
                f"{self.tmem_cols} TMEM column(s)")


def static_smem_bytes(body) -> int:
    """Bytes of static `.shared` allocations in an IR body (what ptxas adds up)."""
    total = 0

    def visit(s):
        nonlocal total
        if isinstance(s, Alloc) and s.buffer.scope == "shared":
            b = s.buffer
            total += max(1, math.ceil(b.span_elems() * b.dtype.bits / 8))
    walk(body, visit)
    return total


def resources_of(kernel) -> Resources:
    """The Resources of a traced pg.Kernel (or PrimFunc): what its pools recorded, else what the
    IR alone shows (static allocations and the dynamic arena size)."""
    recorded = getattr(kernel, "resources", None)
    if isinstance(recorded, dict) and isinstance(recorded.get("memory"), Resources):
        return recorded["memory"]
    func = getattr(kernel, "ir", kernel)
    return Resources(static_smem_bytes(func.body), func.dynamic_smem_bytes)


class AllocState:
    """Kernel-wide facts; created on first use, finalized when tracing ends."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.smem_pool = None
        self.tmem_pools: list = []
        self.tmem_buffers: dict = {}      # tmem buffer uid -> owning TMEMPool
        self.cta_group: tuple | None = None   # (n, src) of the first tcgen05 use
        self.relinquished: str | None = None  # src of relinquish_alloc_permit
        self.tmem_live = 0
        self.tmem_peak = 0
        self.barrier_bufs: dict = {}      # mbarrier buffers not owned by a pool: uid -> count
        self.tmem_base = None             # the latest TMEM allocation: its slot or base Var
        ctx.finalizers.append(self.finalize)

    # ---- tcgen05 rules --------------------------------------------------------------
    def use_cta_group(self, n, what: str):
        if n not in (1, 2):
            raise resource_error(f"{what}: cta_group={n!r} must be 1 (one CTA) or 2 (a CTA "
                                 f"pair in a cluster)")
        if self.cta_group is None:
            self.cta_group = (n, user_src())
        elif self.cta_group[0] != n:
            raise resource_error(
                f"{what} uses cta_group={n} but this kernel already uses cta_group="
                f"{self.cta_group[0]} (at {self.cta_group[1]}); ptxas rejects a kernel that mixes "
                f"single-CTA and CTA-pair tcgen05 granularity: use cta_group="
                f"{self.cta_group[0]} everywhere")

    def tmem_acquire(self, ncols: int, what: str):
        if self.relinquished is not None:
            raise resource_error(
                f"{what} after tcgen05.relinquish_alloc_permit (at {self.relinquished}): the CTA "
                f"gave up its right to allocate; relinquish only after the last allocation "
                f"(tmem.dealloc(relinquish=False) for all but the last pool)")
        if self.tmem_live + ncols > TMEM_COLS:
            raise resource_error(
                f"{what} of {ncols} columns would make {self.tmem_live + ncols} TMEM columns "
                f"live at once, past the {TMEM_COLS} an SM has; dealloc the earlier allocation "
                f"first or shrink total_cols")
        self.tmem_live += ncols
        self.tmem_peak = max(self.tmem_peak, self.tmem_live)

    def tmem_release(self, ncols: int):
        self.tmem_live = max(0, self.tmem_live - ncols)

    # ---- end of tracing -------------------------------------------------------------
    def resources(self) -> Resources:
        pool = self.smem_pool
        dyn = self.ctx.func.dynamic_smem_bytes
        bars = sum(self.barrier_bufs.values()) + (pool.barrier_count if pool else 0)
        return Resources(static_smem_bytes(self.ctx.func.body), dyn, bars, self.tmem_peak)

    def finalize(self):
        if self.smem_pool is not None:
            self.smem_pool._finalize()
        for t in self.tmem_pools:
            t._finalize()
        r = self.resources()
        self.ctx.resources.update(r.as_dict())
        self.ctx.resources["memory"] = r


def state(ctx=None) -> AllocState:
    """The AllocState of the kernel being traced (created on first use)."""
    ctx = ctx or current()
    st = ctx.__dict__.get("_alloc_state")
    if st is None:
        st = ctx.__dict__["_alloc_state"] = AllocState(ctx)
    return st


def require_top_level(what: str):
    """Collective sequences (CTA barriers inside) must run on every thread: not in if_/loops."""
    ctx = current()
    if len(ctx.bodies) != 1:
        raise resource_error(f"{what} must be called at the top level of the kernel body, not "
                             f"inside pg.if_/pg.while_/loops: it contains a CTA barrier that "
                             f"every thread must reach, and later code reads what it defines")


def require_full_warp(what: str):
    """Reject the classic mistake of issuing a .sync.aligned warp collective from one lane: an
    enclosing pg.if_ that analysis.uniform proves to split a warp."""
    ctx = current()
    for cond in ctx.active_mask:
        if not uniform_within(ctx, cond, 32, prove_split=True)[0]:
            raise resource_error(
                f"{what} is .sync.aligned: all 32 lanes of one warp must execute it, but an "
                f"enclosing pg.if_ selects only some lanes of a warp; guard it with a warp-uniform "
                f"condition such as `pg.if_(pg.warp_id() == 0)`")


# ---- TMEM liveness, for the tcgen05 front ends ------------------------------------------
def _vars(e, out):
    if isinstance(e, Var):
        out.add(e.uid)
    elif isinstance(e, BinOp):
        _vars(e.a, out)
        _vars(e.b, out)
    elif isinstance(e, Cast):
        _vars(e.a, out)
    return out


def check_tmem_live(buf):
    """For tcgen05 primitives: raise if `buf` (a TMEM tensor) is used outside its pool's
    commit..dealloc window.  Tensors declared by hand (no pool) pass."""
    b = getattr(buf, "buffer", buf)   # a TensorHandle or a Buffer
    st = state()
    pool = st.tmem_buffers.get(b.uid)
    if pool is None and b.tmem_addr is not None:
        used = _vars(b.tmem_addr, set())
        pool = next((p for p in st.tmem_pools if p._base.uid in used), None)
    if pool is not None:
        pool.check_live(b)
