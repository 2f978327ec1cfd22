"""The driver binding (cuda-bindings' ``cuda.bindings.driver``): loaded by the first driver
call and not before, a clean answer without a driver, and a test stand-in (support/fakecuda.py)
whose calls are the binding's.  CPU only."""
import inspect
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ptxgen.errors import CudaError
from ptxgen.runtime import driver

from support.fakecuda import FakeDriver

cb = pytest.importorskip("cuda.bindings.driver")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(code: str) -> list:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()


def test_the_driver_binding_loads_with_the_first_driver_call():
    code = ("import sys\n"
            "cuda = lambda: sorted(m for m in sys.modules if m.startswith('cuda.bindings.'))\n"
            "import ptxgen, ptxgen.runtime as rt\n"
            "print(cuda())\n"
            "rt.has_gpu()\n"
            "print(cuda())\n")
    before, after = run(code)
    assert before == "[]"
    assert "'cuda.bindings.driver'" in after and "nvjitlink" not in after


def _fresh(monkeypatch, module):
    monkeypatch.setattr(driver, "_drv", None)
    monkeypatch.setattr(driver, "_init_error", None)
    monkeypatch.setattr(driver, "_count", [])
    monkeypatch.setattr(driver, "_driver_version", None)
    monkeypatch.setattr(driver, "_module", lambda: module)


class _NoLibrary(RuntimeError):
    """What cuda.pathfinder raises where there is no libcuda."""


def test_no_driver_library_is_a_clean_answer(monkeypatch):
    def missing(*args):
        raise _NoLibrary('"cuda" is an NVIDIA driver library and can only be found via system '
                         'search')
    _fresh(monkeypatch, SimpleNamespace(cuInit=missing, cuDriverGetVersion=missing))
    assert driver.has_gpu() is False and driver.device_count() == 0
    assert driver.driver_version() == "none" and driver.loaded_driver_version() is None
    with pytest.raises(CudaError) as ei:
        driver.drv()
    assert str(ei.value) == ("no usable CUDA driver: the CUDA driver could not be loaded "
                             "(_NoLibrary: \"cuda\" is an NVIDIA driver library and can only be "
                             "found via system search)")


def test_a_failed_cuInit_is_named(monkeypatch):
    _fresh(monkeypatch, SimpleNamespace(
        cuInit=lambda flags: (100,), cuDriverGetVersion=lambda: (0, 13000),
        cuGetErrorName=lambda e: (0, b"CUDA_ERROR_NO_DEVICE")))
    assert driver.has_gpu() is False and driver.driver_version() == "13000"
    with pytest.raises(CudaError, match=r"^no usable CUDA driver: cuInit failed: "
                                        r"CUDA_ERROR_NO_DEVICE$"):
        driver.drv()


def test_a_machine_without_libcuda_has_no_gpu_and_still_compiles(tmp_path):
    if driver.has_gpu():
        pytest.skip("this machine has a CUDA driver")
    out = run("import ptxgen.runtime as rt, ptxgen as pg\n"
              "from ptxgen.runtime import driver\n"
              "print(rt.has_gpu(), rt.driver_version())\n"
              "print(driver._init_error)\n"
              "@pg.kernel(grid=(1,), block=(32,))\n"
              "def k(a: pg.Tensor((32,), 'float32')):\n"
              "    a[pg.thread_id(32)] = 1.0\n"
              "print(k.compile('sm_90a').cubin[:4])\n")
    assert out[0] == "False none"
    assert out[1].startswith("the CUDA driver could not be loaded (DynamicLibNotFoundError: ")
    assert out[2] == r"b'\x7fELF'"


def _arity(fn) -> int:
    """Parameters of a cuda-bindings function, from the signature its docstring starts with."""
    head = fn.__doc__.split("\n", 1)[0]
    inner = head[head.index("(") + 1:head.rindex(")")].strip()
    return 0 if not inner else inner.count(",") + 1


def test_the_fake_driver_calls_are_cuda_bindings_calls():
    """Each cu* function of the stand-in exists in cuda.bindings.driver with as many
    parameters, so the CPU tests exercise the calls a GPU run makes."""
    names = [n for n, f in vars(FakeDriver).items() if n.startswith("cu") and inspect.isfunction(f)]
    assert len(names) >= 20
    for name in names:
        real = getattr(cb, name)
        fake = inspect.signature(getattr(FakeDriver(), name))
        assert len(fake.parameters) == _arity(real), name
    for enum in ("CUtensorMapDataType", "CUlaunchConfig", "CUlaunchAttributeID", "CUstream",
                 "cuuint64_t"):
        assert getattr(FakeDriver, enum) is getattr(cb, enum)
