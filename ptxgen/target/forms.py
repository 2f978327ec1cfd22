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
the same format, written by scripts/forms_seed.py).  It is read, and checked against the key,
when this module is imported (~0.3 ms: hashing the templates for the key, splitting and
checking the seed; every build needs both, and a small kernel's first `k.ptx()` costs ~0.4 ms,
so there they would come close to doubling it), and a form is taken from it first, then from
the disk cache (read on the first form the seed lacks, from the directory the environment
names then), then rendered.  So a first build whose forms the seed has opens no file and
writes none, also with an empty cache directory.  A seed made for other templates is ignored.
The f-string functions of the seed's forms ship compiled as well (form_shapes.py, one per
shape of text, see _compiled), so no build compiles one of them with an eval.
"""
from __future__ import annotations

import os
import threading
from types import FunctionType
from _string import formatter_parser   # string.Formatter().parse, without importing string
from functools import lru_cache
from keyword import iskeyword
from operator import itemgetter


_HERE = os.path.dirname(os.path.abspath(__file__))


@lru_cache(maxsize=1)
def templates_path() -> str:
    """templates/ beside the package in a checkout, else ptxgen/templates of the wheel.

    The checkout comes first: an editable install maps `ptxgen.templates` to whichever
    checkout was installed, which need not be the one this package was imported from.  The
    package directory as imported is tried before its resolved path (os.path.realpath costs
    ~50 us, and the key is computed on import): they differ only where a link leads to the
    package."""
    up = os.path.dirname
    for pkg in (_HERE, None):
        if pkg is None:
            pkg = up(os.path.realpath(__file__))
        p = os.path.join(up(up(pkg)), "templates")
        if os.path.isfile(os.path.join(p, "isa.ptx.j2")):
            return p
    try:
        from importlib.resources import files

        p = str(files("ptxgen.templates"))
        if os.path.isfile(os.path.join(p, "isa.ptx.j2")):
            return p
    except (ModuleNotFoundError, TypeError):
        pass
    raise FileNotFoundError("ptxgen templates not found (expected templates/isa.ptx.j2)")


def templates_dir():
    """templates_path() as a pathlib.Path (imported here: a build needs only the string)."""
    from pathlib import Path

    return Path(templates_path())


@lru_cache(maxsize=1)
def environment():
    """The jinja environment, imported on the first render that the disk cache lacks."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates_path()),
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


def _plain(texts) -> bool:
    """Whether _fields accepts every one of these texts, in a few C calls for all of them
    (the seed's ~180 on import; a Python loop over their ~450 placeholders costs ~0.1 ms):
    texts that each pass also pass joined with NULs, and a placeholder that would span a NUL
    is not a name, so one parse of the joined texts decides."""
    try:
        parsed = list(formatter_parser("\0".join(texts)))
    except ValueError:    # an unmatched brace
        return False
    names = set(map(itemgetter(1), parsed))
    names.discard(None)
    return set(map(itemgetter(2), parsed)) <= {"", None} and \
        set(map(itemgetter(3), parsed)) == {None} and \
        all(n.isidentifier() and not iskeyword(n) and n != "_" for n in names)


_COMPILE_AFTER = 4    # a form's text is compiled on its 4th use (see _compiled)
try:   # (shape, params) -> code of its f-string function, literals as marks (see _compiled)
    from .form_shapes import SHAPES as _SHIPPED
except ImportError:   # the generated module is missing: every shape is compiled here
    _SHIPPED = {}
_SHAPES: dict = dict(_SHIPPED)


def _shape(text: str) -> tuple:
    """(shape, literals) of a form's text: its fields in order with None where literal text
    goes between them, and those literals."""
    shape, lits = [], []
    for lit, field, _, _ in formatter_parser(text):
        if lit:
            if shape and shape[-1] is None:    # "}}" and "{{" split a literal: one constant
                lits[-1] += lit
            else:
                shape.append(None)
                lits.append(lit)
        if field is not None:
            shape.append(field)
    return tuple(shape), lits


def shape_source(shape: tuple, params: str) -> str:
    """The lambda of a shape, each literal a mark ("\\0<i>\\0"); an f-string but for a shape
    without fields, whose literal is its text (the same code)."""
    marks = iter(range(len(shape)))
    src = "".join(f"\0{next(marks)}\0" if p is None else "{" + p + "}" for p in shape)
    return f"lambda {params}**_: {'f' if params else ''}{src!r}"


def _compiled(text: str, fields: list):
    """The f-string function of a form's text, `lambda d, a, **_: f"mov.b32 {d}, {a};"` (**_:
    like str.format, a form ignores operands it does not use, bar.sync's).  An eval costs
    ~35 us (~70 us in a process's first builds), but forms share few shapes (their fields in
    order, with literal text between them or not: 20 over the seed's 179 forms), so a form's
    function is the code of its shape with its own literals in place of the marks (~1 us):
    the bytecode an eval of its own text gives.  The seed's shapes are compiled with the
    package (form_shapes.py, written by scripts/forms_seed.py); another is compiled once."""
    shape, lits = _shape(text)
    params = "".join(f + ", " for f in fields)
    key = (shape, params)
    code = _SHAPES.get(key)
    if code is None:
        code = _SHAPES[key] = eval(shape_source(shape, params)).__code__
    marks = {f"\0{i}\0": lit for i, lit in enumerate(lits)}
    consts = tuple(marks.pop(c, c) if type(c) is str else c for c in code.co_consts)
    if marks:    # a compiler that keeps literals otherwise: this text's own lambda
        return eval(f"lambda {params}**_: f{text!r}")
    return FunctionType(code.replace(co_consts=consts), globals())


