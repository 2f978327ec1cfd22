"""ptxgen: tile-level GPU kernels written in Python, lowered straight to PTX text.

    import ptxgen as pg

    @pg.kernel(grid=(1,), block=(128,))
    def smem_demo(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        sm = pg.alloc_shared((128,), "float32")
        sm[tx] = A[tx]
        pg.cta_sync()
        B[tx] = sm[tx] * 2.0
"""
from .version import __version__  # noqa: E402,F401

from .dtypes import DType, dtype  # noqa: E402
from .errors import (ArchError, CudaError, DispatchError, LaunchError, LayoutError,  # noqa: E402
                     PTXCompileError, PtxgenError, ResourceError, SyncError,
                     TraceAttributeError, TraceError)
from . import printer as _printer  # noqa: E402,F401  (gives the IR nodes their text)
from .ir import cast, select  # noqa: E402
from .ir import maximum as max  # noqa: E402,A001
from .ir import minimum as min  # noqa: E402,A001
from .builder.control import (block_dim, cta_id, cta_sync, else_, grid_dim, if_,  # noqa: E402
                              lane_id, launch, let, named_barrier, named_barrier_arrive,
                              serial, thread_id,
                              unroll, var,
                              warp_id, warp_sync, warpgroup_id, while_)
from .builder.kernel import Kernel, ScalarType, debug, debug_bounds, kernel  # noqa: E402
from .builder.cluster import (cluster_id, cluster_sync, cluster_view,  # noqa: E402
                              cta_id_in_cluster, cta_rank_in_cluster)
from .builder.griddep import launch_dependent_grids, wait_on_dependent_grids  # noqa: E402
from .builder.tensor import Tensor, TensorHandle  # noqa: E402
from .builder.scalar import LocalScalar, alloc_scalar, local_scalar, shared_scalar  # noqa: E402
from .builder.allocate import alloc_buffer, alloc_local, alloc_shared, decl_buffer  # noqa: E402
# seed 002's spellings of the names above (one implementation each): pg.alloc_tensor /
# pg.decl_tensor / pg.decl_tmem(addr, ty_args=[pg.Tensor(...)]), B[..., pg.Ramp(i, 1, n)],
# and pg.cuda.* for the seed's Tx.cuda.* names
from .builder.allocate import alloc_tensor, decl_tensor, decl_tmem  # noqa: E402
from .builder.subview import Ramp  # noqa: E402
from .builder.cuda_names import cuda  # noqa: E402
from .builder.tensor_meta import address_of, ptr_byte_offset  # noqa: E402
from .builder.ptx import addr  # noqa: E402
from .builder.warpgroup import setmaxnreg, warpgroup_role  # noqa: E402


# Loaded on first use (PEP 562): the tile ops' front ends, the pools and the pg.ptx helpers
# bring in the primitives (and numpy through their layout checks), more than a small kernel
# costs to build.  One group, imported in this order, since alloc registers helpers on the
# pg.ptx namespace and the front ends register the ops of pg.tile.
_ON_FIRST_USE = {"tile", "ptx", "Resources", "SMEMPool", "TMEMPool", "Pipeline", "resources_of",
                 "mma_sync_layout", "ldmatrix_layout"}


def __getattr__(name):
    if name == "torch_op":       # imports torch when called, never with `import ptxgen`
        from .custom_op import torch_op
        globals()["torch_op"] = torch_op
        return torch_op
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module 'ptxgen' has no attribute '{name}'")
    from .builder.tile import tile
    from .builder import tcgen05, mma, async_copy, mma_sync, tile_math  # noqa: F401  (pg.tile ops)
    from .builder import atomic  # noqa: F401  (pg.ptx.atom / red / fence.acq_rel, sc)
    from .alloc import Pipeline, Resources, SMEMPool, TMEMPool, resources_of  # (pg.ptx helpers)
    from .builder.ptx import ptx
    from .primitives.copy.ldstmatrix import ldmatrix_layout
    from .primitives.mma_sync import mma_sync_layout

    g = globals()
    g.update(tile=tile, ptx=ptx, Resources=Resources, SMEMPool=SMEMPool, TMEMPool=TMEMPool,
             Pipeline=Pipeline, resources_of=resources_of, mma_sync_layout=mma_sync_layout,
             ldmatrix_layout=ldmatrix_layout)
    return g[name]


def __dir__():
    return sorted(set(globals()) | _ON_FIRST_USE | {"torch_op"})



int8, int16, int32, int64 = (ScalarType(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (ScalarType(n) for n in ("uint8", "uint16", "uint32", "uint64"))
float16, bfloat16, float32, float64 = (ScalarType(n) for n in
                                       ("float16", "bfloat16", "float32", "float64"))
