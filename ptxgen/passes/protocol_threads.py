"""Facts the protocol check (protocol.py) evaluates: what one scan of the trace finds before
the walk, which threads run a statement (its if_ conditions on thread ids, evaluated for
every thread of the block), constant trip counts, linked guard and loop chains."""
from __future__ import annotations

from itertools import compress, repeat
from operator import (add, and_, eq, floordiv, ge, gt, le, lshift, lt, mod, mul, ne, not_,
                      or_, rshift, sub, xor)

from ..errors import TraceError
from ..ir import (BinOp, BufferPtr, Cast, Const, For, Instr, Let, Load, Mem, Not, Select,
                  SpecialReg, TileCall, Var, subexpressions, traced_statements)
from .lower import SYNC_OPCODES, SYNC_TILE_OPS


SHARED_SCOPES = ("shared", "shared.dyn")
_OPS = {"add": add, "sub": sub, "mul": mul, "floordiv": floordiv, "floormod": mod,
        "and": and_, "or": or_, "xor": xor, "shl": lshift, "shr": rshift, "min": min,
        "max": max, "lt": lt, "le": le, "gt": gt, "ge": ge, "eq": eq, "ne": ne}
_GROUP = {"thread": 1, "warp": 32, "warpgroup": 128, "cta": None, "cluster": None}


class Unknown(Exception):
    """A guard or index the pass cannot evaluate per thread."""


def loaded_locals(exprs) -> set:
    """Root uids of the local buffers an index reads (a pipeline's stage scalar)."""
    out, stack = set(), list(exprs)
    while stack:
        x = stack.pop()
        t = type(x)
        if t is Load and x.buffer.root.scope == "local":
            out.add(x.buffer.root.uid)
        stack += subexpressions(x)
    return out


