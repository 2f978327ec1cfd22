"""Prepared launches (pg.Kernel.prepare): a launch whose checks, build, dims and stream choice
were made once for arguments of one metadata, called per launch with the new device pointers
and scalars.  It must make exactly the launch ``k(...)`` makes for those arguments, and leave
anything else (bad pointers, scalars that do not fit, debug builds) to the kernel's own call.
A stand-in driver (support/fakecuda.py) records each launch."""
import numpy as np
import pytest

import ptxgen as pg
from ptxgen.errors import LaunchError
from support.fakecuda import FLOAT32, FakeTorchTensor, scale_kernel
from test_launch_fast import fake  # noqa: F401  (the stand-in driver and torch, as a fixture)


def T(fake, device, n=256, offset=0):
    return FakeTorchTensor(fake.alloc(device) + offset, (n,), device, FLOAT32, None)


def last(fake, call):
    """The launch one call made (device, grid, block, smem, stream, packed bytes), or the
    error text."""
    before = len(fake.launches)
    try:
        call()
    except LaunchError as e:
        return str(e)
    got = fake.launches[before:]
    assert len(got) == 1
    l = got[0]
    return (l.device, l.grid, l.block, l.smem, l.stream, l.params)


def test_a_prepared_launch_is_the_kernels_launch(fake):
    k = scale_kernel()
    out, x = T(fake, 1), T(fake, 1)
    run = k.prepare(out, x, 2.0, grid=(4,))
    for s in (3.0, -1.5):
        o2, x2 = T(fake, 1), T(fake, 1)
        assert last(fake, lambda: run(o2.data_ptr(), x2.data_ptr(), s)) == \
            last(fake, lambda: k(o2, x2, s, grid=(4,)))
    want = o2.data_ptr().to_bytes(8, "little") + x2.data_ptr().to_bytes(8, "little") + \
        np.float32(-1.5).tobytes()
    assert fake.launches[-1].params == want and fake.launches[-1].device == 1


def test_it_takes_the_current_stream_per_call(fake):
    k = scale_kernel()
    out, x = T(fake, 0), T(fake, 0)
    run = k.prepare(out, x, 1.0, grid=None, stream=None)    # None: as if left out
    s = fake.make_stream(0)
    for stream in (0, s, 0):
        fake.torch_stream[0] = stream
        assert last(fake, lambda: run(out.data_ptr(), x.data_ptr(), 1.0))[4] == stream


def test_bad_values_get_the_kernels_own_errors(fake):
    k = scale_kernel()
    out, x = T(fake, 0), T(fake, 0)
    run = k.prepare(out, x, 1.0)
    p = x.data_ptr()
    assert last(fake, lambda: run(out.data_ptr(), p + 4, 1.0)) == \
        f"argument 'x': base pointer {p + 4:#x} is not 16-byte aligned (declared align=16)"
    assert last(fake, lambda: run(0, p, 1.0)) == \
        "argument 'out': pointer is null (0); pass an allocated CUDA tensor or device address"
    assert last(fake, lambda: run(out.data_ptr(), p, 1e39)) == \
        "argument 's': 1e+39 is out of range for float32 (max 3.40282e+38)"
    assert last(fake, lambda: run(out.data_ptr(), p, "x")) == \
        "argument 's': expected a number (float32), got str 'x'"


def test_preparing_checks_as_a_launch_does(fake):
    k = scale_kernel()
    with pytest.raises(LaunchError, match="argument 'x': dim 0 is symbol N = 256 "
                                          r"\(bound by 'out'\), got 255"):
        k.prepare(T(fake, 0), T(fake, 0, 255), 1.0)
    with pytest.raises(LaunchError, match="kernel 'scale' was traced with blockDim.x = 128"):
        k.prepare(T(fake, 0), T(fake, 0), 1.0, block=(64,))


def test_debug_builds_go_through_the_kernels_call(fake):
    k = scale_kernel()
    out, x = T(fake, 0), T(fake, 0)
    run = k.prepare(out, x, 1.0)
    prev = pg.debug_bounds(True)
    try:
        got = last(fake, lambda: run(out.data_ptr(), x.data_ptr(), 1.0))
    finally:
        pg.debug_bounds(prev)
    entries = {l.entry for l in fake.launches}
    assert got[0] == 0 and len(k._plan.launchers) == 2 and len(entries) == 1
