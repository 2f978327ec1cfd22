"""The copy-benchmark registry, the config sweep, and the runner that times it.

Copy kernels live elsewhere; they join the benchmark by registering a *builder*::

    from ptxgen.bench import register_copy_bench, BenchKernel, SkipReason

    def build(cfg: CopyConfig) -> BenchKernel | SkipReason:
        if cfg.scope == "warpgroup" and cfg.tile[0] < 64:
            return SkipReason("warpgroup needs >= 64 rows")
        kern = ...  # compile for cfg.dtype / cfg.scope / cfg.tile
        return BenchKernel(name=f"tma_{cfg.dtype}_{cfg.tile[0]}x{cfg.tile[1]}",
                           launch=lambda src, dst, nbytes, stream: kern(...),
                           ptx=kern.ptx)

    register_copy_bench("tma", build, path="g2s2g")

A builder is called once per config, only on a GPU machine, before any timing; it may
return SkipReason for configs it does not support (the row says why) and may raise
(the row says ``error: ...`` and the sweep goes on).  ``launch`` must enqueue the copy
of ``nbytes`` bytes from ``src`` to ``dst`` (raw device addresses, ints) on ``stream``
(a raw CUstream handle, int) and return without synchronizing.

Kernel modules are found by importing :data:`DEFAULT_PLUGINS` (if present), the
modules named in ``$PTXGEN_BENCH_PLUGINS`` (comma-separated) and ``--plugin``.
"""
from __future__ import annotations

import importlib
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Callable, Protocol, Union

from ..dtypes import dtype as _dtype
from ..errors import PtxgenError

__all__ = ["CopyConfig", "BenchKernel", "SkipReason", "register_copy_bench",
           "registered_variants", "expand", "copy_bytes", "parse_tile", "load_plugins",
           "run_copy_bench",
           "DEFAULT_DTYPES", "DEFAULT_SCOPES", "DEFAULT_TILES", "SCOPES", "DEFAULT_PLUGINS"]

SCOPES = ("warp", "warpgroup", "cta")
DEFAULT_DTYPES = ("float16", "float32", "bfloat16", "int8")
DEFAULT_SCOPES = SCOPES
DEFAULT_TILES = ((32, 32), (32, 64), (64, 64), (128, 64))
DEFAULT_PLUGINS = ("ptxgen.bench.copy_kernels", "ptxgen.bench.async_kernels")
DEFAULT_COPY_BYTES = 2 << 30   # per buffer; the CLI default --size 4GiB is src + dst
ALIGN = 1 << 20                # buffer sizes are whole MiB: divisible by any tile row


def copy_bytes(total_bytes: int) -> int:
    """Bytes per buffer (and per copy) for a --size of src + dst: half, whole MiB."""
    return (int(total_bytes) // 2) // ALIGN * ALIGN


@dataclass(frozen=True)
class CopyConfig:
    """One point of the sweep.  ``size_bytes`` is what one copy moves (one buffer);
    ``tile`` is (rows, cols) in elements of ``dtype``; ``path`` comes from registration."""
    variant: str
    dtype: str
    scope: str
    tile: tuple[int, int]
    size_bytes: int
    path: str

    @property
    def label(self) -> str:
        return f"{self.variant}/{self.dtype}/{self.scope}/{self.tile[0]}x{self.tile[1]}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tile"] = list(self.tile)
        return d


@dataclass(frozen=True)
class SkipReason:
    """Returned by a builder for a config it does not support; shown as 'skipped: why'."""
    reason: str


class _Launch(Protocol):
    def __call__(self, src_ptr: int, dst_ptr: int, nbytes: int, stream: int) -> None: ...


@dataclass
class BenchKernel:
    """What a builder returns.  ``ptx``/``sass`` are optional text (or zero-argument
    callables returning text, for expensive disassembly), written by ``--dump-dir``."""
    name: str
    launch: _Launch
    ptx: Union[str, Callable[[], str], None] = None
    sass: Union[str, Callable[[], str], None] = None
    meta: dict = field(default_factory=dict)


Builder = Callable[[CopyConfig], Union[BenchKernel, SkipReason]]


@dataclass(frozen=True)
class _Entry:
    builder: Builder
    path: str


_REGISTRY: dict[str, _Entry] = {}


