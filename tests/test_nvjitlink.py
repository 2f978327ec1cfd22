"""The ctypes binding of nvJitLink (ptxgen/runtime/nvjitlink.py) against cuda-bindings': the
same cubins, logs and error texts, the same version and library stamp (disk-cache key); its
symbol names against nvJitLink.h, its library lookup, the PTXGEN_NVJITLINK switch and the
fallback to cuda-bindings; a first compile through it loads no cuda.* module.  CPU only."""
import json
import os
import re
import subprocess
import sys

import pytest

from ptxgen.errors import PTXCompileError
from ptxgen.runtime import compile as comp, nvjitlink
from ptxgen.runtime import clear_memory_cache, compile_ptx

from test_runtime import PTX_SM80, PTX_SM90A, PTX_SM100A

nj = pytest.importorskip("cuda.bindings.nvjitlink")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = nvjitlink.load()
BINDINGS = {"ctypes": LIB, "bindings": nj}


@pytest.fixture
def use(monkeypatch):
    """use("ctypes" | "bindings"): compile.py links through that binding from now on."""
    monkeypatch.setattr(comp, "_nj", [])
    monkeypatch.setattr(comp, "_nvjitlink_version", [])

    def pick(which):
        comp._nj[:] = [BINDINGS[which]]
        comp._nvjitlink_version[:] = []
        clear_memory_cache()
    yield pick
    clear_memory_cache()


def example_kernels():
    import gemm_sm80
    import gemm_sm90
    import gemm_sm100
    import rmsnorm

    return [(gemm_sm80.make_gemm(256, 256, 256), "sm_80"), (rmsnorm.make(4096), "sm_80"),
            (gemm_sm90.make_gemm(), "sm_90a"), (rmsnorm.make(4096), "sm_90a"),
            (gemm_sm100.make_gemm(), "sm_100a")]


def test_both_bindings_link_the_same_bytes(use):
    """Cubin, info log (ptxas -v, but for its compile time) and status of each link."""
    cases = [(k.built(a).text, a, k.built(a).entry) for k, a in example_kernels()]
    cases += [(PTX_SM80, "sm_80", "add1"), (PTX_SM90A, "sm_90a", "smem90"),
              (PTX_SM100A, "sm_100a", "smem100")]
    for ptx, arch, name in cases:
        got = {}
        for which in BINDINGS:
            use(which)
            ok, cubin, info, err, status = comp._nvjitlink(ptx.encode(), arch, ("-lineinfo",),
                                                           name)
            # each log line but ptxas's wall time
            got[which] = ok, cubin, re.sub(r"Compile time = [\d.]+ ms", "", info), err, status
        assert "Used " in got["ctypes"][2], (name, arch)
        assert got["ctypes"][0] and got["ctypes"][1][:4] == b"\x7fELF", (name, arch)
        assert got["ctypes"] == got["bindings"], (name, arch)


BAD = [PTX_SM80.replace("add.f32 %f1, %f1, 0f3F800000;", "add.f32 %f1, %f9, %bogus;"),
       PTX_SM80.replace(".target sm_80", ".target sm_90a"),         # target above the arch
       "not ptx at all"]


