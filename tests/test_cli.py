"""`ptxgen dump`: PTX per kernel, --cubin via nvJitLink, --sass via nvdisasm or a clear message."""
import subprocess
import sys
from pathlib import Path

import pytest

from ptxgen.cli import find_nvdisasm, main

ROOT = Path(__file__).resolve().parents[1]


def test_dump_all_kernels_of_a_file(tmp_path, capsys):
    rc = main(["dump", str(ROOT / "examples" / "add_one.py"), "--arch", "sm_80", "--arch",
               "sm_90a", "-o", str(tmp_path), "--cubin"])
    assert rc == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "add_one_col_major.sm_80.ptx" in names and "add_one_col_major.sm_90a.cubin" in names
    assert ".target sm_80" in (tmp_path / "add_one_col_major.sm_80.ptx").read_text()
    assert "registers" in capsys.readouterr().out


def test_dump_one_kernel_and_arch_error(tmp_path, capsys):
    rc = main(["dump", f"{ROOT / 'examples' / 'pool_sm100.py'}", "--arch", "sm_90a",
               "-o", str(tmp_path)])
    assert rc == 1
    assert "needs one of sm_100a" in capsys.readouterr().err
    rc = main(["dump", f"{ROOT / 'examples' / 'add_one.py'}:add_one_shifted", "-o", str(tmp_path)])
    assert rc == 0 and [p.name for p in tmp_path.iterdir()] == ["add_one_shifted.ptx"]


def test_dump_unknown_kernel(tmp_path):
    with pytest.raises(SystemExit, match="no kernel named 'nope'"):
        main(["dump", f"{ROOT / 'examples' / 'add_one.py'}:nope", "-o", str(tmp_path)])


def test_sass(tmp_path, capsys, monkeypatch):
    if find_nvdisasm() is None:
        rc = main(["dump", str(ROOT / "examples" / "smem_demo.py"), "-o", str(tmp_path), "--sass"])
        assert rc == 3
        assert "--sass needs nvdisasm, which is not installed" in capsys.readouterr().err
        return
    rc = main(["dump", str(ROOT / "examples" / "smem_demo.py"), "-o", str(tmp_path), "--sass"])
    assert rc == 0
    assert "BAR.SYNC" in (tmp_path / "smem_demo.sass").read_text()
    monkeypatch.setattr("ptxgen.cli.find_nvdisasm", lambda: None)
    rc = main(["dump", str(ROOT / "examples" / "smem_demo.py"), "-o", str(tmp_path / "b"), "--sass"])
    assert rc == 3 and "--sass needs nvdisasm" in capsys.readouterr().err


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "ptxgen.cli", "dump", "--help"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "--arch" in r.stdout
