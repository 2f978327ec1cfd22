"""pg.local_scalar / pg.shared_scalar / pg.alloc_scalar: a mutable one-element buffer read and
written by name (seed 000: "T.local_scalar, T.shared_scalar and T.alloc_scalar choose the scope
explicitly")."""
from __future__ import annotations

from ..ir import Const, Load
from .context import fail, user_site
from .allocate import alloc_at
from .tensor import TensorHandle, store


class LocalScalar:
    """A one-element local buffer read and written by name: sugar for `buf[0]`."""

    def __init__(self, handle: TensorHandle):
        object.__setattr__(self, "_h", handle)

    def __ptxgen_expr__(self):
        b = self._h.buffer
        return Load(b, (Const(0),), b.dtype)

    @property
    def buffer(self):
        return self._h.buffer

    # writes: what `buf[0] = value` appends, without indexing a (1,) buffer with 0 again
    def set(self, value):
        store(self._h.buffer, (Const(0),), value, user_site())
        return self

    def _update(self, op, other):
        # user_site(3): the user's line is the caller of the __i<op>__ method that called this
        store(self._h.buffer, (Const(0),), getattr(self.__ptxgen_expr__(), op)(other),
              user_site(3))
        return self

    def __iadd__(self, o): return self._update("__add__", o)
    def __isub__(self, o): return self._update("__sub__", o)
    def __imul__(self, o): return self._update("__mul__", o)
    def __ifloordiv__(self, o): return self._update("__floordiv__", o)
    def __imod__(self, o): return self._update("__mod__", o)
    def __iand__(self, o): return self._update("__and__", o)
    def __ior__(self, o): return self._update("__or__", o)
    def __ixor__(self, o): return self._update("__xor__", o)
    def __ilshift__(self, o): return self._update("__lshift__", o)
    def __irshift__(self, o): return self._update("__rshift__", o)

    def __repr__(self):
        b = self._h.buffer
        return f"<{b.scope} scalar {b.name}: {b.dtype}>"


def _forward(name):
    def f(self, *a):
        return getattr(self.__ptxgen_expr__(), name)(*a)
    f.__name__ = name
    return f


for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
           "__rfloordiv__", "__mod__", "__rmod__", "__truediv__", "__rtruediv__", "__and__",
           "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lshift__", "__rshift__",
           "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__neg__", "__invert__"):
    setattr(LocalScalar, _n, _forward(_n))
LocalScalar.__hash__ = object.__hash__


def alloc_scalar(dtype, scope="local", init=None, name=None):
    """A mutable scalar in `scope` ("local", "shared"): `s += 1`, `s.set(expr)`; the same IR as
    a (1,) buffer and `[0]`.  A shared scalar is one word for the whole CTA: every thread that
    runs `init` (or a write) stores it, so write it from one thread and synchronize."""
    return _scalar(user_site(), dtype, scope, init, name)


def local_scalar(dtype, init=None, name=None):
    """A mutable scalar: `phase += 1`, `phase.set(expr)`; same IR as alloc_local((1,)) + [0]."""
    return _scalar(user_site(), dtype, "local", init, name)


def shared_scalar(dtype, init=None, name=None):
    """A mutable scalar in shared memory (see alloc_scalar)."""
    return _scalar(user_site(), dtype, "shared", init, name)


def _scalar(at, dtype, scope, init, name):
    """alloc_scalar at the user's line `at`, found once by the public function."""
    if scope not in ("local", "shared"):
        raise fail(f"alloc_scalar scope must be 'local' or 'shared', got {scope!r}")
    h = alloc_at(at, "scalar", name, (1,), dtype, scope)
    if init is not None:
        store(h.buffer, (Const(0),), init, at)   # what `h[0] = init` appends
    return LocalScalar(h)
