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
__version__ = "0.1.0"

from .dtypes import DType, dtype  # noqa: E402
from .errors import (ArchError, CudaError, DispatchError, LaunchError, LayoutError,  # noqa: E402
                     PTXCompileError, PtxgenError, ResourceError, TraceAttributeError,
                     TraceError)
from .ir import cast, select  # noqa: E402
from .ir import maximum as max  # noqa: E402,A001
from .ir import minimum as min  # noqa: E402,A001
from .builder.control import (block_dim, cta_id, cta_sync, else_, grid_dim, if_,  # noqa: E402
                              lane_id, launch, let, named_barrier, serial, thread_id,
                              unroll, var,
                              warp_id, warp_sync, warpgroup_id, while_)
from .builder.kernel import Kernel, ScalarType, debug_bounds, kernel  # noqa: E402
from .builder.tensor import (LocalScalar, Tensor, TensorHandle, alloc_buffer,  # noqa: E402
                             alloc_local, alloc_shared, decl_buffer, local_scalar)
from .builder.ptx import ptx, addr  # noqa: E402
from .builder.tile import tile  # noqa: E402
from .alloc import Resources, SMEMPool, TMEMPool, resources_of  # noqa: E402  (registers pg.ptx helpers)

int8, int16, int32, int64 = (ScalarType(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (ScalarType(n) for n in ("uint8", "uint16", "uint32", "uint64"))
float16, bfloat16, float32, float64 = (ScalarType(n) for n in
                                       ("float16", "bfloat16", "float32", "float64"))
