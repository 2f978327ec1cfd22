"""The torch side of the shipped kernels' wrappers, imported only where torch is installed.

`compiling` is torch.compiler.is_compiling itself, so that Dynamo, tracing a wrapper, folds
it to True and takes `traced` (the kernel as its custom op, which Dynamo keeps in the
graph), while an eager call pays one flag read and launches directly: torch's dispatcher
costs more host time than a small kernel's whole launch.  Without torch it is always False.
"""
import functools

from ptxgen.target import TMA_ALIGN

from ._checks import ArgumentError

try:
    import torch
except (ImportError, OSError):   # CPU-only installs (or a torch whose libraries are missing)
    torch = None


def _never() -> bool:
    return False


compiling = torch.compiler.is_compiling if torch is not None else _never
# a wrapper's result: empty_like of a contiguous input, or of a `result_like` template, costs
# less host time than x.new_empty(shape) or torch.empty(shape, ...) (benchmarks/RESULTS.md,
# "host overhead"), which the tiny-input budget of benchmarks/host_overhead.py needs
empty_like = torch.empty_like if torch is not None else None


@functools.lru_cache(maxsize=None)
def sm_count(device) -> int:
    """The device's SM count, which the GEMM plans size their grids and splits by."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def result_like(shape: tuple, dtype, device):
    """A template of a contiguous result: one element expanded to `shape`.  It is not dense,
    so torch.empty_like of it allocates `shape` contiguous (row-major), on `device`, of `dtype`."""
    return torch.empty((), dtype=dtype, device=device).expand(shape)


def traced(name: str, args: tuple, out, **kw):
    """The call of wrapper `name` inside torch.compile: torch.ops.ptxgen.<name>, or with
    out= the mutating torch.ops.ptxgen.<name>_out, whose fake and real implementations run
    the wrapper's checks (at trace and at run time)."""
    ops = torch.ops.ptxgen
    if out is None:
        return getattr(ops, name)(*args, **kw)
    getattr(ops, name + "_out")(*args, out, **kw)
    return out


def into(out, y):
    """A wrapper's result: y, or `out` after copying y into it where the kernel could not
    write `out` directly (not contiguous, or misaligned for its vector stores)."""
    if out is not None and y is not out:
        out.copy_(y)
        return out
    return y


def tma_ready(t):
    """t as TMA reads it: row-major from a TMA_ALIGN-byte aligned address (a copy where it is
    not)."""
    return t if t.is_contiguous() and not t.data_ptr() % TMA_ALIGN else \
        t.clone(memory_format=torch.contiguous_format)


def differentiable(op: str, out) -> bool:
    """Called by wrapper `op` when an input requires grad: whether the call goes through its
    torch op, whose autograd formula records the backward (_ops._register_autograd).  Under
    grad mode, yes; under no_grad / inference_mode the kernel runs directly.  out= is refused
    there, as torch refuses out= arguments under autograd."""
    if not torch.is_grad_enabled():
        return False
    if out is not None:
        raise ArgumentError(f"{op}: out= does not support autograd and an input requires "
                            f"grad; drop out=, or run under torch.no_grad()")
    return True


def torch_ops():
    """torch.ops.ptxgen (registered when ptxgen.kernels is imported with torch installed)."""
    return torch.ops.ptxgen
