"""The asynchronous half of tests/support/ptxsim.py: mbarriers, cp.async, bulk and TMA copies, clusters.

Completion is modelled as *late* as the PTX rules allow, so a kernel that reads data before
waiting for it sees stale bytes and fails its test: a copy into shared memory lands when a
thread waits on its mbarrier (try_wait / test_wait), cp.async copies when their thread waits
for their group (or arrives on an mbarrier through cp.async.mbarrier.arrive), and bulk / TMA
stores read shared memory and write global memory when their thread waits for their bulk
group (or at the end of the CTA).  Tensor maps are the 128-byte blobs of `tensor_map_blob`
(a sim-only encoding of what cuTensorMapEncodeTiled receives); TMA boxes are zero-filled
outside the tensor on loads and clipped on stores, and their swizzle acts on the shared
address bits (16-byte chunk bits ^= 128-byte row bits), which must start on the pattern's
repeat.  Shared::cluster addresses carry the CTA rank + 1 in bits 24 and up (`mapa`).
"""
from __future__ import annotations

import struct

import numpy as np

from .ptxsim_alu import Trap, Unsupported

_MAGIC = b"PGTM"
_SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
_TYPES = ("UINT8", "UINT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "FLOAT32",
          "FLOAT64", "BFLOAT16")
_NP = {"UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "INT32": np.int32,
       "UINT64": np.uint64, "INT64": np.int64, "FLOAT16": np.float16, "FLOAT32": np.float32,
       "FLOAT64": np.float64}
_CLUSTER_BIT = 24


def tensor_map_blob(spec, base: int, symbols: dict) -> bytes:
    """The sim's 128-byte tensor map for a TensorMapSpec over the tensor at `base`."""
    def value(f):
        return f if isinstance(f, int) else symbols[f]
    dims = [value(d) for d in spec.dims]
    strides = [int(np.prod([value(f) for f in fs])) for fs in spec.strides]
    r = spec.rank
    blob = struct.pack("<4s4BQ5Q4Q5I", _MAGIC, r, spec.elem_bytes, _SWIZZLE[spec.swizzle],
                       _TYPES.index(spec.data_type), base, *(dims + [1] * (5 - r)),
                       *(strides + [0] * (4 - len(strides))), *(list(spec.box) + [1] * (5 - r)))
    return blob.ljust(128, b"\0")


def cluster_sregs(rank, ctaid, cl, clid, ncl) -> dict:
    """The cluster special registers of a thread of CTA `rank` (cluster shape `cl`)."""
    out = {"cluster_ctarank": rank, "cluster_nctarank": cl[0] * cl[1] * cl[2]}
    for k, d in enumerate("xyz"):
        out.update({f"clusterid.{d}": clid[k], f"nclusterid.{d}": ncl[k],
                    f"cluster_ctaid.{d}": ctaid[k] % cl[k], f"cluster_nctaid.{d}": cl[k]})
    return out


def _decode(blob: bytes) -> dict:
    f = struct.unpack_from("<4s4BQ5Q4Q5I", blob)
    if f[0] != _MAGIC:
        raise Trap("cp.async.bulk.tensor: the operand is not a tensor map")
    r = f[1]
    return {"rank": r, "eb": f[2], "swizzle": f[3], "type": _TYPES[f[4]], "base": f[5],
            "dims": list(f[6:6 + r]), "strides": [f[2]] + list(f[11:11 + r - 1]),
            "box": list(f[15:15 + r])}


def _swizzle(addr: int, mode: int) -> int:
    """TMA's swizzle of a shared byte address: bits [4, 4+mode) ^= bits [7, 7+mode)."""
    return addr ^ ((addr >> 3) & (((1 << mode) - 1) << 4)) if mode else addr


def _add(a: bytes, b: bytes, ty: str) -> bytes:
    """Element-wise a + b (TMA reduce-add), rounded to the element type."""
    if ty == "BFLOAT16":
        x = (np.frombuffer(a, np.uint16).astype(np.uint32) << 16).view(np.float32)
        y = (np.frombuffer(b, np.uint16).astype(np.uint32) << 16).view(np.float32)
        s = (x + y).view(np.uint32)
        rnd = ((s >> 16) & 1) + 0x7FFF
        out = np.where(np.isnan(x + y), (s >> 16) | 0x40, (s + rnd) >> 16).astype(np.uint16)
        return out.tobytes()
    dt = _NP.get(ty)
    if dt is None or ty == "UINT16" or ty == "UINT8" or ty == "INT64" or ty == "FLOAT64":
        raise Trap(f"TMA reduce-add does not take {ty}")
    with np.errstate(over="ignore"):
        return (np.frombuffer(a, dt) + np.frombuffer(b, dt)).astype(dt).tobytes()


