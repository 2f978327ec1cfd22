"""async_commit / async_wait: the group protocol of cp.async loads and bulk / TMA stores.

Both kinds of group are per thread.  cp.async copies are issued by every thread of the scope,
so every thread commits and waits (`cp.async.commit_group`, `cp.async.wait_group n`); bulk
and TMA stores are issued by the scope's elected thread, so that thread also commits and waits
on its bulk groups (sm_90+; `.read` waits only until the shared source may be overwritten).
A thread with no copy in flight commits an empty group, which costs nothing, so one call
serves both kinds.  After the wait the scope synchronizes (unless sync=False): data another
thread's cp.async brought in is visible to all of the scope only after a barrier.
`kind="cp_async"` / `kind="bulk"` emits only that kind's instructions (a hot loop of bulk
stores then carries no cp.async ones).
"""
from __future__ import annotations

from ...ir import Const, Instr
from ...target import has_opcode
from ...target.forms import opcode
from ..registry import register
from ..tcgen05.common import guarded
from .common import scope_sync


def _groups_ok(call):
    if call.scope.name == "cluster":
        return False, "copy groups are per thread: call it in the scope that issued the copies"
    bulk_ok = has_opcode("cp.async.bulk.commit_group", call.target)
    if call.record.kind == "bulk" and not bulk_ok:
        return False, f"bulk groups need sm_90 or newer; the target is {call.target.arch}"
    bulk = " and the elected thread's bulk groups" if bulk_ok else ""
    return True, f"cp.async groups of every thread{bulk}"


@register("async_commit", "groups", 10, when=[_groups_ok])
def emit_commit(call):
    """Close the copies issued so far into a group (cp.async and bulk)."""
    kind = call.record.kind
    out = [] if kind == "bulk" else [Instr(opcode("cp_async_commit_group"), (),
                                           form="cp_async_commit_group")]
    if has_opcode("cp.async.bulk.commit_group", call.target) and kind != "cp_async":
        out += guarded(call.scope, [Instr(opcode("cp_async_bulk_commit_group"), (),
                                          form="cp_async_bulk_commit_group")])
    return out


@register("async_wait", "groups", 10, when=[_groups_ok])
def emit_wait(call):
    """Wait until at most `pending` groups are in flight, then synchronize the scope."""
    rec = call.record
    n = Const(rec.pending)
    out = [] if rec.kind == "bulk" else [Instr(opcode("cp_async_wait_group"), (n,),
                                               form="cp_async_wait_group")]
    if has_opcode("cp.async.bulk.wait_group", call.target) and rec.kind != "cp_async":
        out += guarded(call.scope, [Instr(opcode("cp_async_bulk_wait_group", rec.read), (n,),
                                          form="cp_async_bulk_wait_group")])
    if rec.sync:
        out += scope_sync(call.scope)
    return out
