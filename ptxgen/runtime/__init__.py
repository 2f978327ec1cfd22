"""Runtime: PTX -> cubin (nvJitLink, offline), module loading, checked launches, caches.

``compile_ptx`` needs no GPU.  ``Module``/``Launcher`` use the CUDA driver through ptxgen's
ctypes binding of libcuda (``libcuda.py``; cuda-bindings with PTXGEN_DRIVER=bindings, see
``driver.py``), in the device's primary context so that torch and cupy interoperate.  Nothing
here loads the driver until a launch needs it; nvJitLink (a compile the disk cache does not
have) goes through ptxgen's ctypes binding of it (``nvjitlink.py``; cuda-bindings with
PTXGEN_NVJITLINK=bindings, see ``compile.py``), so neither imports cuda-bindings by default.
Environment: PTXGEN_CACHE_DIR, PTXGEN_DISK_CACHE=0, PTXGEN_DUMP_DIR, PTXGEN_JIT_ISOLATE=1,
PTXGEN_MEMORY_CACHE_SIZE (cubins kept in memory, default 128), PTXGEN_DRIVER (ctypes |
bindings), PTXGEN_NVJITLINK (ctypes | bindings).
"""
from .args import Binder, ParamPacker, ParamSpec
from .cache import reset_stats, stats
from .compile import (CompileResult, clear_memory_cache, compile_ptx, parse_info_log,
                      set_memory_cache_size)
from .driver import (current_device, device_arch, device_count, driver_version, has_gpu,
                     synchronize)
from .launcher import Launcher, own_launch_path, own_target, stream_handle
from .module import Function, Module

__all__ = [
    "ParamSpec", "CompileResult", "compile_ptx", "Module", "Function", "Launcher",
    "synchronize", "device_arch", "has_gpu", "stats", "reset_stats", "clear_memory_cache",
    "driver_version", "stream_handle", "Binder", "ParamPacker", "parse_info_log",
    "set_memory_cache_size", "device_count", "current_device", "own_launch_path", "own_target",
]
