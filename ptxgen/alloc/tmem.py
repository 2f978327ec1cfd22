"""Tensor memory: TMEMPool and the checked `pg.ptx.tcgen05.alloc/dealloc/relinquish` helpers.

Why: TMEM is reserved by a warp collective that writes its address to shared memory, and every
mistake (a lane-only alloc, a non-power-of-two or >512 column count, a missing dealloc, a use
after dealloc, mixed cta_group) either fails late in ptxas or hangs / poisons the CUDA context
at run time.  These are all decided at trace time here.

Sequence emitted by TMEMPool (ptx-reference section 8):
    commit:  if warp == alloc_warp:
                 tcgen05.alloc.cta_group::N.sync.aligned.shared::cta.b32 [slot], cols
             tcgen05.fence::before_thread_sync; bar.sync 0; tcgen05.fence::after_thread_sync
             base = ld.shared.u32 [slot]                        (after the barrier, never before)
    dealloc: tcgen05.fence::before_thread_sync; bar.sync 0
             if warp == alloc_warp:  tcgen05.fence::after_thread_sync
                                     tcgen05.relinquish_alloc_permit.cta_group::N.sync.aligned
                                     tcgen05.dealloc.cta_group::N.sync.aligned.b32 base, cols

Default TMEM layout ("layout D", one accumulator row per lane): a (128, N) tile maps row r to
lane r.  TMEM cells are 32 bits; a 32-bit element takes one column, narrower elements pack
32/bits to a column (two float16 per column, as tcgen05.ld .pack::16b and an A operand in TMEM
store them), so (128, N) float16 needs N/2 columns.  The layout's TLane/TCol axes give the
cell and its "m" axis the element's slot inside the 32-bit cell.  Any other arrangement (an
unpacked 16-bit value per cell, the M=64 datapath layouts) is given with an explicit layout=.
"""
from __future__ import annotations

from ..builder.context import assigned_name, current, user_src
from ..builder.control import cta_sync, if_
from ..builder.ptx import element_pointer, emit_instr
from ..builder.allocate import decl_buffer
from ..builder.scalar import LocalScalar
from ..builder.tensor import TensorHandle
from ..dtypes import dtype as _dtype
from ..ir import BufferPtr, Cast, Expr, Let, Load, SpecialReg, Var, as_expr, cast
from ..errors import LayoutError
from ..layout import TileLayout
from ..primitives.tmem_layout import default_layout
from ..builder.resources import (TMEM_COLS, require_full_warp, require_top_level,
                                 resource_error, state)
from ..target.forms import opcode
from .tmem_operands import TMEMOperands

_U32 = _dtype("uint32")


