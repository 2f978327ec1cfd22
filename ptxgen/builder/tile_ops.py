"""The front ends of the tile ops, by name: `pg.tile.<scope>.<op>` looks them up here.
Each module that defines front ends registers them when it is imported (builder/tile.py:
copy; builder/tcgen05.py: gemm_async, mma_commit, tmem_load/store/copy; builder/mma_sync.py:
gemm)."""
_OPS = {}


def register(name, fn):
    _OPS[name] = fn
    return fn


def get(name):
    return _OPS.get(name)
