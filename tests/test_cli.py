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


def test_version(capsys):
    from ptxgen.version import __version__
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"ptxgen {__version__}\n"


def test_dump_unknown_kernel_lists_the_kernels_found(tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["dump", f"{ROOT / 'examples' / 'add_one.py'}:nope", "-o", str(tmp_path)])
    assert str(e.value).endswith(
        "add_one.py; it defines add_one_col_major, add_one_row_major, add_one_row_stride_16, "
        "add_one_shifted")


def test_dump_a_module_path_writes_its_default_kernels(tmp_path):
    assert main(["dump", "ptxgen.kernels.softmax", "-o", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "softmax_bfloat16_1000_t64.ptx", "softmax_float32_8192_t512.ptx",
        "softmax_online_float16_50000_t1024.ptx"]
    assert ".entry softmax_float32_8192_t512(" in \
        (tmp_path / "softmax_float32_8192_t512.ptx").read_text()


@pytest.mark.parametrize("module, names", [
    ("gemm_small_m", ["gemm_gemv_bfloat16_m1_u8_w4.ptx",
                      "gemm_small_m_bfloat16_n16_s11.ptx",
                      "gemm_small_m_bfloat16_n16_s11_splitk.ptx",
                      "gemm_small_m_reduce_bfloat16_x4.ptx"]),
    ("gemm_blockscaled", ["gemm_blockscaled_fp8_s4_ring_n192.ptx"]),
])
def test_dump_a_module_of_factories_writes_its_dump_defaults(tmp_path, module, names):
    """A module with no module-level kernel (all made by factories): its dump() defaults."""
    assert main(["dump", f"ptxgen.kernels.{module}", "-o", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_dump_factory_arguments(tmp_path):
    assert main(["dump", "ptxgen.kernels.rmsnorm", "--kernel-args",
                 "n=4096,dtype=float32,weighted=False", "-o", str(tmp_path / "a")]) == 0
    assert [p.name for p in (tmp_path / "a").iterdir()] == [
        "rmsnorm_float32_4096_t256_noweight.ptx"]
    assert main(["dump", "ptxgen.kernels.softmax:make", "--kernel-args", "n=77,dtype=bfloat16",
                 "-o", str(tmp_path / "b")]) == 0
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["softmax_bfloat16_77_t32.ptx"]


@pytest.mark.parametrize("argv, msg", [
    (["ptxgen.kernels.nope"], "ptxgen dump: no such file or module: ptxgen.kernels.nope"),
    ([str(ROOT / "examples" / "add_one.py"), "--kernel-args", "n=1"],
     f"ptxgen dump: --kernel-args needs a factory (`{ROOT / 'examples' / 'add_one.py'}:"
     f"<factory>`) or a dump() hook in {ROOT / 'examples' / 'add_one.py'}, which has none"),
    (["ptxgen.kernels.softmax", "--kernel-args", "4096"],
     "ptxgen dump: --kernel-args takes name=value pairs separated by commas, got '4096'"),
    (["ptxgen.kernels.softmax", "--kernel-args", "size=3"],
     "ptxgen dump: --kernel-args size=...: ptxgen.kernels.softmax: dump() takes n, dtype, "
     "per_thread"),
    (["ptxgen.kernels.softmax", "--kernel-args", "n=abc"],
     "ptxgen dump: --kernel-args n='abc': ptxgen.kernels.softmax: dump()'s n is an int"),
    (["ptxgen.kernels.gemm", "--kernel-args", "BN=True"],
     "ptxgen dump: --kernel-args BN=True: ptxgen.kernels.gemm: dump()'s BN is an int"),
    (["ptxgen.kernels.gemm", "--kernel-args", "scaled=1"],
     "ptxgen dump: --kernel-args scaled=1: ptxgen.kernels.gemm: dump()'s scaled is True or "
     "False"),
    (["ptxgen.kernels.attention", "--kernel-args", "D=80"],
     "ptxgen dump: ptxgen.kernels.attention: dump() raised ValueError: make_attention: D = 80, "
     "dtype = bfloat16; the kernels take D in 64, 128, 192, 256 and dtype in bfloat16, float16"),
    (["ptxgen.kernels.softmax", "--kernel-args", "n=0"],
     "ptxgen dump: ptxgen.kernels.softmax: dump(): softmax: n = 0: a positive int (n elements "
     "a row, about per_thread of them a thread)"),
    (["ptxgen.kernels.rmsnorm", "--kernel-args", "dtype=int8"],
     "ptxgen dump: ptxgen.kernels.rmsnorm: dump(): rmsnorm.make: dtype "
     "'int8'; it takes float32, bfloat16, float16"),
    (["ptxgen.kernels.gemm", "--kernel-args", "STAGES=0"],
     "ptxgen dump: ptxgen.kernels.gemm: dump() raised ValueError: make_gemm: STAGES = 0: 1 to 8 "
     "ring stages"),
    (["ptxgen.kernels.softmax:make", "--kernel-args", "rows=3"],
     "ptxgen dump: --kernel-args rows=...: make() takes n, dtype, per_thread"),
])
def test_dump_module_and_argument_errors(tmp_path, argv, msg):
    with pytest.raises(SystemExit) as e:
        main(["dump", *argv, "-o", str(tmp_path)])
    assert str(e.value) == msg
