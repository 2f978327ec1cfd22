"""The front ends of the tile ops, by name: `pg.tile.<scope>.<op>` looks them up here.

A front end is attached to its op's one declaration (primitives/registry.TileOp.front:
primitives never import builder, so builder fills that field).  Each module that defines
front ends registers them when it is imported (builder/tile.py: copy; builder/tcgen05.py:
mma_commit, tmem_load/store/copy; builder/mma.py: gemm_async, ...; builder/mma_sync.py:
gemm).  A name may have a front end and no declared op (mma_accumulator builds a fragment
and records no call)."""
from ..primitives.registry import declaration, front_end, front_ends


def register(name, fn):
    """Make `fn(scope, *args, **options)` the front end `pg.tile.<scope>.<name>`."""
    declaration(name).front = fn
    return fn


def get(name):
    return front_end(name)


def names() -> list:
    return front_ends()
