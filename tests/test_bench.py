"""Tests of the benchmark harness (ptxgen.bench).  CPU-only except the `gpu` tests,
which run a small real sweep with stand-in kernels and skip without a GPU."""
from __future__ import annotations

import copy
import json

import pytest

from ptxgen.bench import cli, report, sweep, timing
from ptxgen.errors import PtxgenError
from ptxgen.runtime import driver


@pytest.fixture
def registry(monkeypatch):
    """An isolated registry with two variants (so tests never see real kernels)."""
    monkeypatch.setattr(sweep, "_REGISTRY", {})
    sweep.register_copy_bench("tma", lambda cfg: sweep.SkipReason("cpu test"), path="g2s2g")
    sweep.register_copy_bench("ldst", lambda cfg: sweep.SkipReason("cpu test"), path="g2r2g")
    return sweep._REGISTRY


# ---- sweep expansion --------------------------------------------------------------
def test_expand_defaults(registry):
    cfgs = sweep.expand()
    assert len(cfgs) == 2 * 4 * 3 * 4
    assert {c.variant for c in cfgs} == {"tma", "ldst"}
    assert {c.dtype for c in cfgs} == {"float16", "float32", "bfloat16", "int8"}
    assert {c.scope for c in cfgs} == {"warp", "warpgroup", "cta"}
    assert {c.tile for c in cfgs} == {(32, 32), (32, 64), (64, 64), (128, 64)}
    assert {(c.variant, c.path) for c in cfgs} == {("tma", "g2s2g"), ("ldst", "g2r2g")}
    assert all(c.size_bytes == 2 << 30 for c in cfgs)
    assert len(set(cfgs)) == len(cfgs)


def test_expand_filters_and_aliases(registry):
    cfgs = sweep.expand(["ldst"], ["fp16", "float16", "bf16"], ["cta"], ["64x64", (128, 64)],
                        size_bytes=1 << 20)
    assert [(c.variant, c.dtype, c.scope, c.tile) for c in cfgs] == [
        ("ldst", "float16", "cta", (64, 64)), ("ldst", "float16", "cta", (128, 64)),
        ("ldst", "bfloat16", "cta", (64, 64)), ("ldst", "bfloat16", "cta", (128, 64))]
    assert cfgs[0].label == "ldst/float16/cta/64x64"
    assert cfgs[0].to_dict()["tile"] == [64, 64]


def test_expand_errors(registry):
    with pytest.raises(PtxgenError, match=r"unknown copy variant 'nope'; registered variants: tma, ldst"):
        sweep.expand(["nope"])
    with pytest.raises(PtxgenError, match=r"--dtype: unknown dtype 'float17'; known dtypes: .*float16"):
        sweep.expand(dtypes=["float17"])
    with pytest.raises(PtxgenError, match=r"whole-byte element dtypes"):
        sweep.expand(dtypes=["float32x4"])
    with pytest.raises(PtxgenError, match=r"unknown scope 'block'; scopes: warp, warpgroup, cta"):
        sweep.expand(scopes=["block"])
    for bad in ("64", "0x64", "axb", "1x2x3"):
        with pytest.raises(PtxgenError, match=r"--tile"):
            sweep.expand(tiles=[bad])


def test_expand_empty_registry(monkeypatch):
    monkeypatch.setattr(sweep, "_REGISTRY", {})
    assert sweep.expand() == []
    with pytest.raises(PtxgenError, match=r"registered variants: none"):
        sweep.expand(["tma"])


def test_register_rules(registry):
    with pytest.raises(PtxgenError, match="already registered"):
        sweep.register_copy_bench("tma", lambda cfg: None)
    sweep.register_copy_bench("tma", len, path="g2g", replace=True)
    assert registry["tma"].path == "g2g"

    @sweep.register_copy_bench("deco", path="g2g")
    def build(cfg):
        return sweep.SkipReason("x")
    assert "deco" in sweep.registered_variants() and callable(build)
    with pytest.raises(PtxgenError, match="must be letters"):
        sweep.register_copy_bench("bad name", build)


