"""A small PTX interpreter for tests: runs the subset ptxgen emits on the CPU.

It exists so that CI (no GPU) can check emitted kernels *by their results*, bit for bit,
against numpy.  Registers hold raw bit patterns; every instruction interprets them by its
type suffix.  Threads of a CTA run one after another up to each barrier.  Supported: param
loads, mov/cvta, integer and float arithmetic (.rn), setp/selp, cvt, bfe/bfi, ld/st of
global/shared/local memory (scalars and vectors, any cache modifiers), branches, bar.sync
(named barriers with counts, bar.arrive), bar.warp.sync, ldmatrix/stmatrix, mma.sync (ptxsim_mma.py), wgmma
(ptxsim_wgmma.py), ret; in ptxsim_math.py 16-bit and packed float arithmetic, fma,
ex2/lg2/rsqrt/rcp/sqrt, every cvt rounding and saturation (float8 included),
shfl.sync.bfly, redux.sync; and, in ptxsim_async.py, mbarriers, cp.async, bulk and TMA copies
(tensor maps from `tensor_map_blob`), multicast and thread-block clusters (the CTAs of a
cluster run in one schedule: barrier.cluster, mapa, ld/st.shared::cluster); in
ptxsim_atomic.py atom and red (each one indivisible read-modify-write; fences are no-ops).
Anything else raises `Unsupported`, so a test cannot pass by skipping work.  The ALU half is
ptxsim_alu.py.
"""
from __future__ import annotations

import re

import numpy as np

from .ptxsim_alu import (AluOps, Trap, Unsupported, _WIDTH, _from_float, _mask,  # noqa: F401
                         _reg_bits, _signed)
from .ptxsim_async import AsyncOps, cluster_sregs, tensor_map_blob
from .ptxsim_atomic import AtomicOps
from .ptxsim_mma import MmaOps
from .ptxsim_math import MathOps


_REDZONE = 256     # bytes of no array before each shared/local array


class Memory:
    """Byte-addressed spaces: global (named allocations), and per-CTA / per-thread arrays."""

    def __init__(self):
        self.global_allocs = []       # (base, bytearray)
        self.next_base = 0x1000_0000

    def alloc_global(self, data: bytes) -> int:
        """A new allocation, followed by a 64 KiB gap: an access past its end traps instead of
        landing in the next one."""
        base = self.next_base
        self.next_base += ((len(data) + 0xFFFF) & ~0xFFFF) + 0x10000
        self.global_allocs.append((base, bytearray(data)))
        return base

    def view(self, base):
        for b, arr in self.global_allocs:
            if b == base:
                return arr
        raise KeyError(base)

    def _find(self, addr, n):
        for b, arr in self.global_allocs:
            if b <= addr and addr + n <= b + len(arr):
                return arr, addr - b
        raise Trap(f"global access out of bounds at 0x{addr:x} ({n} bytes)")


def _parse_imm(tok):
    tok = tok.strip()
    if tok.startswith("0f"):
        return int(tok[2:], 16)
    if tok.startswith("0d"):
        return int(tok[2:], 16)
    if tok.startswith(("0x", "-0x")):
        return int(tok, 16)
    return int(tok)


