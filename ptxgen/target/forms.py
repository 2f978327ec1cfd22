"""Instruction forms from templates/isa.ptx.j2, rendered once and cached as format strings.

A jinja render costs ~20 us; a cached `str.format` costs ~1 us, a compiled one ~0.25 us.
So each distinct (form, modifiers) pair is rendered once per process and reused for every
emitted line.

Importing jinja2 and compiling the templates costs tens of ms, more than building a small
kernel, so the rendered texts are also kept on disk (`forms-<key>.txt` in the cache
directory, see `cache_dir`), keyed by a hash of the templates, this file and the ptxgen
version: a fresh process whose forms are all on disk never imports jinja.  The templates
stay the source of truth; a stale, corrupt or unwritable cache only costs the renders.
Reading it back imports nothing that a build does not already need (no json, no hashlib:
those cost ~1.5 and ~4 ms to import, more than a small build).

The package ships the texts its own kernels use as a seed (`forms_seed.txt` beside this file,
the same format, written by scripts/forms_seed.py): a form missing from the disk cache is taken
from the seed when the seed was made for the same key, so a fresh install's first build (an
empty cache directory) renders nothing either.  A seed made for other templates is ignored.
"""
from __future__ import annotations

import os
import threading
from _string import formatter_parser   # string.Formatter().parse, without importing string
from functools import lru_cache
from keyword import iskeyword
from pathlib import Path


@lru_cache(maxsize=1)
def templates_dir() -> Path:
    """templates/ beside the package in a checkout, else ptxgen/templates of the wheel.

    The checkout comes first: an editable install maps `ptxgen.templates` to whichever
    checkout was installed, which need not be the one this package was imported from."""
    up = os.path.dirname
    p = os.path.join(up(up(up(os.path.realpath(__file__)))), "templates")
    if os.path.isfile(os.path.join(p, "isa.ptx.j2")):   # os.path: a build reads it, and
        return Path(p)                                  # pathlib's resolve costs ~0.1 ms
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
    name that can be a parameter (no attribute, index, conversion or spec): a form's text is
    compiled into an f-string, so a text read back from disk must not carry an expression."""
    fields = []
    for _, field, spec, conv in formatter_parser(text):
        if field is None:
            continue
        if not field.isidentifier() or iskeyword(field) or field == "_" or spec or conv:
            raise ValueError(f"form placeholder {{{field}}} is not a plain name")
        if field not in fields:
            fields.append(field)
    return fields


_COMPILE_AFTER = 4    # a form's text is compiled on its 4th use (one eval: ~30 str.formats)


class Form(str):
    """An instruction form's format string whose `.format(d=..., a=...)` becomes the text
    compiled into an f-string function once the form has been used a few times: str.format
    with keywords parses the string and builds a dict on every call, 4x the cost, and the
    emitter fills one form per PTX line; but compiling costs as much as ~30 such calls, and
    a first build uses most of its forms once or twice (a small kernel's first build would
    spend most of its time compiling), so until then str.format fills it.  Same text: both
    format each operand with format(x, "")."""

    def __new__(cls, text: str, fields: list | None = None):
        self = super().__new__(cls, text)
        if fields is None:       # else: _fields(text), as the caller checked it
            fields = _fields(text)
        uses = 0

        def first_uses(*args, **operands):
            nonlocal uses
            uses += 1
            if uses == _COMPILE_AFTER:
                # **_: like str.format, a form ignores operands it does not use (bar.sync's)
                self.format = eval(f'lambda {"".join(f + ", " for f in fields)}**_: f{text!r}')
            if args:     # positional operands, in the order the fields first appear
                operands.update(zip(fields, args))
            return str.format(text, **operands)

        self.format = first_uses
        return self


# ---- the disk cache ------------------------------------------------------------------------
_MAGIC = b"ptxgen-forms-3"


@lru_cache(maxsize=1)
def _sha512_type():
    """CPython's own sha512, the one hashlib falls back to: `random` (which tempfile imports)
    has loaded it already, while hashlib's OpenSSL binding costs ~4 ms to load."""
    import sys

    try:
        if sys.version_info >= (3, 12):
            from _sha2 import sha512
        else:
            from _sha512 import sha512
    except ImportError:
        from hashlib import sha512
    return sha512


def _sha512(data: bytes = b""):
    return _sha512_type()(data)


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
    """sha512 over what decides a rendered text: the templates' bytes, this file's (how
    texts are rendered and read back) and the ptxgen version."""
    from .. import __version__   # the package constant; no layer above this one is imported

    h = _sha512(_MAGIC + b"\0" + __version__.encode())
    tdir = str(templates_dir())
    for p in (os.path.join(tdir, "isa.ptx.j2"), os.path.join(tdir, "module.ptx.j2"), __file__):
        with open(p, "rb") as f:
            b = f.read()
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def encode(key: str, texts: dict) -> bytes:
    """The cache file: a line `magic key sha512(payload)`, then the payload: entry keys and
    texts alternating, NUL-separated UTF-8 (no form contains a NUL), so that reading it back
    is one decode and one split."""
    items = sorted((k, v) for k, v in texts.items() if "\0" not in k + v)
    payload = "\0".join(x for kv in items for x in kv).encode()
    return b" ".join((_MAGIC, key.encode(), _sha512(payload).hexdigest().encode())) + b"\n" + \
        payload


