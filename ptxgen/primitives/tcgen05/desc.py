"""Shared-memory matrix descriptors derived from a buffer region's layout (tcgen05 and wgmma).

Why: the descriptor's start address, LBO, SBO and swizzle bits live in a register, so ptxas
checks none of them.  Here they are never typed by hand: the buffer's own layout (its `apply`)
is compared element by element with the PTX canonical layouts (`mma_desc.check_layout_matches`),
and only a match yields LBO/SBO, the swizzle code and the start-address offset of every K step.
Everything that does not match is a build-time LayoutError that names the rule.

Conventions: an operand region is logically (rows, K): rows = M for A, N for B.  A (K, N)
buffer is passed as its `.permute(1, 0)` view (then N is the contiguous, MN-major, dim).
Leading region dims (pipeline stages) must have extent 1; they may be symbolic if each step
moves by whole swizzle repeats.  The descriptor is matched over the buffer's full trailing
(rows, K) tile, so sub-regions (a K slice, a row block) reuse the physical LBO/SBO.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype as _dtype
from ...errors import LayoutError, PtxgenError
from ...analysis.offsets import byte_offset
from ...ir import BufferPtr, BufferRegion, Const, Let, Var, cast
from ...layout import (MMA_SWIZZLES, ComposeLayout, S, Swizzle, TileLayout, mma_canonical_grid,
                       mma_swizzle_name, row_major_strides)
from .. import mma_desc as md

_U32, _U64 = _dtype("uint32"), _dtype("uint64")


def norm_swizzle(sw) -> str:
    name = mma_swizzle_name(sw)
    if name is None:
        raise LayoutError(f"swizzle={sw!r} is not an MMA swizzle; use 'none', '32B', '64B' or "
                          f"'128B'")
    return name


def canonical_layout(rows: int, k: int, dtype, *, major="K", swizzle="128B", atom_order=None,
                     stages: int | None = None):
    """The PTX canonical (rows, K) layout as a ptxgen layout (ComposeLayout when swizzled).

    Units are 8 rows x S bytes of K (K-major) or 8 K-rows x S bytes of rows (MN-major); they
    stack along `atom_order` first ('mn' default for K-major, 'k' for MN-major).  `stages`
    prepends a dim of whole tiles.  This is what `smem_operand` accepts without complaint.
    """
    sw, bits = norm_swizzle(swizzle), _dtype(dtype).bits
    c = md.canonical_plan(major, sw, bits, rows, k, atom_order)   # checks the shape, orders units
    inner = mma_canonical_grid(rows, k, bits, sw, major, c.order,
                               () if stages is None else (stages,))
    return inner if sw == "none" else ComposeLayout(Swizzle.mma(sw, bits), inner)


@dataclass
class SmemOperand:
    """What a descriptor needs, derived and checked at trace time (see module docstring)."""
    region: BufferRegion
    role: str
    dtype: object
    major: str
    swizzle: str
    atom_order: str
    rows: int                 # region rows (M or N)
    k_extent: int             # region K
    k_instr: int
    lbo: int
    sbo: int
    step_offsets: list        # bytes from the tile base to each K step's start address
    base_index: tuple         # buffer index of the tile base (leading dims may be Exprs)
    lead_terms: list          # [(Expr, bytes)] symbolic leading dims: added to the base
    notes: str

    @property
    def n_steps(self) -> int:
        return len(self.step_offsets)

    def template(self, arch) -> int:
        return md.desc_template(lbo=self.lbo, sbo=self.sbo, swizzle=self.swizzle, arch=arch)

    def value(self, base_addr: int, step: int, arch) -> int:
        """The full 64-bit descriptor of K step `step` for a tile base at `base_addr` (bytes)."""
        return md.encode_smem_desc(start_addr=base_addr + self.step_offsets[step], lbo=self.lbo,
                                   sbo=self.sbo, swizzle=self.swizzle, arch=arch)

    def describe(self) -> str:
        return (f"{self.role} {self.region}: {self.major}-major {self.swizzle} "
                f"{self.dtype} {self.rows}x{self.k_extent}, LBO {self.lbo} B, SBO {self.sbo} B, "
                f"{self.n_steps} K step(s) at +{self.step_offsets} B")


def _fail(role, region, msg) -> LayoutError:
    return LayoutError(f"MMA operand {role} {region}: {msg}")


def _declared_swizzle(role, region, lay, bits, declared):
    """The swizzle mode the buffer's layout carries, checked against a declared one."""
    if isinstance(lay, ComposeLayout):
        sw = lay.swizzle
        mode = sw.mode
        if mode is None or not sw.is_mma(bits):
            want = Swizzle.mma(mode or "128B", bits) if mode else None
            raise _fail(role, region, f"its ComposeLayout swizzle {sw!r} is not an MMA swizzle "
                        f"for {bits}-bit elements (rule: MMA swizzles are CuTe Swizzle<B,4,3> on "
                        f"bytes, i.e. Swizzle.mma(mode, {bits})"
                        + (f" = {want!r})" if want else ")"))
        have = mode
    else:
        have = "none"
    if declared is not None:
        want = norm_swizzle(declared)
        if want != "none" and have == "none":
            raise _fail(role, region, f"swizzle={want!r} is declared but the buffer's layout is "
                        f"not swizzled ({lay!r}) (rule: the descriptor's swizzle must be the "
                        f"buffer's; allocate it with a ComposeLayout, e.g. "
                        f"pool.alloc_tcgen05_mma_AB or canonical_layout(..., swizzle={want!r}))")
        if want != have:
            raise _fail(role, region, f"swizzle={want!r} is declared but the buffer's "
                        f"ComposeLayout swizzles {have} (rule: the descriptor's swizzle must "
                        f"match the buffer's ComposeLayout)")
    return have


