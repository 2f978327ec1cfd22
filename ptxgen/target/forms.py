"""Instruction forms from templates/isa.ptx.j2, rendered once and cached as format strings.

A jinja render costs ~20 us; a cached `str.format` costs ~1 us.  So each distinct
(form, modifiers) pair is rendered once per process and reused for every emitted line.

Importing jinja2 and compiling the templates costs tens of ms, more than building a small
kernel, so the rendered texts are also kept on disk (`forms-<key>.json` in the cache
directory, see `cache_dir`), keyed by a hash of the templates, this file and the ptxgen
version: a fresh process whose forms are all on disk never imports jinja.  The templates
stay the source of truth; a stale, corrupt or unwritable cache only costs the renders.
"""
from __future__ import annotations

import os
import threading
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def templates_dir() -> Path:
    """templates/ beside the package in a checkout, else ptxgen/templates of the wheel.

    The checkout comes first: an editable install maps `ptxgen.templates` to whichever
    checkout was installed, which need not be the one this package was imported from."""
    p = Path(__file__).resolve().parents[2] / "templates"
    if (p / "isa.ptx.j2").exists():
        return p
    try:
        from importlib.resources import files

        p = Path(str(files("ptxgen.templates")))
        if (p / "isa.ptx.j2").exists():
            return p
    except (ModuleNotFoundError, TypeError):
        pass
    raise FileNotFoundError("ptxgen templates not found (expected templates/isa.ptx.j2)")


@lru_cache(maxsize=1)
def environment():
    """The jinja environment, imported on the first render that the disk cache lacks."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=False,
                              autoescape=False)


@lru_cache(maxsize=1)
def _macros():
    return environment().get_template("isa.ptx.j2").module


_PLACEHOLDERS = {k: "{" + k + "}" for k in ("d", "a", "b", "c", "v", "p", "l", "id", "n",
                                             "op", "ops")}


def _fields(text: str) -> list:
    """The placeholder names of a format string, in order; ValueError unless each is a bare
    identifier (no attribute, index, conversion or spec): a form's text is compiled into an
    f-string, so a text read back from disk must not be able to carry an expression."""
    import string

    fields = []
    for _, field, spec, conv in string.Formatter().parse(text):
        if field is None:
            continue
        if not field.isidentifier() or spec or conv:
            raise ValueError(f"form placeholder {{{field}}} is not a plain name")
        if field not in fields:
            fields.append(field)
    return fields


class Form(str):
    """An instruction form's format string whose `.format(d=..., a=...)` is the text compiled
    once into an f-string function: str.format with keywords parses the string and builds
    a dict on every call, 4x the cost, and the emitter fills one form per PTX line."""

    def __new__(cls, text: str):
        self = super().__new__(cls, text)
        fields = _fields(text)
        # **_: like str.format, a form ignores operands it does not use (bar.sync's count)
        self.format = eval(f'lambda {"".join(f + ", " for f in fields)}**_: f{text!r}')
        return self


# ---- the disk cache ------------------------------------------------------------------------
_MAGIC = "ptxgen-forms-1"


def cache_dir() -> str | None:
    """PTXGEN_CACHE_DIR, else $XDG_CACHE_HOME/ptxgen, else ~/.cache/ptxgen; None when
    PTXGEN_DISK_CACHE=0 (the rule of the cubin cache in runtime/cache.py, not imported:
    that package loads the CUDA bindings)."""
    if os.environ.get("PTXGEN_DISK_CACHE", "1") == "0":
        return None
    d = os.environ.get("PTXGEN_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "ptxgen")
    return d


def cache_key() -> str:
    """sha256 over what decides a rendered text: the templates' bytes, this file's (how
    texts are rendered and read back) and the ptxgen version."""
    import hashlib

    from .. import __version__   # the package constant; no layer above this one is imported

    h = hashlib.sha256(_MAGIC.encode() + b"\0" + __version__.encode())
    tdir = str(templates_dir())
    for p in (os.path.join(tdir, "isa.ptx.j2"), os.path.join(tdir, "module.ptx.j2"), __file__):
        with open(p, "rb") as f:
            b = f.read()
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


class _Disk:
    """Rendered texts by entry key: loaded once from the cache file, written back (merged
    with whatever another process wrote meanwhile) after a build that rendered new ones."""

    def __init__(self):
        self.texts: dict | None = None
        self.path: str | None = None
        self.key = ""
        self.dirty = False
        self.at_exit = False
        self.lock = threading.Lock()

    def load(self) -> dict:
        with self.lock:
            if self.texts is None:
                self.key = cache_key()
                d = cache_dir()
                self.path = None if d is None else os.path.join(d, f"forms-{self.key[:32]}.json")
                self.texts = self._read() or {}
            return self.texts

    def _read(self) -> dict | None:
        """The file's texts, or None when it is missing, corrupt or for another key."""
        if self.path is None:
            return None
        import hashlib
        import json

        try:
            with open(self.path, "rb") as f:
                head, _, payload = f.read().partition(b"\n")
            meta = json.loads(head)
            if meta.get("key") != self.key or \
                    meta.get("sha256") != hashlib.sha256(payload).hexdigest():
                return None
            texts = json.loads(payload)
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(texts, dict) or \
                not all(isinstance(v, str) for v in texts.values()):
            return None
        return texts

    def flush(self) -> bool:
        """Atomically rewrite the file with every text known here; False if not written."""
        with self.lock:
            if not self.dirty:
                return False
            self.dirty = False
            if self.path is None:
                return False
            import hashlib
            import json
            import tempfile

            texts = dict(self._read() or {}, **self.texts)
            payload = json.dumps(texts, sort_keys=True, separators=(",", ":")).encode()
            head = json.dumps({"key": self.key,
                               "sha256": hashlib.sha256(payload).hexdigest()}).encode()
            tmp = None
            try:
                d = os.path.dirname(self.path)
                os.makedirs(d, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".tmp-forms-", suffix=".json", dir=d)
                with os.fdopen(fd, "wb") as f:
                    f.write(head + b"\n" + payload)
                os.replace(tmp, self.path)
                return True
            except OSError:   # read-only or full disk: the texts stay in this process
                if tmp is not None:
                    try:
                        os.unlink(tmp)
                    except OSError:
                        pass
                return False


