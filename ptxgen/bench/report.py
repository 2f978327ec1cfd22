"""Copy-benchmark results: derived numbers, the text table, JSON and the plot.

Everything works on one plain-dict *report document* so that a JSON file read back
later formats and plots exactly like a fresh run.

JSON schema (``"schema": "ptxgen.bench.copy/1"``), all keys required::

    schema           str   "ptxgen.bench.copy/1"
    device           obj   name: str, peak_gbps: number|null (datasheet DRAM bandwidth),
                           peak_source: str (which datasheet, or why none); more keys allowed
    date             str   ISO 8601, UTC
    command          str   the command line that produced the run
    size_bytes       int   bytes one copy moves (each of src and dst has this size)
    allocated_bytes  int   device memory of src + dst
    settings         obj   warmup_ms, rep_ms, flush_l2, check
    best_baseline    str|null   name of the fastest correct baseline
    baselines[]      name: str, median_ms/q20_ms/q80_ms: number, n: int, gbps: number,
                     pct_peak: number|null, correctness: str
    rows[]           variant, dtype, scope, path: str, tile: [rows, cols], size_bytes: int,
                     kernel: str|null, median_ms/q20_ms/q80_ms: number|null, n: int|null,
                     gbps, ratio_to_best_baseline, pct_peak: number|null, correctness: str

``correctness`` is ``ok``, ``WRONG: <first difference>``, ``skipped: <reason>`` or
``error: <message>``; timings are null exactly when nothing was timed (skipped/error).
``gbps`` counts bytes read plus bytes written: 2 * size_bytes / median time, 1 GB = 1e9 B,
the convention of datasheet bandwidths, which count both directions.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone

from ..errors import PtxgenError

__all__ = ["SCHEMA", "DATASHEET_GBPS", "datasheet_bandwidth", "build_report", "format_table",
           "validate_report", "report_problems", "write_json", "read_json", "plot_report",
           "fmt_bytes", "ReportSchemaError"]

SCHEMA = "ptxgen.bench.copy/1"

# (device-name pattern, datasheet, GB/s).  torch/driver names: "NVIDIA H200",
# "NVIDIA H100 80GB HBM3" (SXM), "NVIDIA A100-SXM4-80GB", "NVIDIA B200".
DATASHEET_GBPS = (
    (r"H200", "NVIDIA H200 datasheet, HBM3e", 4800.0),
    (r"H100.*(SXM|HBM3)", "NVIDIA H100 SXM datasheet, HBM3", 3350.0),
    (r"H100.*PCIe", "NVIDIA H100 PCIe datasheet, HBM2e", 2000.0),
    (r"A100.*SXM.*80\s*GB", "NVIDIA A100 80GB SXM datasheet, HBM2e", 2039.0),
    (r"A100.*80\s*GB.*PCIe", "NVIDIA A100 80GB PCIe datasheet, HBM2e", 1935.0),
    (r"B200", "NVIDIA B200 datasheet, HBM3e", 8000.0),
)

_CORRECTNESS = re.compile(r"ok|WRONG(: .+)?|skipped: .+|error: .+", re.S)
_TIMES = ("median_ms", "q20_ms", "q80_ms")


class ReportSchemaError(PtxgenError):
    """A report document (usually a JSON file) does not follow the schema above."""


def datasheet_bandwidth(device_name: str) -> tuple[float | None, str]:
    """(GB/s, which datasheet) for a known device, else (None, why not)."""
    for pat, label, gbps in DATASHEET_GBPS:
        if re.search(pat, device_name or "", re.I):
            return gbps, label
    return None, f"no datasheet bandwidth known for {device_name!r}"


def fmt_bytes(n: int) -> str:
    for unit, k in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            v = n / (1 << k)
            return f"{v:g} {unit}" if v == int(v) else f"{v:.2f} {unit}"
    return f"{n} B"


def _derive(entry: dict, size: int, peak: float | None, best: float | None = None,
            ratio: bool = False) -> dict:
    """Flatten ``timing`` into the entry and add gbps / ratio / pct_peak."""
    t = entry.get("timing") or {}
    out = {k: v for k, v in entry.items() if k != "timing"}
    for k in _TIMES:
        out[k] = t.get(k)
    out["n"] = t.get("n")
    med = out["median_ms"]
    gbps = 2 * size / (med * 1e6) if med else None
    out["gbps"] = gbps
    out["pct_peak"] = 100 * gbps / peak if gbps and peak else None
    if ratio:
        out["ratio_to_best_baseline"] = gbps / best if gbps and best else None
    return out


def build_report(*, device: dict, command: str, copy_bytes: int, allocated_bytes: int,
                 baselines: list, rows: list, settings: dict, date: str | None = None) -> dict:
    """Assemble a validated report doc from raw entries (``timing`` = do_bench dict or None)."""
    device = dict(device)
    peak, source = datasheet_bandwidth(device.get("name", ""))
    device.setdefault("peak_gbps", peak)
    device.setdefault("peak_source", source)
    peak = device["peak_gbps"]
    bases = [_derive(b, copy_bytes, peak) for b in baselines]
    good = [b for b in bases if b["gbps"] and not b["correctness"].startswith(("WRONG", "error"))]
    best = max(good, key=lambda b: b["gbps"]) if good else None
    doc = {
        "schema": SCHEMA,
        "device": device,
        "date": date or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "size_bytes": int(copy_bytes),
        "allocated_bytes": int(allocated_bytes),
        "settings": dict(settings),
        "best_baseline": best["name"] if best else None,
        "baselines": bases,
        "rows": [_derive(r, r.get("size_bytes", copy_bytes), peak,
                         best["gbps"] if best else None, ratio=True) for r in rows],
    }
    validate_report(doc)
    return doc


# ---- validation -----------------------------------------------------------
def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def report_problems(doc) -> list[str]:
    """Every way ``doc`` departs from the schema (empty list: valid)."""
    p: list[str] = []
    if not isinstance(doc, dict):
        return [f"document is a {type(doc).__name__}, not an object"]
    top = {"schema": str, "device": dict, "date": str, "command": str, "size_bytes": int,
           "allocated_bytes": int, "settings": dict, "baselines": list, "rows": list}
    for k, ty in top.items():
        if k not in doc:
            p.append(f"missing top-level key {k!r}")
        elif not isinstance(doc[k], ty) or (ty is int and not _is_int(doc[k])):
            p.append(f"{k}: expected {ty.__name__}, got {type(doc[k]).__name__}")
    if "best_baseline" not in doc:
        p.append("missing top-level key 'best_baseline'")
    if p:
        return p
    if doc["schema"] != SCHEMA:
        p.append(f"schema: expected {SCHEMA!r}, got {doc['schema']!r}")
    dev = doc["device"]
    if not isinstance(dev.get("name"), str):
        p.append("device.name: expected str")
    if dev.get("peak_gbps") is not None and not _is_num(dev.get("peak_gbps")):
        p.append("device.peak_gbps: expected number or null")
    if not isinstance(dev.get("peak_source"), str):
        p.append("device.peak_source: expected str")
    try:
        datetime.fromisoformat(doc["date"])
    except ValueError:
        p.append(f"date: {doc['date']!r} is not ISO 8601")
    if doc["size_bytes"] <= 0:
        p.append("size_bytes: must be positive")
    for k in ("warmup_ms", "rep_ms", "flush_l2", "check"):
        if k not in doc["settings"]:
            p.append(f"settings: missing {k!r}")
    names = set()
    for i, b in enumerate(doc["baselines"]):
        where = f"baselines[{i}]"
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            p.append(f"{where}: expected an object with a str 'name'")
            continue
        names.add(b["name"])
        p += _entry_problems(b, where, doc["size_bytes"], timed=True)
    if doc["best_baseline"] is not None and doc["best_baseline"] not in names:
        p.append(f"best_baseline: {doc['best_baseline']!r} is not a baseline name")
    for i, r in enumerate(doc["rows"]):
        where = f"rows[{i}]"
        if not isinstance(r, dict):
            p.append(f"{where}: expected an object")
            continue
        for k in ("variant", "dtype", "scope", "path"):
            if not isinstance(r.get(k), str):
                p.append(f"{where}.{k}: expected str")
        tile = r.get("tile")
        if not (isinstance(tile, list) and len(tile) == 2 and all(_is_int(x) and x > 0 for x in tile)):
            p.append(f"{where}.tile: expected [rows, cols] of positive ints, got {tile!r}")
        if not _is_int(r.get("size_bytes")) or r["size_bytes"] <= 0:
            p.append(f"{where}.size_bytes: expected a positive int")
            continue
        if r.get("kernel") is not None and not isinstance(r["kernel"], str):
            p.append(f"{where}.kernel: expected str or null")
        if "ratio_to_best_baseline" not in r:
            p.append(f"{where}: missing 'ratio_to_best_baseline'")
        elif r["ratio_to_best_baseline"] is not None and not _is_num(r["ratio_to_best_baseline"]):
            p.append(f"{where}.ratio_to_best_baseline: expected number or null")
        p += _entry_problems(r, where, r["size_bytes"], timed=None)
    return p


def _entry_problems(e: dict, where: str, size: int, timed) -> list[str]:
    p = []
    c = e.get("correctness")
    if not isinstance(c, str) or not _CORRECTNESS.fullmatch(c):
        p.append(f"{where}.correctness: {c!r} is not ok / WRONG: ... / skipped: ... / error: ...")
        return p
    if timed is None:  # rows: timed exactly when a kernel ran to completion
        timed = c.startswith(("ok", "WRONG")) or c.startswith("skipped: check disabled")
    keys = (*_TIMES, "n", "gbps", "pct_peak")
    missing = [k for k in keys if k not in e]
    if missing:
        return p + [f"{where}: missing {', '.join(missing)}"]
    if not timed:
        stray = [k for k in (*_TIMES, "n", "gbps") if e[k] is not None]
        if stray:
            p.append(f"{where}: {c.split(':')[0]} entry has timings ({', '.join(stray)})")
        return p
    bad = [k for k in (*_TIMES, "gbps") if not _is_num(e[k]) or e[k] <= 0]
    if bad or not _is_int(e["n"]) or e["n"] < 1:
        return p + [f"{where}: timed entry needs positive {', '.join(bad) or 'n'}"]
    if not e["q20_ms"] <= e["median_ms"] <= e["q80_ms"]:
        p.append(f"{where}: quantiles out of order (q20 <= median <= q80)")
    if not math.isclose(e["gbps"], 2 * size / (e["median_ms"] * 1e6), rel_tol=1e-6):
        p.append(f"{where}.gbps: does not equal 2 * size_bytes / median")
    if e["pct_peak"] is not None and not _is_num(e["pct_peak"]):
        p.append(f"{where}.pct_peak: expected number or null")
    return p


def validate_report(doc) -> dict:
    """Return ``doc`` if it follows the schema, else raise ReportSchemaError listing why."""
    problems = report_problems(doc)
    if problems:
        raise ReportSchemaError("invalid copy-bench report:\n  " + "\n  ".join(problems))
    return doc


def write_json(doc: dict, path: str) -> None:
    validate_report(doc)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def read_json(path: str) -> dict:
    with open(path) as f:
        return validate_report(json.load(f))


# ---- text table --------------------------------------------------------------
def _f(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def format_table(doc: dict) -> str:
    """Aligned plain-text table, fastest first (untimed rows last), then the legend that
    names every denominator."""
    entries = [("baseline", b) for b in doc["baselines"]] + [("row", r) for r in doc["rows"]]
    order = sorted(range(len(entries)),
                   key=lambda i: (entries[i][1]["gbps"] is None, -(entries[i][1]["gbps"] or 0), i))
    head = ("variant", "dtype", "scope", "tile", "path", "median ms", "q20 ms", "q80 ms",
            "GB/s", "x base", "% peak", "check")
    right = {5, 6, 7, 8, 9, 10}
    lines = []
    for i in order:
        kind, e = entries[i]
        if kind == "baseline":
            cfg = (f"[baseline] {e['name']}", "-", "-", "-", "-")
            ratio = e["gbps"] / _best(doc) if e["gbps"] and _best(doc) else None
        else:
            cfg = (e["variant"], e["dtype"], e["scope"], f"{e['tile'][0]}x{e['tile'][1]}", e["path"])
            ratio = e.get("ratio_to_best_baseline")
        lines.append((*cfg, _f(e["median_ms"], ".4f"), _f(e["q20_ms"], ".4f"),
                      _f(e["q80_ms"], ".4f"), _f(e["gbps"], ".1f"), _f(ratio, ".2f"),
                      _f(e["pct_peak"], ".1f"), e["correctness"]))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]

    def fmt(cells):
        out = [c.rjust(w) if j in right else c.ljust(w)
               for j, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    dev = doc["device"]
    s = doc["settings"]
    text = [f"ptxgen bench copy | {dev['name']} | {doc['date']} | {fmt_bytes(doc['size_bytes'])} "
            f"per copy | warmup {s['warmup_ms']} ms, rep {s['rep_ms']} ms, "
            f"L2 flush {'on' if s['flush_l2'] else 'off'}",
            fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines), ""]
    text.append(f"GB/s: bytes read + written = 2 x {doc['size_bytes']} B / median time "
                f"(1 GB = 1e9 B); ms are the 20/50/80% quantiles of per-run CUDA-event times")
    text.append(f"x base: GB/s over the best baseline ({doc['best_baseline']}, "
                f"{_f(_best(doc), '.1f')} GB/s)" if doc["best_baseline"]
                else "x base: n/a (no correct baseline)")
    text.append(f"% peak: of {dev['peak_gbps']:.0f} GB/s, the {dev['peak_source']}"
                if dev.get("peak_gbps") else f"% peak: n/a ({dev['peak_source']})")
    return "\n".join(text)


def _best(doc) -> float | None:
    for b in doc["baselines"]:
        if b["name"] == doc["best_baseline"]:
            return b["gbps"]
    return None


# ---- plot ----------------------------------------------------------------------
def require_matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PtxgenError("--plot needs matplotlib, which is not installed: "
                          "pip install matplotlib (or pip install 'ptxgen[plot]')") from None
    return Figure, FigureCanvasAgg


def plot_report(doc: dict, path: str) -> None:
    """One panel per dtype x scope: horizontal bars (variant x tile, GB/s, fastest on top)
    so every label stays readable, baselines and the datasheet peak as vertical lines, WRONG
    kernels in red; written with the Agg backend (no display)."""
    Figure, Canvas = require_matplotlib()
    timed = [r for r in doc["rows"] if r["gbps"] is not None]
    panels = list(dict.fromkeys((r["dtype"], r["scope"]) for r in timed)) or [("", "")]
    ncol = min(3, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    most = max([sum((r["dtype"], r["scope"]) == p for r in timed) for p in panels] + [1])
    fig = Figure(figsize=(6.0 * ncol, (0.17 * most + 1.2) * nrow), layout="constrained")
    Canvas(fig)
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    colors = ("tab:gray", "tab:green", "tab:purple", "tab:orange")
    for ax, (dt, sc) in zip(axes, panels):
        rs = sorted((r for r in timed if (r["dtype"], r["scope"]) == (dt, sc)),
                    key=lambda r: r["gbps"])
        labels = [f"{r['variant']} {r['tile'][0]}x{r['tile'][1]}" for r in rs]
        ax.barh(range(len(rs)), [r["gbps"] for r in rs], height=0.75,
                color=["tab:red" if r["correctness"].startswith("WRONG") else "tab:blue"
                       for r in rs])
        ax.set_yticks(range(len(rs)), labels, fontsize=6)
        ax.set_ylim(-0.6, max(len(rs), 1) - 0.4)
        for b, c in zip(doc["baselines"], colors):
            ax.axvline(b["gbps"], color=c, linestyle="--", linewidth=1, label=b["name"])
        if doc["device"].get("peak_gbps"):
            ax.axvline(doc["device"]["peak_gbps"], color="black", linewidth=1,
                       label=f"datasheet {doc['device']['peak_gbps']:.0f} GB/s")
        ax.set_xlim(left=0)
        ax.set_title(f"{dt} / {sc}" if dt else "baselines only", fontsize=9)
        ax.set_xlabel("GB/s (read + write)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    axes[0].legend(fontsize=6, loc="lower right", framealpha=0.9)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"copy, {fmt_bytes(doc['size_bytes'])}, {doc['device']['name']}", fontsize=10)
    fig.savefig(path, dpi=110)
