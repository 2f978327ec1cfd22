"""Buffers -> storage declarations, loads and stores (addresses: emit/address.py).

Vector values travel as b32/b64 containers, so any 32-bit register class can be moved
without conversion.
"""
from __future__ import annotations

import math

from ..analysis.offsets import root_element_offset
from ..errors import PtxgenError, ResourceError
from ..ir import BOOL, Const, Load, as_expr
from ..printer import format_expr
from ..target.forms import form
from .address import SPACE, AddressEmitter
from .debug import BoundsChecks
from .names import sanitize
from ..target import WIDE_VECTOR_BITS, WIDE_VECTOR_GATE, smem_limits, wide_vector_refusal
from ..dtypes import MOVE_CONTAINERS, mem_type, reg_class
from ..dtypes import REG_PREFIX as _PREFIX

# the container (bit type, count) that moves n bits, and the register class of each type
# (b8 has none of its own: bytes sit in 32-bit registers)
_CONTAINERS = {n: (f"b{b}", k) for n, (b, k) in MOVE_CONTAINERS.items()}
_CONTAINER_CLS = {"b32": "b32", "b16": "b16", "b8": "b32", "b64": "b64"}
_new_str = str.__new__


class MemoryEmitter(AddressEmitter, BoundsChecks):
    """Mixin for Codegen: storage declarations, loads, stores, addresses."""

    def _init_memory(self):
        self.base: dict[int, str] = {}          # root buffer uid -> base register / symbol
        self.local_regs: dict[int, list] = {}   # register-resident local buffers
        self.smem_static = 0
        self.smem_allocs = []     # (bytes, name, src) of each static shared allocation
        self._bases: dict = {}     # view uid, or (parent uid, index keys) -> view base offset
        self._plans: dict = {}     # buffer uid -> (element bytes, byte strides)
        self._exts: dict = {}      # buffer uid -> int extents (see _plan)
        self.debug_bounds = getattr(self, "debug_bounds", False)

    # ---- storage ----------------------------------------------------------------
    def alloc(self, buf, src: str = ""):
        """Declare `buf`'s storage (`src`: the user's line that allocated it, for errors)."""
        scope = buf.scope
        if scope == "local":
            n = buf.span_elems()
            if buf.uid in self.func.register_buffers:   # decided by passes.lower
                cls = reg_class(buf.dtype) if buf.dtype.bits >= 8 or buf.dtype == BOOL else "b32"
                self.local_regs[buf.uid] = [self.new_reg(cls) for _ in range(n)]
                return
            name = sanitize(buf.name, self.names)
            nbytes = max(1, n * buf.dtype.bits // 8)
            self.decls.append(form("array_decl", "local").format(align=max(buf.align, 4),
                                                                 name=name, n=nbytes))
            r = self.new_reg("b64")
            self.emit(form("mov", "u64").format(d=r, a=name))
            self.base[buf.uid] = r
            return
        if scope == "shared":
            name = sanitize(buf.name, self.names)
            nbytes = max(1, math.ceil(buf.span_elems() * buf.dtype.bits / 8))
            self.decls.append(form("array_decl", "shared").format(align=buf.align, name=name,
                                                                  n=nbytes))
            self.smem_static += nbytes
            self.smem_allocs.append((nbytes, buf.name, src))
        elif scope == "shared.dyn":
            name = sanitize(buf.name, self.names)
            self.module_decls.append(form("extern_array_decl", "shared").format(
                align=max(buf.align, 16), name=name))
        elif scope == "tmem":
            return   # tensor memory is not addressable: tcgen05 primitives use buf.tmem_addr
        elif scope == "shared.cluster":   # another CTA's tile: its mapa'd address is the base
            self.need_opcode("ld.shared::cluster")
            self.base[buf.uid] = self.reg(self.an.simplify(buf.tmem_addr))
            return
        else:
            raise PtxgenError(f"cannot allocate scope {scope!r} inside a kernel "
                              f"(global buffers are parameters)")
        r = self.new_reg("b32")
        self.emit(form("mov", "u32").format(d=r, a=name))
        self.base[buf.uid] = r

    def declare_view(self, buf):
        if buf.data is None:
            self.alloc(buf)

    def finish_memory(self):
        """Shared-memory totals against the target's limits, before ptxas sees them."""
        static_max, dyn_max = smem_limits(self.target)
        f = self.func
        dyn = max(f.dynamic_smem_bytes, f.dynamic_smem_reserve or 0)
        if self.smem_static > static_max:
            raise ResourceError(
                f"{self._smem_where(static_max)}static shared memory is {self.smem_static} bytes "
                f"but {self.target.arch} allows {static_max} ({static_max // 1024} KiB) per CTA "
                f"({self._largest()}); move tiles into the dynamic arena (pg.SMEMPool / "
                f"scope='shared.dyn'), which can reach {dyn_max // 1024} KiB")
        if self.smem_static + dyn > dyn_max:
            raise ResourceError(
                f"{self._smem_where(dyn_max - dyn)}shared memory per CTA is {self.smem_static} "
                f"static + {dyn} dynamic = {self.smem_static + dyn} bytes, over the {dyn_max} "
                f"bytes ({dyn_max // 1024} KiB) that {self.target.arch} allows"
                f"{' (' + self._largest() + ')' if self.smem_allocs else ''}; shrink tiles or "
                f"reuse space (pool.move_base_to)")

    def _smem_where(self, limit: int) -> str:
        """'file:line: ' of the static allocation that first crosses `limit` bytes."""
        total = 0
        for nbytes, _, src in self.smem_allocs:
            total += nbytes
            if total > limit:
                return f"{src}: " if src else ""
        return ""

    def _largest(self) -> str:
        big = sorted(self.smem_allocs, key=lambda a: -a[0])[:3]
        return "largest: " + ", ".join(f"'{n}' {b} B" + (f" at {s}" if s else "")
                                       for b, n, s in big)

    # ---- addresses ------------------------------------------------------------------
    def _local_index(self, buf, root, regs, indices):
        """Register number of buf[indices] in a register buffer.  Constant indices into the
        buffer itself (the usual case) are summed over its byte strides directly: the affine
        form of a constant offset is only its constant."""
        if root.dtype.storage_bits < 8:   # float4_e2m1fn: a register per element, no bytes
            return self._local_elements(buf, root, regs, indices)
        off, eo = None, buf.elem_offset
        if buf is root and type(eo) is int:
            nb, strides = self._plans.get(buf.uid) or self._plan(buf)
            if strides is not None:
                off = eo * nb
                for idx, s in zip(indices, strides):
                    if type(idx) is not Const or type(s) is not int:
                        off = None
                        break
                    off += idx.value * s
        if off is None:
            aff = self.offset_affine(buf, indices)
            for t in aff.terms.values():
                if t[1]:
                    raise PtxgenError(f"internal: register buffer '{buf.name}' indexed dynamically")
            off = aff.const
        k = off // max(1, root.dtype.bits // 8)
        if not 0 <= k < len(regs):
            raise PtxgenError(f"index {', '.join(format_expr(i) for i in indices)} is outside "
                              f"local buffer '{buf.name}' ({len(regs)} elements)")
        return k

    def _local_elements(self, buf, root, regs, indices):
        """Register number of buf[indices] in a register buffer of sub-byte elements."""
        if buf.dtype is not root.dtype:
            raise PtxgenError(f"register buffer '{buf.name}' views '{root.name}' ({root.dtype}) "
                              f"as {buf.dtype}")
        k = self.an.simplify(as_expr(root_element_offset(buf, indices)))
        if not isinstance(k, Const):
            raise PtxgenError(f"internal: register buffer '{buf.name}' indexed dynamically")
        if not 0 <= k.value < len(regs):
            raise PtxgenError(f"index {', '.join(format_expr(i) for i in indices)} is outside "
                              f"local buffer '{buf.name}' ({len(regs)} elements)")
        return k.value

    def _unaddressable(self, buf, root):
        """The error for a buffer without a base register or an addressable state space."""
        if root.uid not in self.base:
            raise PtxgenError(f"buffer '{buf.name}' is used before its storage is allocated")
        raise PtxgenError(f"'{buf.name}' is in {root.scope} memory, which is not addressable; "
                          f"use the tcgen05 primitives")

    def _check_vector_alignment(self, buf, root, indices, vbytes, aff):
        """The byte offset must be a provable multiple of the vector size.  Coefficients that
        are multiples already need no facts (the common, scaled index)."""
        base_align = root.align if root.scope != "local" else 16
        if base_align % vbytes == 0:
            if aff.const % vbytes == 0:
                for t in aff.terms.values():
                    if t[1] % vbytes:
                        break
                else:
                    return
            if self.an.affine_divisible(aff, vbytes):
                return
        raise PtxgenError(
            f"{vbytes}-byte vector access to {buf.name}[{', '.join(format_expr(i) for i in indices)}] "
            f"cannot be proven {vbytes}-byte aligned (byte offset {format_expr(aff.to_expr())}, "
            f"base align {base_align}); use narrower vectors or make the index a provable multiple")

    def load(self, e: Load) -> str:
        buf = e.buffer
        lanes = e.dtype.lanes
        root = buf if buf.data is None else buf.root
        regs = self.local_regs.get(root.uid)
        if regs is not None:
            k = self._local_index(buf, root, regs, e.indices)
            if lanes == 1:
                return regs[k]
            return self._pack(regs[k:k + lanes], buf.dtype)
        base = self.base.get(root.uid)
        space = SPACE.get(root.scope)
        if base is None or space is None:
            self._unaddressable(buf, root)
        if e.cache:
            self.need_opcode("ld.global" + e.cache)
        nbits = e.dtype.bits * lanes
        addr = self._access_address(buf, root, base, space, e.indices, lanes, nbits)
        dt = buf.dtype
        counts = self.reg_counts
        if lanes == 1:
            if dt == BOOL:
                raise PtxgenError("bool buffers are not supported in memory; use uint8")
            cls = dt.ptx.reg if dt.bits >= 16 else "b32"
            n = counts[cls] + 1
            counts[cls] = n
            r = _PREFIX[cls] + str(n)
            mt = dt.ptx.mem or mem_type(dt)
            self.lines.append("    " + form("ld", space, mt).format(d=r, a=addr))
            return r
        if nbits == WIDE_VECTOR_BITS:
            self._gate_vector(space)
        ty, n = _CONTAINERS.get(nbits) or _container(nbits)
        cls = _CONTAINER_CLS[ty]
        c = counts[cls]
        counts[cls] = c + n
        regs = list(map(_PREFIX[cls].__add__, map(str, range(c + 1, c + n + 1))))  # no frames
        text = "{" + ", ".join(regs) + "}"
        self.lines.append("    " + form("ld", space, ty, n, e.cache).format(
            d=text if n > 1 else regs[0], a=addr))
        vec = _new_str(_VecRegs, text)   # _VecRegs(regs) without its Python-level __new__
        vec.regs = regs
        return vec

    def _access_address(self, buf, root, base, space, indices, lanes, nbits) -> str:
        """The `[reg+imm]` operand of a load or store of `lanes` elements (nbits in all) at
        buf[indices], checked against the buffer first: the bounds debug mode's test, the
        exact in-bounds test where the facts do not confirm the access, a vector's alignment."""
        if self.debug_bounds:
            self.bounds_check(buf, indices)
        aff = self.offset_affine(buf, indices)
        if not self.known_in_bounds(buf, indices, lanes, aff):
            self.static_bounds(buf, indices, lanes)
        if lanes > 1 and nbits > buf.dtype.bits:
            self._check_vector_alignment(buf, root, indices, nbits // 8, aff)
        reg, off = self._address(base, space, aff)
        return reg + "+" + str(off) if off else reg

    def store(self, buf, indices, value, cache=""):
        lanes = value.dtype.lanes
        root = buf if buf.data is None else buf.root
        regs = self.local_regs.get(root.uid)
        if regs is not None:
            k = self._local_index(buf, root, regs, indices)
            if lanes == 1:
                v = self.val(value)
                self.emit(form("mov", self._mov_type(buf.dtype)).format(d=regs[k], a=v))
            else:
                self._unpack(self.val(value), regs[k:k + lanes], buf.dtype)
            return
        base = self.base.get(root.uid)
        space = SPACE.get(root.scope)
        if base is None or space is None:
            self._unaddressable(buf, root)
        if cache:
            self.need_opcode("st.global" + cache)
        v = self.val(value) if lanes > 1 else self.reg(value)
        nbits = value.dtype.bits * lanes
        addr = self._access_address(buf, root, base, space, indices, lanes, nbits)
        dt = buf.dtype
        if lanes == 1:
            mt = dt.ptx.mem or mem_type(dt)
            self.lines.append("    " + form("st", space, mt).format(a=addr, v=v))
            return
        if nbits == WIDE_VECTOR_BITS:
            self._gate_vector(space)
        ty, n = _CONTAINERS.get(nbits) or _container(nbits)
        # a vector value's text is its braced registers already
        self.lines.append("    " + form("st", space, ty, n, cache).format(
            a=addr, v=v if n > 1 else v.regs[0]))

    def _gate_vector(self, space):
        """256-bit (.v8) accesses: target.wide_vector_refusal and WIDE_VECTOR_GATE say where."""
        why = wide_vector_refusal(space=space)
        if why:
            raise PtxgenError(f"{why}, not {space}; use 128-bit vectors there")
        self.need_opcode("ld.global.v8", **WIDE_VECTOR_GATE)

    # ---- container packing ----------------------------------------------------------
    def _pack(self, regs, dt):
        """Element registers of a register buffer -> the b32 (or b16) containers a vector
        memory access moves: 64-bit lanes split, 16-bit lanes pair, 8-bit lanes insert."""
        nbits = dt.bits * len(regs)
        ty, n = _container(nbits)
        cls = _CONTAINER_CLS[ty]
        if dt.bits == 64:
            out = []
            for reg in regs:
                lo, hi = self.new_reg("b32"), self.new_reg("b32")
                self.emit(form("mov", "b64").format(d="{" + f"{lo}, {hi}" + "}", a=reg))
                out += [lo, hi]
            return _VecRegs(out)
        per = len(regs) // n
        if per == 1:   # a move per lane, new_reg/emit inlined (the register-tile hot path)
            fmt, counts = form("mov", ty.replace("u", "b")), self.reg_counts
            c = counts[cls]
            counts[cls] = c + n
            out = list(map(_PREFIX[cls].__add__, map(str, range(c + 1, c + n + 1))))
            self.lines += ["    " + fmt.format(d=r, a=p) for r, p in zip(out, regs)]
            return _VecRegs(out)
        out = []
        for c in range(n):
            part = regs[c * per:(c + 1) * per]
            if dt.bits == 16:
                r = self.new_reg(cls)
                self.emit(form("mov", "b32").format(d=r, a="{" + ", ".join(part) + "}"))
            elif dt.bits == 8:
                w = self.new_reg("b32")
                self.emit(form("mov", "b32").format(d=w, a=part[0]))
                bfi = form("bfi", "b32")
                for k, p in enumerate(part[1:], 1):
                    self.emit(bfi.format(d=w, a=p, b=w, c=8 * k, n=8))
                r = w
                if cls == "b16":
                    r = self.new_reg("b16")
                    self.emit(form("cvt", "u16", "u32").format(d=r, a=w))
            else:
                raise PtxgenError(f"cannot pack {dt} lanes")
            out.append(r)
        return _VecRegs(out)

    def _unpack(self, vec, regs, dt):
        """The inverse of _pack: containers -> element registers."""
        if dt.bits == 64:
            for k, reg in enumerate(regs):
                lo, hi = vec.regs[2 * k], vec.regs[2 * k + 1]
                self.emit(form("mov", "b64").format(d=reg, a="{" + f"{lo}, {hi}" + "}"))
            return
        per = len(regs) // len(vec.regs)
        if per == 1:   # a move per lane
            fmt = form("mov", "b16" if dt.bits == 16 else
                       self._mov_type(dt) if dt.bits >= 32 else "b32")
            self.lines += ["    " + fmt.format(d=p, a=r) for p, r in zip(regs, vec.regs)]
            return
        for c, r in enumerate(vec.regs):
            part = regs[c * per:(c + 1) * per]
            if dt.bits == 16:
                self.emit(form("mov", "b32").format(d="{" + ", ".join(part) + "}", a=r))
            else:
                if r.startswith("%rs"):      # a 16-bit container of two bytes
                    w = self.new_reg("b32")
                    self.emit(form("cvt", "u32", "u16").format(d=w, a=r))
                    r = w
                bfe = "s32" if dt.kind == "int" else "u32"
                for k, p in enumerate(part):
                    self.emit(form("ternary", "bfe", bfe).format(d=p, a=r, b=8 * k, c=8))


class _VecRegs(str):
    """Registers of a vector value (a str so it flows through val() caches)."""

    def __new__(cls, regs):
        s = super().__new__(cls, "{" + ", ".join(regs) + "}")
        s.regs = list(regs)
        return s


def _container(nbits):
    c = _CONTAINERS.get(nbits)
    if c is None:
        raise PtxgenError(f"no PTX container moves {nbits} bits")
    return c
