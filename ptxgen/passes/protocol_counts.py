"""Counts of the protocol check (protocol.py): arrivals per phase against an mbarrier's init
count, once the walk has seen every arrival and wait (decided only where both are constants
and every arrival's threads are known; otherwise a note says why); pipeline stages held on
each path of an if_, as the walk goes; wgmma accumulator registers."""
from __future__ import annotations

import warnings

from .protocol_threads import Unknown, error, loaded_locals, trip_count


class Bar:
    """What the walk knows of one mbarrier word (or one ring of them).  Fields that are only
    ever replaced, never changed in place, default at class level."""
    init = None               # (count or None, src, guards) of the latest init
    init_syncs = None         # _Check.syncs at the latest init: equal while no CTA barrier since
    dead = None               # src of an inval with no init since
    waited = False
    opaque = ""               # why its arrivals cannot be counted

    def __init__(self, name, buffer, ring):
        self.name = name
        self.buffer = buffer
        self.ring = ring          # a computed index: the state of the whole array
        self.last_parity = {}     # body id -> (parity, src, arrivals so far) of its last wait
        self.sites = []           # (weight or None, loop id, index key, src) of arrivals
        self.waits = []           # (parity or None, loop id, src)
        self.site_pos = []        # program-order positions of the arrivals and the waits
        self.site_tx = []         # whether each arrival leaves transaction bytes pending
        self.site_bufs = []       # the local buffers each arrival's barrier index reads
        self.site_loops = []      # the loops around each arrival, outermost first
        self.wait_loops = []      # the innermost loop of each wait (or None)
        self.wait_pos = []


