"""The launch path does not ask which context is current (see runtime/launcher.py): a launch
that the driver refuses because another device's context, or none, is current in the thread
is made again in its own context.  Every way the current context can differ from the
launch's, with the stand-in driver (support/fakecuda.py, which refuses such launches as the
driver does): the kernel runs on its tensors' device, the thread keeps its own current
context, the driver calls per launch, and errors that are the launch's own are raised."""
import threading

import pytest

import ptxgen as pg
from ptxgen.errors import CudaError
from ptxgen.runtime import clear_memory_cache, reset_stats, stats
from support.fakecuda import FLOAT32, FakeDriver, FakeTorchTensor, install, \
    register_torch_dtypes, scale_kernel

N = pg.var("N")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()
    reset_stats()


@pytest.fixture
def fake(monkeypatch):
    f = install(monkeypatch, FakeDriver(archs=((9, 0), (9, 0))))
    register_torch_dtypes(monkeypatch)
    return f


def T(fake, device, n=256):
    return FakeTorchTensor(fake.alloc(device), (n,), device, FLOAT32)


def calls(fake, fn):
    before = fake.calls.copy()
    fn()
    return dict(fake.calls - before)


def test_own_context_current_one_driver_call(fake):
    k = scale_kernel()
    x, y = T(fake, 1), T(fake, 1)
    fake.cuCtxSetCurrent(fake.ctx_of(1))
    k(x, y, 1.0)
    assert calls(fake, lambda: k(x, y, 2.0)) == {"cuLaunchKernel": 1}
    assert fake.launches[-1].device == 1 and stats()["launch_retries"] == 0


def test_other_devices_context_current(fake):
    """e.g. torch.cuda.set_device(0), then tensors of cuda:1: the refused launch is made again
    in cuda:1's context, pushed over cuda:0's, which stays current; later launches ask first
    rather than be refused each time."""
    k = scale_kernel()
    x, y = T(fake, 1), T(fake, 1)
    fake.cuCtxSetCurrent(fake.ctx_of(0))
    k(x, y, 1.0)
    first = calls(fake, lambda: k(x, y, 1.0))
    assert fake.launches[-1].device == 1 and fake.current == fake.ctx_of(0)
    assert first == {"cuCtxGetCurrent": 2, "cuCtxPushCurrent": 1, "cuLaunchKernel": 1,
                     "cuCtxPopCurrent": 1}          # asked first: the last launch needed it
    assert stats()["launch_retries"] == 1
    assert len(fake.launches) == 2 and {l.device for l in fake.launches} == {1}


def test_a_refused_launch_is_retried_once_then_asked_first(fake):
    k = scale_kernel()
    x, y = T(fake, 1), T(fake, 1)
    fake.cuCtxSetCurrent(fake.ctx_of(1))
    k(x, y, 1.0)                                     # cuda:1 current: direct
    fake.cuCtxSetCurrent(fake.ctx_of(0))             # torch.cuda.set_device(0)
    c = calls(fake, lambda: k(x, y, 1.0))
    assert c["cuLaunchKernel"] == 2 and c["cuCtxPushCurrent"] == 1     # refused, then ours
    assert stats()["launch_retries"] == 1 and fake.current == fake.ctx_of(0)
    fake.cuCtxSetCurrent(fake.ctx_of(1))             # back on cuda:1
    assert calls(fake, lambda: k(x, y, 1.0)) == {"cuCtxGetCurrent": 1, "cuLaunchKernel": 1}
    assert calls(fake, lambda: k(x, y, 1.0)) == {"cuLaunchKernel": 1}   # direct again
    assert [l.device for l in fake.launches] == [1, 1, 1, 1]
    assert stats()["launch_retries"] == 1


def test_no_context_current(fake):
    """A new thread has none: device 0's primary context is made current and stays (as the
    CUDA runtime does); another device's is pushed and popped."""
    k = scale_kernel()
    x0, y0, x1, y1 = T(fake, 0), T(fake, 0), T(fake, 1), T(fake, 1)
    k(x0, y0, 1.0)                          # modules loaded (and launchers made) here
    k(x1, y1, 1.0)
    seen = []

    def work():
        assert fake.current == 0
        seen.append(calls(fake, lambda: k(x0, y0, 1.0)))
        seen.append(fake.current)
        seen.append(calls(fake, lambda: k(x0, y0, 1.0)))
        seen.append(calls(fake, lambda: k(x0, y0, 1.0)))
        fake.cuCtxSetCurrent(0)
        k(x1, y1, 1.0)
        seen.append(fake.current)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen[0] == {"cuLaunchKernel": 2, "cuCtxGetCurrent": 2,   # refused, then set
                       "cuCtxSetCurrent": 1}
    assert seen[1] == fake.ctx_of(0)
    assert seen[2] == {"cuCtxGetCurrent": 1, "cuLaunchKernel": 1}    # asks once, finds ours
    assert seen[3] == {"cuLaunchKernel": 1}
    assert seen[4] == 0                                               # cuda:1 popped again
    assert [l.device for l in fake.launches] == [0, 1, 0, 0, 0, 1]
    assert stats()["launch_retries"] == 2