def decode(key: str, data: bytes) -> dict | None:
    """The texts of a cache file, or None when it is corrupt or made for another key."""
    head, _, payload = data.partition(b"\n")
    if head.split(b" ") != [_MAGIC, key.encode(), _sha512(payload).hexdigest().encode()]:
        return None
    try:
        parts = payload.decode().split("\0") if payload else []
    except UnicodeDecodeError:
        return None
    if len(parts) % 2:
        return None
    it = iter(parts)
    return dict(zip(it, it))


SEED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forms_seed.txt")


class _Disk:
    """Rendered texts by entry key: loaded once from the cache file, written back (merged
    with whatever another process wrote meanwhile) after a build that rendered new ones."""

    def __init__(self):
        self.texts: dict | None = None
        self.seed: dict | None = None     # the shipped seed's texts, read on the first miss
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
                self.path = None if d is None else os.path.join(d, f"forms-{self.key[:32]}.txt")
                self.texts = self._read() or {}
            return self.texts

    def seeded(self, key: str) -> str | None:
        """The seed's text for `key` when the seed was made for this cache key."""
        if self.seed is None:
            try:
                with open(SEED, "rb") as f:
                    self.seed = decode(self.key, f.read()) or {}
            except OSError:
                self.seed = {}
        return self.seed.get(key)

    def _read(self) -> dict | None:
        if self.path is None:
            return None
        try:
            with open(self.path, "rb") as f:
                return decode(self.key, f.read())
        except OSError:
            return None

    def flush(self) -> bool:
        """Atomically rewrite the file with every text known here; False if not written."""
        with self.lock:
            if not self.dirty:
                return False
            self.dirty = False
            if self.path is None:
                return False
            import tempfile

            data = encode(self.key, {**(self._read() or {}), **self.texts})
            tmp = None
            try:
                d = os.path.dirname(self.path)
                os.makedirs(d, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".tmp-forms-", suffix=".txt", dir=d)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
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


def _rendered(key: str, render, check) -> tuple:
    """(text, check(text)): the text for `key` from the disk cache if it passes `check`, else
    from the seed, else `render()`; the latter two go to the disk cache."""
    texts = _disk.texts
    if texts is None:
        texts = _disk.load()
    text = texts.get(key)
    if text is not None:
        try:
            return text, check(text)
        except ValueError:   # a tampered or corrupt entry: render it again
            pass
    text = _disk.seeded(key)
    checked = None
    if text is not None:
        try:
            checked = check(text)
        except ValueError:   # a damaged seed: render
            text = None
    if text is None:
        text = render()
        checked = check(text)
    if not _disk.at_exit:   # written after each build, and at exit for renders without one
        import atexit

        atexit.register(flush)
        _disk.at_exit = True
    _disk.dirty = True
    texts[key] = text
    return text, checked


def flush() -> bool:
    """Write newly rendered texts to the disk cache (after each build; also at exit)."""
    return _disk.flush() if _disk.dirty else False


def _clear_memory():
    """Forget every rendered text and reread the disk cache on next use (for tests)."""
    form.cache_clear()
    opcode.cache_clear()
    _module_format.cache_clear()
    _disk.__init__()


def _macro_text(name, args, attrs) -> tuple:
    """(text, its fields) of a macro call."""
    key = repr((name, args, sorted(attrs.items())))
    return _rendered(key, lambda: str(getattr(_macros(), name)(*args, **attrs)).strip(),
                     _fields)


@lru_cache(maxsize=None)
def form(name: str, *args, **attrs) -> Form:
    """Format string of one instruction form, e.g. form("ld", "global", "u32", 4)."""
    return Form(*_macro_text(name, args, attrs))


@lru_cache(maxsize=None)
def opcode(name: str, *args, **attrs) -> str:
    """The opcode text of one form, e.g. opcode("tcgen05_ld", "32x32b", 16): what an
    ir.Instr of the library carries (with `form=name`), its operands formatted by the
    emitter.  A full form's opcode is its text up to the operands (opcode("mov", "b32") is
    "mov.b32"), so the emitter's lines and the IR's instructions share one macro."""
    text = _macro_text(name, args, attrs)[0]
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
                     lambda: _render_module_format(has_tail), _module_fields)[0]


def render_module(*, module_decls, params, directives, decls, tail, **fields) -> str:
    """Fill the cached module format string (one jinja render per process, not per kernel)."""
    fmt = _module_format(bool(tail))
    if _disk.dirty:
        flush()
    return fmt.format(module_decls="\n".join(module_decls), params=",\n".join(params),
                      directives="\n".join(directives), decls="\n    ".join(decls),
                      tail=tail, **fields)