class Counts:
    """The count checks of _Check (a mixin: they read its barrier states and notes)."""

    def _count_check(self):
        """Arrivals per phase against the init count, where both are constants."""
        for st in self.bars.values():     # arrived on from other CTAs: uncounted (_remote)
            why = self.remote.get(st.buffer.uid)
            if why and not st.opaque:
                st.opaque = why
        rings = {}
        for (uid, k), st in self.bars.items():
            if k is None:
                rings[uid] = st
        for (uid, k), st in self.bars.items():
            if k is None or st.init is None or st.init[0] is None or \
                    uid not in self.waited_bufs:
                continue
            ring = rings.get(uid)
            if ring is not None:
                continue
            self._loop_parity(st)
            self._single(st)
        for uid, ring in rings.items():
            if uid in self.waited_bufs:
                self._ring(ring)

    def _why_not(self, st, sites):
        if st.opaque:
            return st.opaque
        if not sites:
            return "no arrival the pass can see"
        if any(w is None for w, *_ in sites):
            return "a thread guard it cannot evaluate"
        return ""

    def _loop_parity(self, st):
        """A constant parity waited on in a loop whose iterations each bring a new phase: every
        other iteration passes at once."""
        for (p, lp, src), loop in zip(st.waits, st.wait_loops):
            if p is None or loop is None or not any(x == lp for _, x, _, _ in st.sites):
                continue
            same = {q for q, x, _ in st.waits if x == lp}
            n = trip_count(loop)
            if same == {p} and (n is None or n > 1):
                raise error(src, f"this wait on mbarrier '{st.name}' uses the constant parity "
                                 f"{p} in a loop that completes a new phase each iteration: "
                                 f"from the second iteration on it passes at once (the phase "
                                 f"with that parity is complete), so the data is read early; "
                                 f"keep a phase bit that flips each iteration and wait on it")

    def _single(self, st):
        count, isrc, _ = st.init
        sites = st.sites
        why = self._why_not(st, sites)
        loops = {lp for _, lp, _, _ in sites}
        if not why and len(loops) != 1:
            why = "arrivals in more than one loop"
        if not why:
            loop = next(iter(loops))
            if loop is None:
                return self._straight(st, count, isrc)
            if not [w for w in st.waits if w[1] == loop]:
                why = "arrivals in a loop that does not wait on it (phases span iterations)"
        if why:
            self.notes.append(f"{isrc}: arrivals per phase of '{st.name}' not checked: {why}")
            return
        self._compare(st, count, isrc, sites, "")

    def _straight(self, st, count, isrc):
        """Arrivals outside loops: the waits (outside loops, constant parities) say how many
        phases the program waits for; arrivals that all come before the first wait race for
        the first phase."""
        ps = [p for p, lp, _ in st.waits]
        if not ps:
            return      # arrivals no one waits for: nothing hangs on them
        if any(p is None for p in ps) or any(lp is not None for _, lp, _ in st.waits):
            self.notes.append(f"{isrc}: arrivals per phase of '{st.name}' not checked: waits "
                              f"in loops or on computed parities")
            return
        phases = 1 + sum(a != b for a, b in zip(ps, ps[1:]))
        got = sum(w for w, *_ in st.sites)
        first = min(st.wait_pos)
        racing = got > count and max(st.site_pos) < first and any(st.site_tx)
        if phases == 1 or racing or got < phases * count:
            if phases > 1 and got < phases * count:
                lines = ", ".join(s for *_, s in st.sites)
                raise error(isrc, f"mbarrier '{st.name}' is initialised for {count} "
                                  f"arrival(s) per phase and waited on for {phases} phases, "
                                  f"but the program makes {got} (at {lines}): the last phase "
                                  f"never completes (a hang); make one phase's arrivals equal "
                                  f"the init count, and wait only for phases that arrive")
            self._compare(st, count, isrc, st.sites, "")

    def _ring(self, ring):
        els = self._inited(ring)
        counts = {e.init[0] for e in els}
        if not els or None in counts or len(counts) != 1:
            if els:
                self.notes.append(f"{els[0].init[1]}: the ring '{ring.name}' has computed or "
                                  f"differing init counts: arrivals per phase not checked")
            return
        count = counts.pop()
        isrc = els[0].init[1]
        sites = ring.sites + [s for e in els for s in e.sites]
        why = self._why_not(ring, sites) or next((e.opaque for e in els if e.opaque), "")
        if not why and any(e.sites for e in els):
            why = "arrivals on constant elements as well as on a computed stage"
        if not why and len({ik for _, _, ik, _ in sites}) != 1:
            why = "arrivals on more than one stage index"
        stage = None
        if not why:
            bufs = ring.site_bufs[0]
            stage = next((self.store_loop[b] for b in bufs if b in self.store_loop), None)
            if stage is None:
                why = "no loop moves the stage index"
        if not why:
            weighted = []
            for (w, lp, ik, src), loops in zip(sites, ring.site_loops):
                ids = [id(x) for x in loops]
                if stage not in ids:
                    why = f"the arrival at {src} is outside the loop that moves the stage"
                    break
                trips = 1
                for x in loops[ids.index(stage) + 1:]:
                    n = trip_count(x)
                    if n is None:
                        why = f"the arrival at {src} is in a loop of unknown trip count"
                        break
                    trips *= n
                weighted.append((w * trips, lp, ik, src))
            sites = weighted
        if why:
            self.notes.append(f"{isrc}: arrivals per phase of the ring '{ring.name}' not "
                              f"checked: {why}")
            return
        self._compare(ring, count, isrc, sites, " per loop iteration (one stage)")

    def _compare(self, st, count, isrc, sites, per):
        got = sum(w for w, *_ in sites)
        if got == count:
            return
        lines = ", ".join(s for *_, s in sites)
        effect = ("the phase never completes (a hang)" if got < count else
                  "the extra arrivals and their bytes spill into the next phase (a fault or "
                  "stale data)")
        raise error(isrc, f"mbarrier '{st.name}' is initialised for {count} arrival(s) per "
                          f"phase, but the program makes {got}{per} (at {lines}): {effect}; "
                          f"make the init count (pg.Pipeline's producer_arrivals / consumers) "
                          f"equal the arrivals of one phase: one per copy_async(mbar=...) and "
                          f"per arrive, times the threads that run it")


