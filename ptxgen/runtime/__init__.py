"""Runtime: PTX -> cubin (nvJitLink, offline), module loading, checked launches, caches.

``compile_ptx`` needs no GPU.  ``Module``/``Launcher`` use the CUDA driver in the device's
primary context, so that torch and cupy interoperate.  Both go through cuda-bindings
(``cuda.bindings.nvjitlink``, ``cuda.bindings.driver``), imported by the first compile or
launch that needs it, never by ``import ptxgen``.  ``launch_plan`` is what a ``pg.Kernel``
calls to be launched (binder, per-device launchers, the generated fast launch).
Environment: PTXGEN_CACHE_DIR, PTXGEN_DISK_CACHE=0, PTXGEN_DUMP_DIR, PTXGEN_JIT_ISOLATE=1,
PTXGEN_MEMORY_CACHE_SIZE (cubins kept in memory, default 128).
"""
from .args import Binder, ParamPacker, ParamSpec
from .cache import reset_stats, stats
from .compile import (CompileResult, clear_memory_cache, compile_ptx, parse_info_log,
                      set_memory_cache_size)
from .driver import (current_device, device_arch, device_count, driver_version, has_gpu,
                     synchronize)
from .launcher import Launcher, own_launch_path, own_target, prepared_launch_path, \
    stream_handle
from .module import Function, Module

__all__ = [
    "ParamSpec", "CompileResult", "compile_ptx", "Module", "Function", "Launcher",
    "synchronize", "device_arch", "has_gpu", "stats", "reset_stats", "clear_memory_cache",
    "driver_version", "stream_handle", "Binder", "ParamPacker", "parse_info_log",
    "set_memory_cache_size", "device_count", "current_device", "own_launch_path", "own_target",
    "prepared_launch_path",
]