class Kernel:
    """A parsed .entry: params, static shared/local arrays, instructions, labels."""

    def __init__(self, ptx: str):
        head = ptx[ptx.index(".entry"):ptx.index(")")]
        self.params = []     # (type, name); type "bytes" for a .b8 array (a tensor map)
        for m in re.finditer(r"\.param\s+(?:\.align\s+\d+\s+\.b8\s+(\w+)\[\d+\]|\.(\w+)"
                             r"(?:\s+\.ptr\s+\.global\s+\.align\s+\d+)?\s+(\w+))", head):
            self.params.append(("bytes", m.group(1)) if m.group(1) else (m.group(2), m.group(3)))
        body = ptx[ptx.index("{", ptx.index(".entry")) + 1:ptx.rindex("}")]
        self.shared = []     # (name, align, size)
        self.local = []
        self.dyn = re.findall(r"\.extern\s+\.shared\s+\.align\s+(\d+)\s+\.b8\s+(\w+)\[\]", ptx)
        self.instrs = []
        self.labels = {}
        for raw in body.splitlines():
            line = raw.split("//")[0].strip()
            if not line:
                continue
            m = re.match(r"\.shared\s+\.align\s+(\d+)\s+\.b8\s+(\w+)\[(\d+)\];", line)
            if m:
                self.shared.append((m.group(2), int(m.group(1)), int(m.group(3))))
                continue
            m = re.match(r"\.local\s+\.align\s+(\d+)\s+\.b8\s+(\w+)\[(\d+)\];", line)
            if m:
                self.local.append((m.group(2), int(m.group(1)), int(m.group(3))))
                continue
            if line.startswith(".reg") or line.startswith("{") or line.startswith("}"):
                continue
            if line.endswith(":"):
                self.labels[line[:-1]] = len(self.instrs)
                continue
            self.instrs.append(self._parse(line.rstrip(";")))

    @staticmethod
    def _parse(line):
        guard = None
        m = re.match(r"@(!?)(%\w+)\s+(.*)", line)
        if m:
            guard = (m.group(1) == "!", m.group(2))
            line = m.group(3)
        op, _, rest = line.partition(" ")
        ops, depth, cur = [], 0, ""
        for ch in rest:
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
            if ch == "," and depth == 0:
                ops.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            ops.append(cur.strip())
        return guard, op, ops


