"""nvJitLink through cuda-bindings (``cuda.bindings.nvjitlink``): what a first compile loads
(that binding, never the driver's), the library's version and stamp (the disk cache's record of
the tools), a link in a child process (PTXGEN_JIT_ISOLATE=1) and the error without nvJitLink.
CPU only."""
import json
import os
import subprocess
import sys

import pytest

from ptxgen.runtime import compile as comp

nj = pytest.importorskip("cuda.bindings.nvjitlink")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
before = sorted(m for m in sys.modules if m.split(".")[0] == "cuda")
""" + AFFINE + r"""
from ptxgen.runtime import compile as comp, stats
r = affine.compile("sm_90a")
print(json.dumps({"before": before,
                  "cuda": sorted(m for m in sys.modules if m.split(".")[0] == "cuda"),
                  "jit": stats()["jit_compiles"], "cubin": r.cubin.hex(),
                  "stamp": comp._nvjitlink_stamp(), "version": comp.nvjitlink_version()}))
"""


def run(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True, exist_ok=True)
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
             PTXGEN_CACHE_DIR=str(tmp_path / "cache"), **env)
    for k in ("PTXGEN_DISK_CACHE", "PTXGEN_JIT_ISOLATE"):
        if k not in env:
            e.pop(k, None)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    return p


def first_compile(tmp_path, **env) -> dict:
    return json.loads(run(FIRST, tmp_path, **env).stdout.strip().splitlines()[-1])


def affine_cubin() -> str:
    """FIRST's kernel, linked in this process (hex)."""
    env: dict = {}
    exec(AFFINE, env)
    b = env["affine"].built("sm_90a")
    ok, cubin, info, err, status = comp._nvjitlink(b.text.encode(), "sm_90a", (), b.entry)
    assert ok and cubin[:4] == b"\x7fELF" and "Used " in info, (err, status)
    return cubin.hex()


def test_a_first_compile_loads_cuda_bindings_nvjitlink_and_not_the_driver(tmp_path):
    out = first_compile(tmp_path)
    assert out["before"] == [] and out["jit"] == 1 and out["cubin"] == affine_cubin()
    assert "cuda.bindings.nvjitlink" in out["cuda"]
    assert "cuda.bindings.driver" not in out["cuda"]       # an offline compile needs no driver


def test_version_and_stamp_are_the_librarys():
    from cuda.pathfinder import load_nvidia_dynamic_lib

    assert comp.nvjitlink_version() == "%d.%d" % nj.version()
    path = load_nvidia_dynamic_lib("nvJitLink").abs_path
    st = os.stat(path)
    assert comp._nvjitlink_stamp() == f"{path}|{st.st_size}|{st.st_mtime_ns}"


def test_an_isolated_link_makes_the_same_cubin(tmp_path):
    """PTXGEN_JIT_ISOLATE=1: the link runs in a child (compile._child), with the same result."""
    out = first_compile(tmp_path, PTXGEN_JIT_ISOLATE="1")
    assert out["jit"] == 1 and out["cubin"] == affine_cubin()


def test_a_link_error_keeps_nvjitlinks_status_and_log():
    from test_runtime import PTX_SM80

    bad = PTX_SM80.replace("add.f32 %f1, %f1, 0f3F800000;", "add.f32 %f1, %f9, %bogus;")
    assert bad != PTX_SM80
    ok, cubin, info, err, status = comp._nvjitlink(bad.encode(), "sm_80", (), "bad")
    assert not ok and cubin == b"" and status == "ERROR_PTX_COMPILE (4)"
    assert "ptxas" in err and "bogus" in err


def test_no_nvjitlink_is_an_import_error_that_names_the_fix(tmp_path):
    code = ("import sys\nsys.modules['cuda.bindings.nvjitlink'] = None\n"
            "from ptxgen.runtime import compile as comp, compile_ptx\n"
            "try:\n    compile_ptx('x', 'sm_80')\nexcept ImportError as e:\n    print(e)\n"
            "print(comp.nvjitlink_version())")
    msg, version = run(code, tmp_path, PTXGEN_DISK_CACHE="0").stdout.strip().splitlines()
    assert msg.startswith("nvJitLink could not be loaded (import of cuda.bindings.nvjitlink "
                          "halted; None in sys.modules); ptxgen compiles through cuda-bindings: "
                          "pip install cuda-bindings nvidia-nvjitlink")
    assert version == "none"
