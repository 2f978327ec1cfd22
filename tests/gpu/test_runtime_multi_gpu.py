"""One pg.Kernel on two GPUs: it runs on the device of its tensors (in either order, under
torch.cuda.device(...), from one thread per GPU), bit for bit, and refuses mixed devices.
Kernels with a per-launch grid take the general launch path; those with constant dims, after
a first launch on each device, the generated own launch (``own_launch_path``), whose table of
launch targets is keyed by device: both are run on both devices, and from two threads.

Marked ``gpu``; skipped cleanly with fewer than two CUDA devices or without torch.
"""
import threading

import numpy as np
import pytest

import ptxgen as pg
from _affine import N, make_affine, make_affine_fixed
from ptxgen.errors import LaunchError
from ptxgen.runtime import device_count, stats

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(device_count() < 2, reason="needs 2 CUDA GPUs")]
torch = pytest.importorskip("torch")


def make_accumulate(fixed_n=None):
    """out += x; with ``fixed_n`` (a multiple of 256) constant dims: the generated launch."""
    if fixed_n is not None:
        @pg.kernel(grid=(fixed_n // 256,), block=(256,))
        def accumulate_fixed(out: pg.Tensor((fixed_n,), "float32"),
                             x: pg.Tensor((fixed_n,), "float32")):
            i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
            out[i] = out[i] + x[i]
        return accumulate_fixed

    @pg.kernel(grid=lambda a: ((a["N"] + 255) // 256,), block=(256,))
    def accumulate(out: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32")):
        i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
        with pg.if_(i < N):
            out[i] = out[i] + x[i]
    return accumulate


def counting_fast_launch(k):
    """Wrap the kernel's generated launch (made on its first device) so that each call records
    whether it launched (True) or left the launch to the general path (False)."""
    fast, taken = k._plan.fast, []
    assert fast, "no generated launch was made"

    def counted(args):
        taken.append(fast(args))
        return taken[-1]
    k._plan.fast = counted
    return taken


def inputs(dev, n=100_003, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    want = x * np.float32(1.5) + np.float32(-0.25)
    return (torch.full((n,), float("nan"), device=f"cuda:{dev}"),
            torch.from_numpy(x).to(f"cuda:{dev}"), want)


def bits(t):
    torch.cuda.synchronize(t.device)
    return t.cpu().numpy().view(np.uint32)


@pytest.mark.parametrize("order", [(0, 1), (1, 0), (1, 0, 1, 0)])
def test_same_kernel_bit_exact_on_both_devices(order):
    k = make_affine()
    loads = stats()["module_loads"]
    results = {}
    for dev in order:
        out, x, want = inputs(dev)
        k(out, x, 1.5, -0.25)
        assert np.array_equal(bits(out), want.view(np.uint32)), f"cuda:{dev}"
        results.setdefault(dev, bits(out))
    assert np.array_equal(results[0], results[1])
    assert stats()["module_loads"] - loads == 2           # one module per device
    assert sorted(k._plan.launchers) == [0, 1]


def test_under_torch_device_contexts():
    k = make_affine()
    out1, x1, want = inputs(1)
    torch.cuda.set_device(0)
    with torch.cuda.device(0):              # the tensors decide, not the current device
        k(out1, x1, 1.5, -0.25)
        assert torch.cuda.current_device() == 0
    assert np.array_equal(bits(out1), want.view(np.uint32))
    out1.fill_(float("nan"))
    with torch.cuda.device(1):              # raw pointers: the current device
        k(out1.data_ptr(), x1.data_ptr(), 1.5, -0.25, N=x1.numel())
        assert torch.cuda.current_device() == 1
    assert np.array_equal(bits(out1), want.view(np.uint32))
    out0, x0, want0 = inputs(0, seed=1)
    with torch.cuda.device(1):
        k(out0, x0, 1.5, -0.25)
        assert torch.cuda.current_device() == 1
    assert np.array_equal(bits(out0), want0.view(np.uint32))
    assert torch.cuda.current_device() == 0


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_constant_dims_kernel_takes_the_generated_launch_on_both_devices(order):
    n = 16384
    k = make_affine_fixed(n)
    for dev in order:                       # first launch per device: the general path
        out, x, want = inputs(dev, n)
        k(out, x, 1.5, -0.25)
        assert np.array_equal(bits(out), want.view(np.uint32)), f"cuda:{dev}"
    assert sorted(k._plan.fast_targets) == [0, 1]
    assert all(t is not None for t in k._plan.fast_targets.values())
    taken = counting_fast_launch(k)
    for dev in order * 2:                   # now the generated launch, per device
        out, x, want = inputs(dev, n, seed=dev + 7)
        k(out, x, 1.5, -0.25)
        assert np.array_equal(bits(out), want.view(np.uint32)), f"cuda:{dev}"
    assert taken == [True] * 4
    assert sorted(k._plan.launchers) == [0, 1]


def run_two_threads(k, devices, n, reps=300, set_device=False):
    """One thread per entry of ``devices`` launching ``k`` (out += x) ``reps`` times on its
    own tensors; returns (outputs as uint32 bits, the float32 sums made in launch order).
    A thread's error fails the test; a hung thread fails it after a timeout."""
    host = [np.random.default_rng(j).standard_normal(n).astype(np.float32)
            for j in range(len(devices))]
    xs = [torch.from_numpy(h).to(f"cuda:{d}") for h, d in zip(host, devices)]
    outs = [torch.zeros(n, dtype=torch.float32, device=f"cuda:{d}") for d in devices]
    for d in set(devices):
        torch.cuda.synchronize(d)
    errors, start = [], threading.Barrier(len(devices), timeout=60)

    def work(j, d):
        try:
            if set_device:
                torch.cuda.set_device(d)
            start.wait()
            for _ in range(reps):
                k(outs[j], xs[j])
            if set_device:
                assert torch.cuda.current_device() == d
        except Exception as e:  # pragma: no cover - reported below
            start.abort()       # the other threads stop waiting for this one
            errors.append(e)

    threads = [threading.Thread(target=work, args=(j, d), daemon=True)
               for j, d in enumerate(devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a launching thread hung"
    assert not errors, errors
    wants = []
    for h in host:      # the same float32 additions, in launch order (not reps * x: rounding)
        want = np.zeros(n, np.float32)
        for _ in range(reps):
            want += h
        wants.append(want.view(np.uint32))
    return [bits(o) for o in outs], wants


@pytest.mark.parametrize("dims", ["per-launch-grid", "constant"])
@pytest.mark.parametrize("set_device", [False, True], ids=["no-torch-in-thread", "set_device"])
def test_two_threads_each_drive_one_gpu(set_device, dims):
    n = 1 << 16
    k = make_accumulate(n if dims == "constant" else None)
    got, wants = run_two_threads(k, (0, 1), n, set_device=set_device)
    for d, (g, w) in enumerate(zip(got, wants)):
        assert np.array_equal(g, w), f"cuda:{d}"
    if dims == "constant":    # each device's first launch offered it the generated launch
        assert sorted(k._plan.fast_targets) == [0, 1]
        assert all(t is not None for t in k._plan.fast_targets.values())


def cupy_affine(cp, k, dev):
    """k on cupy arrays made on ``dev`` while cuda:0 is torch's current device: (result as
    uint32 bits, numpy's float32 result as bits)."""
    rng = np.random.default_rng(dev + 3)
    x = rng.standard_normal(70_001).astype(np.float32)
    with cp.cuda.Device(dev):
        xc = cp.asarray(x)
        out = cp.full(x.shape, np.nan, dtype=cp.float32)
    torch.cuda.set_device(0)
    k(out, xc, 1.5, -0.25)
    with cp.cuda.Device(dev):
        cp.cuda.Device(dev).synchronize()
        got = cp.asnumpy(out)
    want = x * np.float32(1.5) + np.float32(-0.25)
    return got.view(np.uint32), want.view(np.uint32)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_cupy_arrays_on_both_devices(order):
    """cupy arrays say their device through DLPack (__dlpack_device__)."""
    cp = pytest.importorskip("cupy")
    k = make_affine()
    for dev in order:
        got, want = cupy_affine(cp, k, dev)
        assert np.array_equal(got, want), f"cuda:{dev}"
    assert sorted(k._plan.launchers) == [0, 1]


def test_array_interface_only_objects_launch_where_the_driver_says():
    """__cuda_array_interface__ alone does not say the device: the launch asks the driver
    about the pointer, so cuda:1 memory runs on cuda:1 while cuda:0 is current."""
    from _xp import OnlyCAI
    from ptxgen.runtime import driver

    k = make_affine()
    out1, x1, want = inputs(1)
    assert driver.pointer_device(out1.data_ptr()) == 1
    torch.cuda.set_device(0)
    k(OnlyCAI(out1), OnlyCAI(x1), 1.5, -0.25)
    assert np.array_equal(bits(out1), want.view(np.uint32))
    assert sorted(k._plan.launchers) == [1] and torch.cuda.current_device() == 0
    out0, _, _ = inputs(0)
    with pytest.raises(LaunchError) as ei:
        k(OnlyCAI(out0), OnlyCAI(x1), 1.5, -0.25)
    assert str(ei.value) == ("kernel 'affine': argument 'x' is on cuda:1 but argument 'out' "
                             "is on cuda:0; a launch runs on one device, so move them to the "
                             "same one")


def test_launch_under_the_other_devices_context_is_refused_then_made_in_ours():
    """The launcher does not ask which context is current before a launch: it relies on the
    driver refusing a function of cuda:1 while cuda:0's context is current (counted in
    launch_retries), and never running it elsewhere; the thread keeps cuda:0 current."""
    from ptxgen.runtime import driver

    k = make_affine()
    out1, x1, want = inputs(1)
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda:0")             # cuda:0's context is current in this thread
    cur = int(driver.drv().cuCtxGetCurrent()[1])
    before = stats()["launch_retries"]
    k(out1, x1, 1.5, -0.25)                      # built and loaded on cuda:1, then launched
    k(out1, x1, 1.5, -0.25)
    assert np.array_equal(bits(out1), want.view(np.uint32))
    assert int(driver.drv().cuCtxGetCurrent()[1]) == cur == int(driver.primary_context(0))
    assert stats()["launch_retries"] - before == 1     # the second launch asked first


def test_mixed_devices_are_refused_naming_both():
    k = make_affine()
    out0, x0, _ = inputs(0)
    out1, x1, _ = inputs(1)
    with pytest.raises(LaunchError) as ei:
        k(out0, x1, 1.5, -0.25)
    assert str(ei.value) == ("kernel 'affine': argument 'x' is on cuda:1 but argument 'out' "
                             "is on cuda:0; a launch runs on one device, so move them to the "
                             "same one")
    assert not k._plan.launchers                 # refused before anything was built or loaded
    assert np.isnan(out0.cpu().numpy()).all()


def test_stream_of_the_other_device_is_refused():
    k = make_affine()
    out0, x0, want = inputs(0)
    s1 = torch.cuda.Stream(device=1)
    msg = ("kernel 'affine': the stream is on cuda:1, but the launch runs on cuda:0 (where its "
           "arguments are); pass a stream of cuda:0")
    for stream in (s1, s1.cuda_stream):     # the object says; a raw handle: the driver says
        with pytest.raises(LaunchError) as ei:
            k(out0, x0, 1.5, -0.25, stream=stream)
        assert str(ei.value) == msg
    assert np.isnan(out0.cpu().numpy()).all()
    s0 = torch.cuda.Stream(device=0)
    torch.cuda.synchronize(0)               # s0 does not wait for the default stream
    k(out0, x0, 1.5, -0.25, stream=s0.cuda_stream)
    s0.synchronize()
    assert np.array_equal(bits(out0), want.view(np.uint32))