def test_load_plugins(monkeypatch, tmp_path):
    monkeypatch.setattr(sweep, "_REGISTRY", {})
    monkeypatch.setattr(sweep, "DEFAULT_PLUGINS", ())      # only the named module registers
    (tmp_path / "my_copy_kernels.py").write_text(
        "from ptxgen.bench import register_copy_bench, SkipReason\n"
        "register_copy_bench('plug', lambda cfg: SkipReason('x'), path='g2g')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "my_copy_kernels" in sweep.load_plugins(["my_copy_kernels"])
    assert sweep.registered_variants() == ["plug"]
    with pytest.raises(PtxgenError, match="cannot import copy-kernel module 'no_such_mod'"):
        sweep.load_plugins(["no_such_mod"])


# ---- report: JSON schema, table ---------------------------------------------------
def _timing(ms):
    return {"median_ms": ms, "q20_ms": ms * 0.99, "q80_ms": ms * 1.02, "n": 50}


def _doc(device="NVIDIA H200"):
    size = 2 << 30
    base = [{"name": "cuMemcpyDtoDAsync", "timing": _timing(1.0), "correctness": "ok"},
            {"name": "torch.copy_", "timing": _timing(1.1), "correctness": "ok"}]
    cfgs = sweep.expand(["tma", "ldst"], ["float16"], ["warp", "cta"], ["64x64"], size_bytes=size)
    times = [0.95, 2.0, 1.3, None]
    verdicts = ["ok", "WRONG: 5 of 2147483648 bytes differ; first at byte 7 is never written",
                "ok", "skipped: warp scope needs 32 rows"]
    rows = [{**c.to_dict(), "kernel": None if t is None else f"k{i}",
             "timing": None if t is None else _timing(t), "correctness": v}
            for i, (c, t, v) in enumerate(zip(cfgs, times, verdicts))]
    return report.build_report(
        device={"name": device, "sm_count": 132}, command="ptxgen bench copy", copy_bytes=size,
        allocated_bytes=2 * size, baselines=base, rows=rows,
        settings={"warmup_ms": 25, "rep_ms": 100, "flush_l2": True, "check": True},
        date="2026-01-02T03:04:05+00:00")


def test_report_derived_numbers(registry):
    doc = _doc()
    assert doc["device"]["peak_gbps"] == 4800.0 and "H200" in doc["device"]["peak_source"]
    assert doc["best_baseline"] == "cuMemcpyDtoDAsync"
    b = doc["baselines"][0]
    assert b["gbps"] == pytest.approx(2 * (2 << 30) / 1e6)       # read + write over 1 ms
    assert b["pct_peak"] == pytest.approx(100 * b["gbps"] / 4800)
    r0 = doc["rows"][0]
    assert r0["ratio_to_best_baseline"] == pytest.approx(1 / 0.95)
    skipped = doc["rows"][3]
    assert skipped["median_ms"] is None and skipped["gbps"] is None
    assert skipped["ratio_to_best_baseline"] is None


@pytest.mark.parametrize("name,gbps", [("NVIDIA H200", 4800), ("NVIDIA H100 80GB HBM3", 3350),
                                       ("NVIDIA A100-SXM4-80GB", 2039), ("NVIDIA B200", 8000),
                                       ("NVIDIA H100 PCIe", 2000), ("NVIDIA GeForce RTX 4090", None)])
def test_datasheet_table(name, gbps):
    peak, label = report.datasheet_bandwidth(name)
    assert peak == gbps
    assert label.startswith("no datasheet") == (gbps is None)


def test_json_round_trip(registry, tmp_path):
    doc = _doc()
    path = tmp_path / "r.json"
    report.write_json(doc, str(path))
    back = report.read_json(str(path))
    assert back == json.loads(json.dumps(doc))
    for key in ("device", "date", "command", "size_bytes", "baselines", "rows"):
        assert key in back
    assert report.format_table(back) == report.format_table(doc)


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d.pop("rows"), "missing top-level key 'rows'"),
    (lambda d: d.update(schema="other/9"), "schema: expected"),
    (lambda d: d.update(date="yesterday"), "not ISO 8601"),
    (lambda d: d["rows"][0].update(correctness="fine"), "is not ok / WRONG"),
    (lambda d: d["rows"][0].update(tile=[64]), "tile: expected"),
    (lambda d: d["rows"][0].update(gbps=1.0), "gbps: does not equal"),
    (lambda d: d["rows"][0].update(q20_ms=9.0), "quantiles out of order"),
    (lambda d: d["rows"][3].update(median_ms=1.0), "has timings"),
    (lambda d: d["baselines"][0].update(median_ms=None), "timed entry needs positive"),
    (lambda d: d.update(best_baseline="nvcc"), "not a baseline name"),
])
def test_validator_rejects(registry, mutate, msg):
    doc = copy.deepcopy(_doc())
    mutate(doc)
    with pytest.raises(report.ReportSchemaError, match=msg):
        report.validate_report(doc)
    assert report.report_problems(_doc()) == []
    assert report.report_problems([]) == ["document is a list, not an object"]


