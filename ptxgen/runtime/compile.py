"""PTX -> cubin offline with nvJitLink, and the PTXCompileError that points at the bad line.

nvJitLink runs ptxas in-process (about twice as fast as a ptxas process for small kernels),
so no GPU and no ptxas binary are needed.  Results are cached in memory and on disk
(``cache.py``).  ptxas is known to crash on some inputs (``.v8`` of 16-bit elements); such
PTX, or every compile when ``PTXGEN_JIT_ISOLATE=1``, is compiled in a child process so that a
crash becomes an error instead of killing the interpreter.
"""
from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass, field

from ..errors import PTXCompileError
from . import cache


@dataclass
class CompileResult:
    cubin: bytes
    arch: str
    registers: int
    shared_bytes: int     # static shared memory reported by ptxas
    spill_bytes: int      # spill stores + spill loads
    log: str              # the nvJitLink info log (ptxas -v output)
    functions: dict = field(default_factory=dict)  # entry -> {registers, shared_bytes, spill_*, stack}


_memo: dict = {}
_memo_lock = threading.Lock()

# ---- info-log parsing ----------------------------------------------------------------------
_RE_FUNC = re.compile(r"Compiling entry function '([^']+)'|Function properties for (\S+)\s*$")
_RE_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_RE_USED = re.compile(r"ptxas info\s*: Used (\d+) registers")
_RE_SMEM = re.compile(r"(\d+) bytes smem")


