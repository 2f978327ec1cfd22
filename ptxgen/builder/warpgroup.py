"""Warp specialization: warpgroup roles and `setmaxnreg` register reallocation (sm_90a).

A warp-specialized kernel splits its CTA into warpgroups with roles (a TMA producer, MMA
consumers) and moves registers between them: the producer needs few, the consumers' wgmma
accumulators many.  The mistakes this catches at the user's line, instead of as a hang:

  * `setmaxnreg` is `.sync.aligned` over a warpgroup: all four warps must issue it, so it is
    refused under any branch that splits a warpgroup (analysis/uniform.py);
  * the count is a multiple of 8 in [24, 256]; `dec` may only lower and `inc` only raise the
    count the warpgroup has (its entry count: 64 Ki registers / block threads, per 8);
  * an `inc` the SM cannot satisfy blocks forever: the counts of all warpgroups together
    must fit the SM's 64 Ki registers (checked when the kernel is traced).

    with pg.warpgroup_role(0):               # producer (warpgroup 0)
        pg.setmaxnreg(40, "dec")
        ...
    with pg.warpgroup_role(range(1, 3)) as c:    # consumers; c = 0, 1: rank in the role
        pg.setmaxnreg(232, "inc")
        ...
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

from ..analysis.uniform import keeps_whole_warps, uniform_within
from ..errors import TraceError
from ..ir import Instr, SpecialReg
from ..target.forms import opcode
from ..target.table import MAX_REGS_PER_THREAD, REGISTERS_PER_SM, SETMAXNREG_RANGE
from .context import current, fail, user_site
from .control import bind_let, if_

_WG = 128


class _WarpSpec:
    """Per-kernel: the open roles, and each warpgroup's register count as traced."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.roles: list = []          # stack of (range of warpgroups, src)
        self.counts: dict = {}         # warpgroup -> (count, src) after its last setmaxnreg
        ctx.finalizers.append(self.finalize)

    def warpgroups(self) -> int:
        bx, by, bz = (tuple(self.ctx.func.block) + (1, 1, 1))[:3]
        if by * bz != 1 or bx % _WG:
            raise fail(f"warp specialization needs a 1-D block of whole warpgroups (a multiple "
                       f"of {_WG} threads); the block is {tuple(self.ctx.func.block)}")
        return bx // _WG

    def entry_count(self) -> int:
        """Registers per thread at entry: what .maxntid and .minnctapersm 1 leave ptxas."""
        n = self.warpgroups() * _WG
        return min(MAX_REGS_PER_THREAD, REGISTERS_PER_SM // n) // 8 * 8

    def finalize(self):
        if not self.counts:
            return
        n, entry = self.warpgroups(), self.entry_count()
        per = [self.counts.get(w, (entry, "entry"))[0] for w in range(n)]
        total = sum(per) * _WG
        if total > REGISTERS_PER_SM:
            parts = ", ".join(f"warpgroup {w}: {c}" for w, c in enumerate(per))
            src = max(self.counts.values())[1]      # the largest request
            raise TraceError(f"{src}: setmaxnreg: the warpgroups ask for {total} registers "
                             f"({parts} per thread, x {_WG} threads), more than the "
                             f"{REGISTERS_PER_SM} an SM has; a setmaxnreg.inc that cannot be "
                             f"satisfied waits forever: lower the counts so they sum to at "
                             f"most {REGISTERS_PER_SM // _WG} per thread")


def _state(ctx) -> _WarpSpec:
    st = getattr(ctx, "warpspec", None)
    if st is None:
        st = ctx.warpspec = _WarpSpec(ctx)
    return st


def _as_range(wgs) -> range:
    if isinstance(wgs, int) and not isinstance(wgs, bool):
        return range(wgs, wgs + 1)
    if isinstance(wgs, range) and wgs.step == 1 and len(wgs):
        return wgs
    raise fail(f"warpgroup_role takes a warpgroup index or a range of them (range(1, 3)), got "
               f"{wgs!r}")


@contextmanager
def warpgroup_role(wgs):
    """The body runs on the warpgroups `wgs` (an int or a range) only; yields the rank of this
    warpgroup in the role (0 .. len(wgs) - 1).  The branch is uniform over each warpgroup, so
    warpgroup collectives (setmaxnreg, wgmma, pg.tile.warpgroup.*) are allowed inside."""
    ctx = current()
    at = user_site()
    r = _as_range(wgs)
    st = _state(ctx)
    n = st.warpgroups()
    if r.stop > n:
        raise fail(f"warpgroup_role({wgs!r}): the block has {n} warpgroup(s) "
                   f"({n * _WG} threads)")
    for other, src in st.roles:
        if not (set(r) <= set(other)):
            raise fail(f"warpgroup_role({wgs!r}) is nested in the role of warpgroups "
                       f"{list(other)} (at {src}), which does not contain it")
    tid = SpecialReg("tid.x")
    ctx.block_used = True
    outer = list(ctx.active_mask)       # the role's own conditions keep whole warpgroups
    with ExitStack() as stack:
        if len(r) == 1:
            stack.enter_context(if_(tid // _WG == r.start))
        else:
            if r.start > 0:
                stack.enter_context(if_(tid >= _WG * r.start))
            if r.stop < n:
                stack.enter_context(if_(tid < _WG * r.stop))
        # lane 0's copy where every enclosing branch keeps whole warps: ptxas then keeps the
        # rank and the addresses made from it in uniform registers (CUTLASS broadcasts its
        # warpgroup index the same way)
        rank = bind_let(ctx, at, "role_rank", tid // _WG - r.start, (0, len(r) - 1),
                        broadcast=len(r) > 1 and keeps_whole_warps(ctx, outer))
        st.roles.append((r, at.src))
        try:
            yield rank
        finally:
            st.roles.pop()


def setmaxnreg(count, action):
    """Set this warpgroup's registers per thread to `count` ("inc": take registers, waiting
    until the SM has them; "dec": give them back).  Issued by all 128 threads of a
    warpgroup, typically first thing in a `pg.warpgroup_role` body."""
    ctx = current()
    src = user_site().src
    lo, hi, step = SETMAXNREG_RANGE
    if action not in ("inc", "dec"):
        raise fail(f"setmaxnreg action must be 'inc' or 'dec', got {action!r}")
    if not isinstance(count, int) or isinstance(count, bool) or not lo <= count <= hi \
            or count % step:
        raise fail(f"setmaxnreg({count!r}, {action!r}): the register count must be a multiple "
                   f"of {step} in [{lo}, {hi}] (PTX ISA setmaxnreg)")
    for cond in ctx.active_mask:
        ok, why = uniform_within(ctx, cond, _WG)
        if not ok:
            raise fail(f"setmaxnreg must be issued by all 4 warps of a warpgroup, but an "
                       f"enclosing branch splits one ({why}); call it directly under "
                       f"pg.warpgroup_role(...), outside branches on the thread id")
    st = _state(ctx)
    entry = st.entry_count()
    wgs = st.roles[-1][0] if st.roles else range(st.warpgroups())
    for w in wgs:
        have, where = st.counts.get(w, (entry, "kernel entry"))
        if action == "dec" and count > have or action == "inc" and count < have:
            verb = "lower" if action == "dec" else "raise"
            raise fail(f"setmaxnreg({count}, {action!r}) on warpgroup {w}, which has {have} "
                       f"registers per thread (at {where}): '{action}' can only {verb} the "
                       f"count (use {'inc' if action == 'dec' else 'dec'})")
        st.counts[w] = (count, src)
    ctx.func.attrs["minnctapersm"] = 1
    ctx.append(Instr(opcode("setmaxnreg", action), (str(count),), form="setmaxnreg"), src)
