"""Instruction forms from templates/isa.ptx.j2, rendered once and cached as format strings.

A jinja render costs ~20 us; a cached `str.format` costs ~1 us.  So each distinct
(form, modifiers) pair is rendered once per process and reused for every emitted line.
"""
from __future__ import annotations

import string
from functools import lru_cache
from pathlib import Path

import jinja2


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
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=False,
                              autoescape=False)


@lru_cache(maxsize=1)
def _macros():
    return environment().get_template("isa.ptx.j2").module


_PLACEHOLDERS = {k: "{" + k + "}" for k in ("d", "a", "b", "c", "v", "p", "l", "id", "n",
                                             "op", "ops")}


class Form(str):
    """An instruction form's format string whose `.format(d=..., a=...)` is the text compiled
    once into an f-string function: str.format with keywords parses the string and builds
    a dict on every call, 4x the cost, and the emitter fills one form per PTX line."""

    def __new__(cls, text: str):
        self = super().__new__(cls, text)
        fields = []
        for _, field, _, _ in string.Formatter().parse(text):
            if field is not None and field not in fields:
                fields.append(field)
        # **_: like str.format, a form ignores operands it does not use (bar.sync's count)
        self.format = eval(f'lambda {"".join(f + ", " for f in fields)}**_: f{text!r}')
        return self


@lru_cache(maxsize=None)
def form(name: str, *args, **attrs) -> Form:
    """Format string of one instruction form, e.g. form("ld", "global", "u32", 4)."""
    macro = getattr(_macros(), name)
    return Form(str(macro(*args, **attrs)).strip())


@lru_cache(maxsize=1)
def module_template() -> jinja2.Template:
    return environment().get_template("module.ptx.j2")


_SLOTS = ("ptxgen_version", "arch", "ptx_version", "name", "module_decls", "params",
          "directives", "decls", "body", "tail")


@lru_cache(maxsize=None)
def _module_format(has_tail: bool) -> str:
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


def render_module(*, module_decls, params, directives, decls, tail, **fields) -> str:
    """Fill the cached module format string (one jinja render per process, not per kernel)."""
    fmt = _module_format(bool(tail))
    return fmt.format(module_decls="\n".join(module_decls), params=",\n".join(params),
                      directives="\n".join(directives), decls="\n    ".join(decls),
                      tail=tail, **fields)
