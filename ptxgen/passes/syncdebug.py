"""Sync debug mode (`PTXGEN_DEBUG=sync` or `pg.debug(sync=True)`): bounded waits.

Why: a wrong barrier protocol the build-time check cannot decide hangs the GPU with nothing
to say where.  In this mode every mbarrier wait loop (pg.ptx.mbarrier.try_wait / test_wait,
Pipeline acquire / wait) and every `pg.while_` loop reads %globaltimer when it starts and
after each try; past LIMIT_NS the thread writes one record (magic, site id, parity, thread)
into host-mapped pinned memory and traps.  The site id indexes the table this pass returns
(what waited, on which barrier, at which user line), so the host can name them.

Where the record lives: a trap loses the CUDA context, after which no device memory can be
read back, but pinned host memory mapped into the device stays readable by the host.  Its
device address reaches the kernel through a module global, `__ptxgen_sync_rec` (a .u64 the
runtime sets after loading the module: runtime/syncdebug.py).  The record is written with one
volatile 16-byte store and a system-scope fence before the trap.

Named barriers (bar.sync / pg.named_barrier / pg.cta_sync) are not bounded: a thread in
bar.sync cannot run a timer.  A hang there stays a hang, unless a bounded wait of another
thread times out first (then that one is reported).

Off (the default), nothing here runs and the PTX is byte-identical to a build without it.
"""
from __future__ import annotations

import os

from ..dtypes import dtype as _dtype
from ..ir import (Alloc, BinOp, Buffer, Const, For, If, Instr, Load, SpecialReg, Store,
                  VecOperand, While)

SYMBOL = "__ptxgen_sync_rec"
MAGIC = 0x53594E43            # "SYNC": a record was written
LIMIT_NS = 2_000_000_000      # 2 s per wait: a SyncError well inside 10 s
_U64, _U32, _BOOL = _dtype("uint64"), _dtype("uint32"), _dtype("bool")

# what the host reads back (runtime/syncdebug.py gets it from the builder: no import)
RECORD = {"symbol": SYMBOL, "magic": MAGIC, "limit_ns": LIMIT_NS}

MODE = {  # read by prepared launches too (Kernel.prepare)
    "sync": "sync" in os.environ.get("PTXGEN_DEBUG", "").replace(",", " ").split()}


def enabled() -> bool:
    return MODE["sync"]


def set_sync(on: bool) -> bool:
    """Switch the mode; returns the previous setting (kernels rebuild on their next use)."""
    prev = MODE["sync"]
    MODE["sync"] = bool(on)
    return prev


class _At:
    """A `[register]` memory operand over an address held in a register."""

    def __init__(self, addr):
        self.addr = addr

    def ptx_operand(self, fmt):
        return f"[{fmt(self.addr)}]"

    def __repr__(self):   # the PTX comment's text: stable, so the cubin caches still hit
        return f"[{self.addr.buffer.name}]"


def declare(text: str) -> str:
    """The module-level declaration of the record pointer, after the PTX header."""
    head = ".address_size 64\n"
    i = text.index(head) + len(head)
    return text[:i] + f".global .align 8 .u64 {SYMBOL};\n" + text[i:]


class _Instrument:
    def __init__(self):
        self.sites: list = []      # site id -> (what, barrier name, parity text, src)
        self.n = 0

    def _reg(self, name, dt):
        self.n += 1
        b = Buffer(f"sync_{name}_{self.n}", (1,), dt, "local")
        return b, Load(b, (Const(0),), dt)

    def _timer(self, reg):
        return Instr("mov.u64", (reg, "%globaltimer"), outs=1)

    def _trap(self, site, parity, src) -> list:
        """The record (one 16-byte volatile store), a system fence, then trap."""
        ab, a = self._reg("rec", _U64)
        vals, out = [], [Alloc(ab, src=src), Instr("mov.u64", (a, SYMBOL), outs=1, src=src),
                         Instr("ld.global.u64", (a, _At(a)), outs=1, src=src)]
        for k, v in enumerate((Const(MAGIC, _U32), Const(site, _U32), parity,
                               SpecialReg("tid.x"))):
            vb, vr = self._reg(f"w{k}", _U32)
            out += [Alloc(vb, src=src), Store(vb, (Const(0),), v, src=src)]
            vals.append(vr)
        out += [Instr("st.volatile.global.v4.u32", (_At(a), VecOperand(tuple(vals))), src=src),
                Instr("fence.sc.sys", (), src=src), Instr("trap", (), src=src)]
        return out

    def _bounded(self, loop: While, what, name, parity, parity_text) -> list:
        src = loop.src
        site = len(self.sites)
        self.sites.append((what, name, parity_text, src))
        tb, t0 = self._reg("t0", _U64)
        nb, now = self._reg("now", _U64)
        late = BinOp("gt", BinOp("sub", now, t0, _U64), Const(LIMIT_NS, _U64), _BOOL)
        # tested after the try (or the body): still not done, and past the bound
        check = [self._timer(now), If(BinOp("and", loop.cond, late, _BOOL),
                                      self._trap(site, parity, src), src=src)]
        body = list(loop.body) + check
        return [Alloc(tb, src=src), Alloc(nb, src=src), self._timer(t0),
                While(loop.cond, body, src=src)]

    def body(self, body) -> list:
        out = []
        for s in body:
            t = type(s)
            if t is While:
                inner = s.body
                if len(inner) == 1 and type(inner[0]) is Instr and \
                        inner[0].form == "mbarrier_wait":
                    w = inner[0]
                    ptr = w.operands[1].ptr
                    par = w.operands[2]
                    name = ptr.buffer.name
                    if ptr.indices and all(type(i) is Const for i in ptr.indices) and \
                            (ptr.buffer.numel() or 1) > 1:
                        name += f"[{', '.join(str(i.value) for i in ptr.indices)}]"
                    elif ptr.indices and not all(type(i) is Const for i in ptr.indices):
                        name += "[<stage>]"
                    par_text = str(par.value) if type(par) is Const else "<computed>"
                    out += self._bounded(s, "wait", name, par, par_text)
                else:
                    s = While(s.cond, self.body(s.body), src=s.src)
                    out += self._bounded(s, "while", "", Const(0, _U32), "")
                continue
            if t is For:
                s = For(s.var, s.start, s.stop, s.step, s.kind, self.body(s.body), src=s.src)
            elif t is If:
                s = If(s.cond, self.body(s.then), self.body(s.else_) if s.else_ else s.else_,
                       src=s.src)
            out.append(s)
        return out


def instrument(body) -> tuple:
    """(body with bounded waits and while_ loops, the site table)."""
    ins = _Instrument()
    return ins.body(body), ins.sites
