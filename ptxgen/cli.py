"""`ptxgen` command line: `dump` kernels to .ptx/.cubin/.sass, `bench copy` variants."""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path


def load_kernels(spec: str):
    """Kernels defined in a Python file: `file.py` (all) or `file.py:name`."""
    from .builder.kernel import Kernel

    path, _, want = spec.partition(":")
    if not os.path.exists(path):
        raise SystemExit(f"ptxgen dump: no such file: {path}")
    mod_name = "_ptxgen_user_" + Path(path).stem
    spec_obj = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec_obj)
    sys.path.insert(0, str(Path(path).resolve().parent))
    try:
        sys.modules[mod_name] = mod
        spec_obj.loader.exec_module(mod)
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
            raise SystemExit(f"ptxgen dump: no kernel named {want!r} in {path}")
    if not kernels:
        raise SystemExit(f"ptxgen dump: {path} defines no @pg.kernel")
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


def cmd_dump(args) -> int:
    from .errors import PtxgenError

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    status = 0
    nvdisasm = find_nvdisasm() if args.sass else None
    if args.sass and nvdisasm is None:
        print("ptxgen dump: --sass needs nvdisasm, which is not installed; install it with "
              "`pip install nvidia-cuda-nvdisasm` (or a CUDA toolkit). Writing .cubin instead.",
              file=sys.stderr)
        status = 3
    for spec in args.files:
        for _attr, k in load_kernels(spec):
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
                p.write_text(text)
                line = f"{p}"
                if args.cubin or args.sass:
                    try:
                        res = k.compile(arch)
                    except PtxgenError as e:
                        print(f"{k.name} [{arch}]: {e}", file=sys.stderr)
                        status = status or 1
                        continue
                    c = out / f"{stem}{suffix}.cubin"
                    c.write_bytes(res.cubin)
                    line += (f"  {c.name}: {res.registers} registers, {res.spill_bytes} spill "
                             f"bytes, {res.shared_bytes} static smem bytes")
                    if nvdisasm:
                        s = out / f"{stem}{suffix}.sass"
                        r = subprocess.run([nvdisasm, "-c", str(c)], capture_output=True, text=True)
                        if r.returncode == 0:
                            s.write_text(r.stdout)
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
