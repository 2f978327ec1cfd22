"""Asynchronous copies: `copy_async` (TMA, bulk, cp.async), `async_commit`, `async_wait`.

Importing this package declares the ops and registers their variants (one module each):

    tma        global -> shared tile through a tensor map (cp.async.bulk.tensor), sm_90+
    tma_store  shared -> global tile (or reduce-add) through a tensor map, bulk groups
    bulk       1-D contiguous cp.async.bulk, global <-> shared, sm_90+
    cp_async   per-thread cp.async of 4/8/16 bytes (vec_auto's plan), commit groups, sm_80+

Completion: a copy into shared memory with `mbar=` makes exactly one arrival on that
mbarrier carrying the copy's transaction bytes (TMA / bulk: `mbarrier.arrive.expect_tx` by
the issuing thread; cp.async: `cp.async.mbarrier.arrive.noinc`), so a barrier initialised
with count N completes a phase when N such copies have landed.  Stores and cp.async loads
complete through groups: `async_commit()` closes one, `async_wait(n)` waits until at most n
are pending.  The front end (builder/async_copy.py) validates the operands, plans the tensor
map (`plan_tensor_map`) and records the result; variants read it as `call.record`.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

from ...errors import ArchError
from ...target import has_opcode
from ..call import Call
from ..copy import CopyCall
from ..registry import tile_op
from ..scope import make_scope
from .tmap import DATA_TYPES, REDUCE_ADD, TensorMapSpec, TmaPlan, plan_tensor_map


@dataclass
class TensorMapRef:
    """A tensor-map kernel parameter as a copy uses it: `var` is its generic address (bound
    at the kernel's entry), `plan` the box, coordinates and bytes of this copy."""
    var: object
    plan: TmaPlan

    @property
    def spec(self) -> TensorMapSpec:
        return self.plan.spec


@dataclass(frozen=True)
class AsyncRecord:
    """What the copy_async front end derived at trace time."""
    direction: str            # "load" (global -> shared) or "store" (shared -> global)
    mbar: object = None       # BufferPtr of the mbarrier word, or None
    multicast: object = None  # CTA mask (int) of a multicast load, or None
    cluster: tuple | None = None   # the kernel's cluster shape (cluster scope, multicast)
    reduce: str | None = None      # "add": a TMA reduce-add store
    cache_hint: tuple = ()    # the user's hints, normalized to a tuple
    tmap: TensorMapRef | None = None
    tmap_why: str = ""        # why there is no tensor map


@dataclass(frozen=True)
class GroupRecord:
    """async_commit / async_wait: the pending count, whether only reads are awaited (bulk
    stores' `.read`), and whether the scope synchronizes after the wait."""
    pending: int = 0
    read: bool = False
    sync: bool = True
    cluster: tuple | None = None
    kind: str | None = None        # "cp_async" / "bulk": only that kind of group; None: both


def _of(cls, stmt, target, an, block, where):
    """The call of a traced async op; the cluster scope's shape comes from its record."""
    scope = stmt.scope
    if scope == "cluster":
        scope = make_scope("cluster", block, stmt.record.cluster)
    return cls(stmt.op, stmt.args, scope, target, an, record=stmt.record, options=stmt.options,
               all_active=stmt.active, where=where, stmt=stmt, block=block)


class GroupCall(Call):
    """async_commit / async_wait."""
    of = classmethod(_of)

    def describe(self) -> str:
        arg = str(self.record.pending) if self.op == "async_wait" else ""
        return f"pg.tile.{self.scope.name}.{self.op}({arg}) [{self.scope}, {self.target}]"


class CopyAsyncCall(CopyCall):
    """A copy_async call: the copy's sides plus its record."""
    of = classmethod(_of)

    @property
    def mbar(self):
        return self.record.mbar

    @property
    def load(self) -> bool:
        return self.record.direction == "load"

    @property
    def smem_side(self):
        return self.dst_side if self.load else self.src_side

    @property
    def gmem_side(self):
        return self.src_side if self.load else self.dst_side

    def describe(self) -> str:
        extra = f", mbar={self.args[2]}" if len(self.args) > 2 else ""
        return (f"pg.tile.{self.scope.name}.copy_async({self.dst}, {self.src}{extra}) "
                f"[{self.dtype}, {self.scope}, {self.target}]")


def require_cp_async(call, what="copy_async"):
    """Every async op needs sm_80 (cp.async); TMA and bulk copies say sm_90 themselves."""
    target = call.target
    if not has_opcode("cp.async", target):
        raise ArchError(f"{what} needs sm_80 or newer (cp.async, the oldest asynchronous copy); "
                        f"the target is {target.arch}: use pg.tile.*.copy")


tile_op("copy_async", CopyAsyncCall, requires=require_cp_async)
tile_op("async_commit", GroupCall, requires=lambda call: require_cp_async(call, "async_commit"))
tile_op("async_wait", GroupCall, requires=lambda call: require_cp_async(call, "async_wait"))


def _autoload():
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not m.name.startswith("_") and m.name not in ("common", "tmap"):
            importlib.import_module(f"{__name__}.{m.name}")


_autoload()

__all__ = ["AsyncRecord", "GroupRecord", "TensorMapRef", "TensorMapSpec", "TmaPlan",
           "plan_tensor_map", "CopyAsyncCall", "GroupCall", "DATA_TYPES", "REDUCE_ADD"]