class Form(str):
    """An instruction form's format string whose `.format(d=..., a=...)` becomes the text
    compiled into an f-string function once the form has been used a few times: str.format
    with keywords parses the string and builds a dict on every call, 4x the cost, and the
    emitter fills one form per PTX line; but compiling a new shape costs as much as ~30
    such calls, and a first build uses most of its forms once or twice (a small kernel's
    first build would spend most of its time compiling), so until then str.format fills it.
    Same text: both format each operand with format(x, "").  The text is one that
    _fields accepts (the caller checked it); its fields are parsed when first needed.  A
    Form is its text and, once used, a count: creating one is the str's creation only."""

    _uses = 0

    def format(self, *args, **operands):
        self._uses = uses = self._uses + 1
        if uses == _COMPILE_AFTER:    # from now on the instance's format is the function
            self.format = _compiled(self, _fields(self))
        if args:     # positional operands, in the order the fields first appear
            operands.update(zip(_fields(self), args))
        return str.format(self, **operands)


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
    tdir = templates_path()
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


SEED = os.path.join(_HERE, "forms_seed.txt")


class _Disk:
    """The texts of this process by entry key: from the seed (read with the key on import),
    from the cache file (read once, on the first text the seed lacks) or rendered; the file
    is written back (merged with whatever another process wrote meanwhile) after a build
    that rendered new ones."""

    def __init__(self):
        self.texts: dict = {}             # every text this process has checked: the
        # seed's (checked on import), and those of the cache file or rendered that it used
        self.seed: dict | None = None     # the shipped seed's texts (None: not read yet)
        self.file: dict | None = None     # the cache file's texts (None: not read yet)
        self.path: str | None = None
        self.key = ""
        self.dirty = False
        self.at_exit = False
        self.lock = threading.Lock()

    def prime(self) -> dict:
        """The key, and the seed's texts if it was made for that key, each one that _fields
        accepts (package data only: no environment variable decides either)."""
        with self.lock:
            if self.seed is None:
                key = cache_key()
                try:
                    with open(SEED, "rb") as f:
                        seed = decode(key, f.read()) or {}
                except OSError:
                    seed = {}
                if not _plain(seed.values()):    # a damaged seed: its good texts only
                    seed = {k: v for k, v in seed.items() if _plain((v,))}
                for k in _MODULE_KEYS:           # and module formats of _SLOTS only
                    if k in seed and not _slots_only(seed[k]):
                        del seed[k]
                self.key, self.seed = key, seed
                self.texts.update({**seed, **self.texts})
            return self.seed

    def load(self) -> dict:
        """The cache file's texts (read on first use; the directory is read from the
        environment then)."""
        if self.seed is None:
            self.prime()
        with self.lock:
            if self.file is None:
                d = cache_dir()
                self.path = None if d is None else os.path.join(d, f"forms-{self.key[:32]}.txt")
                self.file = self._read() or {}
            return self.file

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


def _resolved(key: str, render, check) -> str:
    """The text for `key` that this process has (the seed's among them), else the cache
    file's, the first of them that passes `check` (a text fails by raising ValueError), else
    `render()` (which goes to the cache file).  A text the seed has is not written to the
    file for itself: the seed gives it again."""
    if _disk.seed is None:
        _disk.prime()
    texts = _disk.texts
    for source in (texts, None):
        if source is None:
            source = _disk.file
            if source is None:
                source = _disk.load()
        text = source.get(key)
        if text is not None:
            try:
                check(text)
            except ValueError:   # a tampered or corrupt entry: the next one
                continue
            texts[key] = text
            return text
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
    """Forget every text and reread the seed and the disk cache on next use (for tests)."""
    form.cache_clear()
    opcode.cache_clear()
    _module_format.cache_clear()
    _disk.__init__()


def _macro_text(name, args, attrs) -> str:
    """The text of a macro call: the seed's (checked on import) without a further call."""
    key = repr((name, args, sorted(attrs.items())))
    text = _disk.texts.get(key)
    if text is None:
        return _resolved(key, lambda: str(getattr(_macros(), name)(*args, **attrs)).strip(),
                         _fields)
    return text


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


_MODULE_KEYS = (repr(("<module>", False)), repr(("<module>", True)))


def _slots_only(text: str) -> bool:
    names = set(map(itemgetter(1), formatter_parser(text)))
    names.discard(None)
    return names <= set(_SLOTS)


def _module_fields(text: str):
    """ValueError unless the module format's placeholders are bare names of _SLOTS."""
    if not _plain((text,)) or not _slots_only(text):
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
    key = _MODULE_KEYS[has_tail]
    text = _disk.texts.get(key)      # the seed's was checked on import
    if text is None:
        return _resolved(key, lambda: _render_module_format(has_tail), _module_fields)
    return text


def render_module(*, module_decls, params, directives, decls, tail, **fields) -> str:
    """Fill the cached module format string (one jinja render per process, not per kernel)."""
    fmt = _module_format(bool(tail))
    if _disk.dirty:
        flush()
    return fmt.format(module_decls="\n".join(module_decls), params=",\n".join(params),
                      directives="\n".join(directives), decls="\n    ".join(decls),
                      tail=tail, **fields)


try:   # the key and the seed, on import: what every build needs first (see the module text)
    _disk.prime()
except OSError:   # no templates (a broken install): the first build that needs one says so
    pass
