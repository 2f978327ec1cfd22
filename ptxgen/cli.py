"""`ptxgen` command line: `dump` kernels to .ptx/.cubin/.sass, `bench copy` variants."""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def _fail(msg: str) -> SystemExit:
    """The one line the CLI prints for a failure (exit status 1, no traceback)."""
    return SystemExit("ptxgen dump: " + " ".join(str(msg).split("\n")))


def _where(e: BaseException, path: str) -> str:
    """file:line of an exception raised while importing `path`: the innermost frame in that
    file, else the innermost frame outside ptxgen and the standard library."""
    from .builder.context import is_library

    target = os.path.realpath(path)
    mine = other = None
    tb = e.__traceback__
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if os.path.realpath(fn) == target:
            mine = f"{path}:{tb.tb_lineno}"
        elif not is_library(fn):
            other = f"{fn}:{tb.tb_lineno}"
        tb = tb.tb_next
    return mine or other or path


def load_kernels(spec: str):
    """Kernels defined in a Python file: `file.py` (all) or `file.py:name`."""
    from .builder.kernel import Kernel
    from .errors import PtxgenError

    path, _, want = spec.partition(":")
    if not os.path.exists(path):
        raise _fail(f"no such file: {path}")
    if os.path.isdir(path):
        raise _fail(f"{path} is a directory; give a Python file (file.py or file.py:kernel)")
    mod_name = "_ptxgen_user_" + Path(path).stem
    sys.path.insert(0, str(Path(path).resolve().parent))
    try:
        spec_obj = importlib.util.spec_from_file_location(mod_name, path)
        if spec_obj is None or spec_obj.loader is None:
            raise _fail(f"{path} is not a Python file")
        mod = importlib.util.module_from_spec(spec_obj)
        sys.modules[mod_name] = mod
        spec_obj.loader.exec_module(mod)
    except SyntaxError as e:
        sys.modules.pop(mod_name, None)
        where = path if not e.filename or os.path.realpath(e.filename) == \
            os.path.realpath(path) else e.filename
        raise _fail(f"{where}:{e.lineno}: SyntaxError: {e.msg}") from None
    except PtxgenError as e:   # a kernel that fails to trace: the message says where
        sys.modules.pop(mod_name, None)
        raise _fail(f"{e}" if re.match(r"^[^\s:]+\.py:\d+: ", str(e)) else
                    f"{_where(e, path)}: {e}") from None
    except (Exception, SystemExit) as e:
        sys.modules.pop(mod_name, None)
        if isinstance(e, SystemExit) and str(e).startswith("ptxgen dump: "):
            raise
        raise _fail(f"{_where(e, path)}: importing it raised {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)
    found: dict[int, tuple[str, Kernel]] = {}
    for attr, v in vars(mod).items():
        if isinstance(v, Kernel):
            found.setdefault(id(v), (attr, v))
        elif isinstance(v, (list, tuple)):
            for k in v:
                if isinstance(k, Kernel):
                    found.setdefault(id(k), (k.name, k))
    kernels = list(found.values())
    if want:
        kernels = [(a, k) for a, k in kernels if want in (a, k.name)]
        if not kernels:
            raise _fail(f"no kernel named {want!r} in {path}")
    if not kernels:
        raise _fail(f"{path} defines no @pg.kernel")
    return kernels


def find_nvdisasm() -> str | None:
    """nvdisasm on PATH, or the one the nvidia-cuda-nvdisasm wheel ships (nvidia/cu*/bin)."""
    exe = shutil.which("nvdisasm")
    if exe:
        return exe
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        for base in getattr(nvidia, "__path__", []):
            for cand in sorted(Path(base).glob("*/bin/nvdisasm")):
                if os.access(cand, os.X_OK):
                    return str(cand)
    except ImportError:
        pass
    return None


def _plan(args, out: Path) -> list:
    """(spec, kernel) of every kernel to dump, after checking that no two of them would
    write the same file (kernels of one name from different files, or from one file)."""
    jobs, seen = [], {}
    for spec in args.files:
        for attr, k in load_kernels(spec):
            prev = seen.get(k.name)
            if prev is not None:
                raise _fail(f"kernels '{prev[1]}' ({prev[0]}) and '{attr}' ({spec.partition(':')[0]}) "
                            f"are both named '{k.name}' and would both write "
                            f"{out / (k.name + '.ptx')}; give one pg.kernel(name=...), pick one "
                            f"with file.py:<name>, or dump them to different folders")
            seen[k.name] = (spec.partition(":")[0], attr)
            jobs.append((spec, k))
    return jobs


def _write(path: Path, data) -> None:
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    except OSError as e:
        raise _fail(f"cannot write {path}: {e.strerror or e}") from None


def cmd_dump(args) -> int:
    from .errors import PtxgenError

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise _fail(f"output folder {out} is a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _fail(f"cannot create the output folder {out}: {e.strerror or e}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise _fail(f"cannot write into the output folder {out}: permission denied")
    jobs = _plan(args, out)
    status = 0
    nvdisasm = find_nvdisasm() if args.sass else None
    if args.sass and nvdisasm is None:
        print("ptxgen dump: --sass needs nvdisasm, which is not installed; install it with "
              "`pip install nvidia-cuda-nvdisasm` (or a CUDA toolkit). Writing .cubin instead.",
              file=sys.stderr)
        status = 3
    for _spec, k in jobs:
        for arch in args.arch:
            stem = k.name
            suffix = f".{arch}" if len(args.arch) > 1 else ""
            try:
                text = k.ptx(arch)
            except PtxgenError as e:
                print(f"{k.name} [{arch}]: {e}", file=sys.stderr)
                status = status or 1
                continue
            p = out / f"{stem}{suffix}.ptx"
            _write(p, text)
            line = f"{p}"
            if args.cubin or args.sass:
                try:
                    res = k.compile(arch)
                except PtxgenError as e:
                    print(f"{k.name} [{arch}]: {e}", file=sys.stderr)
                    status = status or 1
                    continue
                c = out / f"{stem}{suffix}.cubin"
                _write(c, res.cubin)
                line += (f"  {c.name}: {res.registers} registers, {res.spill_bytes} spill "
                         f"bytes, {res.shared_bytes} static smem bytes")
                if nvdisasm:
                    s = out / f"{stem}{suffix}.sass"
                    r = subprocess.run([nvdisasm, "-c", str(c)], capture_output=True, text=True)
                    if r.returncode == 0:
                        _write(s, r.stdout)
                        line += f"  {s.name}"
                    else:
                        print(f"nvdisasm failed on {c}: {r.stderr.strip()}", file=sys.stderr)
            res_summary = {a: b for a, b in k.resources.items() if a != "memory" and b}
            if res_summary:
                line += "  resources: " + ", ".join(f"{a}={b}" for a, b in res_summary.items())
            print(line)
    return status


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        from .bench.cli import main as bench_main

        return bench_main(argv[1:])
    ap = argparse.ArgumentParser(prog="ptxgen", description="tile-level kernels -> PTX")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="write each kernel's PTX (and cubin/SASS) to a folder")
    d.add_argument("files", nargs="+", help="file.py or file.py:kernel")
    d.add_argument("--arch", action="append", default=None,
                   help="target (repeatable), e.g. sm_80, sm_90a, sm_100a; default sm_90a")
    d.add_argument("-o", "--out", default="out", help="output folder (default out/)")
    d.add_argument("--cubin", action="store_true", help="also assemble with nvJitLink")
    d.add_argument("--sass", action="store_true", help="also disassemble with nvdisasm")
    sub.add_parser("bench", help="benchmarks: `ptxgen bench copy --help`")
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        args.arch = args.arch or ["sm_90a"]
        return cmd_dump(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