@pytest.mark.parametrize("ptx", BAD)
def test_errors_read_the_same(use, ptx, tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_DISK_CACHE", "0")
    monkeypatch.setenv("PTXGEN_DUMP_DIR", str(tmp_path))   # the same repro path for both
    texts = {}
    for which in BINDINGS:
        use(which)
        with pytest.raises(PTXCompileError) as ei:
            compile_ptx(ptx, "sm_80", name="bad")
        texts[which] = (str(ei.value), ei.value.log, ei.value.ptx_line)
        raw = comp._nvjitlink(ptx.encode(), "sm_80", (), "bad")
        texts[which + " raw"] = raw
    assert texts["ctypes"] == texts["bindings"]
    assert texts["ctypes raw"] == texts["bindings raw"] and not texts["ctypes raw"][0]


@pytest.mark.parametrize("opts", [["-arch=sm_80", "-no-such-option"], ["-verbose"]])
def test_a_failed_create_raises_the_same_text(opts):
    errs = []
    for b in BINDINGS.values():
        with pytest.raises(b.nvJitLinkError) as ei:
            b.create(len(opts), opts)
        errs.append((str(ei.value), ei.value.status))
    assert errs[0] == errs[1] and errs[0][0].startswith("ERROR_")


def test_result_names_are_cuda_bindings():
    names = [m.name for m in nj.Result]
    assert nvjitlink.RESULTS == names[:len(nvjitlink.RESULTS)]
    assert str(nvjitlink.nvJitLinkError(4)) == str(nj.nvJitLinkError(4)) == \
        "ERROR_PTX_COMPILE (4)"
    assert str(nvjitlink.nvJitLinkError(999)) == "ERROR_UNKNOWN (999)"
    assert nvjitlink.InputType.PTX == nj.InputType.PTX


def test_version_and_stamp_are_the_same_for_both(use):
    seen = {}
    for which in BINDINGS:
        use(which)
        seen[which] = (comp.nvjitlink_version(), comp._nvjitlink_stamp(),
                       comp.nvjitlink_backend())
    assert seen["ctypes"][:2] == seen["bindings"][:2]
    assert seen["ctypes"][0] == "%d.%d" % nj.version() and seen["ctypes"][1]
    assert (seen["ctypes"][2], seen["bindings"][2]) == ("ctypes", "bindings")


# ---- symbols --------------------------------------------------------------------------------
def header():
    """nvJitLink.h next to the library (the wheel's nvidia/cu13/include), or None."""
    path = os.path.join(os.path.dirname(os.path.dirname(LIB.path)), "include", "nvJitLink.h")
    return open(path).read() if os.path.isfile(path) else None


def test_symbols_are_the_headers_versioned_names():
    """nvJitLink.h maps nvJitLinkX to __nvJitLinkX_<major>_<minor> of its release: the one
    bound for a library of that release; every entry point bound, none twice."""
    text = header()
    if text is None:
        pytest.skip("no nvJitLink.h beside the library")
    mapped = dict(re.findall(r"static inline nvJitLinkResult (nvJitLink\w+)\s*\([^{]*\{"
                             r"\s*return (__nvJitLink\w+)\s*\(", text))
    ver = re.search(r"__nvJitLinkCreate_(\d+)_(\d+)", text).groups()
    assert len(set(LIB.symbols.values())) == len(LIB.symbols) == len(nvjitlink._API)
    for api, (name, _) in nvjitlink._API.items():
        want = mapped["nvJitLink" + name]
        assert want == f"__nvJitLink{name}_{ver[0]}_{ver[1]}"
        assert want in nvjitlink.symbol_names(name, *LIB.version())
        if tuple(map(int, ver)) == LIB.version():
            assert LIB.symbols[api] == want


class _Hiding:
    """The real library with some symbols hidden (a library of another build or release)."""

    def __init__(self, lib, hide):
        self._lib, self._hide = lib, hide

    def __getattr__(self, name):
        if name in self._hide:
            raise AttributeError(name)
        return getattr(self._lib, name)

    def __getitem__(self, name):
        if any(re.fullmatch(h, name) for h in self._hide):
            raise AttributeError(name)
        return self._lib[name]


def test_symbol_fallbacks():
    """The library's own minor first, then earlier minors, then the bare name (what
    cuda-bindings binds); a library with none of them is refused, naming what was tried."""
    major, minor = LIB.version()
    own = rf"__nvJitLink\w+_{major}_{minor}"
    lib = nvjitlink.NvJitLink(_Hiding(LIB._lib, [own]), LIB.path)
    if minor:
        assert lib.symbols["create"] == f"__nvJitLinkCreate_{major}_{minor - 1}"
    lib = nvjitlink.NvJitLink(_Hiding(LIB._lib, [rf"__nvJitLink\w+_{major}_\d+"]), LIB.path)
    assert lib.symbols["complete"] == "nvJitLinkComplete"
    h = lib.create(2, ["-arch=sm_80", "-verbose"])
    lib.add_data(h, lib.InputType.PTX, PTX_SM80.encode(), len(PTX_SM80), "add1.ptx")
    lib.complete(h)
    buf = bytearray(lib.get_linked_cubin_size(h))
    lib.get_linked_cubin(h, buf)
    lib.destroy(h)
    assert buf[:4] == b"\x7fELF"
    with pytest.raises(AttributeError, match="nvJitLinkComplete.*tried __nvJitLinkComplete_"):
        nvjitlink.NvJitLink(_Hiding(LIB._lib, [r"\w*nvJitLinkComplete\w*"]), LIB.path)
    with pytest.raises(AttributeError):
        nvjitlink.NvJitLink(_Hiding(LIB._lib, ["nvJitLinkVersion"]), LIB.path)


# ---- finding the library --------------------------------------------------------------------
def test_candidates_newest_major_then_sys_path_order(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    if os.name == "nt":
        pytest.skip("the Linux file names")
    for d, names in ((a / "nvidia" / "nvjitlink" / "lib", ["libnvJitLink.so.12"]),
                     (a / "nvidia" / "cublas" / "lib", ["libcublas.so.12"]),
                     (b / "nvidia" / "cu13" / "lib", ["libnvJitLink.so.13",
                                                      "libnvJitLink.so.13.0.88"]),
                     (a / "nvidia" / "cu13" / "lib", ["libnvJitLink.so.13"])):
        d.mkdir(parents=True)
        for n in names:
            (d / n).write_bytes(b"")
    monkeypatch.setattr(sys, "path", ["", "relative", str(a), str(tmp_path / "none"), str(b)])
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    assert nvjitlink.candidates() == [str(a / "nvidia/cu13/lib/libnvJitLink.so.13"),
                                      str(b / "nvidia/cu13/lib/libnvJitLink.so.13"),
                                      str(a / "nvidia/nvjitlink/lib/libnvJitLink.so.12")]
    (tmp_path / "conda" / "lib").mkdir(parents=True)
    (tmp_path / "conda" / "lib" / "libnvJitLink.so.13").write_bytes(b"")
    monkeypatch.setenv("CONDA_PREFIX", str(tmp_path / "conda"))
    assert nvjitlink.candidates()[-1] == str(tmp_path / "conda/lib/libnvJitLink.so.13")


def test_a_file_that_does_not_open_is_skipped(tmp_path, monkeypatch):
    """An empty file named like the library: the next candidate (here the loader's search,
    or the wheel's file) is used, and the error names what failed where none opens."""
    bad = tmp_path / "libnvJitLink.so.13"
    bad.write_bytes(b"")
    monkeypatch.setattr(nvjitlink, "candidates", lambda: [str(bad), LIB.path])
    lib, path = nvjitlink.open_library()
    assert path == LIB.path
    monkeypatch.setattr(nvjitlink, "candidates", lambda: [str(bad)])
    monkeypatch.setattr(nvjitlink, "SONAMES", ("libnvJitLink.so.999",))
    with pytest.raises(nvjitlink.NvJitLinkNotFound, match=r"libnvJitLink.so.13: .*so\.999"):
        nvjitlink.open_library()


def run(code: str, tmp_path, *args, **env) -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True, exist_ok=True)
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
             PTXGEN_CACHE_DIR=str(tmp_path / "cache"), **env)
    for k in ("PTXGEN_NVJITLINK", "PTXGEN_DISK_CACHE", "PTXGEN_JIT_ISOLATE"):
        if k not in env:
            e.pop(k, None)
    p = subprocess.run([sys.executable, *args, "-c", code], capture_output=True, text=True,
                       env=e, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    return p


def test_soname_lookup_reports_the_path_pathfinder_does(tmp_path):
    """Found by the loader (LD_LIBRARY_PATH here): the path is cuda.pathfinder's spelling."""
    if not sys.platform.startswith("linux"):
        pytest.skip("LD_LIBRARY_PATH")
    (tmp_path / "lib").mkdir()
    os.symlink(LIB.path, tmp_path / "lib" / "libnvJitLink.so.13")
    p = run("from ptxgen.runtime import nvjitlink as n\n"
            "n.candidates = lambda: []\n"
            "from cuda.pathfinder._dynamic_libs.load_dl_linux import "
            "abs_path_for_dynamic_library as f\n"
            "print(n.load().path, f('nvJitLink', n.load()._lib))", tmp_path,
            LD_LIBRARY_PATH=str(tmp_path / "lib"))
    ours, theirs = p.stdout.split()
    assert ours == theirs == str(tmp_path / "lib" / "libnvJitLink.so.13")


# ---- a fresh process: what loads, the switch, the fallback, isolation -----------------------
AFFINE = r"""
import ptxgen as pg
N = pg.var("N")
@pg.kernel(grid=(1,), block=(256,))
def affine(o: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32"), a: pg.float32):
    i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
    with pg.if_(i < N):
        o[i] = x[i] * a + 1.0
"""
FIRST = r"""
import json, sys
""" + AFFINE + r"""
from ptxgen.runtime import compile as comp, stats
r = affine.compile("sm_90a")
print(json.dumps({"cuda": sorted(m for m in sys.modules if m.split(".")[0] == "cuda"),
                  "backend": comp.nvjitlink_backend(), "note": comp.backend_note,
                  "jit": stats()["jit_compiles"], "cubin": r.cubin.hex(),
                  "stamp": comp._nvjitlink_stamp(), "version": comp.nvjitlink_version()}))
"""


def first_compile(tmp_path, *args, code=FIRST, **env):
    p = run(code, tmp_path, *args, **env)
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def test_a_first_compile_imports_no_cuda_module(tmp_path):
    out, err = first_compile(tmp_path, "-X", "importtime")
    assert out["jit"] == 1 and out["backend"] == "ctypes" and out["cuda"] == []
    imported = [ln.rsplit("|", 1)[-1].strip() for ln in err.splitlines()
                if ln.startswith("import time:")]
    assert "ptxgen.runtime.nvjitlink" in imported
    assert not [m for m in imported if m.split(".")[0] == "cuda"], imported


def test_the_switch_and_the_fallback(tmp_path):
    ours, _ = first_compile(tmp_path / "a")
    theirs, _ = first_compile(tmp_path / "b", PTXGEN_NVJITLINK="bindings")
    assert theirs["backend"] == "bindings" and "cuda.bindings.nvjitlink" in theirs["cuda"]
    assert (ours["cubin"], ours["stamp"], ours["version"]) == \
        (theirs["cubin"], theirs["stamp"], theirs["version"])
    assert not ours["note"] and not theirs["note"]
    # no library for the ctypes binding: cuda-bindings, and the note says why
    code = ("from ptxgen.runtime import nvjitlink as n\n"
            "n.candidates = lambda: []\nn.SONAMES = ('libnvJitLink.so.999',)\n" + FIRST)
    fell, _ = first_compile(tmp_path / "c", code=code)
    assert fell["backend"] == "bindings" and fell["cubin"] == ours["cubin"]
    (note,) = fell["note"]
    assert note.startswith("the ctypes binding of nvJitLink failed (NvJitLinkNotFound: no "
                           "libnvJitLink could be opened (looked in nvidia/*/lib of each "
                           "sys.path entry, then the loader's path): libnvJitLink.so.999: ")
    assert note.endswith("); using cuda-bindings")
    p = subprocess.run([sys.executable, "-c", "from ptxgen.runtime import compile_ptx\n"
                        "compile_ptx('x', 'sm_80')"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT, PTXGEN_NVJITLINK="ctype",
                                PTXGEN_DISK_CACHE="0"))
    assert "PTXGEN_NVJITLINK='ctype': expected 'ctypes' (the default) or 'bindings'" in p.stderr


def affine_cubin() -> str:
    """FIRST's kernel, linked in this process (hex)."""
    env: dict = {}
    exec(AFFINE, env)
    affine = env["affine"]
    b = affine.built("sm_90a")
    return comp._nvjitlink(b.text.encode(), "sm_90a", (), b.entry)[1].hex()


@pytest.mark.parametrize("which", ["ctypes", "bindings"])
def test_isolated_child_links_through_the_selected_binding(tmp_path, which):
    """PTXGEN_JIT_ISOLATE=1 (the link in a child, compile._child, which inherits the
    PTXGEN_NVJITLINK choice): the cubin is the one this process links."""
    out, _ = first_compile(tmp_path, PTXGEN_JIT_ISOLATE="1", PTXGEN_NVJITLINK=which)
    assert out["jit"] == 1 and out["cubin"] == affine_cubin() and out["backend"] == which
    assert (which == "bindings") == ("cuda.bindings.nvjitlink" in out["cuda"])


def test_no_nvjitlink_at_all_says_what_was_tried(tmp_path):
    code = ("import sys\nsys.modules['cuda.bindings.nvjitlink'] = None\n"
            "from ptxgen.runtime import nvjitlink as n\n"
            "n.candidates = lambda: []\nn.SONAMES = ('libnvJitLink.so.999',)\n"
            "from ptxgen.runtime import compile as comp, compile_ptx\n"
            "try:\n    compile_ptx('x', 'sm_80')\nexcept ImportError as e:\n    print(e)\n"
            "print(comp.nvjitlink_version())")
    msg, version = run(code, tmp_path, PTXGEN_DISK_CACHE="0").stdout.strip().splitlines()
    assert msg.startswith("nvJitLink could not be loaded: ") and version == "none"
    assert "; before that, the ctypes binding of nvJitLink failed (NvJitLinkNotFound" in msg
