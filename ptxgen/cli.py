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
    from .errors import is_library

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


_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def parse_kernel_args(text: str | None) -> dict:
    """`--kernel-args n=4096,dtype=bfloat16` -> {"n": 4096, "dtype": "bfloat16"}: each value
    a Python literal where it reads as one, else the text."""
    import ast

    out: dict = {}
    for item in filter(None, (text or "").split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise _fail(f"--kernel-args takes name=value pairs separated by commas, got {item!r}")
        try:
            out[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            out[key.strip()] = value.strip()
    return out


def _import_file(path: str):
    """The module of a Python file, imported under a private name (its folder on sys.path
    while it runs); every failure is the CLI's one line, at the file's line."""
    from .errors import PtxgenError

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
    return mod


def _import_module(name: str):
    """An installed module by its dotted name (`ptxgen.kernels.softmax`)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and name.startswith(e.name):
            raise _fail(f"no such file or module: {name}") from None
        raise _fail(f"{name}: importing it raised ModuleNotFoundError: {e}") from None
    except Exception as e:   # noqa: BLE001  (one line, whatever the module raised)
        raise _fail(f"{name}: importing it raised {type(e).__name__}: {e}") from None


def _as_kernels(value, what: str) -> list:
    """A Kernel or a list/tuple of them (what a factory or a dump() hook returns)."""
    from .builder.kernel import Kernel

    items = value if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(k, Kernel) for k in items):
        raise _fail(f"{what} returned {type(value).__name__}, not a @pg.kernel or a list of "
                    f"them")
    return [(k.name, k) for k in items]


# annotation -> (what a value of it is, whether a --kernel-args literal is one); a str
# annotation (from __future__ annotations) is looked up by its name
_SCALARS = {int: ("an int", lambda v: isinstance(v, int) and not isinstance(v, bool)),
            float: ("a number", lambda v: isinstance(v, (int, float)) and
                    not isinstance(v, bool)),
            bool: ("True or False", lambda v: isinstance(v, bool)),
            str: ("a string", lambda v: isinstance(v, str))}
_SCALARS.update({t.__name__: rule for t, rule in list(_SCALARS.items())})


def _check_kernel_args(fn, kwargs: dict, what: str) -> None:
    """--kernel-args against the factory's signature: unknown names, and values that are not
    of a parameter's annotated scalar type (int, float, bool, str), refused with the names
    it takes, before the factory fails somewhere inside on a string."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    for key, value in kwargs.items():
        p = params.get(key)
        if p is None or p.kind is p.POSITIONAL_ONLY:
            raise _fail(f"--kernel-args {key}=...: {what} takes "
                        f"{', '.join(params) or 'no arguments'}")
        rule = _SCALARS.get(p.annotation)
        if rule is not None and not rule[1](value):
            raise _fail(f"--kernel-args {key}={value!r}: {what}'s {key} is {rule[0]}")


def _call(fn, kwargs: dict, what: str):
    from .errors import PtxgenError

    _check_kernel_args(fn, kwargs, what)
    try:
        return fn(**kwargs)
    except PtxgenError as e:
        raise _fail(f"{what}: {e}") from None
    except Exception as e:   # noqa: BLE001  (a factory's own refusal, e.g. a bad size)
        raise _fail(f"{what} raised {type(e).__name__}: {e}") from None


def load_kernels(spec: str, kernel_args: dict | None = None):
    """Kernels of a Python file or an importable module: `file.py` / `pkg.module` (all: its
    `dump(**kernel_args)` hook when it has one and arguments are given, else its KERNELS
    list and module-level kernels, else, with none of those, its `dump()`), or `...:name`
    (that kernel, or the factory `name` called with the kernel arguments)."""
    from .builder.kernel import Kernel

    path, _, want = spec.partition(":")
    if not path.endswith(".py") and not os.path.exists(path) and _MODULE.match(path):
        mod, where = _import_module(path), path
    else:
        mod, where = _import_file(path), path
    if want and callable(getattr(mod, want, None)) and \
            not isinstance(getattr(mod, want), Kernel):
        return _as_kernels(_call(getattr(mod, want), kernel_args or {}, f"{want}()"),
                           f"{want}()")
    hook = getattr(mod, "dump", None)
    if kernel_args:
        if not callable(hook):
            raise _fail(f"--kernel-args needs a factory (`{where}:<factory>`) or a dump() "
                        f"hook in {where}, which has none")
        kernels = _as_kernels(_call(hook, kernel_args, f"{where}: dump()"), "dump()")
    else:
        found: dict[int, tuple[str, Kernel]] = {}
        for attr, v in vars(mod).items():
            if isinstance(v, Kernel):
                found.setdefault(id(v), (attr, v))
            elif isinstance(v, (list, tuple)):
                for k in v:
                    if isinstance(k, Kernel):
                        found.setdefault(id(k), (k.name, k))
        kernels = list(found.values())
        if not kernels and callable(hook):   # every kernel made by a factory: dump()'s defaults
            kernels = _as_kernels(_call(hook, {}, f"{where}: dump()"), "dump()")
    if want:
        chosen = [(a, k) for a, k in kernels if want in (a, k.name)]
        if not chosen:
            names = sorted({k.name for _, k in kernels})
            raise _fail(f"no kernel named {want!r} in {where}; " +
                        (f"it defines {', '.join(names)}" if names else "it defines none"))
        kernels = chosen
    if not kernels:
        raise _fail(f"{where} defines no @pg.kernel")
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
    kernel_args = parse_kernel_args(getattr(args, "kernel_args", None))
    for spec in args.files:
        for attr, k in load_kernels(spec, kernel_args):
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
            stem = out / (k.name + (f".{arch}" if len(args.arch) > 1 else ""))
            try:
                print(_dump_one(k, arch, stem, args.cubin or args.sass, nvdisasm))
            except PtxgenError as e:
                print(f"{k.name} [{arch}]: {e}", file=sys.stderr)
                status = status or 1
    return status


def _dump_one(k, arch: str, stem, cubin: bool, nvdisasm) -> str:
    """Write `stem`.ptx (and .cubin, .sass) of kernel k for `arch`; the line that says so."""
    p = stem.with_name(stem.name + ".ptx")
    _write(p, k.ptx(arch))
    line = f"{p}"
    if cubin:
        res = k.compile(arch)
        c = stem.with_name(stem.name + ".cubin")
        _write(c, res.cubin)
        line += (f"  {c.name}: {res.registers} registers, {res.spill_bytes} spill "
                 f"bytes, {res.shared_bytes} static smem bytes")
        if nvdisasm:
            s = stem.with_name(stem.name + ".sass")
            r = subprocess.run([nvdisasm, "-c", str(c)], capture_output=True, text=True)
            if r.returncode == 0:
                _write(s, r.stdout)
                line += f"  {s.name}"
            else:
                print(f"nvdisasm failed on {c}: {r.stderr.strip()}", file=sys.stderr)
    res_summary = {a: b for a, b in k.resources.items() if a != "memory" and b}
    if res_summary:
        line += "  resources: " + ", ".join(f"{a}={b}" for a, b in res_summary.items())
    return line


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        from .bench.cli import main as bench_main

        return bench_main(argv[1:])
    ap = argparse.ArgumentParser(prog="ptxgen", description="tile-level kernels -> PTX")
    from .version import __version__
    ap.add_argument("--version", action="version", version=f"ptxgen {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="write each kernel's PTX (and cubin/SASS) to a folder")
    d.add_argument("files", nargs="+",
                   help="file.py[:kernel] or an importable module[:kernel] "
                        "(ptxgen.kernels.softmax); :name may be a factory")
    d.add_argument("--kernel-args", default=None, metavar="K=V,...",
                   help="arguments of the factory named by :name, or of the module's dump() "
                        "hook (e.g. n=4096,dtype=bfloat16)")
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
