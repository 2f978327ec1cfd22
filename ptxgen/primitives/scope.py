"""Execution scopes of tile primitives: how many threads cooperate and who is who.

thread (1), warp (32 lanes), warpgroup (4 consecutive warps, 128 threads), cta
(every thread of the block) and cluster (every thread of a thread-block cluster; only the
ops that say so take it, and their record carries the cluster's shape).  `tid` is the id of a thread within its scope instance;
`axis` is the layout thread axis that names that id (for register layouts).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import PtxgenError
from ..ir import Const, SpecialReg

SCOPES = ("thread", "warp", "warpgroup", "cta", "cluster")


@dataclass(frozen=True)
class ExecScope:
    name: str
    nthreads: int
    tid: object          # IR expression of the thread id within the scope
    axis: str | None     # layout thread axis for register layouts

    def __str__(self):
        return f"{self.name} ({self.nthreads} thread{'s' if self.nthreads > 1 else ''})"


def make_scope(name: str, block, cluster=None) -> ExecScope:
    """The scope `name` inside a CTA of `block` = (x, y, z) threads (`cluster`: the CTAs of a
    cluster, for the cluster scope)."""
    bx, by, bz = (tuple(block) + (1, 1, 1))[:3]
    total = bx * by * bz
    if name == "thread":
        return ExecScope("thread", 1, Const(0), None)
    if name == "warp":
        return ExecScope("warp", 32, SpecialReg("laneid"), "laneid")
    if name == "warpgroup":
        if by * bz != 1:
            raise PtxgenError("warpgroup scope needs a 1-D block")
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
