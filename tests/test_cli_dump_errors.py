"""`ptxgen dump` failures are one line (file, line, what) and a non-zero
exit, never a traceback; two kernels writing one file are an error; an unwritable
PTXGEN_DUMP_DIR is a warning."""
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ptxgen.cli import main

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ("import ptxgen as pg\n"
          "@pg.kernel(grid=(1,), block=(32,))\n"
          "def k(A: pg.Tensor((32,), 'float32')):\n"
          "    tx = pg.thread_id(32)\n"
          "    A[tx] = A[tx] + 1.0\n")


def _cli(tmp_path, *args):
    """Run the console entry point in a subprocess: (exit status, stdout, stderr)."""
    env = {"PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "ptxgen", "dump", *args], cwd=tmp_path,
                       capture_output=True, text=True, env=env)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize("name,text,line", [
    ("syn.py", "import ptxgen as pg\ndef f(:\n    pass\n",
     "ptxgen dump: syn.py:2: SyntaxError: invalid syntax"),
    ("imp.py", "import ptxgen as pg\nx = 1\nraise ValueError('boom')\n",
     "ptxgen dump: imp.py:3: importing it raised ValueError: boom"),
    ("mod.py", "import ptxgen as pg\nimport no_such_module_here\n",
     "ptxgen dump: mod.py:2: importing it raised ModuleNotFoundError: No module named "
     "'no_such_module_here'"),
    ("geo.py", "import ptxgen as pg\n@pg.kernel(grid=(0,), block=(32,))\n"
               "def k(A: pg.Tensor((32,), 'float32')):\n    pass\n",
     "ptxgen dump: geo.py:2: gridDim.x must be a positive int, got 0"),
])
def test_bad_files(tmp_path, name, text, line):
    (tmp_path / name).write_text(text)
    rc, out, err = _cli(tmp_path, name, "-o", "out")
    assert rc == 1 and out == "" and err == line + "\n"


def test_directory_and_missing_file(tmp_path):
    (tmp_path / "d").mkdir()
    rc, _, err = _cli(tmp_path, "d")
    assert rc == 1 and err == ("ptxgen dump: d is a directory; give a Python file (file.py or "
                               "file.py:kernel)\n")
    rc, _, err = _cli(tmp_path, "nope.py")
    assert rc == 1 and err == "ptxgen dump: no such file: nope.py\n"


def test_unwritable_output_folder(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "afile").write_text("")
    rc, _, err = _cli(tmp_path, "k.py", "-o", "afile")
    assert rc == 1 and err == "ptxgen dump: output folder afile is a file\n"
    rc, _, err = _cli(tmp_path, "k.py", "-o", "afile/sub")
    assert rc == 1 and err == ("ptxgen dump: cannot create the output folder afile/sub: Not a "
                               "directory\n")


def test_two_kernels_one_output_file(tmp_path):
    (tmp_path / "a.py").write_text(KERNEL)
    (tmp_path / "b.py").write_text(KERNEL)
    rc, _, err = _cli(tmp_path, "a.py", "b.py", "-o", "out")
    assert rc == 1 and err == (
        "ptxgen dump: kernels 'k' (a.py) and 'k' (b.py) are both named 'k' and would both write "
        "out/k.ptx; give one pg.kernel(name=...), pick one with file.py:<name>, or dump them to "
        "different folders\n")
    assert not (tmp_path / "out" / "k.ptx").exists()
    with pytest.raises(SystemExit, match="are both named 'phase_loop'"):   # one file, twice
        main(["dump", str(ROOT / "examples" / "phase_loop.py"), "-o", str(tmp_path / "p")])
    assert main(["dump", f"{ROOT / 'examples' / 'phase_loop.py'}:phase_scalar", "-o",
                 str(tmp_path / "p")]) == 0


def test_unwritable_dump_dir_warns(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("PTXGEN_DUMP_DIR", str(tmp_path / "afile" / "sub"))
    from ptxgen.runtime import compile as rc

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert rc.dump("k", ".ptx", "text") is None
    assert [str(x.message) for x in w] == [
        f"PTXGEN_DUMP_DIR={tmp_path / 'afile' / 'sub'}: cannot write "
        f"{tmp_path / 'afile' / 'sub' / 'k.ptx'} (Not a directory); the kernel is compiled "
        f"without the dump"]
