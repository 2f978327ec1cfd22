"""Shared and tensor memory bookkeeping: SMEMPool, TMEMPool, mbarriers, resource summary.

Importing this package registers the checked helpers `pg.ptx.tcgen05.{alloc, dealloc,
relinquish_alloc_permit, fence_before_thread_sync, fence_after_thread_sync}`,
`pg.ptx.mbarrier.{init, arrive, arrive_expect_tx, try_wait, test_wait, inval}` and
`pg.ptx.fence.{proxy_async, mbarrier_init}` and `pg.ptx.tma.{map_address, load, prefetch}`.
"""
from ..builder.ptx import ptx as _ptx
from . import mbarrier as _mb
from . import tma as _tma
from . import tmem as _tm
from ..builder.resources import Resources, resources_of, static_smem_bytes
from .pipeline import Pipeline
from .smem import MAX_DYNAMIC_SMEM, SMEMPool
from .swizzle import infer_mode as infer_mma_swizzle
from .swizzle import mma_layout
from ..builder.resources import check_tmem_live
from .tmem import TMEMPool

for _name, _fn in {
    "tcgen05.alloc": _tm.tcgen05_alloc,
    "tcgen05.dealloc": _tm.tcgen05_dealloc,
    "tcgen05.relinquish_alloc_permit": _tm.tcgen05_relinquish_alloc_permit,
    "tcgen05.fence_before_thread_sync": _tm.tcgen05_fence_before_thread_sync,
    "tcgen05.fence_after_thread_sync": _tm.tcgen05_fence_after_thread_sync,
    "mbarrier.init": _mb.init,
    "mbarrier.arrive": _mb.arrive,
    "mbarrier.arrive_expect_tx": _mb.arrive_expect_tx,
    "mbarrier.try_wait": _mb.try_wait,
    "mbarrier.test_wait": _mb.test_wait,
    "mbarrier.inval": _mb.inval,
    "fence.proxy_async": _mb.fence_proxy_async,
    "fence.mbarrier_init": _mb.fence_mbarrier_init,
    "tma.map_address": _tma.map_address,
    "tma.load": _tma.load,
    "tma.prefetch": _tma.prefetch,
}.items():
    _ptx.register(_name, _fn)

__all__ = ["SMEMPool", "TMEMPool", "Pipeline", "Resources", "resources_of", "check_tmem_live",
           "infer_mma_swizzle", "mma_layout", "static_smem_bytes", "MAX_DYNAMIC_SMEM"]