class Sim(MathOps, AluOps, MmaOps, AsyncOps, AtomicOps):
    def __init__(self, ptx: str, mem: Memory | None = None, stop_at=()):
        self.k = Kernel(ptx)
        self.mem = mem or Memory()
        self.steps = 0
        self.stop_at = tuple(stop_at)    # opcode prefixes at which a thread just ends
        self.blobs = {}                  # param-space address -> bytes (tensor maps)

    def param_blob(self, addr):
        if addr not in self.blobs:
            raise Trap(f"no by-value parameter at address {addr:#x}")
        return self.blobs[addr]

    # ---- launch ------------------------------------------------------------------------
    def launch(self, args, grid=(1, 1, 1), block=(1, 1, 1), dyn_smem=0, max_steps=20_000_000,
               cluster=(1, 1, 1)):
        grid = (tuple(grid) + (1, 1))[:3]
        block = (tuple(block) + (1, 1))[:3]
        cl = (tuple(cluster) + (1, 1))[:3]
        if any(g % c for g, c in zip(grid, cl)):
            raise Trap(f"grid {grid} is not a whole number of clusters {cl}")
        params = {}
        for (ty, name), a in zip(self.k.params, args):
            if ty == "bytes":
                addr = 0x7000_0000 + 0x100 * len(self.blobs)
                self.blobs[addr] = bytes(a)
                params[name] = addr
                continue
            params[name] = a if ty in ("u64", "b64") else _mask(a if isinstance(a, int) else
                                                                _from_float(a, ty), _WIDTH[ty])
        ncl = tuple(g // c for g, c in zip(grid, cl))
        for cz in range(ncl[2]):
            for cy in range(ncl[1]):
                for cx in range(ncl[0]):
                    ctaids = [(cx * cl[0] + x, cy * cl[1] + y, cz * cl[2] + z)
                              for z in range(cl[2]) for y in range(cl[1]) for x in range(cl[0])]
                    self._run_cluster(params, ctaids, grid, block, dyn_smem, max_steps, cl,
                                      (cx, cy, cz), ncl)

    def _run_cluster(self, params, ctaids, grid, block, dyn_smem, max_steps, cl, clid, ncl):
        cluster = {"ctas": [], "inflight": []}
        threads = []
        for rank, ctaid in enumerate(ctaids):
            ctx, ths = self._make_cta(params, ctaid, grid, block, dyn_smem, rank, cl, clid, ncl)
            ctx["cluster"] = cluster
            cluster["ctas"].append(ctx)
            threads += ths
        self._schedule(threads, cluster, max_steps)
        for th in threads:
            self.flush_thread(th)
        for _, fn in cluster["inflight"]:   # copies nobody waited for still land
            fn()

    def _make_cta(self, params, ctaid, grid, block, dyn_smem, rank, cl, clid, ncl):
        shared = bytearray()
        sym = {}
        valid = []     # (start, end) of each shared array: red zones between them trap
        for name, align, size in self.k.shared:
            off = (len(shared) + _REDZONE + align - 1) // align * align
            shared.extend(b"\0" * (off - len(shared) + size))
            sym[name] = ("shared", off)
            valid.append((off, off + size))
        for align, name in self.k.dyn:
            off = (len(shared) + _REDZONE + int(align) - 1) // int(align) * int(align)
            shared.extend(b"\0" * (off - len(shared) + dyn_smem))
            sym[name] = ("shared", off)
            valid.append((off, off + dyn_smem))
        nthreads = block[0] * block[1] * block[2]
        threads = []
        for t in range(nthreads):
            local = bytearray()
            lsym = {}
            lvalid = []
            for name, align, size in self.k.local:
                off = (len(local) + _REDZONE + align - 1) // align * align
                local.extend(b"\0" * (off - len(local) + size))
                lsym[name] = off
                lvalid.append((off, off + size))
            tid = (t % block[0], (t // block[0]) % block[1], t // (block[0] * block[1]))
            sregs = {"tid.x": tid[0], "tid.y": tid[1], "tid.z": tid[2], "ntid.x": block[0],
                     "ntid.y": block[1], "ntid.z": block[2], "ctaid.x": ctaid[0],
                     "ctaid.y": ctaid[1], "ctaid.z": ctaid[2], "nctaid.x": grid[0],
                     "nctaid.y": grid[1], "nctaid.z": grid[2], "laneid": t % 32,
                     "warpid": t // 32, **cluster_sregs(rank, ctaid, cl, clid, ncl)}
            threads.append({"pc": 0, "regs": {}, "sregs": sregs, "local": local, "lsym": lsym,
                            "lvalid": lvalid, "done": False, "wait": None, "lin": t, "async": {},
                            "cl_arrived": 0})
        ctx = {"params": params, "shared": shared, "sym": sym, "mbar": {}, "valid": valid}
        for th in threads:
            th["ctx"] = ctx
        return ctx, threads

    def _schedule(self, threads, cluster, max_steps):
        while True:
            progressed = False
            for th in threads:
                if th["done"] or th["wait"] is not None:
                    continue
                self._run_thread(th, th["ctx"], max_steps)
                progressed = True
            live = [t for t in threads if not t["done"]]
            if not live:
                return
            for t in live:                     # spinning waiters retry every round
                if t["wait"] is not None and t["wait"][0] == "spin":
                    t["wait"] = None
                    progressed = True
            released = False
            # the cluster barrier: every live thread of the cluster has arrived
            waits = [t["wait"][1] for t in live if t["wait"] and t["wait"][0] == "cluster"]
            if waits and all(t["cl_arrived"] >= min(waits) for t in live):
                for t in live:
                    if t["wait"] and t["wait"][0] == "cluster" and t["wait"][1] <= min(waits):
                        t["wait"] = None
                released = True
            for ctx in cluster["ctas"]:
                mine = [t for t in live if t["ctx"] is ctx]
                released |= self._release_cta(mine, ctx)
            if not released and not progressed:
                raise Trap("deadlock: threads wait on barriers that never complete")

    def _release_cta(self, live, ctx) -> bool:
        """Release the CTA, warp and named barriers of one CTA's live threads."""
        if not live:
            return False
        waiting = [t for t in live if t["wait"] is not None]
        released = False
        # CTA barriers: every live thread waits on the same id
        if len(waiting) == len(live) and all(t["wait"][0] == "cta" for t in live):
            for t in live:
                t["wait"] = None
            released = True
        else:   # warp barriers and named barriers with counts
            groups = {}
            for t in waiting:
                groups.setdefault(t["wait"], []).append(t)
            for key, ts in groups.items():
                kind, ident, count = key
                if kind == "warp":
                    lanes = [t for t in live if t["lin"] // 32 == ident]
                    if all(t["wait"] == key for t in lanes):
                        for t in lanes:
                            t["wait"] = None
                        released = True
                elif kind == "coll":   # shfl/redux: the live lanes; ldmatrix/mma: all 32
                    lanes = [t for t in live if t["lin"] // 32 == ident]
                    op = self.k.instrs[count][1]
                    whole = len(lanes) == 32 or op.startswith(("shfl", "redux"))
                    if whole and all(t["wait"] == key for t in lanes):
                        run = self._mma if op.startswith("mma") else self._collective
                        run(sorted(lanes, key=lambda t: t["lin"]), ctx, count)
                        for t in lanes:
                            t["wait"] = None
                        released = True
                elif kind == "wgmma":
                    lanes = [t for t in live if t["lin"] // 128 == ident]
                    if len(lanes) == 128 and all(t["wait"] == key for t in lanes):
                        from .ptxsim_wgmma import mma_async
                        mma_async(self, sorted(lanes, key=lambda t: t["lin"]), ctx, count)
                        for t in lanes:
                            t["wait"] = None
                        released = True
                elif kind == "named":
                    arr = ctx.setdefault("arrivals", {})
                    n = len(ts) + arr.get(ident, 0)     # waiters and bar.arrive's
                    if n > count:
                        raise Trap(f"bar.sync {ident}, {count}: {n} threads arrive on it at "
                                   f"once; more arrivals than the count is undefined on the "
                                   f"hardware (an H200 hangs)")
                    if n == count:
                        for t in ts:
                            t["wait"] = None
                        arr[ident] = 0
                        released = True
        return released

    # ---- operands ------------------------------------------------------------------------
    def _read(self, th, ctx, tok, ty=None):
        tok = tok.strip()
        if tok.startswith("%"):
            name = tok[1:]
            if name in th["sregs"]:
                return th["sregs"][name]
            if tok not in th["regs"]:
                return 0
            return th["regs"][tok]
        if tok in ctx["sym"]:
            return ctx["sym"][tok][1]
        if tok in th["lsym"]:
            return th["lsym"][tok]
        if tok in ctx["params"]:
            return ctx["params"][tok]
        v = _parse_imm(tok)
        if ty in ("f32", "f64") and not tok.startswith(("0f", "0d")):
            v = _from_float(float(v), ty)
        return _mask(v, _WIDTH.get(ty, 64)) if ty else v

    def _write(self, th, tok, val, bits):
        th["regs"][tok.strip()] = _mask(val, bits) if bits > 1 else (1 if val else 0)

    def _addr(self, th, ctx, tok):
        inner = tok.strip()[1:-1]
        m = re.match(r"(.+?)\+(-?\d+)$", inner)
        base, off = (m.group(1), int(m.group(2))) if m else (inner, 0)
        addr = self._read(th, ctx, base) + off
        return _mask(addr, 32) if _reg_bits(base) == 32 and base.startswith("%") else addr

    # ---- memory --------------------------------------------------------------------------
    def _mem(self, th, ctx, space, addr, n):
        if space == "global":
            return self.mem._find(addr, n)
        if space == "shared::cluster":
            return self._cluster_shared(th, ctx, addr, n)[:2]
        if space == "shared":
            buf, valid = ctx["shared"], ctx["valid"]
        elif space == "local":
            buf, valid = th["local"], th["lvalid"]
        else:
            raise Unsupported(space)
        for lo, hi in valid:   # inside one array: not in a red zone, not across two
            if lo <= addr and addr + n <= hi:
                return buf, addr
        raise Trap(f"{space} access out of bounds at {addr} ({n} bytes)")

    # ---- execution -------------------------------------------------------------------------
    def _run_thread(self, th, ctx, max_steps):
        instrs = self.k.instrs
        while True:
            if th["pc"] >= len(instrs):
                th["done"] = True
                return
            guard, op, ops = instrs[th["pc"]]
            th["pc"] += 1
            self.steps += 1
            if self.steps > max_steps:
                raise Trap("step limit reached (infinite loop?)")
            if guard is not None:
                p = self._read(th, ctx, guard[1])
                if bool(p) == guard[0]:
                    continue
            parts = op.split(".")
            base = parts[0]
            if base == "ret" or self.stop_at and op.startswith(self.stop_at):
                th["done"] = True
                return
            if base == "bra":
                th["pc"] = self.k.labels[ops[0]]
                continue
            if base == "bar":
                if parts[1] == "arrive":          # counts towards the barrier, no wait
                    ident = self._read(th, ctx, ops[0])
                    arr = ctx.setdefault("arrivals", {})
                    arr[ident] = arr.get(ident, 0) + 1
                    continue
                if parts[1] == "warp":
                    th["wait"] = ("warp", th["lin"] // 32, 0)
                else:
                    ident = self._read(th, ctx, ops[0])
                    if len(ops) > 1:
                        th["wait"] = ("named", ident, self._read(th, ctx, ops[1]))
                    else:
                        th["wait"] = ("cta", ident, 0)
                return
            if base == "trap":
                raise Trap("trap")
            if base == "mbarrier":
                if not self._mbarrier(th, ctx, parts, ops):
                    th["wait"] = ("spin", th["lin"], 0)   # try_wait failed: let others run
                    return
                continue
            if base in ("fence", "prefetch", "griddepcontrol"):   # one kernel at a time:
                continue                                  # the kernel ahead has completed
            if base == "barrier":                 # barrier.cluster.arrive / .wait
                self._op_barrier(th, ctx, parts, ops)
                if th["wait"] is not None:
                    return
                continue
            if base in ("ldmatrix", "stmatrix", "mma", "shfl", "redux"):   # warp collectives: 32 lanes
                th["wait"] = ("coll", th["lin"] // 32, th["pc"] - 1)
                return
            if op.startswith("wgmma.mma_async"):    # warpgroup collective (ptxsim_wgmma)
                th["wait"] = ("wgmma", th["lin"] // 128, th["pc"] - 1)
                return
            if base in ("wgmma", "setmaxnreg"):     # fence / commit / wait: the MMA is done
                continue
            getattr(self, "_op_" + base, self._unsupported(op))(th, ctx, parts, ops)

    def _matrix(self, lanes, ctx, pc):
        """ldmatrix / stmatrix .m8n8.xN[.trans].b16 for one warp: lane i*8+r addresses row r
        of matrix i; lane l's register i holds row l//4, columns 2*(l%4) and 2*(l%4)+1 of
        matrix i (of its transpose with .trans), low half first."""
        guard, op, ops = self.k.instrs[pc]
        if len(lanes) != 32:
            raise Trap(f"{op}: needs the 32 lanes of a warp, {len(lanes)} are running")
        parts = op.split(".")
        n = int(next(p for p in parts if p in ("x1", "x2", "x4"))[1:])
        trans = "trans" in parts
        load = parts[0] == "ldmatrix"
        mem_tok, reg_tok = (ops[1], ops[0]) if load else (ops[0], ops[1])
        rows = [[self._addr(lanes[i * 8 + r], ctx, mem_tok) for r in range(8)] for i in range(n)]
        buf = ctx["shared"]

        def elem_addr(i, r, c):
            a = rows[i][r] + 2 * c
            self._mem(lanes[0], ctx, "shared", a, 2)   # traps outside a shared array
            return a

        for l, th in enumerate(lanes):
            regs = [x.strip() for x in reg_tok.strip("{}").split(",")]
            for i in range(n):
                r0, c0 = l // 4, 2 * (l % 4)
                coords = [(c0, r0), (c0 + 1, r0)] if trans else [(r0, c0), (r0, c0 + 1)]
                if load:
                    v = 0
                    for h, (r, c) in enumerate(coords):
                        a = elem_addr(i, r, c)
                        v |= int.from_bytes(buf[a:a + 2], "little") << (16 * h)
                    self._write(th, regs[i], v, 32)
                else:
                    v = self._read(th, ctx, regs[i])
                    for h, (r, c) in enumerate(coords):
                        a = elem_addr(i, r, c)
                        buf[a:a + 2] = ((v >> (16 * h)) & 0xFFFF).to_bytes(2, "little")

    def _unsupported(self, op):
        def f(*a):
            raise Unsupported(op)
        return f

    def _access(self, th, ctx, parts, addr_tok):
        """(memory, offset, element bytes, register tokens' splitter) of an ld/st."""
        ty = parts[-1]
        vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
        size = _WIDTH[ty] // 8
        buf, off = self._mem(th, ctx, parts[1], self._addr(th, ctx, addr_tok), size * vec)
        regs = (lambda tok: tok.strip("{}").split(",")) if vec > 1 else (lambda tok: [tok])
        return buf, off, size, regs

    def _op_ld(self, th, ctx, parts, ops):
        ty = parts[-1]
        if parts[1] == "param":
            self._write(th, ops[0], ctx["params"][ops[1][1:-1]], _WIDTH[ty])
            return
        buf, off, size, regs = self._access(th, ctx, parts, ops[1])
        for k, d in enumerate(regs(ops[0])):
            raw = int.from_bytes(buf[off + k * size:off + (k + 1) * size], "little")
            if ty[0] == "s":
                raw = _signed(raw, _WIDTH[ty])
            self._write(th, d, raw, _reg_bits(d))

    def _op_st(self, th, ctx, parts, ops):
        buf, off, size, regs = self._access(th, ctx, parts, ops[0])
        for k, s in enumerate(regs(ops[1])):
            v = _mask(self._read(th, ctx, s), size * 8)
            buf[off + k * size:off + (k + 1) * size] = v.to_bytes(size, "little")

    def _op_cvta(self, th, ctx, parts, ops):
        self._write(th, ops[0], self._read(th, ctx, ops[1]), 64)

    def _op_mov(self, th, ctx, parts, ops):
        ty = parts[1]
        bits = _WIDTH[ty]
        d, a = ops
        if d.startswith("{"):        # unpack
            names = [x.strip() for x in d.strip("{}").split(",")]
            v = self._read(th, ctx, a)
            w = bits // len(names)
            for k, n in enumerate(names):
                self._write(th, n, v >> (w * k), w)
            return
        if a.startswith("{"):        # pack
            names = [x.strip() for x in a.strip("{}").split(",")]
            w = bits // len(names)
            v = 0
            for k, n in enumerate(names):
                v |= _mask(self._read(th, ctx, n), w) << (w * k)
            self._write(th, d, v, bits)
            return
        self._write(th, d, self._read(th, ctx, a, ty), bits)


def run(kernel, arrays, scalars=(), grid=None, block=None, arch="sm_90a", stop_at=()):
    """Run a pg.Kernel on numpy arrays (modified in place) and scalar arguments; threads end
    at any opcode starting with one of `stop_at` (to check what a kernel does before it)."""
    sim = Sim(kernel.ptx(arch), stop_at=stop_at)
    bases = [sim.mem.alloc_global(np.ascontiguousarray(a).tobytes()) for a in arrays]
    args = list(bases) + list(scalars)
    f = kernel.ir
    given = {p.name: a for p, a in zip(f.params, args)}
    for p in f.params[len(args):]:       # tensor maps: encoded from their tensor's argument
        if p.kind == "tmap":
            args.append(tensor_map_blob(p.spec, given[p.spec.tensor], given))
    sim.launch(args, grid or f.grid, block or f.block,
               max(f.dynamic_smem_bytes, f.dynamic_smem_reserve or 0),
               cluster=f.attrs.get("cluster", (1, 1, 1)))
    for a, b in zip(arrays, bases):
        flat = np.frombuffer(bytes(sim.mem.view(b)), dtype=a.dtype)
        a.reshape(-1)[...] = flat[:a.size]
    return sim