def register_copy_bench(variant: str, builder: Builder | None = None, *, path: str = "g2g",
                        replace: bool = False):
    """Register ``builder(cfg) -> BenchKernel | SkipReason`` as copy variant ``variant``.

    ``path`` names the data path the variant exercises ("g2s2g", "g2r2g", "g2g", ...).
    Usable as a decorator when ``builder`` is omitted.  Registering a name twice is an
    error unless ``replace=True``, because two modules silently fighting over one name
    would make a sweep measure the wrong kernel.
    """
    if builder is None:
        return lambda b: register_copy_bench(variant, b, path=path, replace=replace)
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", variant or ""):
        raise PtxgenError(f"copy variant name {variant!r} must be letters, digits, '_', '.', '-'")
    if not callable(builder):
        raise PtxgenError(f"register_copy_bench({variant!r}, ...): builder is not callable")
    if variant in _REGISTRY and not replace and _REGISTRY[variant].builder is not builder:
        raise PtxgenError(f"copy variant {variant!r} is already registered; pass replace=True "
                          f"to override it")
    _REGISTRY[variant] = _Entry(builder, path)
    return builder


def registered_variants() -> list[str]:
    return list(_REGISTRY)


def _dedupe(xs):
    return list(dict.fromkeys(xs))


def _check_dtype(name: str) -> str:
    try:
        dt = _dtype(name)
    except PtxgenError as e:
        raise PtxgenError(f"--dtype: {e}") from None
    if dt.lanes != 1 or dt.bits % 8 or dt.kind == "handle":
        raise PtxgenError(f"--dtype {name!r}: copy benches take whole-byte element dtypes "
                          f"(e.g. {', '.join(DEFAULT_DTYPES)}); kernels pick their own vector width")
    return dt.name


def parse_tile(text) -> tuple[int, int]:
    """'64x64' (or a pair) -> (64, 64); rows and cols are positive element counts."""
    if isinstance(text, (tuple, list)):
        parts = list(text)
    else:
        parts = re.split(r"[xX×,]", str(text).strip())
    try:
        r, c = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise PtxgenError(f"--tile {text!r}: expected ROWSxCOLS, e.g. 64x64") from None
    if r <= 0 or c <= 0:
        raise PtxgenError(f"--tile {text!r}: rows and cols must be positive")
    return r, c


def expand(variants=None, dtypes=None, scopes=None, tiles=None, *,
           size_bytes: int = DEFAULT_COPY_BYTES) -> list[CopyConfig]:
    """All configs of variants x dtypes x scopes x tiles (empty/None = the defaults:
    every registered variant, float16/float32/bfloat16/int8, every scope, 32x32/32x64/64x64/
    128x64).

    Names are validated here, before any GPU work, so a typo costs no device time.
    """
    variants = _dedupe(variants or registered_variants())
    unknown = [v for v in variants if v not in _REGISTRY]
    if unknown:
        have = ", ".join(registered_variants()) or "none (no kernel module registered any)"
        raise PtxgenError(f"unknown copy variant{'s' * (len(unknown) > 1)} "
                          f"{', '.join(map(repr, unknown))}; registered variants: {have}")
    dts = _dedupe(_check_dtype(d) for d in (dtypes or DEFAULT_DTYPES))
    scs = _dedupe(scopes or DEFAULT_SCOPES)
    bad = [s for s in scs if s not in SCOPES]
    if bad:
        raise PtxgenError(f"unknown scope {bad[0]!r}; scopes: {', '.join(SCOPES)}")
    tls = _dedupe(parse_tile(t) for t in (tiles or DEFAULT_TILES))
    return [CopyConfig(v, d, s, t, int(size_bytes), _REGISTRY[v].path)
            for v in variants for d in dts for s in scs for t in tls]


def load_plugins(modules=()) -> list[str]:
    """Import kernel modules so they register; returns the names imported.

    A missing *default* module is fine (no kernels yet); a module the user named that
    fails to import is an error carrying the import failure.
    """
    env = [m.strip() for m in os.environ.get("PTXGEN_BENCH_PLUGINS", "").split(",") if m.strip()]
    loaded = []
    for mod in _dedupe([*DEFAULT_PLUGINS, *env, *modules]):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if mod in DEFAULT_PLUGINS and e.name == mod:
                continue
            raise PtxgenError(f"cannot import copy-kernel module {mod!r}: {e}") from e
        except Exception as e:
            raise PtxgenError(f"cannot import copy-kernel module {mod!r}: "
                              f"{type(e).__name__}: {e}") from e
        loaded.append(mod)
    return loaded


# ---- running on a GPU ---------------------------------------------------------
def _text(x) -> str | None:
    return x() if callable(x) else x


def _dump(kernel, dump_dir: str) -> None:
    os.makedirs(dump_dir, exist_ok=True)
    for ext in ("ptx", "sass"):
        text = _text(getattr(kernel, ext, None))
        if text:
            with open(os.path.join(dump_dir, f"{kernel.name}.{ext}"), "w") as f:
                f.write(text)


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]


