"""On-disk cubin cache and the runtime's counters.

An entry is one file: magic, sha256 of the payload, then the payload (the ptxas info log,
length-prefixed, followed by the cubin).  The hash lets a reader reject a truncated or
corrupted file, which is then rebuilt and rewritten.  Writes go to a temp file in the same
directory and are renamed into place, so concurrent writers never expose a half-written
entry.  Nothing is pickled: a cache directory may be shared and must not execute code.
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import threading

MAGIC = b"PTXGCUB1"
_HEAD = len(MAGIC) + 32

_stats = {"jit_compiles": 0, "disk_hits": 0, "memory_hits": 0, "disk_writes": 0,
          "disk_corrupt": 0, "module_loads": 0, "driver_jit": 0}
_stats_lock = threading.Lock()


def bump(name: str, n: int = 1) -> None:
    with _stats_lock:
        _stats[name] += n


def stats() -> dict:
    """Counters since process start (or ``reset_stats``): jit_compiles (nvJitLink runs),
    disk_hits, memory_hits, disk_writes, disk_corrupt, module_loads, driver_jit."""
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
    """sha256 over everything that changes the cubin: PTX, arch, options and the tool
    versions (the driver's, as the contract asks, and nvJitLink's, which does the work)."""
    from .compile import nvjitlink_version
    from .driver import driver_version

    h = hashlib.sha256()
    for part in (ptx, arch, driver_version(), nvjitlink_version(), *options):
        b = part.encode()
        h.update(struct.pack("<Q", len(b)) + b)  # length-prefixed: no ambiguous joins
    return h.hexdigest()


def path_for(k: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, k + ".cubin")


def encode(log: str, cubin: bytes) -> bytes:
    lb = log.encode()
    payload = struct.pack("<I", len(lb)) + lb + cubin
    return MAGIC + hashlib.sha256(payload).digest() + payload


def decode(data: bytes):
    """(log, cubin) from a file's bytes, or None when anything is off."""
    if len(data) < _HEAD + 4 or not data.startswith(MAGIC):
        return None
    payload = data[_HEAD:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):_HEAD]:
        return None
    (n,) = struct.unpack_from("<I", payload, 0)
    cubin = payload[4 + n:]
    if not cubin:
        return None
    return payload[4:4 + n].decode(errors="replace"), cubin


def load(k: str):
    """(info_log, cubin) for key ``k`` or None.  A bad entry counts as ``disk_corrupt`` and is
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
    return entry


def store(k: str, log: str, cubin: bytes) -> bool:
    """Atomically write an entry; failures (read-only or full disk) only cost the cache."""
    p = path_for(k)
    if p is None:
        return False
    d = os.path.dirname(p)
    tmp = None
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".cubin", dir=d)
        with os.fdopen(fd, "wb") as f:
            f.write(encode(log, cubin))
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
