"""The generated own-launch path of pg.Kernel (runtime.own_launch_path): after the first
launch with no options, a Kernel's torch-tensor launches run one generated function.  It must
do exactly what the general path does (same driver call, same packed bytes, same device and
stream) and leave everything else to it (other arguments, options, errors, debug builds).
A stand-in driver (support/fakecuda.py) records each launch; the fake torch module makes the
fake tensor class play torch.Tensor."""
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxgen as pg
from ptxgen.errors import LaunchError
from ptxgen.runtime import clear_memory_cache
from support.fakecuda import FLOAT16, FLOAT32, FakeDriver, FakeTorchTensor, install, \
    install_fake_torch, register_torch_dtypes, scale_kernel

@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()
    f = install(monkeypatch, FakeDriver(archs=((9, 0), (9, 0))))
    register_torch_dtypes(monkeypatch)
    f.torch_stream = {0: 0, 1: 0}
    install_fake_torch(monkeypatch, initialized=True, stream=lambda dev: f.torch_stream[dev])
    f.param_bytes = 20
    return f


def T(fake, device, n=256, dtype=FLOAT32, offset=0, strides=None):
    return FakeTorchTensor(fake.alloc(device) + offset, (n,), device, dtype, strides)


def record(fake, k, *args, **kw):
    """What one call did: the launch it recorded, or the error text."""
    before = len(fake.launches)
    try:
        k(*args, **kw)
    except LaunchError as e:
        return str(e)
    got = fake.launches[before:]
    assert len(got) == 1
    l = got[0]
    return (l.device, l.entry, l.grid, l.block, l.smem, l.stream, l.params)


def test_the_fast_path_takes_over_after_the_first_launch(fake):
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    k(x, y, 2.0)
    assert k._plan.fast and k._plan.fast.__name__ == "launch_own_fast" and 0 in k._plan.fast_targets
    before = fake.calls.copy()
    for _ in range(5):
        assert k._plan.fast((x, y, 2.0)) is True
    assert dict(fake.calls - before) == {"cuLaunchKernel": 5}
    want = x.data_ptr().to_bytes(8, "little") + y.data_ptr().to_bytes(8, "little") + \
        np.float32(2.0).tobytes()
    assert fake.launches[-1].params == want and fake.launches[-1].grid == (2, 1, 1)


def test_each_device_launches_on_its_own(fake):
    k = scale_kernel()
    fake.torch_stream[1] = s1 = fake.make_stream(1)
    a, b = (T(fake, 0), T(fake, 0)), (T(fake, 1), T(fake, 1))
    k(*a, 1.0)
    k(*b, 1.0)
    assert set(k._plan.fast_targets) == {0, 1} and all(k._plan.fast_targets.values())
    for _ in range(3):
        assert record(fake, k, *b, 3.0)[0::5] == (1, s1)
        assert record(fake, k, *a, 3.0)[0::5] == (0, 0)
    assert record(fake, k, a[0], b[1], 1.0).startswith("kernel 'scale': argument 'x' is on")


def test_what_the_fast_path_declines_the_general_path_does(fake):
    """Options, keywords, raw pointers, subclasses, debug builds: the general path (its
    launch or its error), never a second launch."""
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    k(x, y, 1.0)
    f = k._plan.fast
    calls = []
    k._plan.fast = lambda args: calls.append(args) or f(args)
    assert record(fake, k, x, y, 1.0, grid=(4,))[2] == (4, 1, 1)
    assert record(fake, k, x, y, s=1.0)[0] == 0
    assert record(fake, k, x.data_ptr(), y.data_ptr(), 1.0, N=256)[0] == 0
    assert record(fake, k, x, y, 1.0, stream=0)[0] == 0
    assert len(calls) == 0
    prev = pg.debug_bounds(True)
    try:
        assert record(fake, k, x, y, 1.0)[0] == 0       # a debug-bounds build of its own
    finally:
        pg.debug_bounds(prev)
    assert len(calls) == 0


def test_errors_are_the_general_paths(fake):
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    k(x, y, 1.0)
    assert record(fake, k, x, T(fake, 0, 255), 1.0) == \
        "argument 'x': dim 0 is symbol N = 256 (bound by 'out'), got 255"
    assert record(fake, k, x, y, 1e39) == \
        "argument 's': 1e+39 is out of range for float32 (max 3.40282e+38)"
    assert record(fake, k, x, T(fake, 0, dtype=FLOAT16), 1.0) == \
        "argument 'x': expected dtype float32, got float16"
    assert record(fake, k, x, y) == \
        "kernel 'scale' takes 3 arguments (out, x, s), got 2: missing 's'"


def test_fast_and_general_paths_agree(fake):
    """Random good and bad arguments: the same launch record or the same error text."""
    fast_k, plain_k = scale_kernel(), scale_kernel()
    x0 = T(fake, 0)
    fast_k(x0, x0, 1.0)
    plain_k(x0, x0, 1.0)
    assert fast_k._plan.fast
    plain_k._plan.fast = False               # the general path only

    @settings(max_examples=300, deadline=None)
    @given(data=st.data())
    def agree(data):
        def tensor():
            kind = data.draw(st.sampled_from(["ok"] * 5 + ["dtype", "short", "dev1", "cpu",
                                                              "align", "null", "strided",
                                                              "int"]))
            dev = 1 if kind == "dev1" else (None if kind == "cpu" else 0)
            ptr = 0 if kind == "null" else fake.alloc(dev or 0) + (4 if kind == "align" else 0)
            t = FakeTorchTensor(ptr, (255 if kind == "short" else 256,), dev,
                                FLOAT16 if kind == "dtype" else FLOAT32,
                                (2,) if kind == "strided" else None)
            return t.data_ptr() if kind == "int" else t

        args = (tensor(), tensor(),
                data.draw(st.sampled_from([1.0, 2, np.float32(0.5), 1e39, "x"])))
        assert record(fake, fast_k, *args) == record(fake, plain_k, *args)

    agree()


