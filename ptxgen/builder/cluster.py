"""Thread-block clusters: ids, the cluster barrier, and views of another CTA's shared memory.

A kernel declared with `@pg.kernel(..., cluster=(x, y, z))` is launched in clusters of
x*y*z CTAs (cuLaunchKernelEx with the cluster-dimension attribute; `.reqnctapercluster` in
the PTX).  The CTAs of a cluster run at the same time and can address each other's shared
memory (distributed shared memory): `pg.cluster_view(tile, rank)` is `tile` as it lives in
CTA `rank` of this cluster (a `mapa`'d shared::cluster address), loaded and stored like any
tensor.  Writes to it are visible to that CTA after `pg.cluster_sync()` (barrier.cluster
arrive + wait, release / acquire), which every thread of every CTA must reach.

    rank = pg.cta_rank_in_cluster()
    peer = pg.cluster_view(sm, rank ^ 1)      # the other CTA of a pair
    peer[tx] = A[...]                         # st.shared::cluster
    pg.cluster_sync()
"""
from __future__ import annotations

import math

from ..errors import TraceError
from ..ir import Const, DeclBuffer, SpecialReg, as_expr
from ..target.forms import opcode
from .context import current, fail, user_site
from .control import bind_let
from .ptx import addr as _address, emit_instr
from .scalar import local_scalar
from .tensor import TensorHandle, make_buffer

MAX_CLUSTER = 8      # the portable cluster size
MAX_NONPORTABLE = 16  # sm_90's largest: the launch sets NON_PORTABLE_CLUSTER_SIZE_ALLOWED


class ClusterShape(tuple):
    """A checked (x, y, z) that remembers the user's line (`src`), so a later arch error
    (clusters on sm_80) can point at the declaration."""
    src = ""


def check_cluster(cluster) -> tuple:
    """The (x, y, z) of a kernel's cluster= argument, checked, located at the user's line."""
    src = user_site().src
    c = tuple(cluster) if isinstance(cluster, (tuple, list)) else (cluster,)
    if not 1 <= len(c) <= 3 or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0
                                       for x in c):
        raise TraceError(f"{src}: cluster={cluster!r} must be 1 to 3 positive ints, e.g. "
                         f"(2, 1, 1)")
    c = (c + (1, 1))[:3]
    n = math.prod(c)
    if n > MAX_NONPORTABLE:
        raise TraceError(f"{src}: cluster={c} has {n} CTAs; clusters hold at most "
                         f"{MAX_CLUSTER} (the portable size), or {MAX_NONPORTABLE} on sm_90 "
                         f"with the non-portable launch attribute (set by the runtime)")
    out = ClusterShape(c)
    out.src = src
    return out


def _size(ctx) -> int:
    c = ctx.func.attrs.get("cluster")
    return math.prod(c) if c else 1


def cluster_id(dim: str = "x"):
    """%clusterid.<dim>: this cluster's index in the grid of clusters."""
    if dim not in ("x", "y", "z"):
        raise fail(f"dim must be 'x', 'y' or 'z', got {dim!r}")
    return bind_let(current(), user_site(), f"cluster{dim}", SpecialReg(f"clusterid.{dim}"),
                    (0, 2**31 - 2))


def cta_rank_in_cluster():
    """%cluster_ctarank: this CTA's rank in its cluster, 0 .. cluster size - 1."""
    ctx = current()
    return bind_let(ctx, user_site(), "cta_rank", SpecialReg("cluster_ctarank"),
                    (0, _size(ctx) - 1))


def cta_id_in_cluster(dim: str = "x"):
    """%cluster_ctaid.<dim>: this CTA's position in its cluster along `dim`."""
    if dim not in ("x", "y", "z"):
        raise fail(f"dim must be 'x', 'y' or 'z', got {dim!r}")
    ctx = current()
    c = ctx.func.attrs.get("cluster") or (1, 1, 1)
    return bind_let(ctx, user_site(), f"cta_in_cluster_{dim}", SpecialReg(f"cluster_ctaid.{dim}"),
                    (0, c["xyz".index(dim)] - 1))


def cluster_sync():
    """barrier.cluster.arrive + wait: every thread of every CTA of the cluster waits; shared
    memory written before it (local or through cluster_view) is visible after it."""
    emit_instr(opcode("barrier_cluster", "arrive"), [], form="barrier_cluster")
    emit_instr(opcode("barrier_cluster", "wait"), [], form="barrier_cluster")


def cluster_view(tile, rank) -> TensorHandle:
    """`tile` (a shared-memory tensor) as it lives in CTA `rank` of this cluster: a view whose
    loads and stores are ld/st.shared::cluster (sm_90+)."""
    if not isinstance(tile, TensorHandle) or tile.buffer.root.scope not in ("shared",
                                                                            "shared.dyn"):
        raise fail(f"cluster_view needs a shared-memory tensor (pg.alloc_shared or a pool tile), "
                   f"got {tile!r}")
    ctx = current()
    at = user_site()
    r = as_expr(rank)
    if not r.dtype.is_int or r.dtype.bits != 32:
        raise fail(f"cluster_view rank must be a 32-bit integer, got {r.dtype}")
    n = _size(ctx)
    if type(r) is Const and not 0 <= r.value < n:
        raise TraceError(f"{at.src}: cluster_view rank {r.value} is outside the cluster: its "
                         f"{n} CTA(s) have ranks 0..{n - 1} (cluster="
                         f"{ctx.func.attrs.get('cluster') or (1, 1, 1)}); mapa of a rank past "
                         f"the cluster faults")
    b = tile.buffer
    addr = local_scalar("uint32", name=f"{b.name}_peer")
    m = emit_instr(opcode("mapa"), [addr, _address(b.storage_ptr()), r], form="mapa")
    m.outs = 1
    m.attrs = {"peer_of": (b.uid, b.name)}     # the protocol check follows writes to the peer's tile
    view = make_buffer(ctx.unique(at.assigned or f"{b.name}_peer"), b.shape, b.dtype,
                       "shared.cluster", layout=b.layout, elem_offset=b.elem_offset,
                       align=b.align)
    view.tmem_addr = addr.__ptxgen_expr__()
    ctx.append(DeclBuffer(view), at.src)
    return TensorHandle(view)


__all__ = ["cluster_id", "cta_rank_in_cluster", "cta_id_in_cluster", "cluster_sync",
           "cluster_view", "check_cluster"]
