"""Runtime: PTX -> cubin (nvJitLink, offline), module loading, checked launches, caches.

``compile_ptx`` needs no GPU.  ``Module``/``Launcher`` use the CUDA driver through
cuda-bindings, in the device's primary context so that torch and cupy interoperate.
Environment: PTXGEN_CACHE_DIR, PTXGEN_DISK_CACHE=0, PTXGEN_DUMP_DIR, PTXGEN_JIT_ISOLATE=1.
"""
from .args import Binder, ParamPacker, ParamSpec
from .cache import reset_stats, stats
from .compile import CompileResult, clear_memory_cache, compile_ptx, parse_info_log
from .driver import device_arch, driver_version, has_gpu, synchronize
from .launcher import Launcher, stream_handle
from .module import Function, Module

__all__ = [
    "ParamSpec", "CompileResult", "compile_ptx", "Module", "Function", "Launcher",
    "synchronize", "device_arch", "has_gpu", "stats", "reset_stats", "clear_memory_cache",
    "driver_version", "stream_handle", "Binder", "ParamPacker", "parse_info_log",
]
