"""Checked mbarrier and async-proxy fence helpers: `pg.ptx.mbarrier.*`, `pg.ptx.fence.*`.

Why: an mbarrier is an 8-byte word in shared memory driven by raw instructions whose operand
types ptxas checks only loosely (it does not range-check counts), and whose wait must be a loop
because try_wait may time out.  These helpers check the operand (a shared 64-bit word), build
the loop, and leave arch gating to the emitter's table (try_wait / expect_tx / fence.proxy.async
and an arrive on another CTA's barrier need sm_90; init / arrive / test_wait work from sm_80).

Operands: a pool slot (`bars = pool.alloc_mbarrier(2)`) is given as `bars` (its first word),
`bars[i]` or `bars.ptr_to([i])`.  The `.shared` (CTA window) forms are emitted so one kernel
assembles on sm_80 as well as sm_90+.  Only `arrive` also takes an element of
`pg.cluster_view(bars, rank)` (another CTA's barrier); the others refuse it (bar_ptr), as a
wait, an init or an inval acts on this CTA's own barrier.
"""
from __future__ import annotations

from ..builder.context import current
from ..builder.control import while_
from ..builder.ptx import bar_ptr, emit_instr
from ..builder.scalar import LocalScalar, local_scalar
from ..ir import BufferPtr, Expr, as_expr
from ..builder.resources import resource_error, state
from ..target import ATOMIC_CLUSTER_SPACE, STATE_SPACE
from ..target.forms import opcode

_MAX_COUNT = (1 << 20) - 1          # arrival and tx counts are 20-bit (PTX ISA, mbarrier)


def _count(v, what: str, lo: int):
    if isinstance(v, LocalScalar):
        v = v.__ptxgen_expr__()
    if isinstance(v, bool) or not isinstance(v, (int, Expr)):
        raise resource_error(f"{what} must be an int or a 32-bit integer expression, got {v!r}")
    if isinstance(v, int) and not lo <= v <= _MAX_COUNT:
        raise resource_error(f"{what}={v} is outside [{lo}, {_MAX_COUNT}] (mbarrier counts are "
                             f"20-bit); split the work over several barriers or phases")
    e = as_expr(v)
    if not e.dtype.is_int or e.dtype.bits != 32:
        raise resource_error(f"{what} must be a 32-bit integer, got {e.dtype}; use pg.cast")
    return e


def _note_barrier(ptr: BufferPtr):
    st = state()
    root = ptr.buffer.root
    pool = st.smem_pool
    if pool is None or root is not pool.arena.buffer:
        st.barrier_bufs[ptr.buffer.uid] = ptr.buffer.numel() or 1


def init(bar, count):
    """mbarrier.init: expect `count` arrivals per phase.  Issue from one thread, then make it
    visible (fence.mbarrier_init for clusters / async proxies, or a CTA barrier)."""
    ptr = bar_ptr(bar, "mbarrier.init")
    _note_barrier(ptr)
    return emit_instr(opcode("mbarrier_init"), [ptr, _count(count, "mbarrier.init count", 1)],
                      form="mbarrier_init")


def _token(name):
    return local_scalar("uint64", name=name)


_REMOTE_SCOPES = ("cluster", "cta")


def arrive(bar, scope=None):
    """mbarrier.arrive (release, CTA scope); returns the phase token (a uint64 scalar).

    `bar` may also be an element of `pg.cluster_view(bars, rank)`: an arrive on CTA `rank`'s
    barrier (CUTLASS's ClusterBarrier::arrive(cta_id); sm_90+, PTX 8.0).  Its `scope`:
    "cluster" (the default) releases this thread's writes to the peer's waiters, as a
    producer that stored into the peer's shared memory needs; "cta" (PTX's default, what
    CUTLASS emits) releases at CTA scope and is for an arrive that publishes no data, such as
    a consumer freeing a stage it has finished reading: a cluster-scope release stalls the
    arriving thread until its memory operations are visible cluster-wide.  It returns None:
    a remote arrive has no token (PTX's sink `_`), as only the owner can wait on it."""
    ptr = bar_ptr(bar, "mbarrier.arrive", remote=True)
    space = STATE_SPACE[ptr.buffer.root.scope]
    if space == ATOMIC_CLUSTER_SPACE:
        scope = "cluster" if scope is None else scope
        if scope not in _REMOTE_SCOPES:
            raise resource_error(f"mbarrier.arrive scope={scope!r}: one of 'cluster' "
                                 f"(publishes this thread's writes to the peer) or 'cta'")
        emit_instr(opcode("mbarrier_arrive_remote", space, scope=scope), ["_", ptr],
                   form="mbarrier_arrive_remote")
        return None
    if scope is not None:
        raise resource_error(f"mbarrier.arrive scope={scope!r} is for another CTA's barrier "
                             f"(an element of pg.cluster_view); drop it for this CTA's own")
    tok = _token("mbar_token")
    emit_instr(opcode("mbarrier_arrive"), [tok, ptr], form="mbarrier_arrive")
    return tok


