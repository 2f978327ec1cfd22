"""Benchmark harness: CUDA-event timing, copy-kernel sweeps, reports, the bench CLI.

Kernels plug in through :func:`register_copy_bench`; nothing here imports CUDA or
torch until a benchmark actually runs, so the package imports on any machine.
"""
from .sweep import (BenchKernel, CopyConfig, SkipReason, expand, load_plugins,
                    register_copy_bench, registered_variants, run_copy_bench)
from .timing import do_bench, gpu_available

__all__ = ["BenchKernel", "CopyConfig", "SkipReason", "expand", "load_plugins",
           "register_copy_bench", "registered_variants", "run_copy_bench", "do_bench",
           "gpu_available"]