def test_threads_with_different_current_contexts_share_a_launcher(fake):
    """The ask-first hint is shared by the threads of one Launcher: it only decides whether a
    launch asks before or after, never where it runs."""
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    k(x, y, 1.0)
    errors, where = [], []

    def work(current, n):
        try:
            fake.cuCtxSetCurrent(current)
            for _ in range(n):
                k(x, y, 1.0)
                where.append(fake.current == current)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(fake.ctx_of(d), 200)) for d in (0, 1, 0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and all(where) and len(where) == 800
    assert {l.device for l in fake.launches} == {0}


def test_errors_of_the_launch_itself_are_raised(fake):
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    fake.cuCtxSetCurrent(fake.ctx_of(0))
    k(x, y, 1.0)
    fake.launch_result = 700                            # a sticky fault, ours current
    with pytest.raises(CudaError, match="ILLEGAL_ADDRESS") as ei:
        k(x, y, 1.0)
    assert ei.value.sticky and stats()["launch_retries"] == 0
    fake.cuCtxSetCurrent(fake.ctx_of(1))                # and when the retry fails too
    with pytest.raises(CudaError, match="ILLEGAL_ADDRESS"):
        k(x, y, 1.0)
    assert fake.current == fake.ctx_of(1) and stats()["launch_retries"] == 1
    fake.launch_result = 0
    k(x, y, 1.0)
    assert fake.launches[-1].device == 0 and fake.current == fake.ctx_of(1)


def test_raw_pointer_launches_follow_the_current_device(fake):
    k = scale_kernel()
    p = fake.alloc(1)
    fake.cuCtxSetCurrent(fake.ctx_of(1))
    k(p, p + 1024, 1.0, N=256)
    assert calls(fake, lambda: k(p, p + 1024, 1.0, N=256)) == {
        "cuCtxGetCurrent": 1, "cuLaunchKernel": 1}    # which device: asked for raw pointers
    assert fake.launches[-1].device == 1 and stats()["launch_retries"] == 0


# ---- a Kernel's call with no launch options (Launcher.launch_own) --------------------------
def test_call_without_options_launches_as_with_them(fake):
    """Same grid, block, dynamic shared memory (opted in once) and stream as a call that
    passes them; a callable grid is computed per call."""
    @pg.kernel(grid=(1,), block=(128,))
    def pooled(out: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        t = pool.alloc((16384,), "float32")          # 64 KiB: over the 48 KiB default
        pool.commit()
        t[tx] = pg.float32(1.0)
        pg.cta_sync()
        out[tx] = t[tx]

    fake.cuCtxSetCurrent(fake.ctx_of(0))
    o = T(fake, 0, n=128)
    pooled(o)
    pooled(o)
    pooled(o, stream=0, dynamic_smem_bytes=65536)
    pooled(o, grid=(1,), block=(128,))
    assert len({(l.grid, l.block, l.smem, l.stream) for l in fake.launches}) == 1
    assert fake.launches[0].smem == 65536 and fake.calls["cuFuncSetAttribute"] == 1

    @pg.kernel(grid=lambda a: ((a["N"] + 127) // 128,), block=(128,))
    def per_n(out: pg.Tensor((N,), "float32")):
        i = pg.let(pg.cta_id() * 128 + pg.thread_id(128))
        with pg.if_(i < N):
            out[i] = pg.float32(0.0)

    for n in (100, 300, 1000, 300):
        per_n(T(fake, 0, n=n))
    assert [l.grid[0] for l in fake.launches[-4:]] == [1, 3, 8, 3]


def test_call_without_options_after_unload_fails_cleanly(fake):
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    fake.cuCtxSetCurrent(fake.ctx_of(0))
    k(x, y, 1.0)
    k(x, y, 1.0)
    launcher = next(iter(k._plan.launchers.values()))
    launcher.module.unload()
    with pytest.raises(CudaError, match="was unloaded"):
        k(x, y, 1.0)
