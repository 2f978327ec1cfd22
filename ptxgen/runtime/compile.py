"""PTX -> cubin offline with nvJitLink, and the PTXCompileError that points at the bad line.

nvJitLink runs ptxas in-process (about twice as fast as a ptxas process for small kernels),
so no GPU and no ptxas binary are needed.  Results are cached in memory (least recently used
first out, PTXGEN_MEMORY_CACHE_SIZE entries, default 128) and on disk (``cache.py``).  ptxas
is known to crash on some inputs (``.v8`` of 16-bit elements); such PTX, or every compile when
``PTXGEN_JIT_ISOLATE=1``, is compiled in a child process so that a crash becomes an error
instead of killing the interpreter.

A first launch whose cubin is on disk runs little of this: the log is parsed (and its regexes
compiled) when a figure is first read, which a launch does only for a log with a note to
surface (``warn_notes``: ptxas's advice and spills become PtxasWarnings, once per compile),
and what only JIT, errors or isolation need (subprocess, tempfile, hashlib) is imported there.

nvJitLink is cuda-bindings' ``cuda.bindings.nvjitlink``, imported by the first compile that
needs it (``cuda.pathfinder`` finds the library of the ``nvidia-nvjitlink`` wheel).
"""
from __future__ import annotations

import os
import re
import struct
import sys
import threading
import warnings
from collections import OrderedDict
from functools import lru_cache

from ..errors import PtxasWarning, PTXCompileError, warn_user
from ..target.table import GATES
from . import cache, driver


class CompileResult:
    """A cubin and what ptxas said about it.  ``registers``, ``shared_bytes`` (static shared
    memory), ``spill_bytes`` (stores + loads) are the entry's (all entries' maxima/sums when
    it is not named in the log); ``functions``: entry -> {registers, shared_bytes,
    spill_stores, spill_loads, stack_bytes}; ``log``: the nvJitLink info log (ptxas -v)."""

    def __init__(self, cubin: bytes, arch: str, log: str, name: str = ""):
        self.cubin, self.arch, self.log, self._name = cubin, arch, log, name
        self._figures = None

    def _parsed(self) -> tuple:
        if self._figures is None:
            funcs = parse_info_log(self.log)
            pick = [funcs[self._name]] if self._name in funcs else list(funcs.values())
            self._figures = (funcs, max((f["registers"] for f in pick), default=0),
                             max((f["shared_bytes"] for f in pick), default=0),
                             sum(f["spill_stores"] + f["spill_loads"] for f in pick))
        return self._figures

    functions = property(lambda self: self._parsed()[0])
    registers = property(lambda self: self._parsed()[1])
    shared_bytes = property(lambda self: self._parsed()[2])
    spill_bytes = property(lambda self: self._parsed()[3])
    # ptxas's advice (C7511 "wgmma ... serialized", warnings): what the figures do not say
    notes = property(lambda self: [ln.strip() for ln in self.log.splitlines()
                                   if "(C7" in ln or "warning" in ln.lower()])

    def __repr__(self) -> str:
        return (f"CompileResult(arch={self.arch!r}, cubin={len(self.cubin)} bytes, "
                f"registers={self.registers}, shared_bytes={self.shared_bytes}, "
                f"spill_bytes={self.spill_bytes})")


def _size_from_env() -> int:
    v = os.environ.get("PTXGEN_MEMORY_CACHE_SIZE", "128")
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"PTXGEN_MEMORY_CACHE_SIZE={v!r}: expected a count of cubins >= 0 "
                         f"(0 turns the in-memory cache off)")
    return n


_memo: OrderedDict = OrderedDict()     # (ptx, arch, options) -> CompileResult, oldest first
_memo_lock = threading.Lock()
_memo_max = [_size_from_env()]


def set_memory_cache_size(n: int) -> int:
    """Keep at most ``n`` results in memory (0: none); returns the previous bound.  Each
    holds a cubin and the PTX it came from, so a process that builds many kernels stays
    bounded; the disk cache still has the evicted ones."""
    if n < 0:
        raise ValueError(f"memory cache size must be >= 0, got {n}")
    with _memo_lock:
        prev, _memo_max[0] = _memo_max[0], n
        while len(_memo) > n:
            _memo.popitem(last=False)
    return prev

# ---- info-log parsing ----------------------------------------------------------------------
@lru_cache(maxsize=1)
def _log_patterns():
    """(entry, spill, registers, smem) patterns of the ptxas info lines, compiled when a log
    is first parsed rather than on import."""
    return (re.compile(r"Compiling entry function '([^']+)'|Function properties for (\S+)\s*$"),
            re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"),
            re.compile(r"ptxas info\s*: Used (\d+) registers"),
            re.compile(r"(\d+) bytes smem"))