def test_threads_each_use_their_own_storage(fake):
    k = scale_kernel()
    tensors = {d: (T(fake, d), T(fake, d)) for d in (0, 1)}
    for d in (0, 1):
        k(*tensors[d], 1.0)
    start = threading.Barrier(2)

    def work(dev):
        start.wait()
        for _ in range(200):
            k(*tensors[dev], 1.0)

    n0 = len(fake.launches)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, (0, 1)))          # re-raises a thread's exception here
    for d in (0, 1):
        mine = [l for l in fake.launches[n0:] if l.device == d]
        out, x = tensors[d]
        want = out.data_ptr().to_bytes(8, "little") + x.data_ptr().to_bytes(8, "little") + \
            np.float32(1.0).tobytes()
        assert len(mine) == 200 and {l.params for l in mine} == {want}


def test_unload_forgets_the_targets(fake):
    k = scale_kernel()
    x = T(fake, 0)
    k(x, x, 1.0)
    k.unload()
    assert k._plan.fast_targets == {} and k._plan.fast((x, x, 1.0)) is False
    assert record(fake, k, x, x, 1.0)[0] == 0            # loaded again, and fast again
    assert k._plan.fast_targets[0]


def test_a_new_stream_gets_its_own_launch(fake):
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    k(x, y, 1.0)
    s = fake.make_stream(0)
    for stream in (0, s, 0, s):
        fake.torch_stream[0] = stream
        assert record(fake, k, x, y, 1.0)[5] == stream
    assert k._plan.fast((x, y, 1.0)) is True


def test_a_refused_fast_launch_runs_in_its_own_context(fake):
    """Another device's context current (torch.cuda.set_device): the launch is refused, then
    made in ours, which leaves the thread's context as it was; the next one asks first."""
    k = scale_kernel()
    x, y = T(fake, 1), T(fake, 1)
    fake.cuCtxSetCurrent(fake.ctx_of(1))
    k(x, y, 1.0)
    k(x, y, 1.0)                                    # ours current: the fast launch, direct
    fake.cuCtxSetCurrent(fake.ctx_of(0))
    before = fake.calls.copy()
    assert record(fake, k, x, y, 2.0)[0] == 1 and fake.current == fake.ctx_of(0)
    assert record(fake, k, x, y, 2.0)[0] == 1 and fake.current == fake.ctx_of(0)
    got = fake.calls - before
    # the fast launch, refused once, then ours twice
    assert got == Counter({"cuLaunchKernel": 3, "cuCtxGetCurrent": 4,
                           "cuCtxPushCurrent": 2, "cuCtxPopCurrent": 2})


def _sm90_with_torch(tmp_path, monkeypatch):
    """A fresh cache, the fake driver with one sm_90 device, and a stand-in torch whose
    current stream is 0: the fake, whose launches the test reads."""
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()
    fake = install(monkeypatch, FakeDriver(archs=((9, 0),)))
    register_torch_dtypes(monkeypatch)
    install_fake_torch(monkeypatch, initialized=True, stream=lambda dev: 0)
    return fake


def test_a_cluster_kernels_fast_launch_keeps_its_cluster(tmp_path, monkeypatch):
    fake = _sm90_with_torch(tmp_path, monkeypatch)
    N = pg.var("N")

    @pg.kernel(grid=(4,), block=(32,), cluster=(2, 1, 1))
    def pair(a: pg.Tensor((N,), "float32")):
        pass

    x = T(fake, 0)
    pair(x)                                          # the general path's cluster launch
    assert pair._plan.fast((x,)) is True
    assert fake.cluster_launches == [(2, 1, 1)] * 2 and fake.launches[-1].grid == (4, 1, 1)
    assert fake.calls["cuLaunchKernelEx"] == 2


def test_a_kernel_that_waits_on_the_kernel_ahead_launches_programmatically(tmp_path, monkeypatch):
    """pg.wait_on_dependent_grids() in a kernel: every launch of it (general, fast) carries
    programmatic stream serialization, with the cluster shape when it has one; a kernel
    without the wait keeps plain cuLaunchKernel."""
    fake = _sm90_with_torch(tmp_path, monkeypatch)
    N = pg.var("N")

    @pg.kernel(grid=(4,), block=(32,))
    def after(a: pg.Tensor((N,), "float32")):
        pg.wait_on_dependent_grids()

    @pg.kernel(grid=(4,), block=(32,), cluster=(2, 1, 1))
    def after_in_pairs(a: pg.Tensor((N,), "float32")):
        pg.wait_on_dependent_grids()

    @pg.kernel(grid=(4,), block=(32,))
    def ahead(a: pg.Tensor((N,), "float32")):
        pg.launch_dependent_grids()

    x = T(fake, 0)
    after(x)
    assert after._plan.fast((x,)) is True
    after_in_pairs(x)
    ahead(x)
    assert fake.launch_attributes == [{"programmatic": 1}] * 2 + [
        {"cluster": (2, 1, 1), "programmatic": 1}]
    assert fake.calls["cuLaunchKernelEx"] == 3 and fake.calls["cuLaunchKernel"] == 1
