"""pg.cuda: the names seed 002 writes under Tx.cuda, as forms of ptxgen's own (one
implementation each).  Other Tx.cuda names raise an error naming the ptxgen spelling, so a
port from TIRx finds it at the line it is on."""
from __future__ import annotations

from ..errors import TraceAttributeError
from .allocate import decl_tmem
from .context import user_src
from .control import cta_id, cta_sync, thread_id

# Tx.cuda names without a pg.cuda form -> what to write instead
_ELSEWHERE = {
    "LaunchConfig": "pg.launch(grid=..., block=...) in the body, or @pg.kernel(grid=..., "
                    "block=...)",
    "func_call": "pg.ptx['opcode.modifiers'](...) (inline CUDA C++ is out of scope by design)",
    "warp_sync": "pg.warp_sync()",
}


class Cuda:
    """Tx.cuda.decl_tmem / cta_sync / thread_idx / block_idx as pg.cuda.*."""

    decl_tmem = staticmethod(decl_tmem)
    cta_sync = staticmethod(cta_sync)

    @staticmethod
    def thread_idx(dim: str = "x"):
        """%tid.<dim>, its extent from the launch: pg.thread_id(dim=dim)."""
        return thread_id(dim=dim)

    @staticmethod
    def block_idx(dim: str = "x"):
        """%ctaid.<dim>: pg.cta_id(dim=dim)."""
        return cta_id(dim=dim)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        fix = _ELSEWHERE.get(name)
        raise TraceAttributeError(
            f"{user_src()}: pg.cuda has decl_tmem, cta_sync, thread_idx and block_idx (seed "
            f"002's Tx.cuda names); " + (f"for Tx.cuda.{name} write {fix}" if fix else
                                         f"it has no {name!r}"))


cuda = Cuda()