def arrive_expect_tx(bar, nbytes):
    """Arrive and add `nbytes` to the transaction count (sm_90+: TMA / bulk copies)."""
    ptr = bar_ptr(bar, "mbarrier.arrive_expect_tx")
    n = _count(nbytes, "mbarrier.arrive_expect_tx nbytes", 0)
    tok = _token("mbar_token")
    emit_instr(opcode("mbarrier_arrive_expect_tx"), [tok, ptr, n],
               form="mbarrier_arrive_expect_tx")
    return tok


def _parity(p):
    if isinstance(p, LocalScalar):
        p = p.__ptxgen_expr__()
    if isinstance(p, int) and p not in (0, 1):
        raise resource_error(f"mbarrier wait parity={p} must be 0 or 1 (the phase's low bit); "
                             f"use phase & 1")
    e = as_expr(p)
    if not e.dtype.is_int or e.dtype.bits != 32:
        raise resource_error(f"mbarrier wait parity must be a 32-bit integer, got {e.dtype}")
    return e


def _wait_loop(op, bar, parity, what, gate, acquire_cluster=False):
    ptr = bar_ptr(bar, what)
    par = _parity(parity)
    current().check_live(par)
    done = local_scalar("bool", False, name="mbar_done")
    # the default form under its own key (the shipped forms table's), the cluster one named
    code = opcode("mbarrier_wait", op, scope="cluster") if acquire_cluster else \
        opcode("mbarrier_wait", op)
    with while_(~done):
        emit_instr(code, [done, ptr, par], gate=gate, form="mbarrier_wait")


def try_wait(bar, parity, scope=None):
    """Spin until the phase with `parity` completes: `mbarrier.try_wait.parity` in a loop
    (try_wait may return false after a time-out, so the loop is required).  sm_90+.

    scope="cluster" acquires at cluster scope (`.acquire.cluster`, PTX 8.0): the waiter then
    sees what a thread of another CTA stored into this CTA's shared memory (through
    pg.cluster_view) before it arrived here with a cluster-scope release (a remote
    pg.ptx.mbarrier.arrive's default).  None or "cta": PTX's default, acquire at CTA scope,
    which is enough for this CTA's arrivals and for TMA transactions."""
    if scope not in (None, "cta", "cluster"):
        raise resource_error(f"mbarrier.try_wait scope={scope!r}: 'cta' (the default) or "
                             f"'cluster' (to read what another CTA stored here before its "
                             f"release.cluster arrive)")
    _wait_loop("try_wait", bar, parity, "mbarrier.try_wait",
               {"feature": "mbarrier.try_wait (on sm_80 use pg.ptx.mbarrier.test_wait)"},
               acquire_cluster=scope == "cluster")


def test_wait(bar, parity):
    """The sm_80 form of try_wait: a polling loop over `mbarrier.test_wait.parity`."""
    _wait_loop("test_wait", bar, parity, "mbarrier.test_wait", None)


def inval(bar):
    """mbarrier.inval: required before the word is reused as ordinary shared memory."""
    return emit_instr(opcode("mbarrier_inval"), [bar_ptr(bar, "mbarrier.inval")],
                      form="mbarrier_inval")


def fence_proxy_async(space: str | None = "shared::cta"):
    """Order this thread's generic-proxy shared-memory accesses before later async-proxy ones
    (TMA, wgmma, tcgen05) and vice versa.  sm_90+."""
    if space not in (None, "shared::cta", "shared::cluster", "global"):
        raise resource_error(f"fence.proxy_async space={space!r}: use 'shared::cta' (default), "
                             f"'shared::cluster', 'global' or None (all state spaces)")
    return emit_instr(opcode("fence_proxy_async", space or ""), [], form="fence_proxy_async")


def fence_mbarrier_init():
    """Publish mbarrier.init to the cluster and the async proxy (release, cluster scope)."""
    return emit_instr(opcode("fence_mbarrier_init"), [], form="fence_mbarrier_init")
