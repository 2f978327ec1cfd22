"""nvJitLink (libnvJitLink) through ctypes: the calls ``compile.py`` makes, in the calling
convention of ``cuda.bindings.nvjitlink``, so that it can use either.

Why: a first launch with an empty disk cache spent most of its 35 ms on an H200 host importing
``cuda.bindings.nvjitlink`` and ``cuda.pathfinder`` to find and call the library (25-30 ms,
issue #18).  This module finds it with a few ``listdir`` calls and binds the eleven entry points
it needs: in fresh processes on a 2-core CPU machine, importing it, finding, opening and binding
the library took 10-11 ms (7-10 of them the loader opening the 117 MB file), where importing
cuda-bindings' module and asking its version took 34 + 10 ms; a first compile of a small kernel
went from 81 to 64 ms (medians of 11 processes, bytecode cached).

Where: the ``nvidia-nvjitlink`` wheels put it at ``site-packages/nvidia/cu13/lib/
libnvJitLink.so.13`` (CUDA 12: ``nvidia/nvjitlink/lib/libnvJitLink.so.12``; Windows:
``nvidia/cu13/bin/x86_64`` or ``arm64``, ``nvidia/cu13/bin`` before 13.4, ``nvidia/nvjitlink/
bin``, named ``nvJitLink_130_0.dll`` / ``nvJitLink_120_0.dll``).  Every absolute ``sys.path``
entry's ``nvidia/*/lib`` (``bin``, ``bin/*``) is looked in (the newest major first, then in
``sys.path`` order); then ``$CONDA_PREFIX/lib`` (``Library/bin``); then the loader's own search
by soname.  ``path`` is the file opened, spelled as ``cuda.pathfinder`` spells it (the path it
was found at; the loader's origin directory and file name for a soname), since it is part of the
disk cache's record of the tools.

Which symbols: ``nvJitLink.h`` maps each API name to a versioned symbol of the header's release
(``nvJitLinkCreate`` is ``__nvJitLinkCreate_13_5`` in 13.5), so that a program built against a
newer header fails to load with an older library.  The library exports that name for each minor
release of its major (13.5: ``_13_0`` to ``_13_5``, all one function) and, in the NVIDIA builds,
the bare names too (which cuda-bindings binds); Ubuntu's libnvjitlink12 is reported to export
only the versioned ones.  Here each entry point is the versioned name of the library's own
version (``nvJitLinkVersion``, unversioned, CUDA 12.3 and later), then of its earlier minors,
then the bare name.  ``load()`` raises ``NvJitLinkNotFound`` where no library opens and
``AttributeError`` where one lacks an entry point; ``compile.py`` then uses cuda-bindings
(``PTXGEN_NVJITLINK=bindings`` asks for it).
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from ctypes import POINTER, byref, c_char, c_char_p, c_int, c_size_t, c_uint, c_void_p

# nvJitLinkResult as cuda-bindings' Result spells it (nvJitLink.h without "NVJITLINK_")
RESULTS = ["SUCCESS"] + ["ERROR_" + n for n in """UNRECOGNIZED_OPTION MISSING_ARCH INVALID_INPUT
PTX_COMPILE NVVM_COMPILE INTERNAL THREADPOOL UNRECOGNIZED_INPUT FINALIZE NULL_INPUT
INCOMPATIBLE_OPTIONS INCORRECT_INPUT_TYPE ARCH_MISMATCH OUTDATED_LIBRARY MISSING_FATBIN
UNRECOGNIZED_ARCH UNSUPPORTED_ARCH LTO_NOT_ENABLED""".split()]


class NvJitLinkNotFound(OSError):
    """No libnvJitLink could be opened."""


class nvJitLinkError(Exception):
    """A call returned an error: ``str()`` is cuda-bindings' text ("ERROR_PTX_COMPILE (4)"),
    ``status`` the nvJitLinkResult."""

    def __init__(self, status):
        self.status = status
        name = RESULTS[status] if 0 <= status < len(RESULTS) else "ERROR_UNKNOWN"
        super().__init__(f"{name} ({status})")

    def __reduce__(self):
        return (type(self), (self.status,))


class InputType:
    """nvJitLinkInputType (the values compile.py passes)."""
    CUBIN, PTX, LTOIR, FATBIN = 1, 2, 3, 4


_size_p = POINTER(c_size_t)
# API name -> (name without the "nvJitLink" prefix, argtypes); handles are c_void_p
_API = {
    "create": ("Create", [POINTER(c_void_p), c_uint, POINTER(c_char_p)]),
    "destroy": ("Destroy", [POINTER(c_void_p)]),
    "add_data": ("AddData", [c_void_p, c_int, c_char_p, c_size_t, c_char_p]),
    "complete": ("Complete", [c_void_p]),
    "get_linked_cubin_size": ("GetLinkedCubinSize", [c_void_p, _size_p]),
    "get_linked_cubin": ("GetLinkedCubin", [c_void_p, c_void_p]),
    "get_error_log_size": ("GetErrorLogSize", [c_void_p, _size_p]),
    "get_error_log": ("GetErrorLog", [c_void_p, c_void_p]),
    "get_info_log_size": ("GetInfoLogSize", [c_void_p, _size_p]),
    "get_info_log": ("GetInfoLog", [c_void_p, c_void_p]),
}


def symbol_names(api: str, major: int, minor: int) -> list:
    """The C names tried for ``api`` ("Create") of a library of version major.minor."""
    return [f"__nvJitLink{api}_{major}_{m}" for m in range(minor, -1, -1)] + [f"nvJitLink{api}"]


def _check(status: int) -> None:
    if status:
        raise nvJitLinkError(status)


def _out(buf):
    """A pointer to a writable buffer (a bytearray, as compile.py passes) or an address."""
    return (c_char * len(buf)).from_buffer(buf) if isinstance(buf, bytearray) else buf


class NvJitLink:
    """The opened library: ``create``/``add_data``/... as cuda-bindings' functions (handles
    are ints, sizes returned, logs and cubins written into a given bytearray, errors raised as
    ``nvJitLinkError``)."""

    backend = "ctypes"
    nvJitLinkError, InputType = nvJitLinkError, InputType

    def __init__(self, lib, path: str):
        self._lib, self.path = lib, path
        f = lib.nvJitLinkVersion                    # AttributeError: before CUDA 12.3
        f.restype, f.argtypes = c_int, [POINTER(c_uint), POINTER(c_uint)]
        major, minor = c_uint(), c_uint()
        _check(f(byref(major), byref(minor)))
        self._version = (major.value, minor.value)
        self.symbols = {}
        for api, (name, argtypes) in _API.items():
            for sym in symbol_names(name, *self._version):
                try:
                    fn = lib[sym]
                except AttributeError:
                    continue
                fn.restype, fn.argtypes = c_int, argtypes
                setattr(self, "_" + api, fn)
                self.symbols[api] = sym
                break
            else:
                raise AttributeError(f"{path} has no nvJitLink{name} (tried "
                                     f"{', '.join(symbol_names(name, *self._version))})")

    def version(self):
        return self._version

    def create(self, num_options, options):
        opts = [o.encode() if isinstance(o, str) else o for o in list(options)[:num_options]]
        h = c_void_p()
        _check(self._create(byref(h), len(opts), (c_char_p * max(1, len(opts)))(*opts)))
        return h.value or 0

    def destroy(self, handle):
        _check(self._destroy(byref(c_void_p(handle or None))))

    def add_data(self, handle, input_type, data, size, name):
        _check(self._add_data(handle, int(input_type), bytes(data), size,
                              name.encode() if isinstance(name, str) else name))

    def complete(self, handle):
        _check(self._complete(handle))

    def _size(self, fn, handle):
        n = c_size_t()
        _check(fn(handle, byref(n)))
        return n.value

    def get_linked_cubin_size(self, handle):
        return self._size(self._get_linked_cubin_size, handle)

    def get_linked_cubin(self, handle, cubin):
        _check(self._get_linked_cubin(handle, _out(cubin)))

    def get_error_log_size(self, handle):
        return self._size(self._get_error_log_size, handle)

    def get_error_log(self, handle, log):
        _check(self._get_error_log(handle, _out(log)))

    def get_info_log_size(self, handle):
        return self._size(self._get_info_log_size, handle)

    def get_info_log(self, handle, log):
        _check(self._get_info_log(handle, _out(log)))

    def __repr__(self):
        return f"<ptxgen ctypes nvJitLink {'%d.%d' % self._version} ({self.path})>"


def _major(name: str):
    """The major version a library file name says (None: not an nvJitLink library)."""
    if os.name == "nt":
        mid = name[len("nvJitLink_"):-len("_0.dll")]
        ok = name.startswith("nvJitLink_") and name.endswith("_0.dll") and mid.isdigit()
        return int(mid) // 10 if ok else None
    tail = name[len("libnvJitLink.so."):]
    return int(tail) if name.startswith("libnvJitLink.so.") and tail.isdigit() else None


def _files_in(d: str) -> list:
    try:
        return [(m, os.path.join(d, n)) for n in sorted(os.listdir(d))
                if (m := _major(n)) is not None]
    except OSError:
        return []


def candidates() -> list:
    """Library files to try, in order (see the module docstring)."""
    found = []
    sub = ("bin",) if os.name == "nt" else ("lib",)
    for i, entry in enumerate(sys.path):
        base = os.path.join(entry, "nvidia")
        try:
            pkgs = sorted(os.listdir(base)) if os.path.isabs(entry) else ()
        except OSError:                     # most entries: no nvidia/ folder
            continue
        for pkg in pkgs:
            d = os.path.join(base, pkg, *sub)
            dirs = [d]
            if os.name == "nt" and os.path.isdir(d):
                dirs = [os.path.join(d, a) for a in ("x86_64", "arm64")] + dirs
            found += [(-m, i, p) for dd in dirs for m, p in _files_in(dd)]
    paths = [p for _, _, p in sorted(found)]
    conda = os.environ.get("CONDA_PREFIX")
    if conda:
        d = os.path.join(conda, *(("Library", "bin") if os.name == "nt" else ("lib",)))
        paths += [p for _, p in sorted(_files_in(d), reverse=True)]
    return paths


SONAMES = ("nvJitLink_130_0.dll", "nvJitLink_120_0.dll") if os.name == "nt" else \
    ("libnvJitLink.so.13", "libnvJitLink.so.12")


def _loaded_path(lib, soname: str) -> str:
    """Where the loader found ``soname``: cuda.pathfinder's spelling (dlinfo's origin
    directory joined with the link map's name; GetModuleFileNameW on Windows)."""
    try:
        if os.name == "nt":
            buf = ctypes.create_unicode_buffer(32768)
            n = ctypes.windll.kernel32.GetModuleFileNameW(c_void_p(lib._handle), buf, 32768)
            return buf.value if n else soname
        dl = ctypes.CDLL(None)
        dl.dlinfo.argtypes = [c_void_p, c_int, c_void_p]
        lm, origin = POINTER(c_void_p)(), ctypes.create_string_buffer(4096)
        if dl.dlinfo(lib._handle, 2, byref(lm)) or dl.dlinfo(lib._handle, 6, origin):
            return soname                               # 2: RTLD_DI_LINKMAP, 6: RTLD_DI_ORIGIN
        name = ctypes.cast(lm[1], c_char_p).value       # link_map: l_addr, l_name, ...
        return os.path.join(os.fsdecode(origin.value), os.path.basename(os.fsdecode(name)))
    except (AttributeError, OSError, TypeError, ValueError):
        return soname


_opened: list = []
_open_lock = threading.Lock()


def open_library():
    """(CDLL, path) of the first library that opens; NvJitLinkNotFound where none does."""
    loader = ctypes.CDLL        # on Windows too: nvJitLink.h declares no calling convention
    errors = []
    for path in candidates():
        try:
            return loader(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    for soname in SONAMES:
        try:
            lib = loader(soname)
        except OSError as e:
            errors.append(f"{soname}: {e}")
            continue
        return lib, _loaded_path(lib, soname)
    raise NvJitLinkNotFound("no libnvJitLink could be opened (looked in nvidia/*/lib of each "
                            "sys.path entry, then the loader's path): " + "; ".join(errors))


def load() -> NvJitLink:
    """The process's NvJitLink, made once."""
    if not _opened:
        with _open_lock:
            if not _opened:
                _opened.append(NvJitLink(*open_library()))
    return _opened[0]


__all__ = ["load", "NvJitLink", "NvJitLinkNotFound", "nvJitLinkError", "InputType",
           "RESULTS", "SONAMES", "candidates", "symbol_names"]
