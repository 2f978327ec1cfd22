"""Buffers -> storage and address arithmetic.

Global addresses are 64-bit (`mul.wide` of the 32-bit element index, then add),
shared addresses 32-bit (`mad.lo` onto the symbol address).  The element offset
comes from the buffer's metadata only:
    byte(B[c]) = byte(B.data) + (B.elem_offset + B.layout(c)["m"]) * sizeof(B.dtype)
Constant parts fold into the `[reg+imm]` operand.  Vector values travel as b32/b64
containers, so any 32-bit register class can be moved without conversion.
"""
from __future__ import annotations

import math

from ..errors import PtxgenError
from ..ir import BOOL, INT32, INT64, BinOp, BufferPtr, Const, Expr, Load, expr_key, format_expr
from ..passes.simplify import Affine
from .isa import form
from .debug import BoundsChecks
from .names import sanitize
from .values import reg_class
from ..dtypes import mem_type

_SPACE = {"global": "global", "shared": "shared", "shared.dyn": "shared", "local": "local"}


def element_offset(buf, indices):
    """Element offset of buf[indices] relative to buf.data (IR expression or int)."""
    if buf.layout is not None:
        m = buf.layout.apply(*indices, shape=buf.shape)["m"]
    else:
        m, stride = 0, 1
        for idx, ext in zip(reversed(indices), reversed(buf.shape)):
            m = idx * stride + m if not (isinstance(idx, int) and idx == 0) else m
            stride = ext * stride
    eo = buf.elem_offset
    if not (isinstance(eo, int) and eo == 0):
        m = m + eo
    return m


