"""The synchronization protocol check: mbarriers, async groups, wgmma groups, proxies and
cluster shared memory, read off the traced kernel before its tile ops are lowered.

Why a check: every mistake below assembles and launches, then hangs, faults or reads stale
data on the GPU, with nothing pointing at the line.  The pass walks the kernel once in
program order (loops once, both branches of an if) and raises a located TraceError only
where the facts decide: constant barrier indices and counts, thread guards that depend on
thread ids alone (evaluated for every thread of the block), constant parities.  Where they
do not (a runtime guard, a computed count, a barrier some unknown instruction arrives on),
it notes why in `func.attrs`-free notes (`protocol_notes`) and accepts: never a guess.

Checked:
  - an mbarrier is initialised before any arrive, wait or copy names it, and (when another
    thread uses it) a CTA or cluster barrier comes between; inval ends it until a new init;
  - the first constant-parity wait after init waits parity 0, and two straight-line waits
    of one thread on one barrier alternate parity (the second would pass at once);
  - the arrivals a phase receives equal the init count (copies with mbar=, arrives), per
    loop iteration for a ring of barriers indexed by a stage (an arrive through a
    cluster_view is the peer's, not counted here; a barrier that gets one is not checked);
  - shared tiles written by cp.async are read only after an async_commit and async_wait
    that cover them, run by the threads that issued the copy (groups are per thread), by
    other threads only after a barrier that follows the wait;
  - tiles written by plain stores are fenced (fence.proxy.async) before wgmma reads them;
  - a wgmma accumulator is read only after a gemm_wait covering its group;
  - a tile written through cluster_view is read only after cluster_sync (or an mbarrier
    wait: a handshake this pass does not follow); atomics wider than a CTA (atom / red of
    scope cluster, gpu or sys) through it or on the tile itself are indivisible against one
    another, so an atom after such writes is no stale read;
  - a pipeline stage waited on is released on every path of an if_ or on none (Paths).
"""
from __future__ import annotations

from operator import attrgetter

from ..errors import ArchError
from ..ir import (Barrier, BufferPtr, Const, DeclBuffer, For, If, Instr, Let, Load, Mem, Store,
                  TileCall, While, expr_key, subexpressions)

from .lower import lower
from .protocol_counts import Bar, Counts, Paths, register_pressure
from .protocol_threads import (SHARED_SCOPES, CpGroups, Threads, Unknown, chain_list, error,
                               loaded_locals, scan_trace)
from .protocol_tiles import TileOps

_VALUE = attrgetter("value")
# instructions that matter with no memory operand (the rest name a barrier word or a tile)
_BARE = ("barrier.cluster.wait", "fence.proxy.async")