def test_table_sorted_aligned_and_named(registry):
    text = report.format_table(_doc())
    lines = text.splitlines()
    header, rule = lines[1], lines[2]
    body = lines[3:lines.index("")]             # 2 baselines, 3 timed rows, 1 skipped
    assert len(body) == 6
    gbps_col = header.index("GB/s")
    end = gbps_col + len("GB/s")
    values = [ln[:end].split()[-1] for ln in body]
    timed = [float(v) for v in values if v != "-"]
    assert timed == sorted(timed, reverse=True)
    assert values[-1] == "-" and body[-1].rstrip().endswith("skipped: warp scope needs 32 rows")
    # right-aligned numeric columns end at the same character in every line
    for col in ("median ms", "GB/s", "x base", "% peak"):
        stop = header.index(col) + len(col)
        assert all(ln[stop - 1] != " " and (len(ln) == stop or ln[stop] == " ")
                   for ln in body), col
    assert set(rule.replace(" ", "")) == {"-"}
    assert "[baseline] cuMemcpyDtoDAsync" in text and "WRONG" in text
    assert "% peak: of 4800 GB/s, the NVIDIA H200 datasheet, HBM3e" in text
    assert "x base: GB/s over the best baseline (cuMemcpyDtoDAsync" in text
    assert "bytes read + written" in text


def test_table_unknown_device(registry):
    text = report.format_table(_doc("Mystery GPU"))
    assert "% peak: n/a (no datasheet bandwidth known for 'Mystery GPU')" in text