class AsyncOps:
    """mbarrier / cp.async / cp.async.bulk(.tensor) / cluster opcodes; a mixin of Sim."""

    # ---- shared memory of a cluster ------------------------------------------------------
    def _cluster_shared(self, th, ctx, addr, n):
        """(buffer, offset, the CTA ctx) of a shared::cluster address."""
        rank = (addr >> _CLUSTER_BIT) - 1
        cta = ctx if rank < 0 else ctx["cluster"]["ctas"][rank]
        buf, off = self._mem(th, cta, "shared", addr & ((1 << _CLUSTER_BIT) - 1), n)
        return buf, off, cta

    def _op_mapa(self, th, ctx, parts, ops):
        a, rank = self._read(th, ctx, ops[1]), self._read(th, ctx, ops[2])
        if not 0 <= rank < len(ctx["cluster"]["ctas"]):
            raise Trap(f"mapa: CTA rank {rank} is outside the cluster")
        self._write(th, ops[0], ((rank + 1) << _CLUSTER_BIT) | (a & ((1 << _CLUSTER_BIT) - 1)), 32)

    def _op_barrier(self, th, ctx, parts, ops):
        if parts[1] != "cluster":
            raise Unsupported(".".join(parts))
        if parts[2] == "arrive":
            th["cl_arrived"] += 1
            return
        th["wait"] = ("cluster", th["cl_arrived"], 0)
        return "block"

    def _op_createpolicy(self, th, ctx, parts, ops):
        self._write(th, ops[0], 0x1234, 64)

    def _op_prefetch(self, th, ctx, parts, ops):
        return

    # ---- mbarriers ---------------------------------------------------------------------------
    def _bar(self, ctx, addr, what):
        bar = ctx["mbar"].get(addr)
        if bar is None:
            raise Trap(f"{what} on an uninitialized mbarrier at {addr}")
        return bar

    def _mbarrier(self, th, ctx, parts, ops) -> bool:
        """init / arrive(.expect_tx; .shared::cluster: on the barrier of the CTA its address
        names) / try_wait.parity / test_wait.parity; False when a wait must retry later.  A
        wait first lands the copies that complete on its barrier."""
        kind = parts[1]
        if kind in ("init", "inval"):
            addr = self._addr(th, ctx, ops[0])
            if kind == "init":
                n = self._read(th, ctx, ops[1])
                ctx["mbar"][addr] = {"expected": n, "pending": n, "phase": 0, "tx": 0}
            return True
        if kind == "arrive":
            addr = self._addr(th, ctx, ops[1])
            cta = ctx
            if "shared::cluster" in parts:    # maybe a peer's barrier: its CTA, its offset
                _, addr, cta = self._cluster_shared(th, ctx, addr, 8)
            bar = self._bar(cta, addr, "mbarrier.arrive")
            if ops[0] != "_":
                self._write(th, ops[0], bar["phase"], 64)
            if "expect_tx" in parts:
                bar["tx"] += self._read(th, ctx, ops[2])
            bar["pending"] -= 1
            self._complete_phase(bar)
            return True
        if kind in ("try_wait", "test_wait") and "parity" in parts:
            addr = self._addr(th, ctx, ops[1])
            self._land(ctx, addr)
            bar = self._bar(ctx, addr, "mbarrier wait")
            done = bar["phase"] != (self._read(th, ctx, ops[2]) & 1)
            self._write(th, ops[0], done, 1)
            return done or kind == "test_wait"
        raise Unsupported(".".join(parts))

    @staticmethod
    def _complete_phase(bar):
        """A phase completes when every expected arrival came and no tx bytes are owed."""
        if bar["pending"] == 0 and bar["tx"] == 0:
            bar["phase"] ^= 1
            bar["pending"] = bar["expected"]
        elif bar["pending"] < 0:
            raise Trap("mbarrier: more arrivals than its count in one phase")

    def _complete_tx(self, cta, addr, n):
        bar = self._bar(cta, addr, "complete_tx")
        bar["tx"] -= n
        self._complete_phase(bar)

    def _land(self, ctx, addr):
        """Run the in-flight copies that complete on the mbarrier (ctx's CTA, `addr`)."""
        flight = ctx["cluster"]["inflight"]
        keep = []
        for key, fn in flight:
            if key == (id(ctx), addr):
                fn()
            else:
                keep.append((key, fn))
        flight[:] = keep

    # ---- copies ------------------------------------------------------------------------------
    def _op_cp(self, th, ctx, parts, ops):
        op = ".".join(parts)
        if parts[1] == "reduce" or parts[2] == "bulk" and parts[3] == "tensor":
            return self._tensor(th, ctx, parts, ops)
        if parts[2] == "bulk":
            if parts[3] == "commit_group":
                return self._commit(th, "bulk")
            if parts[3] == "wait_group":
                return self._wait(th, "bulk", self._read(th, ctx, ops[0]))
            if parts[3] == "prefetch":
                return
            return self._bulk(th, ctx, parts, ops)
        if parts[2] in ("ca", "cg"):
            return self._cp_async(th, ctx, parts, ops)
        if parts[2] == "commit_group":
            return self._commit(th, "cp")
        if parts[2] == "wait_group":
            return self._wait(th, "cp", self._read(th, ctx, ops[0]))
        if parts[2] == "wait_all":
            self._commit(th, "cp")
            return self._wait(th, "cp", 0)
        if parts[2] == "mbarrier":     # cp.async.mbarrier.arrive(.noinc): after this thread's copies
            self._commit(th, "cp")
            self._wait(th, "cp", 0)
            if "noinc" in parts:
                bar = self._bar(ctx, self._addr(th, ctx, ops[0]), op)
                bar["pending"] -= 1
                self._complete_phase(bar)
            return
        raise Unsupported(op)

    def _commit(self, th, kind):
        q = th["async"].setdefault(kind, {"open": [], "groups": []})
        q["groups"].append(q["open"])
        q["open"] = []

    def _wait(self, th, kind, n):
        q = th["async"].setdefault(kind, {"open": [], "groups": []})
        while len(q["groups"]) > n:
            for fn in q["groups"].pop(0):
                fn()

    def flush_thread(self, th):
        """Everything a thread left in flight completes when its CTA ends."""
        for q in th["async"].values():
            for group in q["groups"] + [q["open"]]:
                for fn in group:
                    fn()
            q["groups"], q["open"] = [], []

    def _queue(self, th, kind, fn):
        th["async"].setdefault(kind, {"open": [], "groups": []})["open"].append(fn)

    def _cp_async(self, th, ctx, parts, ops):
        n = self._read(th, ctx, ops[2])
        if n not in (4, 8, 16) or parts[2] == "cg" and n != 16:
            raise Trap(f"cp.async.{parts[2]} of {n} bytes")
        d, s = self._addr(th, ctx, ops[0]), self._addr(th, ctx, ops[1])
        if d % n or s % n:
            raise Trap(f"cp.async of {n} bytes at misaligned addresses ({d:#x}, {s:#x})")

        def run():
            sbuf, so = self._mem(th, ctx, "global", s, n)
            dbuf, do = self._mem(th, ctx, "shared", d, n)
            dbuf[do:do + n] = bytes(sbuf[so:so + n])
        self._queue(th, "cp", run)

    def _bulk(self, th, ctx, parts, ops):
        op = ".".join(parts)
        n = self._read(th, ctx, ops[2])
        if n % 16:
            raise Trap(f"{op}: {n} bytes is not a multiple of 16")
        daddr, saddr = self._addr(th, ctx, ops[0]), self._addr(th, ctx, ops[1])
        if daddr % 16 or saddr % 16:
            raise Trap(f"{op}: addresses must be 16-byte aligned ({daddr}, {saddr})")
        if parts[3].startswith("shared"):          # global -> shared, completing an mbarrier
            mbar = self._addr(th, ctx, ops[3])

            def run():
                sbuf, so = self._mem(th, ctx, "global", saddr, n)
                dbuf, do, cta = self._cluster_shared(th, ctx, daddr, n)
                dbuf[do:do + n] = bytes(sbuf[so:so + n])
                self._complete_tx(cta, mbar, n)
            ctx["cluster"]["inflight"].append(((id(ctx), mbar), run))
            return
        if parts[3] != "global" or "bulk_group" not in parts:
            raise Unsupported(op)

        def store():
            sbuf, so = self._mem(th, ctx, "shared", saddr, n)
            dbuf, do = self._mem(th, ctx, "global", daddr, n)
            dbuf[do:do + n] = bytes(sbuf[so:so + n])
        self._queue(th, "bulk", store)

    def _tensor(self, th, ctx, parts, ops):
        """cp(.reduce).async.bulk.tensor.Nd: loads (.multicast::cluster), stores, reduce-add."""
        op = ".".join(parts)
        dim = int(next(p for p in parts if p.endswith("d") and p[:-1].isdigit())[:-1])
        load = parts[parts.index("tensor") + 2] != "global"     # the destination space
        mem_tok, tmap_tok = (ops[0], ops[1]) if load else (ops[1], ops[0])
        inner = tmap_tok.strip()[1:-1]
        mref, _, coords = inner.partition(",")
        tm = _decode(self.param_blob(self._read(th, ctx, mref.strip())))
        if tm["rank"] != dim:
            raise Trap(f"{op}: a {dim}-D copy through a rank-{tm['rank']} tensor map")
        cs = [self._signed32(self._read(th, ctx, c)) for c in coords.strip().strip("{}").split(",")]
        saddr = self._addr(th, ctx, mem_tok) & ((1 << _CLUSTER_BIT) - 1)
        rep = {0: 128, 1: 256, 2: 512, 3: 1024}[tm["swizzle"]]
        if saddr % rep:
            raise Trap(f"{op}: shared address {saddr} is not {rep}-byte aligned")
        eb, box = tm["eb"], tm["box"]
        if cs[0] * eb % 16:   # what the H200 does: an "illegal instruction" fault
            raise Trap(f"{op}: the innermost start {cs[0]} x {eb} B is not a multiple of 16 B")
        nbytes = int(np.prod(box)) * eb

        def elements():
            """(dense byte offset in the box, global byte address or None outside)."""
            for lin in range(int(np.prod(box))):
                rem, addr, inside = lin, tm["base"], True
                for k in range(dim):
                    c = cs[k] + rem % box[k]
                    rem //= box[k]
                    inside &= 0 <= c < tm["dims"][k]
                    addr += c * tm["strides"][k]
                yield lin * eb, addr if inside else None

        if load:
            mbar = self._addr(th, ctx, ops[2])
            ranks = [None]
            if "multicast::cluster" in parts:
                mask = self._read(th, ctx, ops[3])
                ranks = [r for r in range(len(ctx["cluster"]["ctas"])) if mask >> r & 1]

            def run(rank):
                cta = ctx if rank is None else ctx["cluster"]["ctas"][rank]
                for o, g in elements():
                    a = _swizzle(saddr + o, tm["swizzle"])
                    buf, so = self._mem(th, cta, "shared", a, eb)
                    if g is None:
                        buf[so:so + eb] = b"\0" * eb
                    else:
                        gbuf, go = self._mem(th, ctx, "global", g, eb)
                        buf[so:so + eb] = bytes(gbuf[go:go + eb])
                self._complete_tx(cta, mbar, nbytes)
            for r in ranks:
                cta = ctx if r is None else ctx["cluster"]["ctas"][r]
                ctx["cluster"]["inflight"].append(((id(cta), mbar), lambda r=r: run(r)))
            return

        def store():
            for o, g in elements():
                if g is None:
                    continue
                buf, so = self._mem(th, ctx, "shared", _swizzle(saddr + o, tm["swizzle"]), eb)
                gbuf, go = self._mem(th, ctx, "global", g, eb)
                new = bytes(buf[so:so + eb])
                if parts[1] == "reduce":
                    new = _add(bytes(gbuf[go:go + eb]), new, tm["type"])
                gbuf[go:go + eb] = new
        self._queue(th, "bulk", store)

    @staticmethod
    def _signed32(v):
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >> 31 else v