_disk = _Disk()


def _rendered(key: str, render, check) -> str:
    """The text for `key` from the disk cache if it passes `check`, else `render()`."""
    texts = _disk.texts
    if texts is None:
        texts = _disk.load()
    text = texts.get(key)
    if text is not None:
        try:
            check(text)
            return text
        except ValueError:   # a tampered or corrupt entry: render it again
            pass
    text = render()
    check(text)
    if not _disk.at_exit:   # written after each build, and at exit for renders without one
        import atexit

        atexit.register(flush)
        _disk.at_exit = True
    _disk.dirty = True
    texts[key] = text
    return text


def flush() -> bool:
    """Write newly rendered texts to the disk cache (after each build; also at exit)."""
    return _disk.flush() if _disk.dirty else False


def _clear_memory():
    """Forget every rendered text and reread the disk cache on next use (for tests)."""
    form.cache_clear()
    opcode.cache_clear()
    _module_format.cache_clear()
    _disk.__init__()


def _macro_text(name, args, attrs) -> str:
    key = repr((name, args, sorted(attrs.items())))
    return _rendered(key, lambda: str(getattr(_macros(), name)(*args, **attrs)).strip(),
                     _fields)


@lru_cache(maxsize=None)
def form(name: str, *args, **attrs) -> Form:
    """Format string of one instruction form, e.g. form("ld", "global", "u32", 4)."""
    return Form(_macro_text(name, args, attrs))


@lru_cache(maxsize=None)
def opcode(name: str, *args, **attrs) -> str:
    """The opcode text of one form, e.g. opcode("tcgen05_ld", "32x32b", 16): what an
    ir.Instr of the library carries (with `form=name`), its operands formatted by the
    emitter.  A full form's opcode is its text up to the operands (opcode("mov", "b32") is
    "mov.b32"), so the emitter's lines and the IR's instructions share one macro."""
    text = _macro_text(name, args, attrs)
    return text.split(" ", 1)[0].rstrip(";")


@lru_cache(maxsize=1)
def module_template():
    return environment().get_template("module.ptx.j2")


_SLOTS = ("ptxgen_version", "arch", "ptx_version", "name", "module_decls", "params",
          "directives", "decls", "body", "tail")


def _module_fields(text: str):
    if not set(_fields(text)) <= set(_SLOTS):
        raise ValueError("unknown field in the module format")


def _render_module_format(has_tail: bool) -> str:
    """The module template rendered once, with every field left as a {placeholder}."""
    marks = {k: f"\x00{k}\x00" for k in _SLOTS}
    text = module_template().render(
        ptxgen_version=marks["ptxgen_version"], arch=marks["arch"],
        ptx_version=marks["ptx_version"], name=marks["name"],
        module_decls=[marks["module_decls"]], params=[marks["params"]],
        directives=[marks["directives"]], decls=[marks["decls"]], body=marks["body"],
        tail=marks["tail"] if has_tail else "")
    text = text.replace("{", "{{").replace("}", "}}")
    for k, m in marks.items():
        text = text.replace(m, "{" + k + "}")
    return text


@lru_cache(maxsize=None)
def _module_format(has_tail: bool) -> str:
    return _rendered(repr(("<module>", has_tail)),
                     lambda: _render_module_format(has_tail), _module_fields)


def render_module(*, module_decls, params, directives, decls, tail, **fields) -> str:
    """Fill the cached module format string (one jinja render per process, not per kernel)."""
    fmt = _module_format(bool(tail))
    if _disk.dirty:
        flush()
    return fmt.format(module_decls="\n".join(module_decls), params=",\n".join(params),
                      directives="\n".join(directives), decls="\n    ".join(decls),
                      tail=tail, **fields)
