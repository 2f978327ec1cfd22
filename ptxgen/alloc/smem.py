"""SMEMPool: a bump allocator over the kernel's one dynamic shared-memory arena.

Why: a kernel may declare only one `.extern .shared` array, so every dynamic tile, barrier and
slot is a view at a byte offset into it.  Doing that by hand is where offsets overlap, alignment
is lost and the launch gets the wrong byte count; the pool owns all three.

Limits (bytes per CTA; ptx-reference section 3 and `target.SMEM_LIMITS`):

    target                         static (ptxas)   dynamic opt-in max
    sm_80, sm_87 (A100, Orin)      48 KiB           163 KiB
    sm_86, sm_89, sm_120           48 KiB            99 KiB
    sm_90/sm_90a, sm_100a, sm_103a 227 KiB          227 KiB

The kernel is traced once for every target, so by default the pool checks against the largest
limit (227 KiB) while tracing and the emitter re-checks static + dynamic against the target's
own limit; `SMEMPool(arch="sm_80")` checks the smaller limit at the allocating line instead.
"""
from __future__ import annotations

import math

from ..builder.context import assigned_name, current, user_src
from ..builder.allocate import alloc_buffer, decl_buffer
from ..builder.tensor import TensorHandle
from ..dtypes import dtype as _dtype
from ..target import SMEM_LIMITS, parse_target, smem_limits
from ..errors import LayoutError
from ..layout import MMA_SWIZZLES, S, TileLayout
from . import swizzle as _swz
from ..builder.resources import resource_error, require_top_level, state

MAX_DYNAMIC_SMEM = max(dyn for _, dyn in SMEM_LIMITS.values())   # 227 KiB (sm_90+)


