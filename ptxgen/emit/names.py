"""PTX identifiers and comment text made safe: nothing a user names can inject PTX."""
from __future__ import annotations

import re
from functools import lru_cache

_NON_IDENT = re.compile(r"[^A-Za-z0-9_]")
PTX_KEYWORDS = {"ret", "exit", "bra", "call", "entry", "func", "reg", "param", "global",
                "shared", "local", "const", "tex", "version", "target", "align"}


_LINE_BREAKS = str.maketrans({c: " " for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """Comment text that cannot end its `//` comment: every line break becomes a space.
    (Every line break is unprintable, so printable text, the usual case, is returned as is.)"""
    return text if text.isprintable() else text.translate(_LINE_BREAKS)


@lru_cache(maxsize=4096)   # per name: a build asks for the same few (kernel, parameters)
def _identifier(name: str) -> str:
    """`name` as a valid PTX identifier that is no keyword and not ptxgen's own.
    (An ASCII Python identifier, the usual name, is already [A-Za-z_][A-Za-z0-9_]*.)"""
    s = name
    if not (s.isascii() and s.isidentifier()):
        s = _NON_IDENT.sub("_", s)
        if not s or not (s[0].isalpha() or s[0] == "_"):
            s = "_" + s
    if s in PTX_KEYWORDS or s.startswith("_ptxgen"):
        s = s + "_"
    return s


def sanitize(name: str, used: set) -> str:
    """A valid, unique PTX identifier derived from `name`; nothing in it can inject PTX."""
    s = _identifier(name if type(name) is str else str(name))
    if s in used:
        n = 2
        while f"{s}_{n}" in used:
            n += 1
        s = f"{s}_{n}"
    used.add(s)
    return s
