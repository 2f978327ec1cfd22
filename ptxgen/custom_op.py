"""`pg.torch_op`: a user's @pg.kernel, or a Python function that launches kernels, as a torch
custom op, so that torch.compile(fullgraph=True) keeps the call in its graph (Dynamo cannot
trace a launch: it would break the graph there) and CUDA graphs capture it.

    op = pg.torch_op(scale_kernel, name="mylib::scale", mutates_args=("y",))
    op(x, y)                 # or torch.ops.mylib.scale(x, y), inside torch.compile too

A kernel returns nothing, so its op writes only the tensors named in `mutates_args` (torch
must know them, or it would reorder or drop the call) and needs no fake implementation.  A
function is passed to torch.library.custom_op as it is: its parameters and result need
torch type annotations, and `fake` (shapes and dtypes of the result, no data) is required
when it returns tensors.  torch is imported here, never by `import ptxgen`.
"""
from __future__ import annotations

import inspect

from .errors import PtxgenError

_FLOAT = {"float16", "bfloat16", "float32", "float64"}


def _kernel_function(k, mutates_args):
    """A function with the op's annotated signature that launches `k`: tensors in the
    kernel's order, its scalars (float or int), and the symbols no tensor's shape binds
    (ints, passed to the launch by keyword)."""
    import torch

    params = k.params
    inputs = [p for p in params if p.kind != "symbol"]
    bound = {d for p in inputs if p.kind == "tensor" for d in p.shape if isinstance(d, str)}
    free = [p.name for p in params if p.kind == "symbol" and p.name not in bound]
    tensors = {p.name for p in inputs if p.kind == "tensor"}
    for m in mutates_args:
        if m not in tensors:
            raise PtxgenError(f"pg.torch_op: mutates_args names '{m}', which is not a tensor "
                              f"parameter of kernel '{k.name}' (its tensors: "
                              f"{', '.join(sorted(tensors))})")
    if not mutates_args:
        raise PtxgenError(f"pg.torch_op: kernel '{k.name}' returns nothing; name the tensors "
                          f"it writes in mutates_args=(...), or torch drops the call")
    n = len(inputs)

    def launch(*args):
        k(*args[:n], **dict(zip(free, args[n:])))

    sig = [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             annotation=torch.Tensor if p.kind == "tensor" else
                             float if p.dtype in _FLOAT else int) for p in inputs]
    sig += [inspect.Parameter(s, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=int)
            for s in free]
    launch.__signature__ = inspect.Signature(sig, return_annotation=None)
    launch.__name__ = k.name
    return launch


def torch_op(kernel_or_fn, name: str, *, mutates_args=(), fake=None, schema: str | None = None):
    """`kernel_or_fn` as the torch custom op `name` ("namespace::op"), returned as the
    callable torch.library.custom_op makes (also torch.ops.<namespace>.<op>).
    `mutates_args`: the tensor parameters it writes; `fake`: its fake implementation
    (a kernel's, which writes and returns nothing, is supplied)."""
    import torch

    from .builder.kernel import Kernel

    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise PtxgenError(f"pg.torch_op: name must be 'namespace::op', got {name!r}")
    mutates_args = (mutates_args,) if isinstance(mutates_args, str) else tuple(mutates_args)
    if isinstance(kernel_or_fn, Kernel):
        fn = _kernel_function(kernel_or_fn, mutates_args)
        if fake is None:
            def fake(*args, **kwargs):     # writes its mutated tensors only: nothing to make
                return None
    elif callable(kernel_or_fn):
        fn = kernel_or_fn
    else:
        raise PtxgenError(f"pg.torch_op takes a @pg.kernel or a function, got "
                          f"{type(kernel_or_fn).__name__}")
    op = torch.library.custom_op(name, fn, mutates_args=mutates_args, schema=schema)
    if fake is not None:
        op.register_fake(fake)
    return op
