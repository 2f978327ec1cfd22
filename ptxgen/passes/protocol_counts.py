"""Arrivals per phase against an mbarrier's init count (the part of the protocol check,
protocol.py, that runs once the walk has seen every arrival and wait).  Decided only where
both are constants and every arrival's threads are known; otherwise a note says why."""
from __future__ import annotations

from .protocol_threads import _fail, _trips


class _Bar:
    """What the walk knows of one mbarrier word (or one ring of them)."""

    def __init__(self, name):
        self.name = name
        self.init = None          # (count or None, src, guards) of the latest init
        self.pending = False      # initialised, no CTA barrier since
        self.dead = None          # src of an inval with no init since
        self.last_parity = {}     # body id -> (parity, src, arrivals so far) of its last wait
        self.waited = False
        self.sites = []           # (weight or None, loop id, index key, src) of arrivals
        self.waits = []           # (parity or None, loop id, src)
        self.opaque = ""          # why its arrivals cannot be counted
        self.site_pos = []        # program-order positions of the arrivals and the waits
        self.site_tx = []         # whether each arrival leaves transaction bytes pending
        self.site_bufs = []       # the local buffers each arrival's barrier index reads
        self.site_loops = []      # the loops around each arrival, outermost first
        self.wait_loops = []      # the innermost loop of each wait (or None)
        self.wait_pos = []


class _Counts:
    """The count checks of _Check (a mixin: they read its barrier states and notes)."""

    def _count_check(self):
        """Arrivals per phase against the init count, where both are constants."""
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
            n = _trips(loop)
            if same == {p} and (n is None or n > 1):
                raise _fail(src, f"this wait on mbarrier '{st.name}' uses the constant parity "
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
                raise _fail(isrc, f"mbarrier '{st.name}' is initialised for {count} "
                                  f"arrival(s) per phase and waited on for {phases} phases, "
                                  f"but the program makes {got} (at {lines}): the last phase "
                                  f"never completes (a hang); make one phase's arrivals equal "
                                  f"the init count, and wait only for phases that arrive")
            self._compare(st, count, isrc, st.sites, "")

    def _ring(self, ring):
        els = [e for e in self._elements(ring) if e.init is not None]
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
                    n = _trips(x)
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
        raise _fail(isrc, f"mbarrier '{st.name}' is initialised for {count} arrival(s) per "
                          f"phase, but the program makes {got}{per} (at {lines}): {effect}; "
                          f"make the init count (pg.Pipeline's producer_arrivals / consumers) "
                          f"equal the arrivals of one phase: one per copy_async(mbar=...) and "
                          f"per arrive, times the threads that run it")

    # ---- reads of buffers ------------------------------------------------------------
