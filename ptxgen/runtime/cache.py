"""On-disk cubin cache and the runtime's counters.

An entry is one file named by its key (and the Python environment): magic, sha256 of the
payload, then the payload (the entry's own key, the tool versions that made it, the ptxas info
log, the cubin).  The hash lets a reader reject a truncated or corrupted file; the recorded key
catches a file that was swapped or renamed; the versions let the caller reject an entry an
older toolchain made.  Any of these is rebuilt and rewritten.  The key is a hash of what the
cubin is made from (PTX, arch, options) only, so computing it loads neither libcuda nor
nvJitLink: a warm start reads its cubins without either.  Writes go to a temp file in the same
directory and are renamed into place, so concurrent writers never expose a half-written entry.
Nothing is pickled: a cache directory may be shared and must not execute code.
"""
from __future__ import annotations

import hashlib
import os
import struct
import sys
import threading
from typing import NamedTuple

MAGIC = b"PTXGCUB2"
FORMAT = "ptxgen-cubin-2"     # hashed into every key: entries of another layout never match
_HEAD = len(MAGIC) + 32

_stats = {"jit_compiles": 0, "disk_hits": 0, "memory_hits": 0, "disk_writes": 0,
          "disk_corrupt": 0, "disk_mismatch": 0, "disk_stale": 0, "module_loads": 0,
          "driver_jit": 0, "launch_retries": 0}
_stats_lock = threading.Lock()


def bump(name: str, n: int = 1) -> None:
    with _stats_lock:
        _stats[name] += n


def stats() -> dict:
    """Counters since process start (or ``reset_stats``): jit_compiles (nvJitLink runs),
    disk_hits, memory_hits, disk_writes, disk_corrupt (unreadable entries), disk_mismatch
    (an entry holding another key's cubin), disk_stale (made by other tool versions),
    module_loads, driver_jit, launch_retries (launches the driver refused because another
    context, or none, was current in the thread, made again in their own)."""
    with _stats_lock:
        return dict(_stats)


def reset_stats() -> None:
    with _stats_lock:
        for k in _stats:
            _stats[k] = 0


def cache_dir() -> str | None:
    """PTXGEN_CACHE_DIR, else $XDG_CACHE_HOME/ptxgen, else ~/.cache/ptxgen; None when
    PTXGEN_DISK_CACHE=0.  Read on every call so tests and users can switch it at run time."""
    if os.environ.get("PTXGEN_DISK_CACHE", "1") == "0":
        return None
    d = os.environ.get("PTXGEN_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "ptxgen")
    return d


def key(ptx: str, arch: str, options=()) -> str:
    """sha256 over what the cubin is made from: PTX, arch and options.  The tool versions
    are recorded in the entry instead (see ``load``), so no library is loaded to compute it."""
    h = hashlib.sha256()
    for part in (FORMAT, ptx, arch, *options):
        b = part.encode()
        h.update(struct.pack("<Q", len(b)) + b)  # length-prefixed: no ambiguous joins
    return h.hexdigest()


# Entries are per Python environment: two venvs with different nvJitLink (or cuda-bindings)
# versions sharing one cache directory then keep their own files instead of each rebuilding
# and overwriting the other's.  The tag is of sys.prefix, known without loading anything.
_ENV_TAG = hashlib.sha256(sys.prefix.encode()).hexdigest()[:8]


def path_for(k: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, f"{k}.{_ENV_TAG}.cubin")


class Entry(NamedTuple):
    key: str
    meta: dict      # str -> str: the versions of the tools that made the cubin
    log: str
    cubin: bytes


def _text(b: str) -> bytes:
    e = b.encode()
    return struct.pack("<I", len(e)) + e


def encode(k: str, meta: dict, log: str, cubin: bytes) -> bytes:
    fields = [k, *(f"{a}={v}" for a, v in sorted(meta.items())), log]
    payload = struct.pack("<I", len(fields)) + b"".join(map(_text, fields)) + cubin
    return MAGIC + hashlib.sha256(payload).digest() + payload


def decode(data: bytes) -> Entry | None:
    """The entry in a file's bytes, or None when anything is off."""
    if len(data) < _HEAD + 4 or not data.startswith(MAGIC):
        return None
    payload = data[_HEAD:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):_HEAD]:
        return None
    try:
        (n,) = struct.unpack_from("<I", payload, 0)
        pos, fields = 4, []
        for _ in range(n):
            (m,) = struct.unpack_from("<I", payload, pos)
            fields.append(payload[pos + 4:pos + 4 + m].decode())
            pos += 4 + m
    except (struct.error, UnicodeDecodeError):
        return None
    cubin = payload[pos:]
    if n < 2 or not cubin or len(fields) != n:
        return None
    meta = dict(f.split("=", 1) for f in fields[1:-1] if "=" in f)
    return Entry(fields[0], meta, fields[-1], cubin)


def load(k: str, current=None):
    """(info_log, cubin) for key ``k`` or None.  ``current(meta) -> bool`` says whether the
    tools that made the entry are the ones in use.  A bad entry counts as ``disk_corrupt``,
    one that holds another key as ``disk_mismatch``, an outdated one as ``disk_stale``; each is
    left for ``store`` to overwrite after the rebuild."""
    p = path_for(k)
    if p is None:
        return None
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError:
        return None
    entry = decode(data)
    if entry is None:
        bump("disk_corrupt")
        return None
    if entry.key != k:
        bump("disk_mismatch")
        return None
    if current is not None and not current(entry.meta):
        bump("disk_stale")
        return None
    return entry.log, entry.cubin


def store(k: str, log: str, cubin: bytes, meta: dict | None = None) -> bool:
    """Atomically write an entry; failures (read-only or full disk) only cost the cache."""
    p = path_for(k)
    if p is None:
        return False
    import tempfile   # here: a warm start reads entries and never writes one

    d = os.path.dirname(p)
    tmp = None
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".cubin", dir=d)
        with os.fdopen(fd, "wb") as f:
            f.write(encode(k, meta or {}, log, cubin))
        os.replace(tmp, p)
        bump("disk_writes")
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False
