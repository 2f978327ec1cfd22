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
from operator import itemgetter

from ..errors import PtxgenError
from ..ir import BOOL, INT32, INT64, BinOp, BufferPtr, Const, Expr, Load, Var, expr_key, format_expr
from ..passes.simplify import Affine
from .isa import form
from .debug import BoundsChecks
from .names import sanitize
from .values import _PREFIX, _REG_CLASS, reg_class
from ..dtypes import mem_type

_SPACE = {"global": "global", "shared": "shared", "shared.dyn": "shared", "local": "local"}
# the container (type, count) that moves n bits, and the register class of each type
_CONTAINERS = {256: ("b32", 8), 128: ("b32", 4), 64: ("b32", 2), 32: ("b32", 1),
               16: ("b16", 1), 8: ("b8", 1)}
_CONTAINER_CLS = {"b32": "b32", "b16": "b16", "b8": "b32", "b64": "b64"}
_new_str = str.__new__
_COEF = itemgetter(1)   # the coefficient of an affine term [atom, coef]
_MEM_TYPE: dict = {}   # dtype (interned) -> ld/st type



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
    base = 0 if parent is None else byte_offset(parent.buffer, parent.indices)
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
        self._off_cache: dict = {}              # (parent uid, index keys) -> view base
        self._bases: dict = {}                  # view uid -> byte offset of its data pointer
        self._plans: dict = {}                  # buffer uid -> (element bytes, byte strides)
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
        r = buf if buf.data is None else buf.root
        if r.uid not in self.base and r.uid not in self.local_regs:
            raise PtxgenError(f"buffer '{buf.name}' is used before its storage is allocated")
        return r

    def mem_operand(self, ptr: BufferPtr):
        """(base register, constant byte offset) of a pointer expression."""
        buf = ptr.buffer
        root = self._root(buf)
        # no separate simplify: the affine form simplifies the index's atoms itself
        return self._address(self.base[root.uid], _SPACE.get(root.scope),
                             self.offset_affine(buf, ptr.indices))

    # ---- offsets as affine forms (no intermediate expression trees) --------------------
    def offset_affine(self, buf, indices) -> Affine:
        """Bytes from the root storage to buf[indices] (indices simplified; None: buf.data),
        as a fresh form the caller may rewrite.  Not cached per access: a (buffer, indices)
        pair rarely repeats, so its key would cost more than it saves; what is fixed per
        buffer (view base, element size, strides) is cached instead."""
        base = None if buf.data is None else self._view_base(buf)
        if indices is None:
            return Affine(INT32) if base is None else base.copy()
        nb, strides = self._plans.get(buf.uid) or self._plan(buf)
        if strides is None:   # a layout
            m = buf.layout.apply(*indices, shape=buf.shape)["m"]
            aff = Affine(INT32, {}, m) if isinstance(m, int) else self.an.affine(m)
            if nb != 1:
                aff.scale(nb)
        else:   # row-major: each index scaled by its byte stride as it is added
            aff = None
            for idx, s in zip(indices, strides):
                if type(s) is int:
                    a = Affine(INT32, {}, idx) if isinstance(idx, int) else self.an.affine(idx)
                else:   # a symbolic element stride: the product is simplified as an expression
                    dt = idx.dtype if isinstance(idx, Expr) else s.dtype
                    i = idx if isinstance(idx, Expr) else Const(idx, dt)
                    a = self.an.affine(BinOp("mul", i, s, dt))
                    s = nb
                if s != 1:
                    for t in a.terms.values():
                        t[1] *= s
                    a.const *= s
                if aff is None:   # the first index's form is the sum so far
                    aff = a
                    if a.dtype is not INT64:
                        a.dtype = INT32
                else:
                    if a.dtype is INT64:
                        aff.dtype = INT64
                    aff.add(a)
            if aff is None:
                aff = Affine(INT32)
        eo = buf.elem_offset
        if isinstance(eo, int):
            aff.const += eo * nb
        else:
            e = self.an.affine(eo)
            if e.dtype is INT64:
                aff.dtype = INT64
            aff.add(e.scale(nb) if nb != 1 else e)
        if aff.dtype is not INT64:
            for a, c in aff.terms.values():
                if c and a.dtype is not INT32:
                    aff.dtype = INT64   # unsigned (or narrow) indices: widen, zero-extending
                    break
        if base is not None:
            wide = aff.dtype is INT64 or base.dtype is INT64
            aff.add(base)
            aff.dtype = INT64 if wide else INT32
        return aff

    def _plan(self, buf) -> tuple:
        """(element bytes, strides) of a buffer, once: row-major strides innermost last, in
        bytes, or in elements (an Expr) past a symbolic extent; None for a layout."""
        dt = buf.dtype
        bits = 8 if dt == BOOL else dt.bits   # a predicate slot: one byte
        if bits < 8:
            raise PtxgenError(f"{dt} elements are not byte addressable; view "
                              f"'{buf.name}' as uint8 to move packed pairs")
        nb = bits // 8
        strides = None
        if buf.layout is None:
            shape = buf.shape
            strides, stride = [], 1
            for ext in reversed(shape[1:]):   # the outermost extent scales no index
                strides.append(stride * nb if type(stride) is int else stride)
                if isinstance(stride, int) and isinstance(ext, int):
                    stride *= ext
                else:
                    st = stride if isinstance(stride, Expr) else Const(stride, ext.dtype)
                    e = ext if isinstance(ext, Expr) else Const(ext, st.dtype)
                    stride = BinOp("mul", e, st, st.dtype)
            if shape:
                strides.append(stride * nb if type(stride) is int else stride)
            strides.reverse()
        plan = self._plans[buf.uid] = (nb, strides)
        return plan

    def _view_base(self, buf) -> Affine:
        """Bytes from the root storage to a view's data pointer.  Cached per view (its pointer
        never changes) and per structural pointer, so views of one pointer share the form."""
        hit = self._bases.get(buf.uid)
        if hit is None:
            p = buf.data
            if p.indices is None:
                hit = Affine(INT32) if p.buffer.data is None else self._view_base(p.buffer)
            else:
                pidx = tuple([self.an.simplify(i) for i in p.indices])
                key = (p.buffer.uid, tuple([expr_key(i) for i in pidx]))
                hit = self._off_cache.get(key)
                if hit is None:
                    hit = self._off_cache[key] = self.offset_affine(p.buffer, pidx)
            self._bases[buf.uid] = hit
        return hit

    def _address(self, base, space, aff):
        """(register, immediate) for `base` + `aff` bytes.  The scaled variable part is
        cached separately from the base, so A[i, j] and B[i, j] share one index."""
        const = aff.const
        terms = aff.terms
        # the index's identity: dtype, atoms and coefficients of its nonzero terms, keyed
        # without building the expression (the coefficients fix the scale g, below)
        coefs = tuple(map(_COEF, terms.values()))
        if 0 in coefs:   # a cancelled term
            terms = {k: t for k, t in terms.items() if t[1]}
            coefs = tuple(map(_COEF, terms.values()))
        if not coefs:
            return (base, const) if const >= 0 else self._fold_negative(base, const)
        ikey = (aff.dtype, tuple(terms), coefs)
        key = ("addr", base, ikey)
        known = self.known
        hit = known.get(key)
        if hit is None:
            # factor out the largest power-of-two multiple: emit the element-ish index once,
            # then one scale (mul.wide for the 64-bit spaces)
            g = math.gcd(*coefs)
            g &= -g
            wide64 = space != "shared"
            skey = ("scaled", ikey, wide64)
            scaled = known.get(skey) if wide64 else None
            atom = None
            if len(coefs) == 1 and coefs[0] == g:
                [(atom, _)] = terms.values()
            if type(atom) is Var and atom.dtype is aff.dtype:
                # the index is a variable: once scaled, no operand needed
                v = self.val(atom) if scaled is None else None
            else:
                aff.const = 0
                if g != 1:
                    for t in aff.terms.values():
                        t[1] //= g
                v = self.affine_val(aff)
            counts = self.reg_counts
            lines = self.lines
            scope = self._scope_keys[-1]
            if wide64:
                n = counts["b64"] + 1
                hit = "%rd" + str(n)
                if scaled is None:
                    n += 1
                    scaled = "%rd" + str(n)
                    mul = ("mul.lo", "s64") if aff.dtype is INT64 else ("mul.wide", "s32")
                    lines.append("    " + form("binary", *mul).format(d=scaled, a=v, b=g))
                    known[skey] = scaled
                    scope.append(skey)
                counts["b64"] = n
                lines.append("    " + form("binary", "add", "s64").format(d=hit, a=base, b=scaled))
            else:
                n = counts["b32"] + 1
                counts["b32"] = n
                hit = "%r" + str(n)
                if g == 1:
                    lines.append("    " + form("binary", "add", "s32").format(d=hit, a=base, b=v))
                else:
                    lines.append("    " + form("ternary", "mad.lo", "s32").format(d=hit, a=v, b=g, c=base))
            known[key] = hit
            scope.append(key)
        return (hit, const) if const >= 0 else self._fold_negative(hit, const)

    def _fold_negative(self, reg, const):
        """PTX has no [reg-imm]: a negative offset is added into a new register."""
        return (self._add_const(reg, const), 0)

    def _add_const(self, reg, const) -> str:
        wide = reg.startswith("%rd")
        r = self.new_reg("b64" if wide else "b32")
        self.emit(form("binary", "add", "s64" if wide else "s32").format(d=r, a=reg, b=const))
        return r

    def address_value(self, ptr: BufferPtr) -> str:
        """A pointer as a value: 64-bit global address or 32-bit shared address."""
        base, off = self.mem_operand(ptr)
        return base if off == 0 else self._add_const(base, off)

    # ---- loads and stores: the hot path, with new_reg/emit/remember inlined -------------
    def _local_index(self, buf, root, regs, indices):
        aff = self.offset_affine(buf, indices)
        for t in aff.terms.values():
            if t[1]:
                raise PtxgenError(f"internal: register buffer '{buf.name}' indexed dynamically")
        k = aff.const // max(1, root.dtype.bits // 8)
        if not 0 <= k < len(regs):
            raise PtxgenError(f"index {', '.join(format_expr(i) for i in indices)} is outside "
                              f"local buffer '{buf.name}' ({len(regs)} elements)")
        return k

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
        space = _SPACE.get(root.scope)
        if base is None or space is None:
            self._unaddressable(buf, root)
        indices = e.indices
        if self.debug_bounds:
            self.bounds_check(buf, indices)
        if e.cache:
            self.need_opcode("ld.global" + e.cache)
        aff = self.offset_affine(buf, indices)
        dt = buf.dtype
        if lanes > 1:
            nbits = e.dtype.bits * lanes
            if nbits > dt.bits:
                self._check_vector_alignment(buf, root, indices, nbits // 8, aff)
        reg, off = self._address(base, space, aff)
        addr = reg + "+" + str(off) if off else reg
        counts = self.reg_counts
        if lanes == 1:
            if dt == BOOL:
                raise PtxgenError("bool buffers are not supported in memory; use uint8")
            cls = (_REG_CLASS.get(dt) or reg_class(dt)) if dt.bits >= 16 else "b32"
            n = counts[cls] + 1
            counts[cls] = n
            r = _PREFIX[cls] + str(n)
            mt = _MEM_TYPE.get(dt) or _MEM_TYPE.setdefault(dt, mem_type(dt))
            self.lines.append("    " + form("ld", space, mt).format(d=r, a=addr))
            return r
        if nbits == 256:
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
        space = _SPACE.get(root.scope)
        if base is None or space is None:
            self._unaddressable(buf, root)
        if cache:
            self.need_opcode("st.global" + cache)
        v = self.val(value) if lanes > 1 else self.reg(value)
        if self.debug_bounds:
            self.bounds_check(buf, indices)
        aff = self.offset_affine(buf, indices)
        dt = buf.dtype
        if lanes > 1:
            nbits = value.dtype.bits * lanes
            if nbits > dt.bits:
                self._check_vector_alignment(buf, root, indices, nbits // 8, aff)
        reg, off = self._address(base, space, aff)
        addr = reg + "+" + str(off) if off else reg
        if lanes == 1:
            mt = _MEM_TYPE.get(dt) or _MEM_TYPE.setdefault(dt, mem_type(dt))
            self.lines.append("    " + form("st", space, mt).format(a=addr, v=v))
            return
        if nbits == 256:
            self._gate_vector(space)
        ty, n = _CONTAINERS.get(nbits) or _container(nbits)
        # a vector value's text is its braced registers already
        self.lines.append("    " + form("st", space, ty, n, cache).format(
            a=addr, v=v if n > 1 else v.regs[0]))

    def _gate_vector(self, space):
        """256-bit (.v8) accesses: global memory only, sm_100+."""
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