def check_cols(n, what: str) -> int:
    """Column counts for tcgen05.alloc: a power of two in [32, 512]."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise resource_error(f"{what}: the column count must be an int constant, got {n!r} "
                             f"(ptxas does not check a register count; use the raw "
                             f"pg.ptx['tcgen05.alloc...'] for that)")
    if n > TMEM_COLS:
        raise resource_error(f"{what}: {n} columns is more than the {TMEM_COLS} columns of "
                             f"tensor memory an SM has; use at most 512 (split the accumulator "
                             f"into passes or reuse columns)")
    if n < 32:
        raise resource_error(f"{what}: {n} columns is below the 32-column minimum of "
                             f"tcgen05.alloc; allocate 32")
    if n & (n - 1):
        up = 1 << n.bit_length()
        raise resource_error(f"{what}: {n} columns is not a power of two; tcgen05.alloc takes "
                             f"32, 64, 128, 256 or 512: use {up}")
    return n


def _slot_ptr(slot, what: str) -> BufferPtr:
    ptr = element_pointer(slot)
    if ptr is None:
        raise resource_error(f"{what}: the address slot must be a shared uint32 tensor (e.g. "
                             f"pool.alloc((1,), 'uint32')), got {slot!r}")
    b = ptr.buffer
    if b.root.scope not in ("shared", "shared.dyn") or b.dtype.bits != 32:
        raise resource_error(f"{what}: the address slot must be a 32-bit word in shared memory; "
                             f"'{b.name}' is {b.dtype} in {b.root.scope} memory (use "
                             f"pool.alloc((1,), 'uint32'))")
    return ptr


def _addr_value(addr, what: str) -> Expr:
    if isinstance(addr, (TensorHandle, BufferPtr)):
        raise resource_error(f"{what} takes the TMEM address value (slot[0] or tmem.base), not "
                             f"a pointer to the slot")
    if isinstance(addr, LocalScalar):
        addr = addr.__ptxgen_expr__()
    e = as_expr(addr, _U32)
    if not e.dtype.is_int or e.dtype.bits != 32:
        raise resource_error(f"{what}: the TMEM address must be a 32-bit integer, got {e.dtype}")
    return e


# ---- checked helpers: pg.ptx.tcgen05.* -----------------------------------------------------
def tcgen05_alloc(slot, n_cols, cta_group=1):
    """One full warp reserves `n_cols` TMEM columns; the address lands in the shared `slot`."""
    st = state()
    check_cols(n_cols, "tcgen05.alloc")
    st.use_cta_group(cta_group, "tcgen05.alloc")
    require_full_warp("tcgen05.alloc")
    ptr = _slot_ptr(slot, "tcgen05.alloc")
    st.tmem_acquire(n_cols, "tcgen05.alloc")
    st.tmem_base = ptr           # decl_buffer(..., allocated_addr=<column>) reads it
    return emit_instr(opcode("tcgen05_alloc", cta_group), [ptr, n_cols], form="tcgen05_alloc")


def tcgen05_dealloc(addr, n_cols, cta_group=1):
    """The allocating warp frees the columns starting at TMEM address `addr`."""
    st = state()
    check_cols(n_cols, "tcgen05.dealloc")
    st.use_cta_group(cta_group, "tcgen05.dealloc")
    require_full_warp("tcgen05.dealloc")
    a = _addr_value(addr, "tcgen05.dealloc")
    st.tmem_release(n_cols)
    return emit_instr(opcode("tcgen05_dealloc", cta_group), [a, n_cols], form="tcgen05_dealloc")


def tcgen05_relinquish_alloc_permit(cta_group=1):
    """The CTA promises no further tcgen05.alloc (lets a waiting CTA on the SM allocate)."""
    st = state()
    st.use_cta_group(cta_group, "tcgen05.relinquish_alloc_permit")
    require_full_warp("tcgen05.relinquish_alloc_permit")
    st.relinquished = user_src()
    return emit_instr(opcode("tcgen05_relinquish_alloc_permit", cta_group), [],
                      form="tcgen05_relinquish_alloc_permit")


def tcgen05_fence_before_thread_sync():
    return emit_instr(opcode("tcgen05_fence", "before"), [], form="tcgen05_fence")


def tcgen05_fence_after_thread_sync():
    return emit_instr(opcode("tcgen05_fence", "after"), [], form="tcgen05_fence")


def _warp_index():
    """Warp of the calling thread, from the linear thread index (warp-uniform by construction)."""
    bx, by, bz = current().func.block
    if by * bz == 1:
        return SpecialReg("tid.x") // 32
    lin = SpecialReg("tid.x") + SpecialReg("ntid.x") * (
        SpecialReg("tid.y") + SpecialReg("ntid.y") * SpecialReg("tid.z"))
    return lin // 32


# ---- TMEMPool ---------------------------------------------------------------------------------
class TMEMPool(TMEMOperands):
    """Column bump allocator over one tcgen05.alloc; see the module docstring for the sequence.
    The operand helpers (alloc_tcgen05_mma_D/A/C, alloc_sf, move_base_to) are in
    tmem_operands.py."""

    def __init__(self, pool=None, total_cols=TMEM_COLS, cta_group=1, tmem_addr=None,
                 alloc_warp=0):
        ctx = current()
        st = state(ctx)
        check_cols(total_cols, "TMEMPool total_cols")
        st.use_cta_group(cta_group, "TMEMPool")
        if isinstance(alloc_warp, bool) or not isinstance(alloc_warp, int) or alloc_warp < 0:
            raise resource_error(f"TMEMPool alloc_warp={alloc_warp!r} must be a warp index "
                                 f"(int >= 0)")
        if tmem_addr is None:
            if pool is None:
                raise resource_error("TMEMPool needs tmem_addr= (a shared (1,) uint32 slot) or "
                                     "an SMEMPool to allocate it from")
            if pool.committed:
                raise resource_error("TMEMPool: the SMEMPool is already committed, so the TMEM "
                                     "address slot cannot come from it; allocate "
                                     "tmem_addr = pool.alloc((1,), 'uint32') before "
                                     "pool.commit() and pass it")
            tmem_addr = pool.alloc((1,), "uint32", name="tmem_addr")
        self.slot_ptr = _slot_ptr(tmem_addr, "TMEMPool tmem_addr")
        self.slot = tmem_addr if isinstance(tmem_addr, TensorHandle) else None
        self.pool = pool
        self.total_cols = total_cols
        self.cta_group = cta_group
        self.alloc_warp = alloc_warp
        self.src = user_src()
        self._base = Var(ctx.unique("tmem_base"), _U32)
        self._cols = 0
        self.status = "open"              # open -> committed -> freed
        self.commit_src = self.free_src = None
        self.tiles: list = []             # (name, first column, columns)
        st.tmem_pools.append(self)
        ctx.pools.append(self)

    # ---- queries --------------------------------------------------------------------------
    @property
    def base(self) -> Var:
        """The allocated TMEM address (lane 0, first column); valid between commit and dealloc."""
        self.check_live()
        return self._base

    def check_live(self, buf=None):
        """Raise unless the allocation is committed and not yet freed (primitives call this)."""
        what = f"TMEM buffer '{_name(buf)}'" if buf is not None else "the TMEM allocation"
        if self.status == "open":
            raise resource_error(f"{what} is used before tmem.commit(): its columns are not "
                                 f"allocated yet; call tmem.commit() first")
        if self.status == "freed":
            raise resource_error(f"{what} is used after tmem.dealloc() (at {self.free_src}); "
                                 f"the columns may belong to another CTA now: move the use "
                                 f"before dealloc()")

    # ---- allocation -----------------------------------------------------------------------
    def alloc(self, shape, dtype, layout=None, name=None) -> TensorHandle:
        """Bump-allocate columns; returns a scope="tmem" view at base + first column."""
        name = name or assigned_name("tmem_tile")
        if self.status != "open":
            raise resource_error(f"tmem.alloc '{name}' after tmem.commit() (at "
                                 f"{self.commit_src}): the column count is fixed by the "
                                 f"tcgen05.alloc; allocate every TMEM tile before commit()")
        dt = _dtype(dtype)
        if dt.bits not in (4, 8, 16, 32):
            raise resource_error(f"tmem.alloc '{name}': {dt} does not fit TMEM's 32-bit cells; "
                                 f"use a 32-, 16-, 8- or 4-bit type")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if layout is None:
            cols, layout = self._layout_d(shape, dt, name)
        else:
            if not hasattr(layout, "apply"):
                layout = TileLayout(layout)
            if "TCol" not in layout.axes() or layout.span("TLane") > 128:
                raise resource_error(f"tmem.alloc '{name}': layout {layout!r} must map onto the "
                                     f"TLane (at most 128 lanes) and TCol axes")
            cols = layout.span("TCol")
        free = self.total_cols - self._cols
        if cols > free:
            raise resource_error(
                f"TMEM tile '{name}' {shape} {dt} needs {cols} columns but only {free} of this "
                f"pool's total_cols={self.total_cols} remain; raise total_cols (a power of two, "
                f"at most 512) or make the tile narrower")
        first = self._cols
        addr = self._base if first == 0 else self._base + cast(first, _U32)
        h = decl_buffer(shape, dt, scope="tmem", allocated_addr=addr, layout=layout, name=name)
        self._cols += cols
        self.tiles.append((h.buffer.name, first, cols))
        state().tmem_buffers[h.buffer.uid] = self
        return h

    @staticmethod
    def _layout_d(shape, dt, name):
        try:
            return default_layout(shape, dt)
        except LayoutError as e:
            raise resource_error(f"tmem.alloc '{name}': {e}") from None

    # ---- the collective sequences -------------------------------------------------------
    def commit(self):
        """One full warp allocates; barrier; everyone reads the address from the slot."""
        require_top_level("tmem.commit()")
        if self.status != "open":
            raise resource_error(f"tmem.commit() called twice (first at {self.commit_src})")
        ctx = current()
        with if_(_warp_index() == self.alloc_warp):
            tcgen05_alloc(self.slot_ptr, self.total_cols, self.cta_group)
        tcgen05_fence_before_thread_sync()
        cta_sync()
        tcgen05_fence_after_thread_sync()
        b = self.slot_ptr.buffer
        idx = self.slot_ptr.indices if self.slot_ptr.indices is not None else \
            tuple(as_expr(0) for _ in b.shape)
        ctx.append(Let(self._base, Load(b, tuple(idx), b.dtype) if b.dtype == _U32 else
                       Cast(Load(b, tuple(idx), b.dtype), _U32)))
        self.status = "committed"
        self.commit_src = user_src()
        state().tmem_base = self._base

    def dealloc(self, relinquish: bool = True):
        """Barrier (all TMEM traffic done), then the allocating warp relinquishes and frees."""
        require_top_level("tmem.dealloc()")
        if self.status == "open":
            raise resource_error("tmem.dealloc() before tmem.commit(): nothing is allocated yet")
        if self.status == "freed":
            raise resource_error(f"tmem.dealloc() called twice (first at {self.free_src})")
        base = self._base
        tcgen05_fence_before_thread_sync()
        cta_sync()
        with if_(_warp_index() == self.alloc_warp):
            tcgen05_fence_after_thread_sync()
            if relinquish:
                tcgen05_relinquish_alloc_permit(self.cta_group)
            tcgen05_dealloc(base, self.total_cols, self.cta_group)
        self.status = "freed"
        self.free_src = user_src()

    def _finalize(self):
        if self.status == "committed":
            raise resource_error(
                f"tcgen05.dealloc never issued: the TMEMPool created here was committed (at "
                f"{self.commit_src}) but never freed; a CTA must free its TMEM before it exits: "
                f"call tmem.dealloc() at the end of the kernel", src=self.src)
        if self.status == "open" and self.tiles:
            raise resource_error(
                f"the TMEMPool created here allocated {self._cols} columns but tmem.commit() "
                f"was never called, so no tcgen05.alloc is issued; call tmem.commit() before "
                f"using its tiles", src=self.src)
        bx, by, bz = current().func.block
        if (self.alloc_warp + 1) * 32 > bx * by * bz:
            raise resource_error(
                f"TMEMPool alloc_warp={self.alloc_warp} is not a full warp of a block of "
                f"{bx * by * bz} threads; tcgen05.alloc/dealloc need all 32 lanes: use an "
                f"alloc_warp below {max(bx * by * bz // 32, 1)} or a larger block", src=self.src)

    def __repr__(self):
        return f"<TMEMPool {self._cols}/{self.total_cols} columns, {self.status}>"


def _name(buf):
    b = buf.buffer if isinstance(buf, TensorHandle) else buf
    return getattr(b, "name", b)
