"""Execution scopes of tile primitives: how many threads cooperate and who is who.

thread (1), warp (32 lanes), warpgroup (4 consecutive warps, 128 threads) and cta
(every thread of the block).  `tid` is the id of a thread within its scope instance;
`axis` is the layout thread axis that names that id (for register layouts).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import PtxgenError, TraceError
from ..ir import Const, SpecialReg

SCOPES = ("thread", "warp", "warpgroup", "cta")


@dataclass(frozen=True)
class ExecScope:
    name: str
    nthreads: int
    tid: object          # IR expression of the thread id within the scope
    axis: str | None     # layout thread axis for register layouts

    def __str__(self):
        return f"{self.name} ({self.nthreads} thread{'s' if self.nthreads > 1 else ''})"


def make_scope(name: str, block) -> ExecScope:
    """The scope `name` inside a CTA of `block` = (x, y, z) threads."""
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
    raise PtxgenError(f"unknown execution scope {name!r}; scopes are {', '.join(SCOPES)}")