def run_copy_bench(configs: list[CopyConfig], *, total_bytes: int, command: str = "",
                   warmup_ms: float = 25, rep_ms: float = 100, flush_l2: bool = True,
                   check: bool = True, use_torch: bool = True, device: int = 0,
                   dump_dir: str | None = None, progress=None) -> dict:
    """Time the baselines and every config on one pair of buffers; return the report doc.

    ``progress(done, total, label)`` is called before each item.  A failing kernel
    becomes an 'error' row; if it leaves the CUDA context broken (e.g. an illegal
    address), the remaining rows are 'skipped' instead of all failing the same way.
    Ctrl-C stops the sweep but still returns the rows measured so far.
    """
    from ..runtime import driver
    from . import report, timing
    from .buffers import CopyBuffers

    info = timing.init_device(device)
    stream = driver.create_stream()
    bench = dict(warmup_ms=warmup_ms, rep_ms=rep_ms, flush_l2=flush_l2, stream=stream)
    baselines, rows = [], []
    with CopyBuffers(total_bytes, use_torch=use_torch) as bufs:
        n = bufs.nbytes
        sized = [CopyConfig(c.variant, c.dtype, c.scope, c.tile, n, c.path) for c in configs]

        def measure(launch) -> tuple[dict | None, str]:
            verdict = "skipped: check disabled (--no-check)"
            if check:
                bufs.poison(stream)
                launch()
                diff = bufs.check(stream)
                verdict = "ok" if diff is None else f"WRONG: {diff}"
            return timing.do_bench(launch, **bench), verdict

        bases = [("cuMemcpyDtoDAsync", lambda: driver.call(
            "cuMemcpyDtoDAsync", bufs.dst, bufs.src, n, driver.drv().CUstream(stream)))]
        if bufs.torch_src is not None:
            import torch

            ext = torch.cuda.ExternalStream(stream)

            def torch_copy():
                with torch.cuda.stream(ext):
                    bufs.torch_dst.copy_(bufs.torch_src)
            bases.append((f"torch.copy_ (torch {torch.__version__})", torch_copy))

        total = len(bases) + len(sized)
        dead = None
        for i, (name, launch) in enumerate(bases):
            if progress:
                progress(i, total, f"baseline {name}")
            t, verdict = measure(launch)
            baselines.append({"name": name, "timing": t, "correctness": verdict})

        for j, cfg in enumerate(sized):
            if progress:
                progress(len(bases) + j, total, cfg.label)
            row = {**cfg.to_dict(), "kernel": None, "timing": None}
            if dead:
                rows.append({**row, "correctness": f"skipped: {dead}"})
                continue
            try:
                built = _REGISTRY[cfg.variant].builder(cfg)
            except KeyboardInterrupt:
                dead = "interrupted"
                rows.append({**row, "correctness": "skipped: interrupted"})
                continue
            except Exception as e:  # noqa: BLE001 - one bad builder must not end the sweep
                rows.append({**row, "correctness": f"error: build: {_one_line(e)}"})
                continue
            if isinstance(built, SkipReason):
                rows.append({**row, "correctness": f"skipped: {built.reason}"})
                continue
            row["kernel"] = built.name
            try:
                if dump_dir:
                    _dump(built, dump_dir)
                t, verdict = measure(lambda: built.launch(bufs.src, bufs.dst, n, stream))
                rows.append({**row, "timing": t, "correctness": verdict})
            except KeyboardInterrupt:
                dead = "interrupted"
                rows.append({**row, "correctness": "skipped: interrupted"})
            except Exception as e:  # noqa: BLE001
                rows.append({**row, "correctness": f"error: {_one_line(e)}"})
                try:
                    driver.call("cuCtxSynchronize")
                except Exception as e2:  # noqa: BLE001 - sticky error: context is gone
                    dead = f"CUDA context lost after {built.name} ({_one_line(e2)})"
        if progress:
            progress(total, total, "done")
    if not dead:
        driver.call("cuStreamDestroy", driver.drv().CUstream(stream))
    dev = {"name": info.name, "ordinal": info.ordinal, "sm_count": info.sm_count,
           "l2_bytes": info.l2_bytes, "memory_bytes": info.total_mem,
           "compute_capability": f"{info.cc[0]}.{info.cc[1]}"}
    return report.build_report(
        device=dev, command=command, copy_bytes=n, allocated_bytes=2 * n,
        baselines=baselines, rows=rows,
        settings={"warmup_ms": warmup_ms, "rep_ms": rep_ms, "flush_l2": flush_l2,
                  "check": check})
