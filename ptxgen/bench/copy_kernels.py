"""Copy kernels for `ptxgen bench copy`: whole-GPU streaming kernels built with ptxgen.

Each scope instance (a warp, a warpgroup or the CTA) copies whole tiles of a large
(ROWS, cols) tensor, by default one tile per instance with the grid computed from ROWS
(persistent grids looping over tiles were slower on the H200; ctas_per_sm= builds one):

  g2s2g   vec_auto / fallback: tile.<scope>.copy global -> shared, barrier, shared -> global
  g2r2g   reg: tile.<scope>.copy into a register tile (vec_auto's register path) and out;
          vec_16b ... vec_256b: the same split, each thread forcing one vector form
  s2r2s   ldstmatrix: global -> shared, ldmatrix, stmatrix, shared -> global (16-bit types)
  g2s2g   bulk: cp.async.bulk (the TMA engine, no tensor map) global -> shared -> global,
          one thread per CTA (sm_90+)
  g2g     grid_stride(_nc_cs): examples/grid_stride_copy.py on the bytes as float32 words
          (no tile: every tile row times the same kernel)

A config a variant cannot take (a dtype the form cannot move, a tile that does not split
over the scope, a form the GPU lacks) becomes a row "skipped: <the dispatcher's reason>".
"""
# no `from __future__ import annotations`: kernel annotations refer to local variables
from .sweep import BenchKernel, CopyConfig, SkipReason, register_copy_bench

THREADS = 256
SCOPE_THREADS = {"warp": 32, "warpgroup": 128, "cta": THREADS}


def launch_geometry(pg, ctas_per_sm, nsm):
    """(grid, CTA count, the ROWS extent) every tile-streaming builder starts from.  The grid
    is None for one tile per scope instance (tile_kernel makes it a callable of ROWS and the
    tile), or with ctas_per_sm a persistent grid whose instances loop.  On the H200 the
    first was faster (benchmarks/RESULTS.md, grid-stride variants)."""
    rows = pg.var("ROWS")
    if ctas_per_sm:
        return (nsm * ctas_per_sm,), nsm * ctas_per_sm, rows
    return None, None, rows