class _Check(Counts, Paths, CpGroups, TileOps):
    def __init__(self, func, scan):
        self.func = func
        _, binds, self.waited_bufs, self.stages = scan   # stages: local scalars waits index
        self.threads = Threads(func.body, func.block, binds)
        self.held: dict = {}          # stage scalar uid -> its state on this path (Paths)
        self.bars: dict = {}
        self.by_buf: dict = {}        # barrier buffer uid -> its states in self.bars, in order
        self.tma_pending: dict = {}   # tile uid -> (barrier uid, name, src) of a TMA load
        self.store_loop: dict = {}    # local buffer uid -> the innermost loop of its last store
        self.accs: dict = {}          # root uid -> (register accumulator, first gemm_async)
        self.clock = 0
        self.syncs = 0                # CTA-wide barriers so far (Bar.init_syncs)
        self.notes: list = []
        # cp.async: buffer uid -> (name, src, issuing threads, the commit / wait they missed)
        self.cp_open: dict = {}       # written, uncommitted
        self.cp_groups: list = []     # [{uid: ...}] committed, not yet waited
        self.cp_seen: dict = {}       # uid -> (name, src, threads it is visible to, wait src)
        self.cp_bars, self.guards = {}, None   # named barrier id -> its threads; who reads
        self.dirty: dict = {}         # shared buffer uid -> src of a plain write not fenced
        self.wg_groups: list = []     # [(acc uid, name, src)] wgmma groups not yet waited
        self.peer_of: dict = {}       # cluster view uid -> the tile uid it maps
        self.mapa: object = None
        self.remote: dict = {}        # tile uid -> why its arrivals are not counted: an
        #                               mbarrier op through a cluster_view of it (Counts)
        self.dsmem: dict = {}         # tile uid -> (name, src, atomic) written through a
        #                               peer view (atomic: by atom / red wider than a CTA only)

    def _tick(self):
        self.clock += 1
        return self.clock

    # ---- barriers ----------------------------------------------------------------------
    def _bar(self, ptr: BufferPtr):
        """The state of the barrier `ptr` names: a constant element has a state of its own,
        a computed index names the whole array (a ring)."""
        b = ptr.buffer
        idx = ptr.indices or ()
        ring = not all(type(i) is Const for i in idx)
        key = (b.uid, None if ring else tuple(map(_VALUE, idx)))
        st = self.bars.get(key)
        if st is None:
            name = b.name if ring or b.numel() == 1 else \
                f"{b.name}[{', '.join(map(str, map(_VALUE, idx)))}]"
            st = self.bars[key] = Bar(name, b, ring)
            self.by_buf.setdefault(b.uid, []).append(st)
        return st

    def _inited(self, st):
        """Every initialised constant-index state of the ring `st`'s buffer."""
        return [v for v in self.by_buf[st.buffer.uid] if not v.ring and v.init is not None]

    def _check_use(self, st, what, src, guards):
        if st.buffer.uid not in self.waited_bufs:
            return    # never waited on: a fragment (emission tests), nothing reads through it
        if st.ring:
            n = st.buffer.numel() or 0
            inited = self._inited(st)
            if len(inited) < n:
                if not inited:
                    raise error(src, f"{what} uses mbarrier '{st.name}', which is never "
                                     f"initialised before this point: call "
                                     f"pg.ptx.mbarrier.init (one thread), then pg.cta_sync(), "
                                     f"before any arrive or wait (for a pg.Pipeline: "
                                     f"pipe.init())")
                self.notes.append(f"{src}: '{st.name}' has {len(inited)} of {n} elements "
                                  f"initialised; which one this computed index names is "
                                  f"not known here")
            for e in inited:
                self._check_visible(e, what, src, guards)
            return
        if st.dead is not None:
            raise error(src, f"{what} uses mbarrier '{st.name}' after mbarrier.inval at "
                             f"{st.dead}: an invalidated barrier is ordinary memory; "
                             f"initialise it again first, or move the inval after the last use")
        if st.init is None:
            raise error(src, f"{what} uses mbarrier '{st.name}' before it is initialised: "
                             f"call pg.ptx.mbarrier.init (one thread), then pg.cta_sync(), "
                             f"before any arrive or wait (for a pg.Pipeline: pipe.init())")
        self._check_visible(st, what, src, guards)

    def _check_visible(self, st, what, src, guards):
        if st.init_syncs != self.syncs:
            return        # a CTA barrier came after the init: every thread sees it
        _, isrc, iguards = st.init
        try:
            mine = set(self.threads.running(iguards))
            users = set(self.threads.running(guards))
        except Unknown as e:
            self.notes.append(f"{src}: whether the threads of this {what} initialised "
                              f"'{st.name}' themselves depends on {e}: not checked")
            return
        if users <= mine:
            return        # the initialising threads themselves: program order suffices
        raise error(src, f"{what} uses mbarrier '{st.name}' initialised at {isrc} with no CTA "
                         f"barrier in between: other threads may arrive or wait before the "
                         f"init lands; call pg.cta_sync() after the init block")

    def _one_initialiser(self, st, src, guards):
        if st.buffer.uid not in self.waited_bufs:
            return
        try:
            n = len(self.threads.running(guards))
        except Unknown:
            return
        if n > 1:
            raise error(src, f"mbarrier.init of '{st.name}' runs in {n} threads of each CTA: "
                             f"every init resets the barrier, racing the arrivals of the "
                             f"threads past it; initialise from one thread (with "
                             f"pg.if_(tx == 0)), then pg.cta_sync()")

    def _arrival(self, ptr, src, guards, loops, scope, what, tx=True):
        st = self._bar(ptr)
        ikey = tuple(map(expr_key, ptr.indices or ()))
        self._check_use(st, what, src, guards)
        try:
            w = self.threads.instances(guards, scope)
        except Unknown as e:
            w = None
            self.notes.append(f"{src}: how many threads run this {what} depends on {e}: "
                              f"the arrivals on '{st.name}' are not counted")
        st.sites.append((w, id(loops[0]) if loops else None, ikey, src))
        st.site_bufs.append(loaded_locals(ptr.indices or ()))
        st.site_loops.append(tuple(x for x, in chain_list(loops, 1)))
        st.site_pos.append(self._tick())
        st.site_tx.append(tx)

    def _wait(self, ptr, parity, src, guards, loops, body_id, what):
        st = self._bar(ptr)
        self._check_use(st, what, src, guards)
        if self.stages:
            self._acquire(ptr, src)
        if self.tma_pending:
            for k in [k for k, v in self.tma_pending.items() if v[0] == ptr.buffer.uid]:
                del self.tma_pending[k]
        p = parity.value if type(parity) is Const else None
        st.waits.append((p, id(loops[0]) if loops else None, src))
        st.wait_loops.append(loops[0] if loops else None)
        st.wait_pos.append(self._tick())
        if st.ring:
            return
        if p is not None:
            if p == 1 and not st.waited:
                raise error(src, f"{what} waits on parity 1 of mbarrier '{st.name}', fresh "
                                 f"from its init at {st.init[1]}: the phase before the first "
                                 f"counts as complete, so this wait passes at once and what "
                                 f"it guards is read early; wait on parity 0 first (phases go "
                                 f"0, 1, 0, ...: pass phase & 1 of a counter)")
            last = st.last_parity.get(body_id)
            if last is not None and last[0] == p and last[2] < len(st.sites):
                raise error(src, f"{what} waits on parity {p} of mbarrier '{st.name}' again "
                                 f"(as at {last[1]}) with no other parity between, after new "
                                 f"arrivals: that phase is already complete, so this wait "
                                 f"passes at once and does not wait for them; wait on parity "
                                 f"{p ^ 1} for the next phase")
            st.last_parity[body_id] = (p, src, len(st.sites))
        st.waited = True

    def _outstanding(self):
        """Whether some read can be refused (truthy): a copy, a wgmma group or a peer write
        is in flight.  For most statements none is, and a read needs no look."""
        return (self.tma_pending or self.cp_open or self.cp_groups or self.cp_seen or
                self.wg_groups or self.dsmem)

    def _read(self, buf, src, atomic=False):
        """`atomic`: the read of an atom wider than a CTA (it reads the element's latest value
        in the order of every such atom and red on it)."""
        if not self._outstanding():
            return
        u = buf.uid
        t = self.tma_pending.get(u)
        if t is not None:
            raise error(src, f"this reads shared tile '{buf.name}', filled by the TMA copy at "
                             f"{t[2]}, before any wait on its mbarrier '{t[1]}': the bytes may "
                             f"not have landed; wait first (pg.ptx.mbarrier.try_wait(bar, "
                             f"phase) or the pipeline consumer's wait())")
        if u in self.cp_open or any(u in g for g in self.cp_groups):
            for e in [self.cp_open.get(u)] + [g[u] for g in self.cp_groups if u in g]:
                if e is not None and e[3] is not None:    # threads a commit / wait missed
                    raise self._cp_missed(buf, e, e is self.cp_open.get(u), src)
            if u not in self.cp_seen:
                where = (self.cp_open.get(u) or next(g[u] for g in self.cp_groups if u in g))[1]
                if u in self.cp_open:
                    how = "before async_commit() and async_wait()"
                    fix = "pg.tile.<scope>.async_commit() and then async_wait(0)"
                else:
                    how = "before an async_wait() covers its group"
                    fix = ("pg.tile.<scope>.async_wait(0) (or a pending count that leaves its "
                           "group out)")
                raise error(src, f"this reads shared tile '{buf.name}', written by cp.async "
                                 f"copy_async at {where}, {how}: the copy may not have "
                                 f"landed (stale data); call {fix} before the read")
        self._cp_visible(buf, src)
        for acc, name, gsrc in self.wg_groups:
            if acc == u:
                raise error(src, f"this reads the wgmma accumulator '{name}' of the gemm_async "
                                 f"at {gsrc} before a gemm_wait covers its group: call "
                                 f"pg.tile.warpgroup.gemm_wait(0) before reading it")
        tile = self.peer_of.get(u, (u, None))[0]
        w = self.dsmem.get(tile)
        if w is not None and not (atomic and w[2]):
            name, wsrc, _ = w
            raise error(src, f"this reads shared tile '{name}', written through a cluster_view "
                             f"of it at {wsrc} with no cluster_sync in between: the peer CTA's "
                             f"write may not be visible yet; call pg.cluster_sync() between "
                             f"the write and the read")

    def _expr_reads(self, e, src):
        if not self._outstanding():
            return
        stack = [e]
        while stack:
            x = stack.pop()
            if type(x) is Load:
                self._read(x.buffer, src)
            stack += subexpressions(x)

    # ---- statements ----------------------------------------------------------------------
    def walk(self, body, guards, loops):
        bid = id(body)
        self.guards = guards      # who runs a read (_cp_visible); set again after a nested body
        for s in body:
            t = type(s)
            if t is Instr:
                if Mem in map(type, s.operands) or s.opcode.startswith(_BARE) or \
                        s.form == "mapa":
                    self._instr(s, guards, loops, bid)
            elif t is Let:
                self._expr_reads(s.value, s.src)
            elif t is Store:
                self._expr_reads(s.value, s.src)
                self._write(s.buffer, s.src)
                root = s.buffer.root
                if root.scope == "local":
                    self.store_loop[root.uid] = id(loops[0]) if loops else None
                    if root.uid in self.stages:
                        self._advance(s)
            elif t is DeclBuffer:
                if s.buffer.scope == "shared.cluster" and self.mapa is not None:
                    self.peer_of[s.buffer.uid] = self.mapa
                    self.mapa = None
            elif t is If:
                self._if(s, guards, loops)
                self.guards = guards
            elif t is For:
                self.walk(s.body, guards, (s, loops))
                self.guards = guards
            elif t is While:
                if len(s.body) == 1 and type(s.body[0]) is Instr and \
                        (s.body[0].form == "mbarrier_wait"):
                    self._instr(s.body[0], guards, loops, bid)
                else:
                    self._expr_reads(s.cond, s.src)
                    self.walk(s.body, guards, (s, loops))
                    self.guards = guards
            elif t is Barrier:
                if s.kind == "cta" and s.count is None and type(s.id) is int and s.id == 0:
                    self._cta_barrier()
                elif self.cp_seen:
                    self._cp_barrier(s, guards)
            elif t is TileCall:
                self._tile(s, guards, loops)

    def _cta_barrier(self):
        self.syncs += 1
        self._cp_sync(None)

    def _write(self, buf, src, atomic=False):
        """`atomic`: the write of an atom / red wider than a CTA; a plain write already
        outstanding on the tile stays the one a later read is refused for."""
        scope = buf.root.scope
        if scope in SHARED_SCOPES:
            self.dirty[buf.uid] = src
        elif scope == "shared.cluster" and buf.uid in self.peer_of:
            tile, name = self.peer_of[buf.uid]
            w = self.dsmem.get(tile)
            if w is None or (w[2] and not atomic):
                self.dsmem[tile] = (name, src, atomic)

    def _instr(self, s, guards, loops, bid):
        """An instruction with a memory operand, a cluster barrier wait, a proxy fence or a
        mapa (walk passes no other)."""
        op, src, ops = s.opcode, s.src, s.operands
        if op.startswith("mbarrier."):
            for o in ops:
                if type(o) is Mem and type(o.ptr) is BufferPtr:
                    ptr = o.ptr
                    break
            else:
                return
            if ptr.buffer.root.scope == "shared.cluster":   # a cluster_view: a peer's barrier
                self._remote(ptr, op, src)
                return
            if op.startswith("mbarrier.init"):
                st = self._bar(ptr)
                self._one_initialiser(st, src, guards)
                cnt = ops[-1]
                st.init = (cnt.value if type(cnt) is Const else None, src, guards)
                st.init_syncs, st.dead, st.waited, st.last_parity = self.syncs, None, False, {}
            elif op.startswith("mbarrier.inval"):
                self._bar(ptr).dead = src
            elif op.startswith(("mbarrier.arrive", "mbarrier.arrive_drop")):
                if "expect_tx" in op or op.startswith("mbarrier.arrive.") or op == \
                        "mbarrier.arrive":
                    n = ops[-1] if "expect_tx" in op else None
                    tx = n is not None and not (type(n) is Const and n.value == 0)
                    self._arrival(ptr, src, guards, loops, "thread", "mbarrier.arrive", tx)
            elif op.startswith(("mbarrier.try_wait", "mbarrier.test_wait")):
                par = ops[-1] if ".parity" in op else None
                self._wait(ptr, par, src, guards, loops, bid, "this mbarrier wait")
                self.dsmem.clear()
                self._cp_sync(None)
            elif op.startswith("mbarrier.expect_tx"):
                self._bar(ptr)
            else:
                self._bar(ptr).opaque = f"'{op}' at {src} (not followed by this check)"
            return
        if op.startswith("barrier.cluster.wait"):
            self._cta_barrier()
            self.dsmem.clear()
            return
        if op.startswith("fence.proxy.async"):
            self.dirty.clear()
            return
        if s.form == "mapa":
            self.mapa = (s.attrs or {}).get("peer_of")
            return
        # another instruction naming a barrier word (tcgen05.commit, a raw copy): its
        # arrivals are not counted
        for o in ops:
            p = o.ptr if type(o) is Mem else None
            if type(p) is BufferPtr:
                self._opaque(p.buffer, f"'{op}' at {src} names it")
        if op.startswith(("st.shared", "stmatrix")):
            p = ops[0].ptr if ops and type(ops[0]) is Mem else None
            if type(p) is BufferPtr:
                self._write(p.buffer, src)
        elif op.startswith(("atom.", "red.")):   # its values, then a read (atom) and a write of
            # a shared element, as ld / st.shared (.shared::cluster: through a cluster_view);
            # wide: a scope past the CTA (PTX's default is .gpu), indivisible against the other
            # CTAs' atomics
            wide = "cta" not in op.split(".")
            for o in ops:
                if type(o) is not Mem:
                    if type(o) is not str:
                        self._expr_reads(o, src)
                elif type(o.ptr) is BufferPtr and o.ptr.buffer.root.scope != "global":
                    if op[0] == "a":
                        self._read(o.ptr.buffer, src, atomic=wide)
                    self._write(o.ptr.buffer, src, atomic=wide)
        elif op.startswith(("ld.", "ldmatrix")):
            for o in ops:
                if type(o) is Mem and type(o.ptr) is BufferPtr:
                    self._read(o.ptr.buffer, src)

    def _remote(self, ptr, op, src):
        """An mbarrier op on a cluster_view element (pg.ptx.mbarrier.arrive(peer[i])) acts on
        another CTA's barrier, not on this CTA's of the same name: it is no arrival here.  The
        arrivals this CTA's barrier gets from its peers are then unseen (the rank is a runtime
        value), so the tile's count is left unchecked, as for a multicast copy's."""
        tile = self.peer_of.get(ptr.buffer.uid)
        if tile is not None:
            self.remote.setdefault(tile[0], f"other CTAs arrive on it through a cluster_view "
                                            f"('{op}' at {src})")


