"""``ptxgen bench copy ...``: the command line over the sweep, the table, JSON and plot.

The top-level ``ptxgen`` CLI calls :func:`main` with the arguments after ``bench``.
Exit codes: 0 all good, 1 a kernel or baseline copied wrongly or failed, 2 usage error
or no usable GPU, 130 interrupted.  Argument errors are reported before any GPU work
so a typo costs no device time.
"""
from __future__ import annotations

import argparse
import re
import shlex
import sys

from ..errors import PtxgenError
from . import report, sweep, timing

__all__ = ["main", "parse_size", "Progress"]

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def parse_size(text: str) -> int:
    """'4GiB' / '512MiB' / '1e9' / '2.5GB' -> bytes.  Binary (KiB..TiB) and decimal
    (KB..TB) units are both accepted; a bare K/M/G/T is refused as ambiguous."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)\s*([A-Za-z]*)\s*", str(text))
    if not m:
        raise PtxgenError(f"size {text!r}: expected a number and an optional unit, "
                          f"e.g. 4GiB, 512MiB, 1e9")
    unit = m.group(2).lower()
    if unit in ("k", "m", "g", "t"):
        raise PtxgenError(f"size {text!r}: unit {m.group(2)!r} is ambiguous; write "
                          f"{m.group(1)}{m.group(2).upper()}iB (powers of 2) or "
                          f"{m.group(1)}{m.group(2).upper()}B (powers of 10)")
    if unit not in _UNITS:
        raise PtxgenError(f"size {text!r}: unknown unit {m.group(2)!r}; use B, KiB, MiB, GiB, "
                          f"TiB, KB, MB, GB or TB")
    value = float(m.group(1)) * _UNITS[unit]
    n = round(value)
    if abs(value - n) > 1e-6 * max(1.0, value):
        raise PtxgenError(f"size {text!r} is not a whole number of bytes")
    if n <= 0:
        raise PtxgenError(f"size {text!r} must be positive")
    return int(n)


def _size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except PtxgenError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class Progress:
    """A one-line stderr progress bar; on a non-terminal it prints a line per 10% step
    instead of carriage returns, so CI logs stay readable."""

    def __init__(self, file=None, width: int = 28):
        self.file = file or sys.stderr
        self.width = width
        self.tty = getattr(self.file, "isatty", lambda: False)()
        self._last_decile = -1

    def __call__(self, done: int, total: int, label: str) -> None:
        frac = done / total if total else 1.0
        bar = "#" * int(frac * self.width)
        line = f"[{bar:<{self.width}}] {done}/{total} {label}"
        if self.tty:
            end = "\n" if done >= total else ""
            self.file.write("\r\033[K" + line[:160] + end)
        elif int(frac * 10) != self._last_decile:
            self._last_decile = int(frac * 10)
            self.file.write(line + "\n")
        self.file.flush()


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ptxgen bench", description="Benchmark ptxgen kernels.")
    sub = ap.add_subparsers(dest="suite", required=True, metavar="{copy}")
    p = sub.add_parser(
        "copy", help="device-to-device copy kernels vs cuMemcpy and torch",
        description="Time registered copy kernels over variant x dtype x scope x tile on "
                    "one pair of device buffers, next to cuMemcpyDtoDAsync and torch copy_. "
                    "List options take several values, repeated or comma-separated.")
    add = p.add_argument
    add("--variant", action="append", metavar="NAME", help="copy variants (default: all registered)")
    add("--dtype", action="append", metavar="DT",
        help=f"element dtypes (default: {','.join(sweep.DEFAULT_DTYPES)})")
    add("--scope", action="append", metavar="S", help=f"scopes (default: {','.join(sweep.SCOPES)})")
    add("--tile", action="append", metavar="RxC",
        help="tiles in elements (default: " + ",".join(f"{r}x{c}" for r, c in sweep.DEFAULT_TILES) + ")")
    add("--size", type=_size_arg, default=parse_size("4GiB"), metavar="BYTES",
        help="device memory for src + dst together, e.g. 4GiB, 512MiB, 1e9 (default 4GiB)")
    add("--json", metavar="FILE", help="write the results as JSON (schema ptxgen.bench.copy/1, see ptxgen.bench.report)")
    add("--plot", metavar="FILE.png", help="write a bar chart (needs matplotlib)")
    add("--warmup-ms", type=float, default=25.0, help="warm-up budget per item (default 25)")
    add("--rep-ms", type=float, default=100.0, help="timed budget per item (default 100)")
    add("--no-l2-flush", action="store_true", help="do not evict L2 between runs")
    add("--no-check", action="store_true", help="skip the dst == src correctness check")
    add("--no-torch", action="store_true", help="skip the torch baseline even if torch imports")
    add("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    add("--plugin", action="append", default=[], metavar="MODULE",
        help="import MODULE first so it can register copy variants")
    add("--dump-dir", metavar="DIR", help="write each kernel's PTX/SASS (when provided) here")
    add("--list", action="store_true", help="print registered variants and the configs; no GPU")
    return ap


def _split(values):
    return [v.strip() for x in values or () for v in x.split(",") if v.strip()] or None


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2), already printed
        return e.code if isinstance(e.code, int) else 2
    err = sys.stderr
    try:
        if args.list:
            return _list(args)
        ok, reason = timing.gpu_available()
        if not ok:
            print(f"ptxgen bench: no CUDA GPU available ({reason})", file=err)
            return 2
        sweep.load_plugins(args.plugin)
        configs = _configs(args)
        if args.plot:
            report.require_matplotlib()  # fail before the sweep, not after it
        if not configs:
            print("ptxgen bench: no copy variants registered (pass --plugin MODULE); "
                  "timing the baselines only", file=err)
        doc = sweep.run_copy_bench(
            configs, total_bytes=args.size, command="ptxgen bench " + shlex.join(argv),
            warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, flush_l2=not args.no_l2_flush,
            check=not args.no_check, use_torch=not args.no_torch, device=args.device,
            dump_dir=args.dump_dir, progress=Progress(err))
    except PtxgenError as e:
        print(f"ptxgen bench: error: {e}", file=err)
        return 2
    except KeyboardInterrupt:
        print("ptxgen bench: interrupted", file=err)
        return 130
    print(report.format_table(doc))
    try:
        if args.json:
            report.write_json(doc, args.json)
            print(f"ptxgen bench: wrote {args.json}", file=err)
        if args.plot:
            report.plot_report(doc, args.plot)
            print(f"ptxgen bench: wrote {args.plot}", file=err)
    except (OSError, PtxgenError) as e:
        print(f"ptxgen bench: error: {e}", file=err)
        return 2
    bad = [e for e in doc["baselines"] + doc["rows"]
           if e["correctness"].startswith(("WRONG", "error"))]
    return 1 if bad else 0


def _configs(args):
    return sweep.expand(_split(args.variant), _split(args.dtype), _split(args.scope),
                        _split(args.tile), size_bytes=sweep.copy_bytes(args.size))


def _list(args) -> int:
    sweep.load_plugins(args.plugin)
    configs = _configs(args)
    names = sweep.registered_variants()
    print(f"registered copy variants: {', '.join(names) if names else '(none)'}")
    for c in configs:
        print(f"  {c.label}  path={c.path}")
    print(f"{len(configs)} configs, {report.fmt_bytes(sweep.copy_bytes(args.size))} per buffer")
    return 0
