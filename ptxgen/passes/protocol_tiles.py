"""The tile ops' part of the protocol check (protocol.py's _Check mixes it in): what each
async copy, commit, wait, gemm and elementwise tile op does to the barriers, the cp.async
groups, the wgmma accumulators and the tiles' written / read state."""
from __future__ import annotations

from ..ir import BufferPtr, BufferRegion, Mem, VecOperand
from .protocol_threads import SHARED_SCOPES, error


class TileOps:
    """Mixin of protocol._Check: its state (barriers, cp groups, accumulators, dirty tiles)
    and helpers (_bar, _arrival, _read, _write, _cp_*) are _Check's and its other mixins'."""

    def _opaque(self, buf, why):
        for st in self.by_buf.get(buf.uid, ()):
            st.opaque = why

    def _tile(self, s, guards, loops):
        op, src, args = s.op, s.src, s.args
        rec = s.record
        if op == "copy_async":
            d, sr = args[0], args[1]
            if rec.direction == "load":
                if rec.mbar is not None:
                    if rec.multicast is not None or s.scope == "cluster":
                        st = self._bar(rec.mbar)
                        st.opaque = f"the multicast copy at {src}"
                        self._check_use(st, "this copy_async", src, guards)
                    else:
                        self._arrival(rec.mbar, src, guards, loops, s.scope,
                                      "copy_async(mbar=...)")
                    if rec.mbar.buffer.uid in self.waited_bufs:
                        self.tma_pending[d.buffer.uid] = (rec.mbar.buffer.uid,
                                                          rec.mbar.buffer.name, src)
                else:   # a load with no mbarrier is cp.async (TMA and bulk need one)
                    self.cp_open[d.buffer.uid] = (d.buffer.name, src,
                                                  self._cp_threads(guards), None)
                    self.cp_seen.pop(d.buffer.uid, None)
            else:   # a bulk / TMA store: the scope synchronizes, then one thread reads
                self._cp_scope(s.scope, guards)
                self._read(sr.buffer, src)
            return
        if op == "async_commit":
            if rec.kind in (None, "cp_async") and self.cp_open:
                group, self.cp_open = self._cp_split(self.cp_open, guards, src)
                if group:
                    self.cp_groups.append(group)
            return
        if op == "async_wait":
            if rec.kind in (None, "cp_async") and not rec.read:
                n = max(len(self.cp_groups) - rec.pending, 0)   # the oldest groups
                left = []
                for g in self.cp_groups[:n]:
                    done, rest = self._cp_split(g, guards, src)
                    self._cp_landed(done, rest, src)
                    if rest:
                        left.append(rest)
                self.cp_groups = left + self.cp_groups[n:]
            if rec.sync:    # then the scope synchronizes (groups.emit_wait)
                self._cp_scope(s.scope, guards)
            return
        if op == "gemm_async":
            acc = args[0]
            for r in args[1:3]:
                if isinstance(r, BufferRegion) and r.buffer.root.scope in SHARED_SCOPES:
                    w = self.dirty.get(r.buffer.uid)
                    if w is not None:
                        raise error(src, f"gemm_async reads shared tile '{r.buffer.name}', "
                                         f"written by plain stores at {w} with no "
                                         f"fence.proxy.async in between: wgmma reads through "
                                         f"the async proxy and may see stale bytes; call "
                                         f"pg.ptx.fence.proxy_async() after the writes and "
                                         f"before the barrier that precedes the gemm")
                    self._read(r.buffer, src)
            if isinstance(acc, BufferRegion) and acc.buffer.root.scope != "tmem":
                self.accs.setdefault(acc.buffer.root.uid, (acc.buffer.root, src))
                self.wg_groups.append((acc.buffer.uid, acc.buffer.name, src))
            return
        if op == "gemm_wait":
            keep = getattr(rec, "pending", 0)
            self.wg_groups = self.wg_groups[len(self.wg_groups) - keep:] if keep else []
            return
        # any other tile op: reads its sources, writes its destination
        for a in args[1:]:
            if isinstance(a, BufferRegion):
                self._read(a.buffer, src)
            elif isinstance(a, BufferPtr):
                self._opaque(a.buffer, f"the {op} at {src} names it")
            elif hasattr(a, "dtype") and not isinstance(a, (Mem, VecOperand)):
                self._expr_reads(a, src)
        if args and isinstance(args[0], BufferRegion):
            d = args[0].buffer
            self._read_acc_write(d, src)
            self._write(d, src)

    def _read_acc_write(self, buf, src):
        """Writing an accumulator while its wgmma is in flight races the tensor core too."""
        for acc, name, gsrc in self.wg_groups:
            if acc == buf.uid:
                raise error(src, f"this writes the wgmma accumulator '{name}' of the "
                                 f"gemm_async at {gsrc} before a gemm_wait covers its group: "
                                 f"call pg.tile.warpgroup.gemm_wait(0) first")
