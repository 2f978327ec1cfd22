"""The argument rules of the shipped kernels' wrappers, as plain functions over tensor metadata.

A tensor is described by a ``Meta`` tuple (shape, dtype name, device text, contiguous), so the
rules run (and are tested) without torch; the wrappers build the Meta of their torch tensors
once per distinct metadata and memoize what the rules return, which is why no rule here may
read anything but its arguments.  `shares_memory` is the one per-call test of the tensors
themselves (their addresses), for an out= that may overlap an input.  Every refusal is an
ArgumentError naming the argument.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

from ..errors import LaunchError


class ArgumentError(LaunchError, ValueError):
    """A wrapper's argument that the kernel cannot take; the message names the argument and
    the fix.  A ValueError too, as torch's own refusals of bad shapes are."""


class Meta(NamedTuple):
    """What the rules read of a tensor: shape, dtype name ("bfloat16", "float8_e4m3fn", ...),
    device ("cuda:0", "cpu") and whether it is row-major contiguous."""
    shape: tuple
    dtype: str
    device: str
    contiguous: bool = True


def meta_of(t) -> Meta:
    """The Meta of a torch tensor; anything else is refused by ``tensor`` with its name."""
    return Meta(tuple(t.shape), str(t.dtype).rpartition(".")[2], str(t.device),
                t.is_contiguous())


def tensor(op: str, name: str, m, *, dtypes, min_dim: int = 1, dim: int | None = None) -> Meta:
    """Rules every tensor argument shares: a tensor on a CUDA device, of an accepted dtype,
    with the rank the op needs (0-d tensors have no dimension to work over)."""
    if not isinstance(m, Meta):
        raise ArgumentError(f"{op}: {name} must be a torch tensor, got {type(m).__name__}")
    if not m.device.startswith("cuda"):
        raise ArgumentError(f"{op}: {name} is on {m.device}; ptxgen kernels run on CUDA "
                            f"tensors (move it with {name}.cuda())")
    if m.dtype not in dtypes:
        raise ArgumentError(f"{op}: {name} has dtype {m.dtype}; it takes "
                            f"{', '.join(dtypes)}")
    if dim is not None and len(m.shape) != dim:
        raise ArgumentError(f"{op}: {name} must be {dim}-D, got shape {m.shape}")
    if len(m.shape) < min_dim:
        raise ArgumentError(f"{op}: {name} is a {len(m.shape)}-d tensor; it needs at least "
                            f"{min_dim} dimension{'s' * (min_dim > 1)} (shape (..., N))")
    return m


def same_device(op: str, first: tuple, *others) -> None:
    """(name, Meta) pairs, None for an absent optional one: all on the first one's device."""
    for o in others:
        if o is not None and o[1].device != first[1].device:
            raise ArgumentError(f"{op}: {o[0]} is on {o[1].device} but {first[0]} is on "
                                f"{first[1].device}; put every tensor on one device")


def out_tensor(op: str, out, shape: tuple, dtype: str, device: str) -> bool:
    """``out=`` must have the result's exact shape, dtype and device (torch would resize a
    wrong shape; a kernel cannot, and a silent resize hides a bug).  True when it is
    contiguous (written in place), False when the result is written through a copy."""
    if not isinstance(out, Meta):
        raise ArgumentError(f"{op}: out must be a torch tensor, got {type(out).__name__}")
    out_shape(op, out, shape)
    if out.dtype != dtype:
        raise ArgumentError(f"{op}: out has dtype {out.dtype}, the result is {dtype}")
    if out.device != device:
        raise ArgumentError(f"{op}: out is on {out.device}, the inputs on {device}")
    return out.contiguous


def out_shape(op: str, out, shape: tuple) -> None:
    """``out=`` (a Meta or a tensor) must have the result's exact shape."""
    if tuple(out.shape) != tuple(shape):
        raise ArgumentError(f"{op}: out has shape {tuple(out.shape)}, the result has shape "
                            f"{tuple(shape)}; pass an out of that shape or none")


def is_int(v) -> bool:
    """An int argument (a bool is not one, though Python counts it as one)."""
    return isinstance(v, int) and not isinstance(v, bool)


def real(op: str, name: str, value) -> float:
    """A finite real scalar argument (eps, scale) as a float; a bool, a string or a NaN is
    refused by name rather than failing inside float() or the kernel."""
    if type(value) is float and value - value == 0:    # the per-call case: a finite float
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(f"{op}: {name} must be a real number, got {value!r}")
    f = float(value)
    if not math.isfinite(f):
        raise ArgumentError(f"{op}: {name} must be finite, got {f}")
    return f


def known_options(op: str, options: dict, allowed: tuple) -> None:
    """Keyword options forwarded to a kernel factory: an unknown name, or a value that cannot
    key the factory's kernel cache, is refused by name (not a TypeError from inside the
    factory or its cache); the factory checks the values' rules."""
    for k, v in options.items():
        if k not in allowed:
            raise ArgumentError(f"{op}: unknown keyword argument {k!r}; its kernel options "
                                f"are {', '.join(allowed)}")
        try:
            hash(v)
        except TypeError:
            raise ArgumentError(f"{op}: {k} = {v!r}: a kernel option is a plain value (an "
                                f"int, a bool or None), not a {type(v).__name__}") from None


def reduced_dim(op: str, shape: tuple, dim) -> int:
    """A dimension argument of a tensor of `shape` as a non-negative index (torch's range
    [-ndim, ndim))."""
    n = len(shape)
    if not is_int(dim) or not -n <= dim < n:
        raise ArgumentError(f"{op}: dim must be an int in [{-n}, {n}) for a {n}-d tensor, "
                            f"got {dim!r}")
    return dim % n


def _span(t) -> tuple:
    """[first byte, past the last byte) of a tensor's elements (torch strides are >= 0); a
    contiguous tensor's from its nbytes, the common case, without a walk over its strides."""
    start = t.data_ptr()
    if t.is_contiguous():
        return start, start + t.nbytes
    if not t.numel():
        return 0, 0
    last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def shares_memory(out, inputs, in_place=None) -> bool:
    """Whether a kernel writing `out` in place could meet one of `inputs` (torch tensors or
    None): their byte spans intersect.  The wrappers then compute into a fresh tensor and
    copy, as torch refuses or copies where an out= overlaps an input.  `in_place`: an input
    whose exact alias (same address, shape and strides) is no overlap, for the row kernels,
    which read each element before they write it."""
    lo, hi = _span(out)
    for t in inputs:
        if t is None:
            continue
        a, b = _span(t)
        if a < hi and lo < b and not (t is in_place and a == lo and t.shape == out.shape and
                                      t.stride() == out.stride()):
            return True
    return False


def numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