def check_cluster_arch(func, target):
    """Clusters need sm_90+: say so at the kernel's cluster= line, not in the emitter."""
    c = func.attrs.get("cluster")
    if c is not None and target is not None and target.sm < 90:
        raise ArchError(f"{getattr(c, 'src', '') or '?'}: cluster={tuple(c)} needs sm_90 or "
                        f"newer (thread-block clusters, .reqnctapercluster); the target is "
                        f"{target.arch}: build for sm_90a, or drop cluster=")


def check_protocol(func, target=None) -> list:
    """Raise a located TraceError for a synchronization mistake the facts decide; return the
    notes on what they leave undecided."""
    check_cluster_arch(func, target)
    scan = scan_trace(func.body)
    if not scan[0]:
        return []
    c = _Check(func, scan)
    c.walk(func.body, None, None)
    c._count_check()
    register_pressure(c.accs)
    return c.notes


def protocol_notes(kernel, arch: str = "sm_90a") -> str:
    """What the protocol check could not decide for `kernel` (a pg.kernel or its PrimFunc),
    one line each, in the spirit of pg.tile.explain."""
    func = getattr(kernel, "ir", kernel)
    body = lower(func.body)[0]
    tmp = type(func)(func.name, func.params, body, func.grid, func.block)
    notes = check_protocol(tmp)
    return "\n".join(notes) if notes else "every synchronization fact was decided"
