"""The wheel ships the jinja templates: build it, install it into a fresh venv, dump a kernel
from a folder outside the checkout."""
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]



def test_wheel_installs_and_dumps(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                        "--no-build-isolation", "-w", str(dist), "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    wheels = list(dist.glob("ptxgen-*.whl"))
    assert len(wheels) == 1
    import zipfile

    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "ptxgen/templates/isa.ptx.j2" in names and "ptxgen/templates/module.ptx.j2" in names
    assert "ptxgen/target/forms_table.py" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheels[0])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "k.py").write_text(
        "import ptxgen as pg\n"
        "@pg.kernel(grid=(1,), block=(32,))\n"
        "def hello(A: pg.Tensor((32,), 'float32')):\n"
        "    tx = pg.thread_id(32)\n"
        "    A[tx] = A[tx] + 1.0\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(env_dir / "bin" / "ptxgen"), "dump", "k.py", "--arch", "sm_90a",
                        "-o", "out"], cwd=work, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    ptx = (work / "out" / "hello.ptx").read_text()
    assert ".target sm_90a" in ptx and "add.rn.f32" in ptx
    r = subprocess.run([str(py), "-c", "import ptxgen, sys; print(ptxgen.__file__)"], cwd=work,
                       capture_output=True, text=True, env=env)
    assert str(env_dir) in r.stdout, r.stdout   # the wheel, not the checkout