def byte_offset(buf, indices):
    """Bytes from the root storage to buf[indices] (None indices: buf.data)."""
    parent = buf.data
    base = 0
    if parent is not None:
        base = byte_offset(parent.buffer, parent.indices) if parent.indices is not None \
            else byte_offset(parent.buffer, None)
    if indices is None:
        return base
    m = element_offset(buf, indices)
    bits = 8 if buf.dtype == BOOL else buf.dtype.bits   # a bool (predicate) slot is one byte
    if bits < 8:
        raise PtxgenError(f"{buf.dtype} elements are not byte addressable; view '{buf.name}' as "
                          f"uint8 to move packed pairs")
    scaled = m * (bits // 8) if not isinstance(m, int) else m * (bits // 8)
    return scaled if isinstance(base, int) and base == 0 else scaled + base


class MemoryEmitter(BoundsChecks):
    """Mixin for Codegen: storage declarations, loads, stores, addresses."""

    def _init_memory(self):
        self.base: dict[int, str] = {}          # root buffer uid -> base register / symbol
        self.local_regs: dict[int, list] = {}   # register-resident local buffers
        self.smem_static = 0
        self.local_in_regs: set = set()
        self._off_cache: dict = {}
        self._strides: dict = {}
        self.debug_bounds = getattr(self, "debug_bounds", False)

    # ---- storage ----------------------------------------------------------------
    def alloc(self, buf):
        scope = buf.scope
        if scope == "local":
            n = buf.span_elems()
            if buf.uid in self.local_in_regs:
                cls = reg_class(buf.dtype) if buf.dtype.bits >= 8 or buf.dtype == BOOL else "b32"
                self.local_regs[buf.uid] = [self.new_reg(cls) for _ in range(n)]
                return
            name = sanitize(buf.name, self.names)
            nbytes = max(1, n * buf.dtype.bits // 8)
            self.decls.append(f".local .align {max(buf.align, 4)} .b8 {name}[{nbytes}];")
            r = self.new_reg("b64")
            self.emit(form("mov", "u64").format(d=r, a=name))
            self.base[buf.uid] = r
            return
        if scope == "shared":
            name = sanitize(buf.name, self.names)
            nbytes = max(1, math.ceil(buf.span_elems() * buf.dtype.bits / 8))
            self.decls.append(f".shared .align {buf.align} .b8 {name}[{nbytes}];")
            self.smem_static += nbytes
        elif scope == "shared.dyn":
            name = sanitize(buf.name, self.names)
            self.module_decls.append(f".extern .shared .align {max(buf.align, 16)} .b8 {name}[];")
        elif scope == "tmem":
            return   # tensor memory is not addressable: tcgen05 primitives use buf.tmem_addr
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
        from ..errors import ResourceError
        from .target import smem_limits

        static_max, dyn_max = smem_limits(self.target)
        f = self.func
        dyn = max(f.dynamic_smem_bytes, f.dynamic_smem_reserve or 0)
        if self.smem_static > static_max:
            raise ResourceError(
                f"static shared memory is {self.smem_static} bytes but {self.target.arch} allows "
                f"{static_max} ({static_max // 1024} KiB) per CTA; move tiles into the dynamic "
                f"arena (pg.SMEMPool / scope='shared.dyn'), which can reach {dyn_max // 1024} KiB")
        if self.smem_static + dyn > dyn_max:
            raise ResourceError(
                f"shared memory per CTA is {self.smem_static} static + {dyn} dynamic = "
                f"{self.smem_static + dyn} bytes, over the {dyn_max} bytes ({dyn_max // 1024} KiB) "
                f"that {self.target.arch} allows; shrink tiles or reuse space (pool.move_base_to)")

    # ---- addresses ------------------------------------------------------------------
    def _root(self, buf):
        r = buf.root
        if r.uid not in self.base and r.uid not in self.local_regs:
            raise PtxgenError(f"buffer '{buf.name}' is used before its storage is allocated")
        return r

    def mem_operand(self, ptr: BufferPtr):
        """(base register, constant byte offset) of a pointer expression."""
        buf = ptr.buffer
        root = self._root(buf)
        # no separate simplify: the affine form simplifies the index's atoms itself
        return self._address(root, _SPACE.get(root.scope), self.offset_affine(buf, ptr.indices))

    # ---- offsets as affine forms (no intermediate expression trees) --------------------
    def _aff(self, x) -> Affine:
        if isinstance(x, int):
            return Affine(INT32, {}, x)
        return self.an.affine(x)

    def offset_affine(self, buf, indices) -> Affine:
        """Bytes from the root storage to buf[indices] (indices simplified; None: buf.data).
        Cached per (buffer, indices): the value is the same wherever it is computed."""
        key = (buf.uid, None if indices is None else tuple([expr_key(i) for i in indices]))
        hit = self._off_cache.get(key)
        if hit is None:
            hit = self._off_cache[key] = self._offset_affine(buf, indices)
        return hit.copy()   # callers may rewrite their copy

    def _offset_affine(self, buf, indices) -> Affine:
        parent = buf.data
        if parent is None:
            base = None   # owns its storage: no base offset
        else:
            pidx = None if parent.indices is None else \
                tuple([self.an.simplify(i) for i in parent.indices])
            base = self.offset_affine(parent.buffer, pidx)
        if indices is None:
            return base if base is not None else Affine(INT32)
        bits = 8 if buf.dtype == BOOL else buf.dtype.bits   # a predicate slot: one byte
        if bits < 8:
            raise PtxgenError(f"{buf.dtype} elements are not byte addressable; view "
                              f"'{buf.name}' as uint8 to move packed pairs")
        aff = self._elem_affine(buf, indices)
        if bits != 8:
            aff.scale(bits // 8)
        if base is not None:
            wide = aff.dtype is INT64 or base.dtype is INT64
            aff.add(base)
            aff.dtype = INT64 if wide else INT32
        return aff

    def _row_major_strides(self, buf) -> list:
        """Element strides of a row-major buffer, innermost last (ints, or Exprs for
        symbolic extents); cached per buffer."""
        strides = self._strides.get(buf.uid)
        if strides is None:
            strides = []
            stride = 1
            for ext in reversed(buf.shape):
                strides.append(stride)
                if isinstance(stride, int) and isinstance(ext, int):
                    stride *= ext
                else:
                    st = stride if isinstance(stride, Expr) else Const(stride, ext.dtype)
                    e = ext if isinstance(ext, Expr) else Const(ext, st.dtype)
                    stride = BinOp("mul", e, st, st.dtype)
            strides.reverse()
            self._strides[buf.uid] = strides
        return strides

    def _elem_affine(self, buf, indices) -> Affine:
        if buf.layout is None:
            aff = Affine(INT32)
            for idx, stride in zip(indices, self._row_major_strides(buf)):
                if type(stride) is int:
                    a = self._aff(idx)
                    if stride != 1:
                        a.scale(stride)
                else:
                    dt = idx.dtype if isinstance(idx, Expr) else stride.dtype
                    i = idx if isinstance(idx, Expr) else Const(idx, dt)
                    a = self.an.affine(BinOp("mul", i, stride, dt))
                if a.dtype is INT64:
                    aff.dtype = INT64
                aff.add(a)
        else:
            m = buf.layout.apply(*indices, shape=buf.shape)["m"]
            aff = self._aff(m)
        eo = buf.elem_offset
        if not (isinstance(eo, int) and eo == 0):
            e = self._aff(eo)
            if e.dtype is INT64:
                aff.dtype = INT64
            aff.add(e)
        if aff.dtype is not INT64:
            for a, c in aff.terms.values():
                if c and a.dtype is not INT32:
                    aff.dtype = INT64   # unsigned (or narrow) indices: widen, zero-extending
                    break
        return aff

    def _address(self, root, space, aff):
        """(register, immediate) for root base + `aff` bytes.  The scaled variable part is
        cached separately from the base, so A[i, j] and B[i, j] share one index."""
        base = self.base[root.uid]
        const = aff.const
        terms = [(k, t) for k, t in aff.terms.items() if t[1]]
        if not terms:
            return self._fold_negative(base, const, space)
        # factor out the largest power-of-two multiple: emit the element-ish index once,
        # then one scale (mul.wide for the 64-bit spaces)
        g = 0
        for _, t in terms:
            g = math.gcd(g, t[1])
        g &= -g
        # the index's identity is its (ordered) terms: keyed without building the expression
        ikey = (aff.dtype, tuple([(k, t[1] // g) for k, t in terms]))
        wide64 = space in ("global", "local")
        key = ("addr", base, ikey, g)
        hit = self.known.get(key)
        if hit is None:
            skey = ("scaled", ikey, g, wide64)
            scaled = self.known.get(skey)
            aff.const = 0
            for _, t in terms:
                t[1] //= g
            idx = aff.to_expr()
            v = self.val(idx)
            r = self.new_reg("b64" if wide64 else "b32")
            if wide64:
                if scaled is None:
                    scaled = self.new_reg("b64")
                    if idx.dtype == INT64:
                        self.emit(form("binary", "mul.lo", "s64").format(d=scaled, a=v, b=g))
                    else:
                        self.emit(form("binary", "mul.wide", "s32").format(d=scaled, a=v, b=g))
                    self.remember(skey, scaled)
                self.emit(form("binary", "add", "s64").format(d=r, a=base, b=scaled))
            elif g == 1:
                self.emit(form("binary", "add", "s32").format(d=r, a=base, b=v))
            else:
                self.emit(form("ternary", "mad.lo", "s32").format(d=r, a=v, b=g, c=base))
            hit = r
            self.remember(key, r)
        return self._fold_negative(hit, const, space)

    def _fold_negative(self, reg, const, space):
        if const >= 0:
            return (reg, const)
        # PTX has no [reg-imm]: fold a negative offset into the register
        wide = reg.startswith("%rd")
        r = self.new_reg("b64" if wide else "b32")
        self.emit(form("binary", "add", "s64" if wide else "s32").format(d=r, a=reg, b=const))
        return (r, 0)

    def address_value(self, ptr: BufferPtr) -> str:
        """A pointer as a value: 64-bit global address or 32-bit shared address."""
        base, off = self.mem_operand(ptr)
        if off == 0:
            return base
        wide = base.startswith("%rd")
        r = self.new_reg("b64" if wide else "b32")
        self.emit(form("binary", "add", "s64" if wide else "s32").format(d=r, a=base, b=off))
        return r

    # ---- loads and stores -------------------------------------------------------------
    def _local_index(self, buf, indices):
        aff = self.offset_affine(buf, indices)
        if aff.items():
            raise PtxgenError(f"internal: register buffer '{buf.name}' indexed dynamically")
        regs = self.local_regs[buf.root.uid]
        k = aff.const // max(1, buf.root.dtype.bits // 8)
        if not 0 <= k < len(regs):
            raise PtxgenError(f"index {', '.join(format_expr(i) for i in indices)} is outside "
                              f"local buffer '{buf.name}' ({len(regs)} elements)")
        return k

    def _check_vector_alignment(self, buf, indices, vbytes, aff):
        if vbytes <= buf.dtype.bits // 8:
            return
        root = buf.root
        base_align = root.align if root.scope != "local" else 16
        if not (self.an.affine_divisible(aff, vbytes) and base_align % vbytes == 0):
            raise PtxgenError(
                f"{vbytes}-byte vector access to {buf.name}[{', '.join(format_expr(i) for i in indices)}] "
                f"cannot be proven {vbytes}-byte aligned (byte offset {format_expr(aff.to_expr())}, "
                f"base align {base_align}); use narrower vectors or make the index a provable multiple")

    def load(self, e: Load) -> str:
        buf = e.buffer
        root = self._root(buf)
        lanes = e.dtype.lanes
        if root.uid in self.local_regs:
            k = self._local_index(buf, e.indices)
            regs = self.local_regs[root.uid]
            if lanes == 1:
                return regs[k]
            return self._pack(regs[k:k + lanes], buf.dtype)
        space = _SPACE.get(root.scope)
        if space is None:
            raise PtxgenError(f"'{buf.name}' is in {root.scope} memory, which is not addressable; "
                              f"use the tcgen05 primitives")
        self.bounds_check(buf, e.indices)
        if e.cache:
            self.need_opcode("ld.global" + e.cache)
        aff = self.offset_affine(buf, e.indices)
        if lanes > 1:
            self._check_vector_alignment(buf, e.indices, e.dtype.bits * lanes // 8, aff)
        base, off = self._address(root, space, aff)
        addr = base + (f"+{off}" if off else "")
        if lanes == 1:
            dt = buf.dtype
            r = self.new_reg(reg_class(dt) if dt.bits >= 16 or dt == BOOL else "b32")
            if dt == BOOL:
                raise PtxgenError("bool buffers are not supported in memory; use uint8")
            self.emit(form("ld", space, mem_type(dt)).format(d=r, a=addr))
            return r
        nbits = e.dtype.bits * lanes
        self._gate_vector(space, nbits)
        ty, n = _container(nbits)
        regs = [self.new_reg(_container_cls(ty)) for _ in range(n)]
        self.emit(form("ld", space, ty, n, e.cache).format(d=_vec(regs), a=addr))
        return _VecRegs(regs)

    def store(self, buf, indices, value, cache=""):
        root = self._root(buf)
        lanes = value.dtype.lanes
        if root.uid in self.local_regs:
            k = self._local_index(buf, indices)
            regs = self.local_regs[root.uid]
            if lanes == 1:
                v = self.val(value)
                self.emit(form("mov", self._mov_type(buf.dtype)).format(d=regs[k], a=v))
            else:
                self._unpack(self.val(value), regs[k:k + lanes], buf.dtype)
            return
        space = _SPACE.get(root.scope)
        if space is None:
            raise PtxgenError(f"'{buf.name}' is in {root.scope} memory, which is not addressable; "
                              f"use the tcgen05 primitives")
        if cache:
            self.need_opcode("st.global" + cache)
        v = self.val(value) if lanes > 1 else self.reg(value)
        self.bounds_check(buf, indices)
        aff = self.offset_affine(buf, indices)
        if lanes > 1:
            self._check_vector_alignment(buf, indices, value.dtype.bits * lanes // 8, aff)
        base, off = self._address(root, space, aff)
        addr = base + (f"+{off}" if off else "")
        if lanes == 1:
            self.emit(form("st", space, mem_type(buf.dtype)).format(a=addr, v=v))
            return
        nbits = value.dtype.bits * lanes
        self._gate_vector(space, nbits)
        ty, n = _container(nbits)
        self.emit(form("st", space, ty, n, cache).format(a=addr, v=_vec(v.regs)))

    def _gate_vector(self, space, nbits):
        if nbits == 256:
            if space != "global":
                raise PtxgenError(f"256-bit vector access needs the global state space, not {space}")
            self.need_opcode("ld.global.v8", feature="256 bit wide load/store", min_sm=100,
                             min_ptx=(8, 8))

    # ---- container packing ----------------------------------------------------------
    def _pack(self, regs, dt):
        """Element registers of a register buffer -> the b32 (or b16) containers a vector
        memory access moves: 64-bit lanes split, 16-bit lanes pair, 8-bit lanes insert."""
        nbits = dt.bits * len(regs)
        ty, n = _container(nbits)
        cls = _container_cls(ty)
        if dt.bits == 64:
            out = []
            for reg in regs:
                lo, hi = self.new_reg("b32"), self.new_reg("b32")
                self.emit(form("mov", "b64").format(d="{" + f"{lo}, {hi}" + "}", a=reg))
                out += [lo, hi]
            return _VecRegs(out)
        per = len(regs) // n
        out = []
        for c in range(n):
            part = regs[c * per:(c + 1) * per]
            if per == 1:
                r = self.new_reg(cls)
                self.emit(form("mov", ty.replace("u", "b")).format(d=r, a=part[0]))
            elif dt.bits == 16:
                r = self.new_reg(cls)
                self.emit(form("mov", "b32").format(d=r, a="{" + ", ".join(part) + "}"))
            elif dt.bits == 8:
                w = self.new_reg("b32")
                self.emit(form("mov", "b32").format(d=w, a=part[0]))
                for k, p in enumerate(part[1:], 1):
                    self.emit(f"bfi.b32 {w}, {p}, {w}, {8 * k}, 8;")
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
        for c, r in enumerate(vec.regs):
            part = regs[c * per:(c + 1) * per]
            if per == 1:
                self.emit(form("mov", self._mov_type(dt) if dt.bits >= 32 else "b32").format(d=part[0], a=r)
                          if dt.bits != 16 else form("mov", "b16").format(d=part[0], a=r))
            elif dt.bits == 16:
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


def _vec(regs) -> str:
    return "{" + ", ".join(regs) + "}" if len(regs) > 1 else regs[0]


def _container(nbits):
    if nbits == 256:
        return "b32", 8
    if nbits == 128:
        return "b32", 4
    if nbits == 64:
        return "b32", 2
    if nbits in (32, 16, 8):
        return {32: "b32", 16: "b16", 8: "b8"}[nbits], 1
    raise PtxgenError(f"no PTX container moves {nbits} bits")


def _container_cls(ty):
    return {"b32": "b32", "b16": "b16", "b8": "b32", "b64": "b64"}[ty]


