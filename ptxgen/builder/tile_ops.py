"""Registry of extra tile ops exposed as pg.tile.<scope>.<op> (gemm_async, ...)."""
_OPS = {}


def register(name, fn):
    _OPS[name] = fn
    return fn


def get(name):
    return _OPS.get(name)