def parse_info_log(log: str) -> dict:
    """Per-entry resources from the ``ptxas info`` lines (the linker's own summary lines,
    which lack the "ptxas" prefix, count reserved smem differently and are skipped)."""
    funcs: dict = {}
    cur = None
    entry_re, spill_re, used_re, smem_re = _log_patterns()
    for line in log.splitlines():
        if not line.startswith("ptxas"):
            continue
        m = entry_re.search(line)
        if m:
            cur = funcs.setdefault(m.group(1) or m.group(2), dict(
                registers=0, shared_bytes=0, spill_stores=0, spill_loads=0, stack_bytes=0))
            continue
        if cur is None:
            continue
        m = spill_re.search(line)
        if m:
            cur["stack_bytes"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        m = used_re.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            s = smem_re.search(line)
            cur["shared_bytes"] = int(s.group(1)) if s else 0
    return funcs


def _result(cubin: bytes, arch: str, log: str, name: str) -> CompileResult:
    return CompileResult(cubin, arch, log, name)


# ---- what ptxas said that the kernel's author should hear ----------------------------------
@lru_cache(maxsize=1)
def _whole_program_re():
    """A line issuing an instruction the target table marks whole-program (setmaxnreg)."""
    ops = "|".join(re.escape(g.prefix) for g in GATES if g.whole_program)
    return re.compile(rf"^\s*(?:@!?%\w+\s+)?(?:{ops})\b", re.M)


def jit_from_ptx(ptx: str) -> bool:
    """Whether the runtime loads this PTX through the driver JIT instead of nvJitLink's cubin:
    launch_plan does so for a build whose codegen is `whole_program`, which it is exactly when
    the PTX issues an instruction the target table marks whole-program (every instruction the
    emitter writes passes its gate).  Asked of the text: compile_ptx gets only that."""
    return _whole_program_re().search(ptx) is not None


def user_notes(res: CompileResult, jit: bool) -> list:
    """The notes of `res` a kernel's author should hear, one line each: ptxas's warnings and
    C7xxx advice (wgmma serialized, ...), and registers spilled to local memory.

    Where the runtime loads the kernel from its PTX (`jit`), nvJitLink's relocatable compile
    is not the code that runs: it ignored setmaxnreg (C7504), which the driver JIT's
    whole-program compile keeps, so that note is harmless there, and so are its register
    consequences: spills and wgmma serialized for "insufficient register resources" (the
    sm_90a attention kernel has both through nvJitLink and neither with `ptxas -v` in
    whole-program mode).  A cubin of such PTX that is used as is keeps them."""
    out = []
    for note in res.notes:
        if jit and ("(C7504)" in note or "'setmaxnreg' ignored" in note or
                    "insufficient register resources" in note):
            continue
        out.append(" ".join(note.split()))
    if not jit and not any("spill" in n for n in out):
        for fn, f in res.functions.items():
            if f["spill_stores"] or f["spill_loads"]:
                out.append(f"'{fn}' spills registers to local memory ({f['spill_stores']} bytes "
                           f"spill stores, {f['spill_loads']} bytes spill loads)")
    return out


def warn_notes(res: CompileResult, name: str, ptx: str) -> None:
    """Each note of a new compile as a PtxasWarning at the user's line (k.compile(), the first
    launch): once per compile, as later calls take the memoized result."""
    log = res.log     # string tests first: a launch parses no log that has nothing to say
    if not res.notes and log.count("bytes spill stores") == \
            log.count(" 0 bytes spill stores, 0 bytes spill loads"):
        return
    for note in user_notes(res, jit_from_ptx(ptx)):
        warn_user(f"kernel '{name}' ({res.arch}): {note}", PtxasWarning)


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
        import hashlib
        import tempfile

        if not _tmpdir:
            _tmpdir.append(tempfile.mkdtemp(prefix="ptxgen-"))
        tag = hashlib.sha256(ptx.encode()).hexdigest()[:8]
        path = os.path.join(_tmpdir[0], f"{_safe(name)}-{tag}.ptx")
        with open(path, "w") as f:
            f.write(ptx)
    return path




def compile_error(ptx: str, arch: str, log: str, *, name: str, line_origin=None,
                  headline: str | None = None, options=()) -> PTXCompileError:
    """PTXCompileError with the ptxas text, each failing PTX line with +-3 lines of context,
    the IR statement / user source for it (``line_origin``), and a ptxas repro command."""
    log = log.replace("\x00", "").strip()
    lines = ptx.splitlines()
    bad = []
    for m in re.finditer(r"\bline (\d+)\b", log):
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
_nj: list = []                 # cuda.bindings.nvjitlink, once imported


def _binding():
    """cuda.bindings.nvjitlink, imported by the first compile that needs it."""
    if not _nj:
        try:
            from cuda.bindings import nvjitlink
        except ImportError as e:
            raise ImportError(f"nvJitLink could not be loaded ({e}); ptxgen compiles through "
                              f"cuda-bindings: pip install cuda-bindings nvidia-nvjitlink") from e
        _nj.append(nvjitlink)
    return _nj[0]


def _nvjitlink(ptx: bytes, arch: str, options, name: str):
    """One link: returns (ok, cubin, info_log, error_log, status_text)."""
    nj = _binding()

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


_nvjitlink_version: list = []


def nvjitlink_version() -> str:
    """nvJitLink's "major.minor", or "none" where it cannot be loaded; asked once."""
    if not _nvjitlink_version:
        try:
            v = "%d.%d" % _binding().version()
        except Exception:
            v = "none"
        _nvjitlink_version.append(v)
    return _nvjitlink_version[0]


def _file_stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f"{path}|{st.st_size}|{st.st_mtime_ns}"


def _nvjitlink_stamp() -> str:
    """path|size|mtime of the nvJitLink library this process uses ("" if unknown), where
    cuda.pathfinder found it for cuda-bindings."""
    try:
        _binding()
        from cuda.pathfinder import load_nvidia_dynamic_lib
        path = load_nvidia_dynamic_lib("nvJitLink").abs_path
    except Exception:
        return ""
    return _file_stamp(path) if path else ""


def _tools() -> dict:
    """What a disk cache entry records about the tools that made its cubin."""
    return {"nvjitlink": nvjitlink_version(), "nvjitlink_lib": _nvjitlink_stamp(),
            "python": sys.prefix, "driver": driver.loaded_driver_version() or "none"}


def _tools_current(meta: dict) -> bool:
    """Whether an entry's tools are this process's.  The driver is compared once this process
    uses one (an offline compile never loads libcuda to check).  nvJitLink: while the library
    file that made the entry is unchanged and this is the same Python environment, the entry's
    version stands without loading nvJitLink (a library load, the slow part of a cached launch);
    otherwise nvJitLink is asked for its version."""
    now = driver.loaded_driver_version()
    was = meta.get("driver", "none")
    if now not in (None, "none") and was != "none" and was != now:
        return False
    stamp = meta.get("nvjitlink_lib", "")
    if stamp and meta.get("python") == sys.prefix and \
            _file_stamp(stamp.rsplit("|", 2)[0]) == stamp:
        return True
    return meta.get("nvjitlink") == nvjitlink_version()


# PTX that makes ptxas 13.x segfault (ptx-reference.md section 9): compiled out of process.
_CRASHERS = r"\.v8\.[bsu]16\b"   # a pattern: compiled by the first JIT, not on import


def _isolated(ptx: bytes, arch: str, options, name: str):
    """Run ``_nvjitlink`` in a child so that a ptxas crash cannot take this process down."""
    import subprocess

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
        with _memo_lock:
            if key in _memo:
                _memo.move_to_end(key)
        return hit
    dump(name, ".ptx", ptx)
    dkey = cache.key(ptx, arch, options)
    entry = cache.load(dkey, _tools_current)
    if entry is not None:
        cache.bump("disk_hits")
        res = _result(entry[1], arch, entry[0], name)
    else:
        data = ptx.encode()
        isolate = os.environ.get("PTXGEN_JIT_ISOLATE") == "1" or re.search(_CRASHERS, ptx)
        cache.bump("jit_compiles")
        ok, cubin, info, err, status = (_isolated if isolate else _nvjitlink)(
            data, arch, options, name)
        if not ok or not cubin:
            log = err.strip() or info.strip()
            if status.endswith("gave no message"):  # the isolated child crashed
                suspects = [f"line {i}: a .v8 vector of 16-bit elements is known to crash "
                            f"ptxas; move the same bits as .v4.b32"
                            for i, ln in enumerate(ptx.splitlines(), 1) if re.search(_CRASHERS, ln)]
                log = "\n".join([status, *suspects] + ([log] if log else []))
            elif not log:
                log = f"(no message; nvJitLink returned {status or 'an empty cubin'})"
            raise compile_error(ptx, arch, log, name=name, line_origin=line_origin,
                                options=options)
        res = _result(cubin, arch, info, name)
        cache.store(dkey, info, cubin, _tools())
    dump(name, ".cubin", res.cubin)
    with _memo_lock:
        _memo[key] = res
        while len(_memo) > _memo_max[0]:
            _memo.popitem(last=False)
    warn_notes(res, name, ptx)    # after the memo: an error filter must not undo the compile
    return res


def clear_memory_cache() -> None:
    with _memo_lock:
        _memo.clear()
