"""Registry of extra tile ops exposed as pg.tile.<scope>.<op> (gemm_async, ...)."""
_OPS = {}


def register(name, fn):
    _OPS[name] = fn
    return fn


def get(name):
    if name not in _OPS:
        from ..primitives import tcgen05  # noqa: F401  (registers its ops on import)
    return _OPS.get(name)