def trip_count(loop):
    """A serial loop's constant trip count, or None."""
    if type(loop) is not For or type(loop.start) is not Const or type(loop.stop) is not Const \
            or type(loop.step) is not int:
        return None
    return max(0, -(-(loop.stop.value - loop.start.value) // loop.step))


def chain_list(node, n=2) -> list:
    """A linked (item..., parent) chain as a list, outermost first: guards and loops are
    linked, so a deeply nested kernel costs linear memory."""
    out = []
    while node is not None:
        out.append(node[:n])
        node = node[n]
    out.reverse()
    return out


def error(src, msg):
    """A TraceError located at `src` (a site's "file:line", or None)."""
    return TraceError(f"{src or '?'}: {msg}")


def _some(who) -> str:
    """A set of thread ids in words: thread 3, threads 32..127, 40 threads (1, ...)."""
    lo, hi = min(who), max(who)
    return (f"thread {lo}" if lo == hi else f"threads {lo}..{hi}" if hi - lo + 1 == len(who)
            else f"{len(who)} threads ({lo}, ...)")


def scan_trace(body) -> tuple:
    """One flat pass over the trace for what the walk needs before it starts: (whether the
    kernel holds anything this check follows, the lets a guard may name, the barrier buffers
    some wait names, the local scalars that index them).  A build has lower()'s answer to
    the first already; most kernels never get here."""
    sync, binds, waited, stages = False, {}, set(), set()
    for s in traced_statements(body):
        t = type(s)
        if t is Instr:
            op = s.opcode
            if op.startswith(SYNC_OPCODES):
                sync = True
                if op.startswith("mbarrier.") and "wait" in op:
                    for o in s.operands:
                        if type(o) is Mem and type(o.ptr) is BufferPtr:
                            waited.add(o.ptr.buffer.uid)
                            stages |= loaded_locals(o.ptr.indices or ())
        elif t is Let:
            binds[s.var.uid] = s.value
        elif t is TileCall and s.op in SYNC_TILE_OPS:
            sync = True
    return sync, binds, waited, stages


class Threads:
    """Which threads of the block run a statement, from its enclosing if_ conditions, when
    those depend on thread ids alone (lets of tid expressions are followed).  Each value is
    a list over the threads, mapped with the operator module's functions: the per-thread
    steps run in C."""

    def __init__(self, body, block, binds=None):
        self.block = block
        self.memo = {}        # guard chain -> the thread ids running under it
        self.last = {}        # id(guards) -> (guards, their ids): the chain walked once
        self.one = {}         # (id(guard), polarity) -> the thread ids it lets through
        self.binds = binds if binds is not None else \
            {s.var.uid: s.value for s in traced_statements(body) if type(s) is Let}

    def _values(self, e, ids):
        """e's value in each thread of `ids` as a list in that order (one value where it does
        not depend on the thread): the whole block at once, one Python step per operation.
        A select evaluates each side over the threads that take it only, since the other side
        may be undefined there (a division by zero)."""
        t = type(e)
        if t is Const:
            return e.value
        if t is SpecialReg:
            if e.name == "tid.x":
                return list(ids)
            if e.name == "laneid":
                return list(map(mod, ids, repeat(32)))
            if e.name in ("tid.y", "tid.z"):
                return 0
            raise Unknown(e.name)
        if t is Var:
            v = self.binds.get(e.uid)
            if v is None:
                raise Unknown(e.name)
            return self._values(v, ids)
        if t is BinOp:
            f = _OPS.get(e.op)
            if f is None:
                raise Unknown(e.op)
            a, b = self._values(e.a, ids), self._values(e.b, ids)
            if e.op in ("floordiv", "floormod") and (0 in b if type(b) is list else not b):
                raise Unknown("division by zero")
            if type(a) is list:
                return list(map(f, a, b if type(b) is list else repeat(b)))
            return list(map(f, repeat(a), b)) if type(b) is list else f(a, b)
        if t is Not:
            a = self._values(e.a, ids)
            return list(map(not_, a)) if type(a) is list else not a
        if t is Cast:
            return self._values(e.a, ids)
        if t is Select:
            c = self._values(e.cond, ids)
            if type(c) is not list:
                return self._values(e.t if c else e.f, ids)
            sides = []
            for side, takes in ((e.t, c), (e.f, list(map(not_, c)))):
                mine = list(compress(ids, takes))
                v = self._values(side, mine) if mine else []
                sides.append(iter(v if type(v) is list else [v] * len(mine)))
            return [next(sides[0]) if x else next(sides[1]) for x in c]
        raise Unknown(type(e).__name__)

    def value(self, e, tid):
        """e's value in thread `tid` (a named barrier's id, ...)."""
        v = self._values(e, [tid])
        return v[0] if type(v) is list else v

    def running(self, guards) -> list:
        """The thread ids (x; the block must be 1-D) that satisfy every guard, ascending.
        `last` holds the chain itself, so its id is not reused while it is a key."""
        hit = self.last.get(id(guards))
        if hit is not None and hit[0] is guards:
            return hit[1]
        chain = chain_list(guards)
        key = tuple([(id(c), pol) for c, pol in chain])
        r = self.memo.get(key)
        if r is None:
            bx, by, bz = self.block
            if by * bz != 1 and chain:
                raise Unknown("a 2-D or 3-D block")
            ids = None
            for c, pol in chain:     # chains share guards: each is evaluated once
                through = self._through(c, pol, bx)
                ids = through if ids is None else ids & through
            r = self.memo[key] = list(range(bx)) if ids is None else sorted(ids)
        self.last[id(guards)] = (guards, r)
        return r

    def _through(self, c, pol, bx) -> frozenset:
        """The thread ids for which guard c is `pol`; what it cannot decide is raised again
        from the memo."""
        k = (id(c), pol)
        r = self.one.get(k)
        if r is None:
            try:
                v = self._values(c, range(bx))
                r = frozenset(compress(range(bx), v if pol else map(not_, v))) \
                    if type(v) is list else frozenset(range(bx)) if bool(v) == pol else frozenset()
            except Unknown as e:
                r = e
            self.one[k] = r
        if isinstance(r, Unknown):
            raise r
        return r

    def instances(self, guards, scope) -> int:
        """How many instances of `scope` (threads, warps, ...) run a statement."""
        tids = self.running(guards)
        n = _GROUP.get(scope)
        if n is None:
            return 1 if tids else 0
        return len(tids) if n == 1 else len(set(map(floordiv, tids, repeat(n))))


class CpGroups:
    """cp.async groups per thread (a mixin of _Check).  cp.async.commit_group and wait_group
    act on the calling thread's own copies, so a commit or wait that some issuing threads do
    not run leaves their part of the copy uncommitted or in flight: a reader that a CTA-wide
    list would let through (a producer warp copies and commits, a consumer warp waits).  Each
    copy carries the threads that issued it, where thread ids decide them; where they do not
    (a runtime guard), the commit or wait covers it, as before: never a guess.

    A wait makes a thread's own copies visible to that thread only: `cp_seen` holds, for each
    tile a completed copy wrote, the threads that may read it (its issuers, then each barrier
    after the wait adds the threads of the barrier instances some of them took part in: the
    wait's own scope sync, pg.warp_sync, named barriers by id; None: every thread, after
    bar.sync 0, a cluster barrier or an mbarrier wait, a handshake not followed here)."""

    def _cp_threads(self, guards):
        try:
            return frozenset(self.threads.running(guards))
        except Unknown:
            return None

    def _cp_split(self, entries, guards, src) -> tuple:
        """(the part of each copy that a commit / wait running under `guards` covers, the
        part it leaves, marked with `src`)."""
        mine = self._cp_threads(guards)
        done, rest = {}, {}
        for u, (name, wsrc, who, missed) in entries.items():
            if mine is None or who is None or who <= mine:
                done[u] = (name, wsrc, who, None)
                continue
            if who & mine:
                done[u] = (name, wsrc, who & mine, None)
            rest[u] = (name, wsrc, who - mine, src)
        return done, rest

    def _cp_landed(self, done, rest, src):
        """The copies a wait at `src` completes: visible to their issuing threads."""
        for u, (name, wsrc, who, _) in done.items():
            if u not in rest:
                self.cp_seen[u] = (name, wsrc, who, src)

    def _cp_sync(self, groups):
        """A barrier: `groups` are the thread sets of its instances (None: every thread);
        a copy visible to a thread of one becomes visible to all of it."""
        for u, (name, wsrc, seen, wait) in self.cp_seen.items():
            if seen is not None:
                if groups is None:
                    seen = None
                else:
                    for g in groups:
                        if not g.isdisjoint(seen):
                            seen = seen | g
                self.cp_seen[u] = (name, wsrc, seen, wait)

    def _cp_scope(self, scope, guards):
        """The scope barrier an async_wait (sync=True) or a bulk / TMA store's prelude runs."""
        n = _GROUP.get(scope)
        if n != 1 and self.cp_seen:
            self._cp_sync(None if n is None else self._cp_groups(guards, lambda t: t // n))

    def _cp_barrier(self, s, guards):
        """pg.warp_sync (each warp's running lanes) or a named barrier: its instances are the
        threads of every bar.sync / bar.arrive on that id seen so far."""
        if s.kind == "warp":
            return self._cp_sync(self._cp_groups(guards, lambda t: t // 32))
        key = (lambda t: s.id) if type(s.id) is int else \
            (lambda t: self.threads.value(s.id, t))
        groups = self._cp_groups(guards, key, self.cp_bars)
        self._cp_sync(groups)

    def _cp_groups(self, guards, key, acc=None):
        """The running threads grouped by `key(tid)` (merged into `acc` by key), or None
        where thread ids do not decide them."""
        try:
            out = {}
            for t in self.threads.running(guards):
                out.setdefault(key(t), set()).add(t)
        except Unknown:
            return None
        if acc is None:
            return list(out.values())
        for k, g in out.items():
            acc[k] = acc.get(k, frozenset()) | g
        return [acc[k] for k in out]

    def _cp_visible(self, buf, src):
        """A read of a tile a completed copy wrote, by threads it is not visible to."""
        e = self.cp_seen.get(buf.uid)
        if e is None or not e[2]:     # every thread (None), or a copy no thread ran
            return
        readers = self._cp_threads(self.guards)
        if readers is None or readers <= e[2]:
            return
        raise error(src, f"this reads shared tile '{buf.name}', written by cp.async copy_async "
                         f"at {e[1]}, in {_some(readers - e[2])}, which did not issue it, with "
                         f"no barrier after the async_wait() at {e[3]}: a wait makes a "
                         f"thread's own copies visible to that thread only, so these threads "
                         f"may read the tile before the copy lands (stale data); add "
                         f"pg.cta_sync() after the wait (or a named barrier over the waiting "
                         f"and the reading threads)")

    def _cp_missed(self, buf, e, uncommitted, src):
        _, wsrc, who, missed = e
        op = "async_commit" if uncommitted else "async_wait"
        return error(src, f"this reads shared tile '{buf.name}', written by cp.async copy_async "
                          f"at {wsrc}, but the {op}() at {missed} does not run in {_some(who)}, "
                          f"which issued it: cp.async groups are per thread (commit_group and "
                          f"wait_group cover only the calling thread's copies), so their copies "
                          f"may not have landed (stale data); call async_commit() and "
                          f"async_wait() in the scope and branch that issued the copy")