def tile_loop(pg, scope, groups, R, ROWS, ctas):
    """(group index, this instance's first tile index, the loop over its tile indices)."""
    bx = pg.cta_id(ctas)
    g = 0 if scope == "cta" else (pg.warp_id() if scope == "warp" else pg.warpgroup_id())
    first = pg.let(bx * groups + g)
    return g, first, pg.serial(first, ROWS // R, pg.grid_dim() * groups)


def tile_kernel(body, name, R, groups, grid, block=THREADS):
    import ptxgen as pg

    if grid is None:
        def one_tile_per_instance(args, R=R, groups=groups):
            return (max(1, -(-(args["ROWS"] // R) // groups)),)
        grid = one_tile_per_instance
    body.__name__ = name
    return pg.kernel(grid=grid, block=(block,), name=name)(body)


def streaming_copy_kernel(dtype: str, scope: str, tile, dispatch=None, ctas_per_sm=None,
                          nsm=132, name=None):
    """A tile-streaming g2s2g kernel: each scope instance copies whole tiles through its own
    shared-memory slot; barriers are per instance (bar.warp.sync / named barriers)."""
    import ptxgen as pg

    R, C = tile
    per = SCOPE_THREADS[scope]
    groups = THREADS // per
    grid, ctas, ROWS = launch_geometry(pg, ctas_per_sm, nsm)
    kw = {"dispatch": dispatch} if dispatch else {}

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        pg.thread_id(THREADS)
        copy = getattr(pg.tile, scope).copy
        sm = pg.alloc_shared((groups, R, C), dtype, align=128)
        g, first, tiles = tile_loop(pg, scope, groups, R, ROWS, ctas)
        for t in tiles:
            # the slot is reused only from the second tile on: wait for the previous
            # tile's reads of it there, instead of after every tile
            with pg.if_(t != first):
                group_sync(pg, scope, g)
            copy(sm[g:g + 1, 0:R, 0:C], src[t * R:t * R + R, 0:C], **kw)
            group_sync(pg, scope, g)
            copy(dst[t * R:t * R + R, 0:C], sm[g:g + 1, 0:R, 0:C], **kw)

    k = tile_kernel(body, name or f"stream_{dtype}_{scope}_{R}x{C}", R, groups, grid)
    return k, ctas


def _register_split(scope: str, tile, vec: int):
    """(vectors per row, rows per pass, passes) of a tile split into `vec`-element runs over
    the scope's threads, or SkipReason when it does not split into whole vectors."""
    R, C = tile
    P = SCOPE_THREADS[scope]
    if C % vec:
        return SkipReason(f"{C} columns are not whole {vec}-element vectors")
    per_row = C // vec
    if per_row > P or P % per_row:
        return SkipReason(f"a row of {per_row} vectors does not split over the {P} threads "
                          f"of a {scope}")
    rows_per_pass = P // per_row
    if R % rows_per_pass:
        return SkipReason(f"a {R}x{C} tile holds {R * C // P} elements per thread of a "
                          f"{scope}; a {vec}-element vector per thread needs "
                          f"{rows_per_pass} rows per pass")
    return per_row, rows_per_pass, R // rows_per_pass


def register_tile_layout(scope: str, tile, vec: int):
    """The register layout of a g2r2g tile: each thread holds runs of `vec` contiguous
    elements of a row; a warp's threads cover consecutive runs (coalesced), and a thread's
    further runs are one pass of the scope further down.  SkipReason when the tile does not
    split into whole vectors over the scope's threads."""
    from ..layout import S, TileLayout, laneid, tid, tid_in_wg

    split = _register_split(scope, tile, vec)
    if isinstance(split, SkipReason):
        return split
    per_row, rows_per_pass, passes = split
    axis = {"warp": laneid, "warpgroup": tid_in_wg, "cta": tid}[scope]
    return TileLayout(S[((passes, rows_per_pass), (per_row, vec)):
                        ((vec, per_row @ axis), (1 @ axis, 1))])


def register_copy_kernel(dtype: str, scope: str, tile, vec: int, dispatch=None,
                         ctas_per_sm=None, nsm=132, name=None):
    """A tile-streaming g2r2g kernel: each scope instance loads a tile into registers (all
    loads in flight), then stores it.  dispatch forces a vec_* form; None is vec_auto."""
    import ptxgen as pg

    lay = register_tile_layout(scope, tile, vec)
    if isinstance(lay, SkipReason):
        return lay, None
    R, C = tile
    groups = THREADS // SCOPE_THREADS[scope]
    grid, ctas, ROWS = launch_geometry(pg, ctas_per_sm, nsm)
    kw = {"dispatch": dispatch} if dispatch else {}

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        pg.thread_id(THREADS)
        copy = getattr(pg.tile, scope).copy
        regs = pg.alloc_local((R, C), dtype, layout=lay)
        _, _, tiles = tile_loop(pg, scope, groups, R, ROWS, ctas)
        for t in tiles:
            copy(regs[0:R, 0:C], src[t * R:t * R + R, 0:C], **kw)
            copy(dst[t * R:t * R + R, 0:C], regs[0:R, 0:C], **kw)

    return tile_kernel(body, name or f"regs_{dtype}_{scope}_{R}x{C}", R, groups, grid), ctas


def forced_vec_copy_kernel(dtype: str, scope: str, tile, bits: int, ctas_per_sm=None, nsm=132,
                           name=None):
    """g2r2g with one forced vec_<bits>b form: the forms are thread-scope, so each thread of
    the scope instance copies its own runs of the tile (_register_split's split), all
    loads of a tile before its stores."""
    import ptxgen as pg

    from ..dtypes import dtype as _dtype

    ebits = _dtype(dtype).bits
    if bits % ebits:
        return SkipReason(f"a {bits}-bit vector is not a whole number of {dtype} elements"), None
    vec = bits // ebits
    split = _register_split(scope, tile, vec)
    if isinstance(split, SkipReason):
        return split, None
    per_row, rows_per_pass, passes = split
    R, C = tile
    P = SCOPE_THREADS[scope]
    groups = THREADS // P
    grid, ctas, ROWS = launch_geometry(pg, ctas_per_sm, nsm)
    variant = f"vec_{bits}b"

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tx = pg.thread_id(THREADS)
        lt = pg.let(tx % P)
        row0 = pg.let(lt // per_row)
        col = pg.let(lt % per_row * vec)
        regs = pg.alloc_local((passes * vec,), dtype)
        _, _, tiles = tile_loop(pg, scope, groups, R, ROWS, ctas)
        for t in tiles:
            for p in range(passes):         # Python loop: register indices are constants
                r = t * R + p * rows_per_pass + row0
                pg.tile.thread.copy(regs[p * vec:p * vec + vec], src[r, col:col + vec],
                                    dispatch=variant)
            for p in range(passes):         # Python loop: register indices are constants
                r = t * R + p * rows_per_pass + row0
                pg.tile.thread.copy(dst[r, col:col + vec], regs[p * vec:p * vec + vec],
                                    dispatch=variant)

    return tile_kernel(body, name or f"{variant}_{dtype}_{scope}_{R}x{C}", R, groups, grid), ctas


def bulk_copy_kernel(dtype: str, tile, ctas_per_sm=None, nsm=132, name=None):
    """g2s2g by the bulk-copy (TMA) engine: one thread per CTA issues
    cp.async.bulk global -> shared (completing an mbarrier's tx bytes), waits, then
    cp.async.bulk shared -> global and waits until the tile has been read.  One warp per
    CTA (only lane 0 works), so up to 32 CTAs and their tiles are in flight per SM.  sm_90+."""
    import ptxgen as pg

    from ..builder.ptx import emit_instr
    from ..dtypes import dtype as _dtype
    from ..target import BULK_MAX_BYTES, TMA_ALIGN
    from ..target.forms import opcode

    def bulk(name, *modifiers, ops=()):
        emit_instr(opcode(name, *modifiers), ops, form=name)

    R, C = tile
    nbytes = R * C * _dtype(dtype).bits // 8
    if nbytes % TMA_ALIGN or nbytes > BULK_MAX_BYTES:
        return SkipReason(f"a bulk copy moves a multiple of {TMA_ALIGN} bytes, at most "
                          f"{BULK_MAX_BYTES}; a {R}x{C} {dtype} tile is {nbytes}"), None
    grid, ctas, ROWS = launch_geometry(pg, ctas_per_sm, nsm)

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        tx = pg.thread_id(32)
        sm = pg.alloc_shared((R, C), dtype, align=128)
        bar = pg.alloc_shared((1,), "uint64", align=8)
        _, _, tiles = tile_loop(pg, "cta", 1, R, ROWS, ctas)
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
            pg.ptx.fence.mbarrier_init()
            phase = pg.local_scalar("int32", 0)
            for t in tiles:
                pg.ptx.mbarrier.arrive_expect_tx(bar, nbytes)
                bulk("cp_async_bulk", "shared::cluster", "global", "mbarrier::complete_tx::bytes",
                     ops=(sm.ptr_to([0, 0]), src.ptr_to([t * R, 0]), nbytes, bar.ptr_to([0])))
                pg.ptx.mbarrier.try_wait(bar, phase)
                phase.set(1 - phase)
                bulk("cp_async_bulk", "global", "shared::cta", "bulk_group",
                     ops=(dst.ptr_to([t * R, 0]), sm.ptr_to([0, 0]), nbytes))
                bulk("cp_async_bulk_commit_group")
                bulk("cp_async_bulk_wait_group", True, ops=(0,))   # the slot may be refilled
            bulk("cp_async_bulk_wait_group", ops=(0,))              # writes done before exit

    return tile_kernel(body, name or f"bulk_{dtype}_{R}x{C}", R, 1, grid, block=32), ctas


def ldstmatrix_copy_kernel(dtype: str, scope: str, tile, ctas_per_sm=None, nsm=132,
                           name=None):
    """g2s, ldmatrix into the mma fragment layout, stmatrix back, s2g: the s2r2s path timed
    inside a streaming kernel (the global legs are vec_auto)."""
    import ptxgen as pg

    from ..primitives.copy.ldstmatrix import ldmatrix_layout

    R, C = tile
    groups = THREADS // SCOPE_THREADS[scope]
    warps = SCOPE_THREADS[scope] // 32
    try:
        lay = ldmatrix_layout(R, C, warps=warps)
    except ValueError as e:
        return SkipReason(str(e).split(": ", 1)[-1]), None
    grid, ctas, ROWS = launch_geometry(pg, ctas_per_sm, nsm)

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        pg.thread_id(THREADS)
        copy = getattr(pg.tile, scope).copy
        sm = pg.alloc_shared((groups, R, C), dtype, align=128)
        regs = pg.alloc_local((R, C), dtype, layout=lay)
        g, _, tiles = tile_loop(pg, scope, groups, R, ROWS, ctas)
        for t in tiles:
            copy(sm[g:g + 1, 0:R, 0:C], src[t * R:t * R + R, 0:C])
            group_sync(pg, scope, g)
            copy(regs[0:R, 0:C], sm[g:g + 1, 0:R, 0:C], dispatch="ldstmatrix")
            copy(sm[g:g + 1, 0:R, 0:C], regs[0:R, 0:C], dispatch="ldstmatrix")
            group_sync(pg, scope, g)
            copy(dst[t * R:t * R + R, 0:C], sm[g:g + 1, 0:R, 0:C])
            group_sync(pg, scope, g)

    return tile_kernel(body, name or f"ldsm_{dtype}_{scope}_{R}x{C}", R, groups, grid), ctas


def group_sync(pg, scope, g):
    """The barrier of one scope instance.  A named barrier's count must be exactly the
    threads that reach it: 256 threads on a 128-count barrier hang an H200."""
    if scope == "warp":
        pg.warp_sync()
    elif scope == "warpgroup":   # one named barrier per warpgroup (ids 1..), 128 threads each
        pg.named_barrier(g + 1, 128)
    else:
        pg.cta_sync()


def _tile_rows(cfg: CopyConfig):
    from ..dtypes import dtype as _dtype

    R, C = cfg.tile
    ebytes = _dtype(cfg.dtype).bits // 8
    row_bytes = C * ebytes
    if cfg.size_bytes % (row_bytes * R):
        return None
    return cfg.size_bytes // row_bytes


def bench_kernel(cfg: CopyConfig, make, check_split=True):
    """Build with make() -> (kernel, ctas) or (SkipReason, None); a dispatch rejection or a
    resource limit becomes a skipped row with the reason, anything else an error row."""
    import warnings

    from ..errors import DispatchError, ResourceError
    from ..runtime import device_arch

    rows = _tile_rows(cfg)
    if rows is None:
        return SkipReason(f"{cfg.size_bytes} bytes is not a whole number of {cfg.tile} tiles")
    R, C = cfg.tile
    if check_split and R * C % SCOPE_THREADS[cfg.scope]:
        return SkipReason(f"a {R}x{C} tile does not split over a {cfg.scope}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # fallback warns; that is the point here
        try:
            k, _ = make()
            if isinstance(k, SkipReason):
                return k
            ptx = k.ptx(device_arch())
        except (DispatchError, ResourceError) as e:
            return SkipReason(" ".join(str(e).split(": ", 1)[-1].split()))

    def launch(src, dst, nbytes, stream, k=k, rows=rows):
        k(src, dst, ROWS=rows, stream=stream)

    return BenchKernel(name=k.name, launch=launch, ptx=ptx)


def kernel_name(cfg):
    return f"{cfg.variant}_{cfg.dtype}_{cfg.scope}_{cfg.tile[0]}x{cfg.tile[1]}"


def _build_stream(cfg: CopyConfig, dispatch=None):
    return bench_kernel(cfg, lambda: streaming_copy_kernel(
        cfg.dtype, cfg.scope, cfg.tile, dispatch, name=kernel_name(cfg)))


def _widest_register_vec(cfg: CopyConfig):
    """vec_auto's register path gets the widest run (<= 16 bytes) the tile splits into."""
    from ..dtypes import dtype as _dtype

    ebytes = _dtype(cfg.dtype).bits // 8
    why = None
    for nbytes in (16, 8, 4, 2, 1):
        if nbytes % ebytes:
            continue
        lay = register_tile_layout(cfg.scope, cfg.tile, nbytes // ebytes)
        if not isinstance(lay, SkipReason):
            return nbytes // ebytes
        why = why or lay
    return why


def _build_reg(cfg: CopyConfig):
    vec = _widest_register_vec(cfg)
    if isinstance(vec, SkipReason):
        return vec
    return bench_kernel(cfg, lambda: register_copy_kernel(
        cfg.dtype, cfg.scope, cfg.tile, vec, name=kernel_name(cfg)))


def _build_forced(bits):
    return lambda cfg: bench_kernel(cfg, lambda: forced_vec_copy_kernel(
        cfg.dtype, cfg.scope, cfg.tile, bits, name=kernel_name(cfg)))


def _build_ldstmatrix(cfg: CopyConfig):
    from ..dtypes import dtype as _dtype

    if _dtype(cfg.dtype).bits != 16:
        return SkipReason(f"ldmatrix/stmatrix move 16-bit elements (b16); {cfg.dtype} is "
                          f"{_dtype(cfg.dtype).bits}-bit")
    return bench_kernel(cfg, lambda: ldstmatrix_copy_kernel(
        cfg.dtype, cfg.scope, cfg.tile, name=kernel_name(cfg)))


def _build_grid_stride(cfg: CopyConfig, load_hint=None, store_hint=None):
    if cfg.scope != "cta":
        return SkipReason("the grid-stride copy is a whole-CTA kernel")
    import os
    import sys

    here = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        import grid_stride_copy as g
    except ImportError:
        return SkipReason("examples/grid_stride_copy.py is not available")
    k = g.make(name=f"{cfg.variant}_{cfg.dtype}", load_hint=load_hint, store_hint=store_hint)
    n = cfg.size_bytes // 4     # moved as float32 words: a copy moves bits

    def launch(src, dst, nbytes, stream, k=k, n=n):
        k(src, dst, N=n, stream=stream)

    return BenchKernel(name=k.name, launch=launch, ptx=lambda: k.ptx("sm_90a"))


register_copy_bench("vec_auto", lambda cfg: _build_stream(cfg), path="g2s2g", replace=True)
register_copy_bench("fallback", lambda cfg: _build_stream(cfg, "fallback"), path="g2s2g",
                    replace=True)
register_copy_bench("reg", _build_reg, path="g2r2g", replace=True)
for _bits in (16, 32, 64, 128, 256):
    register_copy_bench(f"vec_{_bits}b", _build_forced(_bits), path="g2r2g", replace=True)
register_copy_bench("ldstmatrix", _build_ldstmatrix, path="s2r2s", replace=True)
def _build_bulk(cfg: CopyConfig):
    if cfg.scope != "cta":
        return SkipReason("bulk copies are issued by one thread per CTA; scope cta only")
    return bench_kernel(cfg, lambda: bulk_copy_kernel(cfg.dtype, cfg.tile, name=kernel_name(cfg)),
                        check_split=False)


register_copy_bench("bulk", _build_bulk, path="g2s2g", replace=True)
register_copy_bench("grid_stride", _build_grid_stride, path="g2g", replace=True)
register_copy_bench("grid_stride_nc_cs", lambda cfg: _build_grid_stride(
    cfg, ["nc", "L1::no_allocate"], "cs"), path="g2g", replace=True)
