"""A stand-in libcuda.so.1 built from tests/mockcuda/mock_libcuda.c, for CPU tests of the
ctypes driver binding (ptxgen/runtime/libcuda.py) through real ctypes calls, and of
cuda-bindings against the same library (it resolves entry points by cuGetProcAddress_v2).

    lib_dir = build()          # a folder holding libcuda.so.1, or None (no C compiler)
    run_child(code, lib_dir)   # a child process whose loader finds the mock first

``Mock`` reads what the last launch saw (``mock_*`` functions of the library).
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tests", "mockcuda", "mock_libcuda.c")
_built: list = []


def build() -> str | None:
    """Compile the mock once per process into a temporary folder; None where that cannot be
    done (not Linux, no C compiler, or it fails)."""
    if not _built:
        path = None
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if cc and sys.platform.startswith("linux"):
            d = tempfile.mkdtemp(prefix="ptxgen-mockcuda-")
            out = os.path.join(d, "libcuda.so.1")
            r = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", out, SRC, "-ldl"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                path = d
        _built.append(path)
    return _built[0]


class LaunchRecord(ctypes.Structure):
    """mock_launch_t of mock_libcuda.c."""
    _fields_ = [("f", ctypes.c_void_p), ("grid", ctypes.c_uint * 3),
                ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("params", ctypes.c_void_p),
                ("extra", ctypes.c_void_p), ("ex", ctypes.c_int), ("num_attrs", ctypes.c_int),
                ("attr_id", ctypes.c_int), ("cluster", ctypes.c_uint * 3),
                ("blob", ctypes.c_ubyte * 1024), ("blob_len", ctypes.c_int)]


class Mock:
    """The mock's inspection functions, through a handle of the loaded library."""

    def __init__(self, lib):
        self.lib = lib
        assert lib.mock_sizeof_launch() == ctypes.sizeof(LaunchRecord)

    def set_param_sizes(self, sizes) -> None:
        self.lib.mock_set_param_sizes(len(sizes), (ctypes.c_int * max(1, len(sizes)))(*sizes))

    def set_launch_result(self, r: int) -> None:
        self.lib.mock_set_launch_result(r)

    def launches(self) -> int:
        return self.lib.mock_launch_count()

    def last(self) -> dict:
        r = LaunchRecord()
        self.lib.mock_last_launch(ctypes.byref(r))
        return {"f": r.f or 0, "grid": list(r.grid), "block": list(r.block), "smem": r.smem,
                "stream": r.stream or 0, "params": r.params or 0, "extra": r.extra or 0,
                "ex": r.ex, "num_attrs": r.num_attrs, "attr_id": r.attr_id,
                "cluster": list(r.cluster), "blob": bytes(r.blob[:r.blob_len])}


def child_env(lib_dir: str, **extra) -> dict:
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(
        [lib_dir] + ([os.environ["LD_LIBRARY_PATH"]] if os.environ.get("LD_LIBRARY_PATH")
                     else [])),
        PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")] +
                                   ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                    else [])))
    env.pop("PTXGEN_DRIVER", None)
    env.update(extra)
    return env


def run_child(code: str, lib_dir: str, cwd=None, args=(), **env) -> dict:
    """Run ``code`` in a child that loads the mock as libcuda.so.1; its last stdout line is
    JSON, returned."""
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env=child_env(lib_dir, **env), cwd=cwd or ROOT)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
