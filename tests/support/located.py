"""The exact located-error check of the build-time checks' tests: the user's line of a
statement marked `# at: tag`, and an error whose text is exactly "<that line>: message"."""
import inspect
import os
import sys

import pytest

import ptxgen as pg


def at(tag: str, depth: int = 1) -> str:
    """"file.py:N" of the line of the calling test function that ends with `# at: tag` (or,
    failing that, the one such line of its file)."""
    code = sys._getframe(depth).f_code
    lines, start = inspect.getsourcelines(code)
    hits = [start + n for n, line in enumerate(lines) if line.rstrip().endswith(f"# at: {tag}")]
    if not hits:   # a helper of the file (one tag in the whole file)
        with open(code.co_filename) as f:
            hits = [n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# at: {tag}")]
    assert len(hits) == 1, (tag, hits)
    return f"{os.path.basename(code.co_filename)}:{hits[0]}"


def fails(build, tag: str, message: str, exc=pg.PtxgenError, where=None):
    """build() raises `exc` whose text is exactly "<user's line>: message" (the line marked
    `tag`, or `where`)."""
    where = where or at(tag, 2)
    with pytest.raises(exc) as ei:
        build()
    assert str(ei.value) == f"{where}: {message}"
    return ei.value


def kernel(fn, grid=(1,), block=(32,), **kw):
    return pg.kernel(fn, grid=grid, block=block, **kw)


def build(fn, grid=(1,), block=(32,), arch="sm_90a"):
    """Trace and emit (the errors of either)."""
    return lambda: pg.kernel(fn, grid=grid, block=block).ptx(arch)


def line_of(fn) -> str:
    """"file.py:N" of a one-line lambda (the user's line of what it does)."""
    return f"{os.path.basename(fn.__code__.co_filename)}:{fn.__code__.co_firstlineno}"
