"""Generic -> async proxy ordering: a TMA or bulk store must not read shared memory that
threads wrote with plain stores unless a `fence.proxy.async` came between them.

Why a check: the async proxy (TMA, bulk copies) does not see the generic proxy's shared-memory
writes without that fence, so the store may copy stale bytes, and nothing faults.  The store
variants fence by themselves in warp/warpgroup/cta scope (every thread fences, the scope
synchronizes, one thread issues); in thread scope the caller elected the issuer, and this
pass walks the lowered kernel in program order to say where a fence is missing.  Writes are
matched by the tile they go through (name and storage); branches are read linearly.
"""
from __future__ import annotations

from ..errors import PtxgenError
from ..ir import Instr, Mem, Store, walk

_SHARED = ("shared", "shared.dyn")


def _key(buf):
    return (buf.root.uid, buf.name)


def check_proxy_fences(body) -> None:
    dirty: dict = {}      # tile key -> the source line of its latest plain write

    def visit(s):
        t = type(s)
        if t is Store:
            if s.buffer.root.scope in _SHARED:
                dirty[_key(s.buffer)] = s.src
            return
        if t is not Instr:
            return
        op = s.opcode
        if op.startswith("fence.proxy.async"):
            dirty.clear()
            return
        reads = (s.attrs or {}).get("reads_shared")
        if reads is not None:
            where = dirty.get(_key(reads))
            if where is not None:
                raise PtxgenError(
                    f"{s.src or '?'}: this store reads shared tile '{reads.name}', written by "
                    f"plain stores at {where or '?'} with no fence.proxy.async in between: the "
                    f"async proxy (TMA / bulk copy) may read stale bytes.  Call "
                    f"pg.ptx.fence.proxy_async() in every writing thread before the barrier "
                    f"that precedes the store, or issue the store from the scope that wrote "
                    f"the tile (pg.tile.cta.copy_async fences and synchronizes itself)")
            return
        if op.startswith(("st.shared", "stmatrix")) and s.operands and \
                isinstance(s.operands[0], Mem):
            buf = getattr(s.operands[0].ptr, "buffer", None)
            if buf is not None and buf.root.scope in _SHARED:
                dirty[_key(buf)] = s.src
        elif op.startswith(("atom.", "red.")):   # a generic-proxy write of its element
            for o in s.operands:
                buf = getattr(o.ptr, "buffer", None) if isinstance(o, Mem) else None
                if buf is not None and buf.root.scope in _SHARED:
                    dirty[_key(buf)] = s.src

    walk(body, visit)