def parse_info_log(log: str) -> dict:
    """Per-entry resources from the ``ptxas info`` lines (the linker's own summary lines,
    which lack the "ptxas" prefix, count reserved smem differently and are skipped)."""
    funcs: dict = {}
    cur = None
    for line in log.splitlines():
        if not line.startswith("ptxas"):
            continue
        m = _RE_FUNC.search(line)
        if m:
            cur = funcs.setdefault(m.group(1) or m.group(2), dict(
                registers=0, shared_bytes=0, spill_stores=0, spill_loads=0, stack_bytes=0))
            continue
        if cur is None:
            continue
        m = _RE_SPILL.search(line)
        if m:
            cur["stack_bytes"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        m = _RE_USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            s = _RE_SMEM.search(line)
            cur["shared_bytes"] = int(s.group(1)) if s else 0
    return funcs


def _result(cubin: bytes, arch: str, log: str, name: str) -> CompileResult:
    funcs = parse_info_log(log)
    pick = [funcs[name]] if name in funcs else list(funcs.values())
    return CompileResult(
        cubin=cubin, arch=arch, log=log, functions=funcs,
        registers=max((f["registers"] for f in pick), default=0),
        shared_bytes=max((f["shared_bytes"] for f in pick), default=0),
        spill_bytes=sum(f["spill_stores"] + f["spill_loads"] for f in pick))


# ---- dumps and error formatting ------------------------------------------------------------
def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "kernel"


def dump(name: str, suffix: str, data) -> str | None:
    """Write ``<name><suffix>`` under PTXGEN_DUMP_DIR when it is set; returns the path."""
    d = os.environ.get("PTXGEN_DUMP_DIR")
    if not d:
        return None
    path = os.path.join(d, _safe(name) + suffix)
    try:
        os.makedirs(d, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
    except OSError as e:   # a debugging aid: never the reason a compile fails
        warnings.warn(f"PTXGEN_DUMP_DIR={d}: cannot write {path} ({e.strerror or e}); "
                      f"the kernel is compiled without the dump", stacklevel=2)
        return None
    return path


_tmpdir: list = []


def _repro_path(name: str, ptx: str) -> str:
    """A real file holding the PTX, so the repro line can be pasted into a shell."""
    path = dump(name, ".ptx", ptx)
    if path is None:
        if not _tmpdir:
            _tmpdir.append(tempfile.mkdtemp(prefix="ptxgen-"))
        tag = hashlib.sha256(ptx.encode()).hexdigest()[:8]
        path = os.path.join(_tmpdir[0], f"{_safe(name)}-{tag}.ptx")
        with open(path, "w") as f:
            f.write(ptx)
    return path


_RE_LINE = re.compile(r"\bline (\d+)\b")


def compile_error(ptx: str, arch: str, log: str, *, name: str, line_origin=None,
                  headline: str | None = None, options=()) -> PTXCompileError:
    """PTXCompileError with the ptxas text, each failing PTX line with +-3 lines of context,
    the IR statement / user source for it (``line_origin``), and a ptxas repro command."""
    log = log.replace("\x00", "").strip()
    lines = ptx.splitlines()
    bad = []
    for m in _RE_LINE.finditer(log):
        n = int(m.group(1))
        if n not in bad and 1 <= n <= len(lines):
            bad.append(n)
    parts = [headline or f"ptxas rejected kernel '{name}' for {arch}:"]
    parts += ["  " + ln for ln in log.splitlines()] or ["  (no message from ptxas)"]
    for n in bad[:5]:
        parts.append(f"\nPTX line {n}:")
        for i in range(max(1, n - 3), min(len(lines), n + 3) + 1):
            parts.append(f"  {'>' if i == n else ' '} {i:5d} | {lines[i - 1]}")
        if line_origin is not None:
            try:
                origin = line_origin(n)
            except Exception as e:  # never hide the real error behind a broken callback
                origin = f"(line_origin failed: {type(e).__name__}: {e})"
            if origin:
                parts.append(f"  from: {origin}")
    extra = "".join(" " + o.split("=", 1)[1] for o in options if o.startswith("-Xptxas="))
    repro = f"ptxas -arch={arch}{extra} {_repro_path(name, ptx)}"
    parts.append(f"\nrepro: {repro}")
    exc = PTXCompileError("\n".join(parts))
    exc.ptx_line, exc.log, exc.repro, exc.arch = (bad[0] if bad else None), log, repro, arch
    return exc


# ---- nvJitLink -----------------------------------------------------------------------------
def _nvjitlink(ptx: bytes, arch: str, options, name: str):
    """One link: returns (ok, cubin, info_log, error_log, status_text)."""
    from cuda.bindings import nvjitlink as nj

    def text(size_fn, get_fn, h):
        n = size_fn(h)
        buf = bytearray(n)
        if n:
            get_fn(h, buf)
        return bytes(buf).decode(errors="replace").replace("\x00", "")

    opts = [f"-arch={arch}", "-verbose", *options]
    h = nj.create(len(opts), opts)
    try:
        try:
            nj.add_data(h, nj.InputType.PTX, ptx, len(ptx), name + ".ptx")
            nj.complete(h)
        except nj.nvJitLinkError as e:
            return (False, b"", text(nj.get_info_log_size, nj.get_info_log, h),
                    text(nj.get_error_log_size, nj.get_error_log, h), str(e))
        n = nj.get_linked_cubin_size(h)
        cubin = bytearray(n)
        nj.get_linked_cubin(h, cubin)
        return True, bytes(cubin), text(nj.get_info_log_size, nj.get_info_log, h), "", ""
    finally:
        nj.destroy(h)


def nvjitlink_version() -> str:
    try:
        from cuda.bindings import nvjitlink as nj
        return "%d.%d" % nj.version()
    except Exception:
        return "none"


# PTX that makes ptxas 13.x segfault (ptx-reference.md section 9): compiled out of process.
_CRASHERS = re.compile(r"\.v8\.[bsu]16\b")


def _isolated(ptx: bytes, arch: str, options, name: str):
    """Run ``_nvjitlink`` in a child so that a ptxas crash cannot take this process down."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    req = "\0".join([arch, name, *options]).encode()
    p = subprocess.run([sys.executable, "-c", "from ptxgen.runtime.compile import _child; _child()"],
                       input=struct.pack("<I", len(req)) + req + ptx, capture_output=True, env=env)
    if p.returncode != 0:
        sig = -p.returncode if p.returncode < 0 else None
        why = f"crashed with signal {sig}" if sig else f"exited with status {p.returncode}"
        err = p.stderr.decode(errors="replace").strip()
        return False, b"", "", err, f"ptxas (nvJitLink) {why} and gave no message"
    out, pos, fields = p.stdout, 1, []
    for _ in range(3):  # ok byte, then info / error / status as length-prefixed text, then cubin
        (n,) = struct.unpack_from("<I", out, pos)
        fields.append(out[pos + 4:pos + 4 + n].decode(errors="replace"))
        pos += 4 + n
    return out[0] == 1, out[pos:], *fields


def _child() -> None:
    data = sys.stdin.buffer.read()
    (n,) = struct.unpack_from("<I", data, 0)
    arch, name, *options = data[4:4 + n].decode().split("\0")
    ok, cubin, info, err, status = _nvjitlink(data[4 + n:], arch, options, name)
    out = bytes([1 if ok else 0])
    for s in (info, err, status):
        b = s.encode()
        out += struct.pack("<I", len(b)) + b
    sys.stdout.buffer.write(out + cubin)


def compile_ptx(ptx: str, arch: str, *, name: str = "kernel", line_origin=None,
                options=()) -> CompileResult:
    """Assemble ``ptx`` for ``arch`` ("sm_90a") to a cubin, without a GPU.

    Looks in the in-process cache, then the disk cache, then runs nvJitLink.  Raises
    PTXCompileError (with context and a repro command) when ptxas rejects the PTX.
    """
    options = tuple(options)
    key = (ptx, arch, options)
    hit = _memo.get(key)
    if hit is not None:
        cache.bump("memory_hits")
        return hit
    dump(name, ".ptx", ptx)
    dkey = cache.key(ptx, arch, options)
    entry = cache.load(dkey)
    if entry is not None:
        cache.bump("disk_hits")
        res = _result(entry[1], arch, entry[0], name)
    else:
        data = ptx.encode()
        isolate = os.environ.get("PTXGEN_JIT_ISOLATE") == "1" or _CRASHERS.search(ptx)
        cache.bump("jit_compiles")
        ok, cubin, info, err, status = (_isolated if isolate else _nvjitlink)(
            data, arch, options, name)
        if not ok or not cubin:
            log = err.strip() or info.strip()
            if status.endswith("gave no message"):  # the isolated child crashed
                suspects = [f"line {i}: a .v8 vector of 16-bit elements is known to crash "
                            f"ptxas; move the same bits as .v4.b32"
                            for i, ln in enumerate(ptx.splitlines(), 1) if _CRASHERS.search(ln)]
                log = "\n".join([status, *suspects] + ([log] if log else []))
            elif not log:
                log = f"(no message; nvJitLink returned {status or 'an empty cubin'})"
            raise compile_error(ptx, arch, log, name=name, line_origin=line_origin,
                                options=options)
        res = _result(cubin, arch, info, name)
        cache.store(dkey, info, cubin)
    dump(name, ".cubin", res.cubin)
    with _memo_lock:
        _memo[key] = res
    return res


def clear_memory_cache() -> None:
    with _memo_lock:
        _memo.clear()
