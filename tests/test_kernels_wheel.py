"""The wheel ships ptxgen.kernels, py.typed and the LICENSE: installed into a fresh venv and
used from a folder outside the checkout, `from ptxgen.kernels import gemm, rmsnorm, softmax`
works on the CPU and their modules' kernels write PTX."""
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_the_kernels(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                        "--no-build-isolation", "-w", str(dist), "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (wheel,) = dist.glob("ptxgen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("__init__.py", "_checks.py", "_ops.py", "_torch.py", "gemm.py", "rmsnorm.py",
              "softmax.py"):
        assert f"ptxgen/kernels/{f}" in names, f
    assert "ptxgen/py.typed" in names
    lic = [n for n in names if n.endswith("LICENSE") and ".dist-info/" in n]
    assert lic and "Apache License" in zipfile.ZipFile(wheel).read(lic[0]).decode()

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    code = ("import ptxgen, ptxgen.kernels as K\n"
            "from ptxgen.kernels import gemm, rmsnorm, softmax\n"
            "import importlib\n"
            "for m in ('gemm', 'rmsnorm', 'softmax'):\n"
            "    mod = importlib.import_module('ptxgen.kernels.' + m)\n"
            "    for k in mod.KERNELS:\n"
            "        assert '.entry ' + k.name + '(' in k.ptx('sm_90a')\n"
            "print(ptxgen.__file__)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(py), "-c", code], cwd=work, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert str(env_dir) in r.stdout, r.stdout       # the wheel's package, not the checkout
    r = subprocess.run([str(env_dir / "bin" / "ptxgen"), "dump", "ptxgen.kernels.rmsnorm",
                        "-o", "out"], cwd=work, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert (work / "out" / "rmsnorm_bfloat16_8192_t512.ptx").exists()
