"""A kernel function's signature: its parameters' annotations (pg.Tensor, pg.float32, dtype
names, or strings of them under `from __future__ import annotations`) and the scalar types
(``ScalarType``: pg.int32, pg.float32, ...) that annotate scalars and make literals.  Split
from kernel.py."""
from __future__ import annotations

import inspect
from types import FunctionType

from ..errors import TraceError
from ..ir import cast, const

class ScalarType:
    """pg.int32, pg.float32, ...: scalar parameter annotations and literal constructors."""

    def __init__(self, name):
        self.ptxgen_dtype = name

    def __call__(self, value):
        return const(value, self.ptxgen_dtype) if isinstance(value, (int, float)) \
            else cast(value, self.ptxgen_dtype)

    def __repr__(self):
        return f"pg.{self.ptxgen_dtype}"

    def __str__(self):
        return self.ptxgen_dtype


def param_from_annotation(name, ann, fn, src):
    if isinstance(ann, str):
        ns = dict(fn.__globals__)
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                ns[var] = cell.cell_contents
            except ValueError:
                pass
        try:
            ann = eval(ann, ns)   # `from __future__ import annotations`
        except Exception as e:
            raise TraceError(f"{src}: cannot evaluate the annotation of '{name}' of "
                             f"{fn.__name__}: {e}") from None
    return ann


def annotated_params(fn):
    """(name, annotation) of each parameter.  A plain function is read off its code object:
    inspect.signature costs as much as tracing a small kernel."""
    code = fn.__code__ if isinstance(fn, FunctionType) else None
    if code is None or hasattr(fn, "__wrapped__") or code.co_kwonlyargcount or \
            code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return [(n, p.annotation) for n, p in inspect.signature(fn).parameters.items()]
    anns = fn.__annotations__
    return [(n, anns.get(n, inspect.Parameter.empty))
            for n in code.co_varnames[:code.co_argcount]]