def smem_operand(region, *, k_instr: int, role="A", major=None, swizzle=None) -> SmemOperand:
    """Derive and check an MMA shared-memory operand from `region` (see module docstring).

    `k_instr` is the K (elements) one instruction consumes; `major` ('K'/'MN') and `swizzle`
    may be declared, else they are read off the layout.  Raises LayoutError with the rule."""
    if not isinstance(region, BufferRegion):
        raise LayoutError(f"MMA operand {role} must be a shared-memory tensor or region, got "
                          f"{region!r}")
    buf = region.buffer
    if buf.root.scope not in ("shared", "shared.dyn"):
        raise _fail(role, region, f"it is in {buf.root.scope} memory; a matrix descriptor "
                    f"addresses shared memory (rule: tcgen05/wgmma descriptors hold a "
                    f"shared::cta address)")
    dt = buf.dtype
    bits = dt.bits
    if bits not in (8, 16, 32):
        raise _fail(role, region, f"{dt} is not an MMA operand type (8-, 16- or 32-bit)")
    if len(region.region) < 2 or not all(isinstance(s, int) for s in buf.shape):
        raise _fail(role, region, "the region needs constant (..., rows, K) extents")
    lead, (r0, rows), (k0, kext) = region.region[:-2], region.region[-2], region.region[-1]
    for s, e in lead:
        if e != 1:
            raise _fail(role, region, f"leading dims must have extent 1 (one tile), got {e}")
    if not (isinstance(r0, int) and isinstance(k0, int)):
        raise _fail(role, region, "the row and K starts of the region must be constants")
    lay = buf.layout if buf.layout is not None else \
        TileLayout(S[tuple(buf.shape):row_major_strides(buf.shape)])
    sw = _declared_swizzle(role, region, lay, bits, swizzle)
    R, K = buf.shape[-2], buf.shape[-1]
    # the K-step rules first: they are the likeliest mistake and have the clearest message
    if kext % k_instr or k0 % k_instr:
        what = f"K extent {kext}" if kext % k_instr else f"K start {k0}"
        raise _fail(role, region, f"K-step misalignment: {what} is not a multiple of the "
                    f"instruction K = {k_instr} {dt} elements (rule: every MMA step consumes "
                    f"256 bits of K per row and starts on a step boundary)")

    # the tile base: leading indices (symbolic -> 0 here, checked to move by whole repeats)
    lead0 = tuple(s if isinstance(s, int) else 0 for s, _ in lead)
    shape = buf.shape

    def m_at(idx):
        return lay.apply(*idx, shape=shape)["m"]

    base_m = m_at(lead0 + (0, 0))

    def offset(r, k):
        return m_at(lead0 + (r, k)) - base_m

    nbytes = bits // 8
    inner = lay.layout if isinstance(lay, ComposeLayout) else lay
    lead_terms, rep = [], MMA_SWIZZLES[sw].repeat_bytes
    for d, (s, _) in enumerate(lead):
        if isinstance(s, int):
            continue
        unit = [0] * len(shape)
        unit[d] = 1
        step = (inner.apply(*unit, shape=shape)["m"] - inner.apply(*([0] * len(shape)),
                                                                   shape=shape)["m"]) * nbytes
        if not isinstance(step, int) or step % rep:
            raise _fail(role, region, f"leading dim {d} moves {step} bytes per index, not a "
                        f"multiple of the {rep}-B {sw} swizzle repeat, so a symbolic "
                        f"index there cannot keep the tile on the repeat boundary (rule: PTX ISA "
                        f"Table 41 alignment)")
        lead_terms.append((s, step))
    base_bytes = byte_offset(buf, lead0 + (0, 0))
    if isinstance(base_bytes, int):
        if base_bytes % rep or buf.root.align % rep:
            got = base_bytes % rep if base_bytes % rep else f"storage aligned to {buf.root.align}"
            raise _fail(role, region, f"the tile does not start on the {rep}-B repeat of the "
                        f"{sw} swizzle ({got}) (rule: PTX ISA Table 41; allocate with "
                        f"align={rep}, base_offset is not used here)")

    reasons = {}
    majors = (major,) if major is not None else ("K", "MN")
    found = None
    for mj in majors:
        if mj not in ("K", "MN"):
            raise PtxgenError(f"major={mj!r} must be 'K' or 'MN'")
        errs = []
        for order in ("mn", "k"):
            try:
                params = md.check_layout_matches(offset, major=mj, swizzle=sw, elem_bits=bits,
                                                 rows=R, k_extent=K, atom_order=order,
                                                 explain=False)
            except LayoutError:
                errs.append(order)
                continue
            found = (mj, order, params)
            break
        if found:
            break
        reasons[mj] = errs[0]
    if found is None:   # the report: each major's first miss again, now with the modes that fit
        for mj, order in reasons.items():
            try:
                md.check_layout_matches(offset, major=mj, swizzle=sw, elem_bits=bits, rows=R,
                                        k_extent=K, atom_order=order)
            except LayoutError as e:
                reasons[mj] = str(e)
        detail = "; ".join(f"{m}-major: {r}" for m, r in reasons.items())
        what = "is neither K-major- nor MN-major-compatible" if len(majors) == 2 else \
            f"is not {majors[0]}-major-compatible"
        raise _fail(role, region, f"its layout {what} for a {sw}-swizzled {R}x{K} {dt} tile "
                    f"(rule: PTX ISA 'Canonical Layouts'): {detail}")
    mj, order, params = found
    c = md.canonical_plan(mj, sw, bits, R, K, order)
    if r0 % c.unit_rows or rows % c.unit_rows:
        raise _fail(role, region, f"rows {r0}:{r0 + rows} do not cover whole {c.unit_rows}-row "
                    f"units of the {mj}-major {sw} layout")
    # row r0 starts a whole unit, so its offset has no swizzled bits: steps just add up
    row0 = md.canonical_offset(mj, sw, bits, R, K, order)(r0, 0)
    ks = md.k_step_offsets(mj, sw, bits, R, K, order, k_instr)
    steps = [row0 + ks[k0 // k_instr + i] for i in range(kext // k_instr)]
    return SmemOperand(region, role, dt, mj, sw, order, rows, kext, k_instr, params.lbo_bytes,
                       params.sbo_bytes, steps, lead0 + (0, 0), lead_terms, params.notes)


# ---- IR: the descriptor registers ---------------------------------------------------------
def desc_stmts(op: SmemOperand, arch, name="desc"):
    """(statements, [descriptor Expr per K step]): one Let for the tile's shared address, one
    for `(addr >> 4) | template`, then a 64-bit add of each step's `offset >> 4`."""
    buf = op.region.buffer
    zeros = tuple(Const(0) for _ in buf.shape)
    addr = Var(f"{name}_addr", _U32)
    out = [Let(addr, BufferPtr(buf, zeros), (0, (1 << 18) - 1))]
    base = addr
    for e, step in op.lead_terms:
        base = base + cast(e, _U32) * Const(step, _U32)
    if op.base_index != tuple(0 for _ in buf.shape):
        extra = byte_offset(buf, op.base_index) - byte_offset(buf, tuple(0 for _ in buf.shape))
        if extra:
            base = base + Const(extra, _U32)
    d = Var(name, _U64)
    tmpl = op.template(arch)
    out.append(Let(d, cast((base & 0x3FFFF) >> 4, _U64) | Const(tmpl, _U64)))
    descs = [d if off == 0 else d + Const(off >> 4, _U64) for off in op.step_offsets]
    return out, descs