class Paths:
    """Pipeline stages held per path (a mixin of _Check).  A wait on a barrier indexed by a
    local stage scalar acquires that stage; a store that moves the scalar on releases it
    (Pipeline's release and commit advance it; a store of a constant is its start).  Both
    branches of an if_ must leave each stage held or free alike: a release on one path only
    is decided by the branch structure, whatever the condition, so it is refused, except
    where thread ids decide that every thread running the if_ takes the same branch.  A
    runtime condition around both the wait and the release leaves both branches alike."""

    def _acquire(self, ptr, src):
        for u in loaded_locals(ptr.indices or ()) & self.stages:
            self.held[u] = (True, src, ptr.buffer.name)

    def _advance(self, s):
        u = s.buffer.root.uid
        st = self.held.get(u)
        if st is not None and st[0] and u in loaded_locals((s.value,)):
            self.held[u] = (False, s.src, st[2], st[1])    # released: where, ring, its wait

    def _if(self, s, guards, loops):
        self._expr_reads(s.cond, s.src)
        before = self.held
        self.held = dict(before)
        self.walk(s.then, (s.cond, True, guards), loops)
        then, self.held = self.held, dict(before)
        if s.else_:
            self.walk(s.else_, (s.cond, False, guards), loops)
        if then or self.held:
            self.held = self._join(s, guards, before, then, self.held)

    def _join(self, s, guards, before, then, other) -> dict:
        """The stages after the if_: the branches' states, which must agree."""
        for u in then.keys() | other.keys():
            a, b = then.get(u), other.get(u)
            if (a is not None and a[0]) == (b is not None and b[0]):
                continue
            try:     # threads of the if_ that take its then branch: all, or none?
                run = self.threads.running(guards)
                taken = self.threads.running((s.cond, True, guards))
                if len(taken) == len(run) or not taken:
                    return then if taken else other
            except Unknown:
                pass
            hold, free = (a, b) if a is not None and a[0] else (b, a)
            was = before.get(u)
            if was is not None and was[0]:
                raise error(free[1], f"this releases the pipeline stage of '{free[2]}' waited "
                                     f"on at {free[3]} in one branch of the if_ at {s.src} "
                                     f"only: on the other path the stage is never released, "
                                     f"so that side stays on it (its next wait passes on the "
                                     f"old phase) and the other side's wait for the stage "
                                     f"hangs once the ring wraps; release on every path: "
                                     f"call cons.release() (a producer: prod.commit()) after "
                                     f"the if_, or in both branches")
            raise error(hold[1], f"this waits on a pipeline stage of '{hold[2]}' in one branch "
                                 f"of the if_ at {s.src} only and does not release it there: "
                                 f"after the if_ the stage is held on one path and free on "
                                 f"the other, so a release frees a stage the other path never "
                                 f"waited on (the other side reuses it early); wait and "
                                 f"release on the same paths: put cons.release() (a "
                                 f"producer: prod.commit()) in the branch of the wait")
        return then


MAX_REGS = 255     # registers per thread (PTX ISA); past them ptxas spills to local memory


def register_pressure(accs):
    """wgmma accumulators live in registers for the whole main loop: more than a thread has
    makes ptxas spill them (kilobytes of local memory per thread, silently).  A warning, not
    an error: the kernel is still correct, only slow."""
    regs, names = 0, []
    for buf, src in accs.values():
        n = buf.span_elems()
        if n is None:
            return
        r = (n * buf.dtype.bits + 31) // 32
        regs += r
        names.append(f"'{buf.name}' ({r} registers, first used at {src})")
    if regs > MAX_REGS:
        warnings.warn(f"wgmma accumulators {', '.join(names)} need {regs} registers per thread, "
                      f"more than the {MAX_REGS} a thread has: ptxas will spill them to local "
                      f"memory; use a narrower tile (N) or fewer accumulators per warpgroup",
                      UserWarning, stacklevel=2)