def _pow2(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0 and x & (x - 1) == 0


class SMEMPool:
    """pool = SMEMPool(); t = pool.alloc((BM, BK), "float16", align=128); ...; pool.commit()"""

    def __init__(self, arch=None, limit=None, name=None):
        ctx = current()
        st = state(ctx)
        require_top_level("pg.SMEMPool()")
        if st.smem_pool is not None:
            raise resource_error(
                f"a second SMEMPool in one kernel: the kernel has one dynamic shared arena and "
                f"the SMEMPool created at {st.smem_pool.src} already owns it (two arenas would "
                f"alias at offset 0); allocate from that pool, using move_base_to(offset) to "
                f"reuse space")
        if ctx.arena is not None:
            raise resource_error(
                f"the kernel already has a shared.dyn arena '{ctx.arena.name}' from "
                f"pg.alloc_buffer; an SMEMPool needs to own the one dynamic arena (two arenas "
                f"would alias): allocate every dynamic tile through the pool instead")
        if limit is None:
            limit = smem_limits(parse_target(arch))[1] if arch else MAX_DYNAMIC_SMEM
        if not isinstance(limit, int) or limit <= 0:
            raise resource_error(f"SMEMPool limit={limit!r} must be a positive byte count")
        self.limit = limit
        self.limit_what = (f"the {arch} target" if arch else "the sm_90a/sm_100a target"
                           if limit == MAX_DYNAMIC_SMEM else f"SMEMPool(limit={limit})")
        self.src = user_src()
        self._offset = 0
        self._high = 0
        self._align = 16
        self.committed = False
        self.barrier_count = 0
        self.tiles: list = []          # (name, byte offset, bytes, align)
        self.arena = alloc_buffer((limit,), "uint8", scope="shared.dyn", align=16,
                                  name=name or "smem_pool")
        ctx.func.dynamic_smem_bytes = 0    # the real size arrives at commit()
        st.smem_pool = self
        ctx.pools.append(self)

    # ---- queries ------------------------------------------------------------------------
    @property
    def offset(self) -> int:
        """Where the next allocation starts (before alignment)."""
        return self._offset

    @property
    def high_water(self) -> int:
        """The largest end offset of any allocation: the bytes the launch needs."""
        return self._high

    @property
    def size(self) -> int:
        if not self.committed:
            raise resource_error("pool.size is fixed by pool.commit(); call commit() first "
                                 "(or read pool.high_water)")
        return self._high

    def offset_of(self, tile) -> int:
        """Byte offset of a tile this pool allocated."""
        b = tile.buffer if isinstance(tile, TensorHandle) else tile
        for name, off, _, _ in self.tiles:
            if name == b.name:
                return off
        raise resource_error(f"'{b.name}' was not allocated from this SMEMPool")

    # ---- allocation -----------------------------------------------------------------------
    def _check_open(self, what):
        if self.committed:
            raise resource_error(f"pool.{what} after pool.commit() (at {self.commit_src}): "
                                 f"commit fixes the arena size; move every allocation before "
                                 f"commit()")

    def alloc(self, shape, dtype, align=16, layout=None, name=None) -> TensorHandle:
        """Carve a tile at the next `align`-byte boundary; a view into the arena."""
        self._check_open("alloc")
        name = name or assigned_name("tile")
        dt = _dtype(dtype)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape):
            raise resource_error(f"pool.alloc '{name}': shape {shape} must be positive int "
                                 f"constants (the arena is carved at trace time)")
        if not _pow2(align):
            raise resource_error(f"pool.alloc '{name}': align={align!r} must be a power of two "
                                 f"in bytes (16 for vector access, 128/1024 for swizzled tiles)")
        align = max(align, max(1, dt.bits // 8))
        if isinstance(layout, str) and layout == "default":
            layout = None
        if layout is not None and not hasattr(layout, "apply"):
            layout = TileLayout(layout)
        if layout is None and dt.bits < 8:
            # explicit row-major: decl_buffer's byte-based bounds check cannot size sub-byte
            # elements (the pool checks the bounds itself)
            layout = TileLayout(S[shape])
        span = layout.cosize() if layout is not None else math.prod(shape)
        nbytes = max(1, math.ceil(span * dt.bits / 8))
        start = -(-self._offset // align) * align
        end = start + nbytes
        if end > self.limit:
            raise resource_error(
                f"SMEMPool overflow: '{name}' ({nbytes} bytes at offset {start}) ends at byte "
                f"{end}, past the {self.limit}-byte ({self.limit / 1024:g} KiB) dynamic shared "
                f"memory limit of {self.limit_what}; shrink the tile or the number of "
                f"stages, or reuse space with pool.move_base_to(offset)")
        view = decl_buffer(shape, dt, data=self.arena, byte_offset=start, layout=layout,
                           align=align, name=name)
        self._offset = end
        self._high = max(self._high, end)
        self._align = max(self._align, align)
        self.arena.buffer.align = self._align
        self.tiles.append((view.buffer.name, start, nbytes, align))
        return view

    def alloc_mbarrier(self, n: int = 1, name=None) -> TensorHandle:
        """`n` mbarrier words: 8-byte aligned uint64 slots for pg.ptx.mbarrier.*."""
        if not (isinstance(n, int) and n > 0):
            raise resource_error(f"alloc_mbarrier(n={n!r}): n must be a positive int")
        h = self.alloc((n,), "uint64", align=8, name=name or assigned_name("mbar"))
        self.barrier_count += n
        return h

    def alloc_tcgen05_mma_AB(self, shape, dtype, swizzle="auto", atom_order="k",
                             name=None) -> TensorHandle:
        """An MMA operand tile (K-major, K = last dim) with the widest swizzle that fits its rows,
        aligned to the swizzle's repeat (1024/512/256/16 B).  See ptxgen.alloc.swizzle."""
        name = name or assigned_name("mma_tile")
        try:
            mode = _swz.normalize_mode(swizzle)
            mode = _swz.infer_mode(shape, dtype) if mode == "auto" else \
                _swz.check_mode(shape, dtype, mode)
            layout = _swz.mma_layout(shape, dtype, mode, atom_order)
        except LayoutError as e:
            raise LayoutError(f"{user_src()}: alloc_tcgen05_mma_AB '{name}': {e}") from None
        return self.alloc(shape, dtype, align=MMA_SWIZZLES[mode].repeat_bytes, layout=layout,
                          name=name)

    def move_base_to(self, offset: int):
        """Rewind (or advance) the cursor: later tiles reuse bytes from `offset` on."""
        self._check_open("move_base_to")
        if isinstance(offset, TensorHandle):
            offset = self.offset_of(offset)
        if not (isinstance(offset, int) and not isinstance(offset, bool) and
                0 <= offset <= self.limit):
            raise resource_error(f"pool.move_base_to({offset!r}): the offset must be an int "
                                 f"byte position in [0, {self.limit}] (e.g. pool.offset saved "
                                 f"earlier, or a tile handle)")
        self._offset = offset

    def commit(self) -> int:
        """Fix the arena size at the high-water mark; the launch gets exactly that."""
        if self.committed:
            raise resource_error(f"pool.commit() called twice (first at {self.commit_src})")
        self.committed = True
        self.commit_src = user_src()
        self.arena.buffer.shape = (max(self._high, 1),)
        current().func.dynamic_smem_bytes = self._high
        return self._high

    def _finalize(self):
        if not self.committed and self.tiles:
            raise resource_error(
                f"the SMEMPool created here allocated {self._high} bytes but pool.commit() was "
                f"never called, so the launch would get no dynamic shared memory; call "
                f"pool.commit() after the last allocation", src=self.src)

    def __repr__(self):
        return f"<SMEMPool {self._high} B, {len(self.tiles)} tiles>"


__all__ = ["SMEMPool", "MAX_DYNAMIC_SMEM"]