def test_plot(registry, tmp_path, monkeypatch):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(PtxgenError, match="--plot needs matplotlib"):
            report.plot_report(_doc(), str(tmp_path / "p.png"))
        return
    report.plot_report(_doc(), str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- CLI ----------------------------------------------------------------------------
@pytest.mark.parametrize("text,n", [("4GiB", 4 << 30), ("512MiB", 512 << 20), ("1e9", 10**9),
                                    ("2.5GB", 2_500_000_000), ("1 KiB", 1024), ("4096", 4096),
                                    ("1.5gib", 3 << 29), ("64B", 64)])
def test_parse_size(text, n):
    assert cli.parse_size(text) == n


@pytest.mark.parametrize("text,msg", [("4G", "ambiguous"), ("4 potatoes", "unknown unit"),
                                      ("0", "positive"), ("1.5B", "whole number"),
                                      ("", "expected a number"), ("-1GiB", "expected a number")])
def test_parse_size_errors(text, msg):
    with pytest.raises(PtxgenError, match=msg):
        cli.parse_size(text)


def test_no_gpu_exit(monkeypatch, capsys, registry):
    monkeypatch.setattr(timing, "gpu_available", lambda: (False, "no driver here"))
    assert cli.main(["copy", "--size", "512MiB", "--dtype", "float16"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "ptxgen bench: no CUDA GPU available (no driver here)\n"


def test_real_gpu_check_never_raises():
    ok, reason = timing.gpu_available()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason


def test_cli_usage_errors(capsys, registry):
    assert cli.main(["copy", "--size", "4G"]) == 2
    assert "ambiguous" in capsys.readouterr().err
    assert cli.main([]) == 2
    assert cli.main(["copy", "--help"]) == 0


def test_cli_list(capsys, registry):
    assert cli.main(["copy", "--list", "--variant", "tma,ldst", "--dtype", "int8",
                     "--scope", "cta", "--tile", "64x64", "--size", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "tma/int8/cta/64x64  path=g2s2g" in out and "2 configs, 512 MiB per buffer" in out


def test_cli_bad_variant(monkeypatch, capsys, registry):
    monkeypatch.setattr(timing, "gpu_available", lambda: (True, "fake"))
    assert cli.main(["copy", "--variant", "nope"]) == 2
    assert "unknown copy variant 'nope'" in capsys.readouterr().err


def test_progress_non_tty():
    import io

    buf = io.StringIO()
    p = cli.Progress(buf)
    for i in range(101):
        p(i, 100, f"item {i}")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("[" + "#" * 28 + "] 100/100")


# ---- GPU: a real sweep with stand-in kernels ------------------------------------------
gpu = pytest.mark.skipif(not timing.gpu_available()[0], reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
def test_gpu_sweep_end_to_end(monkeypatch, tmp_path, capsys):
    """Stand-in kernels made of driver copies: a correct one, one that skips the last
    byte, one skipped and one whose builder raises; checks verdicts and timings."""
    monkeypatch.setattr(sweep, "_REGISTRY", {})

    def memcpy(src, dst, n, stream):
        driver.call("cuMemcpyDtoDAsync", dst, src, n, stream)

    def short(src, dst, n, stream):
        driver.call("cuMemcpyDtoDAsync", dst, src, n - 1, stream)

    def build(cfg):
        if cfg.scope == "warp":
            return sweep.SkipReason("warp not supported")
        if cfg.variant == "boom":
            raise PtxgenError("cannot build")
        fn = memcpy if cfg.variant == "good" else short
        return sweep.BenchKernel(name=f"{cfg.variant}_{cfg.dtype}", launch=fn, ptx="// ptx")

    for v in ("good", "short", "boom"):
        sweep.register_copy_bench(v, build, path="g2g")
    js, png = tmp_path / "r.json", tmp_path / "r.png"
    argv = ["copy", "--size", "256MiB", "--dtype", "float16", "--scope", "warp,cta",
            "--tile", "64x64", "--rep-ms", "20", "--warmup-ms", "5", "--json", str(js),
            "--dump-dir", str(tmp_path / "dump")]
    try:
        import matplotlib  # noqa: F401
        argv += ["--plot", str(png)]
    except ImportError:
        pass
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    print(out)
    assert rc == 1, err                              # 'short' is WRONG
    doc = report.read_json(str(js))
    by = {(r["variant"], r["scope"]): r for r in doc["rows"]}
    assert by[("good", "cta")]["correctness"] == "ok"
    assert by[("short", "cta")]["correctness"].startswith("WRONG: 1 of ")
    assert "never written" in by[("short", "cta")]["correctness"]
    assert by[("boom", "cta")]["correctness"] == "error: build: PtxgenError: cannot build"
    assert by[("good", "warp")]["correctness"] == "skipped: warp not supported"
    assert all(b["correctness"] == "ok" for b in doc["baselines"])
    good = by[("good", "cta")]
    assert 0.5 < good["ratio_to_best_baseline"] < 2 and good["n"] >= 1
    assert (tmp_path / "dump" / "good_float16.ptx").read_text() == "// ptx"
    if "--plot" in argv:
        assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.gpu
@gpu
def test_gpu_do_bench_scales_with_size():
    """Copying 4x the bytes takes clearly longer; flush on/off both return sane stats."""
    from ptxgen.bench.buffers import CopyBuffers

    timing.init_device(0)
    with CopyBuffers(512 << 20, use_torch=False) as b:
        b.poison()
        assert "never written" in b.check()
        f = lambda n: lambda: driver.call("cuMemcpyDtoDAsync", b.dst, b.src, n, 0)  # noqa: E731
        small = timing.do_bench(f(b.nbytes // 4), rep_ms=20)
        big = timing.do_bench(f(b.nbytes), rep_ms=20, flush_l2=False)
        assert b.check() is None
    for r in (small, big):
        assert r["q20_ms"] <= r["median_ms"] <= r["q80_ms"] and r["n"] >= 1
    assert big["median_ms"] > 2 * small["median_ms"]
