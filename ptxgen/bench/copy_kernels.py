"""Copy kernels for `ptxgen bench copy`: whole-GPU streaming kernels built with ptxgen.

Each builder makes a kernel in which every CTA (warp scope: every warp; warpgroup scope:
every warpgroup) loops over its tiles of a large (ROWS, cols) tensor:

  g2s2g   tile.<scope>.copy global -> shared, barrier, shared -> global (vec_auto / fallback)
  g2g     the grid-stride vectorized copy of examples/grid_stride_copy.py (float32 view)

The grid comes from the SM count.  Variants that have no streaming form yet (the forced
vec_* forms, ldstmatrix, the reg path) register a builder that says so, so their rows read
"skipped: <why>" instead of vanishing.
"""
# no `from __future__ import annotations`: kernel annotations refer to local variables
import functools

from .sweep import BenchKernel, CopyConfig, SkipReason, register_copy_bench

THREADS = 256
_SCOPE_THREADS = {"warp": 32, "warpgroup": 128, "cta": THREADS}


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    from cuda.bindings import driver as d

    from ..runtime import driver as rt

    rt.ensure_context() if hasattr(rt, "ensure_context") else None
    err, dev = d.cuDeviceGet(0)
    err, n = d.cuDeviceGetAttribute(
        d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
    return int(n)


def streaming_copy_kernel(dtype: str, scope: str, tile, dispatch=None, ctas_per_sm=2,
                          nsm=132, name=None):
    """A tile-streaming g2s2g kernel: each scope instance copies whole tiles through its own
    shared-memory slot; barriers are per instance (bar.warp.sync / named barriers)."""
    import ptxgen as pg

    R, C = tile
    per = _SCOPE_THREADS[scope]
    groups = THREADS // per
    grid = nsm * ctas_per_sm
    ROWS = pg.var("ROWS")
    kw = {"dispatch": dispatch} if dispatch else {}

    def body(src: pg.Tensor((ROWS, C), dtype), dst: pg.Tensor((ROWS, C), dtype)):
        pg.thread_id(THREADS)
        bx = pg.cta_id(grid)
        ntiles = pg.let(ROWS // R)
        copy = getattr(pg.tile, scope).copy
        if scope == "cta":
            sm = pg.alloc_shared((R, C), dtype, align=128)
            for t in pg.serial(bx, ntiles, pg.grid_dim()):
                copy(sm[0:R, 0:C], src[t * R:t * R + R, 0:C], **kw)
                pg.cta_sync()
                copy(dst[t * R:t * R + R, 0:C], sm[0:R, 0:C], **kw)
                pg.cta_sync()
            return
        g = pg.warp_id() if scope == "warp" else pg.warpgroup_id()
        sm = pg.alloc_shared((groups, R, C), dtype, align=128)
        first = pg.let(bx * groups + g)
        for t in pg.serial(first, ntiles, pg.grid_dim() * groups):
            copy(sm[g:g + 1, 0:R, 0:C], src[t * R:t * R + R, 0:C], **kw)
            _group_sync(pg, scope, g)
            copy(dst[t * R:t * R + R, 0:C], sm[g:g + 1, 0:R, 0:C], **kw)
            _group_sync(pg, scope, g)

    body.__name__ = name or f"stream_{dtype}_{scope}_{R}x{C}"
    return pg.kernel(grid=(grid,), block=(THREADS,), name=body.__name__)(body), grid


def _group_sync(pg, scope, g):
    if scope == "warp":
        pg.warp_sync()
    else:   # one named barrier per warpgroup (ids 1..), 128 threads each
        pg.named_barrier(g + 1, 128)


def _tile_rows(cfg: CopyConfig):
    from ..dtypes import dtype as _dtype

    R, C = cfg.tile
    ebytes = _dtype(cfg.dtype).bits // 8
    row_bytes = C * ebytes
    if cfg.size_bytes % (row_bytes * R):
        return None
    return cfg.size_bytes // row_bytes


def _build_stream(cfg: CopyConfig, dispatch=None):
    rows = _tile_rows(cfg)
    if rows is None:
        return SkipReason(f"{cfg.size_bytes} bytes is not a whole number of {cfg.tile} tiles")
    R, C = cfg.tile
    if R * C % _SCOPE_THREADS[cfg.scope]:
        return SkipReason(f"a {R}x{C} tile does not split over a {cfg.scope}")
    k, _ = streaming_copy_kernel(cfg.dtype, cfg.scope, cfg.tile, dispatch, nsm=sm_count(),
                                 name=f"{cfg.variant}_{cfg.dtype}_{cfg.scope}_{R}x{C}")
    import warnings

    from ..errors import ResourceError
    from ..runtime import device_arch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # fallback warns; that is the point here
        try:
            ptx = k.ptx(device_arch())
        except ResourceError as e:               # e.g. 8 warps x a 32 KiB tile each
            return SkipReason(str(e).split(": ", 1)[-1])

    def launch(src, dst, nbytes, stream, k=k, rows=rows):
        k(src, dst, ROWS=rows, stream=stream)

    return BenchKernel(name=k.name, launch=launch, ptx=ptx)


def _build_grid_stride(cfg: CopyConfig):
    pass

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
    k = g.make(ctas=sm_count() * 8, name=f"grid_stride_{cfg.dtype}")
    n = cfg.size_bytes // 4     # moved as float32 words: a copy moves bits

    def launch(src, dst, nbytes, stream, k=k, n=n):
        k(src, dst, N=n, stream=stream)

    return BenchKernel(name=k.name, launch=launch, ptx=lambda: k.ptx("sm_90a"))


def _no_streaming_form(why):
    return lambda cfg: SkipReason(why)


register_copy_bench("vec_auto", lambda cfg: _build_stream(cfg), path="g2s2g", replace=True)
register_copy_bench("fallback", lambda cfg: _build_stream(cfg, "fallback"), path="g2s2g",
                    replace=True)
register_copy_bench("grid_stride", _build_grid_stride, path="g2g", replace=True)
for _v in ("vec_16b", "vec_32b", "vec_64b", "vec_128b", "vec_256b"):
    register_copy_bench(_v, _no_streaming_form(
        "forced single-vector forms have no streaming kernel in this sweep yet"),
        path="g2r2g", replace=True)
register_copy_bench("ldstmatrix", _no_streaming_form(
    "ldmatrix/stmatrix streaming kernel not in this sweep yet"), path="s2r2s", replace=True)
