"""Execution scopes of tile primitives: how many threads cooperate and who is who.

thread (1), warp (32 lanes), warpgroup (4 consecutive warps, 128 threads), cta
(every thread of the block) and cluster (every thread of a thread-block cluster; only the
ops that say so take it, and their record carries the cluster's shape).  `tid` is the id of a thread within its scope instance;
`axis` is the layout thread axis that names that id (for register layouts).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import PtxgenError, TraceError
from ..ir import Const, SpecialReg

SCOPES = ("thread", "warp", "warpgroup", "cta", "cluster")


@dataclass(frozen=True)
class ExecScope:
    name: str
    nthreads: int
    tid: object          # IR expression of the thread id within the scope
    axis: str | None     # layout thread axis for register layouts
    active: str = ""     # narrowed: which of the instance's threads these are

    def __str__(self):
        n = f"{self.nthreads} thread{'s' if self.nthreads > 1 else ''}"
        return f"{self.name} ({n}{', ' + self.active if self.active else ''})"


def narrow(scope: ExecScope, first: int, step: int, count: int) -> ExecScope:
    """The part of `scope` a branch leaves active: threads first, first + step, ... (count),
    renumbered 0..count-1.  No register-layout axis numbers them, so only variants that
    synthesize their own partition can run on it."""
    tid = scope.tid if first == 0 else scope.tid - first
    if step != 1:
        tid = tid // step
    last = first + step * (count - 1)
    which = f"thread {first}" if count == 1 else \
        f"threads {first}..{last}{f' step {step}' if step > 1 else ''}"
    what = f"only {which} of {scope.nthreads} active"
    return ExecScope(scope.name, count, tid if count > 1 else Const(0), None, what)


def make_scope(name: str, block, cluster=None) -> ExecScope:
    """The scope `name` inside a CTA of `block` = (x, y, z) threads (`cluster`: the CTAs of a
    cluster, for the cluster scope)."""
    bx, by, bz = (tuple(block) + (1, 1, 1))[:3]
    total = bx * by * bz
    if name == "thread":
        return ExecScope("thread", 1, Const(0), None)
    if name == "warp":
        if total % 32:   # warps are cut from the linear thread index: the last one is partial
            raise TraceError(
                f"the warp scope needs whole warps, but the block {(bx, by, bz)} has {total} "
                f"threads: its last warp has {total % 32} lanes, and the work of the missing "
                f"ones would be skipped; make the block a multiple of 32 threads or use the "
                f"thread or cta scope")
        return ExecScope("warp", 32, SpecialReg("laneid"), "laneid")
    if name == "warpgroup":
        if by * bz != 1:
            raise TraceError(f"the warpgroup scope needs a 1-D block, but the block is "
                             f"{(bx, by, bz)}; give all threads to x (a multiple of 128) or use "
                             f"the warp or cta scope")
        if bx % 128:
            raise TraceError(
                f"the warpgroup scope needs whole warpgroups, but the block {(bx, by, bz)} has "
                f"{bx} threads: its last warpgroup has {bx % 128}, and the work of the missing "
                f"ones would be skipped; make blockDim.x a multiple of 128 or use the warp or "
                f"cta scope")
        return ExecScope("warpgroup", 128, SpecialReg("tid.x") % 128, "tid_in_wg")
    if name == "cta":
        if by * bz == 1:
            tid = SpecialReg("tid.x")
        else:
            tid = SpecialReg("tid.x") + SpecialReg("tid.y") * bx + SpecialReg("tid.z") * (bx * by)
        return ExecScope("cta", total, tid, "tid")
    if name == "cluster":
        if cluster is None:
            raise PtxgenError("the cluster scope is taken only by copy_async / async_commit / "
                              "async_wait in a kernel with @pg.kernel(..., cluster=(x, y, z))")
        cx, cy, cz = (tuple(cluster) + (1, 1, 1))[:3]
        cta = make_scope("cta", block).tid
        return ExecScope("cluster", total * cx * cy * cz,
                         SpecialReg("cluster_ctarank") * total + cta, None)
    raise PtxgenError(f"unknown execution scope {name!r}; scopes are {', '.join(SCOPES)}")
