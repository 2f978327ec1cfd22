"""Per-device execution and launch safety of pg.Kernel, without a GPU: a stand-in driver with
several devices (support/fakecuda.py) records what a launch asks of it.  Real nvJitLink builds
the cubins, so these also cover one build per arch and one module per device."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxgen as pg
from ptxgen.errors import CudaError, LaunchError
from ptxgen.runtime import Binder, ParamSpec, clear_memory_cache
from ptxgen.runtime.args import ROW_MAJOR
from support.fakecuda import FLOAT16, FLOAT32, FakeDriver, FakeTorchTensor, install, \
    install_fake_torch, register_torch_dtypes, scale_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = pg.var("N")


def make_pooled():
    @pg.kernel(grid=(1,), block=(128,))
    def pooled(out: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        t = pool.alloc((256,), "float32")        # 1 KiB of dynamic shared memory
        pool.commit()
        t[tx] = pg.float32(1.0)
        pg.cta_sync()
        out[tx] = t[tx]
    return pooled


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()


def fake_gpus(monkeypatch, archs=((9, 0), (9, 0))):
    fake = install(monkeypatch, FakeDriver(archs=archs))
    register_torch_dtypes(monkeypatch)
    return fake


def T(fake, device, n=256, dtype=FLOAT32, offset=0):
    return FakeTorchTensor(fake.alloc(device) + offset, (n,), device, dtype)


def launch_error(fn, *args, **kw):
    with pytest.raises(LaunchError) as ei:
        fn(*args, **kw)
    return str(ei.value)


# ---- per-device execution ----------------------------------------------------------------
@pytest.mark.parametrize("order", [(0, 1, 0), (1, 0, 1)])
def test_one_kernel_runs_on_the_device_of_its_tensors(monkeypatch, order):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    for dev in order:
        k(T(fake, dev), T(fake, dev), 2.0)
    assert [l.device for l in fake.launches] == list(order)
    assert fake.calls["cuModuleLoadData"] == 2         # one module per device, on first use
    assert sorted(k._plan.launchers) == [0, 1]
    assert list(k._ptx_cache) == [("sm_90a", False, False)]   # same arch: one build
    # none was current: device 0's context is left current (the CUDA runtime's default
    # device), device 1's never is (torch's current device must not move to it)
    assert fake.current == fake.ctx_of(0)


def test_devices_of_different_archs_get_their_own_build(monkeypatch):
    fake = fake_gpus(monkeypatch, archs=[(9, 0), (10, 0)])
    k = scale_kernel()
    k(T(fake, 1), T(fake, 1), 1.0)
    k(T(fake, 0), T(fake, 0), 1.0)
    assert sorted(a for a, *_ in k._ptx_cache) == ["sm_100a", "sm_90a"]
    assert [l.device for l in fake.launches] == [1, 0]


def test_mixed_devices_are_refused_before_the_driver(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    assert launch_error(k, T(fake, 0), T(fake, 1), 1.0) == (
        "kernel 'scale': argument 'x' is on cuda:1 but argument 'out' is on cuda:0; a launch "
        "runs on one device, so move them to the same one")
    assert fake.calls["cuLaunchKernel"] == fake.calls["cuModuleLoadData"] == 0
    assert not k._ptx_cache                              # nothing was even built


def test_raw_pointers_launch_on_the_current_device(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    fake.cuCtxSetCurrent(fake.ctx_of(1))                 # e.g. torch.cuda.set_device(1)
    p = fake.alloc(1)
    k(p, p + 1024, 1.0, N=256)
    k(np.int64(p), np.uint64(p + 1024), np.float32(0.5), N=np.int32(256))   # numpy ints
    assert [l.device for l in fake.launches] == [1, 1]
    assert fake.current == fake.ctx_of(1)
    fake.cuCtxSetCurrent(0)                              # no context: device 0, as CUDA does
    k(p, p, 1.0, N=256)
    assert fake.launches[-1].device == 0


def fake_torch(monkeypatch, initialized=False, device=0, stream=0):
    return install_fake_torch(monkeypatch, initialized, device, stream)


def test_raw_pointers_follow_torchs_current_device(monkeypatch):
    """torch may switch devices lazily (no context current yet): once torch has initialized
    CUDA, its current device is the one raw-pointer launches use, with its current stream."""
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    s1 = fake.make_stream(1)
    fake_torch(monkeypatch, initialized=True, device=1, stream=s1)
    p = fake.alloc(1)
    k(p, p, 1.0, N=256)
    assert (fake.launches[-1].device, fake.launches[-1].stream) == (1, s1)
    assert fake.calls["cuCtxGetDevice"] == 0


def test_launch_on_another_device_leaves_the_current_context(monkeypatch):
    """torch's current device must not change because a kernel ran elsewhere."""
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    fake.cuCtxSetCurrent(fake.ctx_of(0))
    x1, y1 = T(fake, 1), T(fake, 1)
    k(x1, y1, 1.0)
    assert fake.current == fake.ctx_of(0) and fake.launches[-1].device == 1
    pushes = fake.calls["cuCtxPushCurrent"]
    k(x1, y1, 1.0)
    assert fake.calls["cuCtxPushCurrent"] == pushes + 1 and fake.current == fake.ctx_of(0)
    fake.cuCtxSetCurrent(fake.ctx_of(1))
    k(x1, y1, 1.0)                                       # now ours is current: no push
    assert fake.calls["cuCtxPushCurrent"] == pushes + 1


def test_steady_state_launch_makes_one_driver_call(monkeypatch):
    """Arch, attributes, contexts and the module are asked once; with its context current a
    later launch is cuLaunchKernel alone (the current context is asked only when it fails)."""
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    k(x, y, 1.0)
    before = fake.calls.copy()
    for _ in range(5):
        k(x, y, 1.0)
    diff = fake.calls - before
    assert dict(diff) == {"cuLaunchKernel": 5}


def test_threads_drive_one_device_each(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    fake.param_bytes = 16
    tensors = {d: (T(fake, d), T(fake, d)) for d in (0, 1)}
    errors, start = [], threading.Barrier(2)

    def work(dev):                   # a new thread has no current context
        try:
            start.wait()
            for _ in range(200):
                k(*tensors[dev], 1.0)
            currents.append((dev, fake.current))
        except Exception as e:       # pragma: no cover - reported below
            errors.append(e)

    currents = []
    threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(currents) == [(0, fake.ctx_of(0)), (1, 0)]
    for d in (0, 1):
        mine = [l for l in fake.launches if l.device == d]
        assert len(mine) == 200 and len({l.thread for l in mine}) == 1
        out, x = tensors[d]
        want = out.data_ptr().to_bytes(8, "little") + x.data_ptr().to_bytes(8, "little")
        assert {l.params for l in mine} == {want}      # each launch packed its own arguments
    assert fake.calls["cuModuleLoadData"] == 2


def test_a_device_the_process_does_not_have(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    assert launch_error(k, T(fake, 5), T(fake, 5), 1.0) == \
        "there is no cuda:5: this process sees 2 CUDA devices"


# ---- streams --------------------------------------------------------------------------------
class TorchStream:
    def __init__(self, handle, device):
        self.cuda_stream, self.device_index = handle, device


class CupyStream:
    def __init__(self, handle, device):
        self.ptr, self.device_id = handle, device


def test_stream_must_belong_to_the_launch_device(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    x, y = T(fake, 0), T(fake, 0)
    s0, s1 = fake.make_stream(0), fake.make_stream(1)
    k(x, y, 1.0, stream=s0)
    k(x, y, 1.0, stream=TorchStream(s0, 0))
    k(x, y, 1.0, stream=CupyStream(s0, 0))
    k(x, y, 1.0, stream=np.uint64(s0))
    for special in (0, 1, 2):                # legacy / per-thread default streams: any device
        k(x, y, 1.0, stream=special)
    assert [l.stream for l in fake.launches] == [s0] * 4 + [0, 1, 2]
    n = len(fake.launches)
    msg = ("kernel 'scale': the stream is on cuda:1, but the launch runs on cuda:0 (where its "
           "arguments are); pass a stream of cuda:0")
    assert launch_error(k, x, y, 1.0, stream=s1) == msg                   # asked the driver
    assert launch_error(k, x, y, 1.0, stream=TorchStream(s1, 1)) == msg   # the object says
    assert launch_error(k, x, y, 1.0, stream=CupyStream(s1, 1)) == msg
    assert launch_error(k, x, y, 1.0, stream=TorchStream(0, 1)) == msg    # default of cuda:1
    assert launch_error(k, x, y, 1.0, stream="s") == (
        "stream must be None, an int handle, or a torch/cupy/CUDA stream object, got str")
    assert len(fake.launches) == n                                        # none reached it


def test_unknown_stream_is_left_to_the_driver(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    with pytest.raises(CudaError, match=r"cuLaunchKernel failed for kernel 'scale': "
                                        r"CUDA_ERROR_INVALID_HANDLE \(400\)"):
        k(T(fake, 0), T(fake, 0), 1.0, stream=0xDEAD0)


# ---- where an array lives ------------------------------------------------------------------
class CAI:
    def __init__(self, ptr, shape=(256,), typestr="<f4", dlpack_device=None, data=True):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "version": 3,
                                         "strides": None}
        if data:
            self.__cuda_array_interface__["data"] = (ptr, False)
        if dlpack_device is not None:
            self.__dlpack_device__ = lambda: dlpack_device


def test_array_interface_device_from_dlpack_or_the_pointer(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    p1 = fake.alloc(1)
    k(CAI(p1, dlpack_device=(2, 1)), CAI(p1 + 1024, dlpack_device=(2, 1)), 1.0)
    assert fake.calls["cuPointerGetAttribute"] == 0 and fake.launches[-1].device == 1
    k(CAI(p1), CAI(p1 + 1024), 1.0)                  # only the driver knows
    assert fake.calls["cuPointerGetAttribute"] == 2 and fake.launches[-1].device == 1
    assert launch_error(k, CAI(p1), T(fake, 0), 1.0) == (
        "kernel 'scale': argument 'x' is on cuda:0 but argument 'out' is on cuda:1; a launch "
        "runs on one device, so move them to the same one")


def test_array_interface_without_data(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    assert launch_error(k, CAI(0, data=False), T(fake, 0), 1.0) == (
        "argument 'out': its __cuda_array_interface__ has no 'data' (pointer, read-only) pair "
        "(got None); pass an array that owns device memory")


# ---- launch safety -------------------------------------------------------------------------
def test_dynamic_smem_override_below_the_pool_is_refused(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = make_pooled()
    out = FakeTorchTensor(fake.alloc(0), (128,), 0)
    k(out)
    k(out, dynamic_smem_bytes=np.int64(4096))
    k(out, dynamic_smem_bytes=1024)
    assert [l.smem for l in fake.launches] == [1024, 4096, 1024]
    msg = ("kernel 'pooled': dynamic_smem_bytes=1000 is less than the 1024 bytes its dynamic "
           "shared memory (pool or shared.dyn arena) uses; pass at least 1024, or leave it out "
           "to get 1024")
    assert launch_error(k, out, dynamic_smem_bytes=1000) == msg
    assert launch_error(k, out, dynamic_smem_bytes=-1) == \
        "kernel 'pooled': dynamic_smem_bytes=-1 is negative"
    assert launch_error(k, out, dynamic_smem_bytes=2.5) == \
        "kernel 'pooled': dynamic_smem_bytes must be an integer, got float 2.5"
    assert launch_error(scale_kernel(), T(fake, 0), T(fake, 0), 1.0, dynamic_smem_bytes=-8) == \
        "kernel 'scale': dynamic_smem_bytes=-8 is negative"
    assert len(fake.launches) == 3
    k(out, dynamic_smem_bytes=100 * 1024)              # above 48 KiB: opted in first
    assert fake.calls["cuFuncSetAttribute"] == 1 and fake.launches[-1].smem == 100 * 1024
    with pytest.raises(LaunchError, match="exceed the device's limit of 232448 bytes"):
        k(out, dynamic_smem_bytes=300 * 1024)


def test_empty_and_non_positive_shapes(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    empty = FakeTorchTensor(0, (0,), 0)               # torch's empty CUDA tensors have no data
    assert launch_error(k, empty, empty, 1.0) == \
        "argument 'out': is empty (shape (0,)); a launch needs every dim to be at least 1"
    p = fake.alloc(0)
    assert launch_error(k, CAI(p, shape=(0,)), CAI(p, shape=(0,)), 1.0) == (
        "argument 'out': dim 0 is symbol N = 0; shape symbols must be at least 1 (an empty "
        "tensor cannot be launched on)")
    assert launch_error(k, p, p, 1.0, N=0) == \
        "kernel 'scale': symbol N = 0 (passed as N=0) must be at least 1"
    assert launch_error(k, p, p, 1.0, N=-5) == \
        "kernel 'scale': symbol N = -5 (passed as N=-5) must be at least 1"
    assert not fake.launches


def test_null_and_bad_pointers(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    p = fake.alloc(0)
    assert launch_error(k, 0, p, 1.0, N=4) == (
        "argument 'out': pointer is null (0); pass an allocated CUDA tensor or device address")
    assert launch_error(k, p, np.int64(0), 1.0, N=4) == (
        "argument 'x': pointer is null (0); pass an allocated CUDA tensor or device address")
    assert launch_error(k, p, -16, 1.0, N=4) == \
        "argument 'x': pointer -16 is negative; pass a device address"
    assert launch_error(k, p, True, 1.0, N=4) == (
        "argument 'x': expected a CUDA tensor (__cuda_array_interface__ or __dlpack__) or a "
        "device pointer (int), got bool")
    assert launch_error(k, CAI(0), CAI(0), 1.0) == (
        "argument 'out': pointer is null (0); pass an allocated CUDA tensor or device address")
    assert launch_error(k, p, p + 2**64, 1.0, N=4) == \
        f"argument 'x': pointer {p + 2**64:#x} does not fit in 64 bits"
    assert not fake.launches


def test_packing_errors_name_the_argument(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    x = T(fake, 0)
    assert launch_error(k, x, x, 1e39) == \
        "argument 's': 1e+39 is out of range for float32 (max 3.40282e+38)"
    assert launch_error(k, x, x, "2") == "argument 's': expected a number (float32), got str '2'"
    assert launch_error(k, x, x, None) == \
        "argument 's': expected a number (float32), got NoneType None"
    assert not fake.launches


def test_numpy_integers_wherever_ints_go(monkeypatch):
    fake = fake_gpus(monkeypatch)
    k = scale_kernel()
    p = fake.alloc(0)
    k(np.uint64(p), np.int64(p), np.float32(1.0), N=np.int64(256), grid=(np.int64(2),),
      block=np.int32(128), stream=np.int64(0), dynamic_smem_bytes=np.uint32(0))
    (l,) = fake.launches
    assert (l.grid, l.block, l.smem, l.stream) == ((2, 1, 1), (128, 1, 1), 0, 0)
    assert launch_error(k, p, p, 1.0, N=256, block=np.int64(64)) == (
        "kernel 'scale' was traced with blockDim.x = 128 (the generated code relies on it: "
        "thread/CTA ids, warp ids or tile scopes); launched with 64")

    @pg.kernel(grid=(np.int64(3),), block=np.int32(64), dynamic_smem_bytes=np.int64(2048))
    def k2(a: pg.Tensor((N,), "float32")):
        a[pg.thread_id(64)] = pg.float32(1.0)
    assert (k2.ir.grid, k2.ir.block, k2.ir.dynamic_smem_reserve) == ((3, 1, 1), (64, 1, 1), 2048)
    k2(T(fake, 0))
    assert (fake.launches[-1].grid, fake.launches[-1].smem) == ((3, 1, 1), 2048)


def test_kernel_uses_the_specialized_bind_for_torch(monkeypatch):
    """With torch imported, a Kernel's bind is generated for torch.Tensor; the fake torch
    module here makes the fake tensor class play that part."""
    fake = fake_gpus(monkeypatch)
    fake_torch(monkeypatch)
    k = scale_kernel()
    x = T(fake, 1)
    k(x, x, 1.0)
    assert k._plan.bind.__name__ == "bind_fast" and fake.launches[-1].device == 1
    assert launch_error(k, x, T(fake, 0), 1.0).startswith("kernel 'scale': argument 'x' is on")


# ---- the generated bind agrees with the generic one ----------------------------------------
SIG = [ParamSpec("A", "tensor", "float32", ".u64", ("M", 64), strides=ROW_MAJOR),
       ParamSpec("b", "tensor", "float16", ".u64", ("M",), align=8),
       ParamSpec("alpha", "scalar", "float32", ".f32"),
       ParamSpec("C", "tensor", "float32", ".u64", (4, "M"), strides=ROW_MAJOR),
       ParamSpec("M", "symbol", "int32", ".s32")]


class SubTensor(FakeTorchTensor):
    """Like torch.nn.Parameter: a subclass, which the generated bind leaves to the generic."""


def _outcome(f, args, kw):
    try:
        return f(args, kw)
    except LaunchError as e:
        return str(e)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_specialized_bind_matches_generic(data):
    from ptxgen.runtime import args
    args.torch_dt.update({FLOAT32: "float32", FLOAT16: "float16"})   # idempotent
    b = Binder(SIG, name="k")
    fast = b.specialize(FakeTorchTensor, {"float32": [FLOAT32], "float16": [FLOAT16]})
    assert fast is not None
    m = data.draw(st.sampled_from([1, 3, 128]))

    def tensor(shape, dt):
        kind = data.draw(st.sampled_from(["ok"] * 6 + ["dtype", "shape", "device", "cpu",
                                                          "align", "null", "strides", "int",
                                                          "rank", "subclass"]))
        ptr, dev, strides = 0x7F00_0000_0000 + 4096 * data.draw(st.integers(0, 9)), 0, None
        if kind == "dtype":
            dt = FLOAT16 if dt is FLOAT32 else FLOAT32
        elif kind == "shape":
            shape = tuple(s + data.draw(st.sampled_from([-1, 1])) for s in shape)
        elif kind == "device":
            dev = 1
        elif kind == "cpu":
            dev = None
        elif kind == "align":
            ptr += data.draw(st.sampled_from([2, 4, 8]))
        elif kind == "null":
            ptr = 0
        elif kind == "strides" and len(shape) == 2:
            strides = (1, shape[0])
        elif kind == "int":
            return ptr
        elif kind == "rank":
            shape = shape + (1,)
        elif kind == "subclass":
            return SubTensor(ptr, shape, dev, dt, strides)
        return FakeTorchTensor(ptr, shape, dev, dt, strides)

    args = (tensor((m, 64), FLOAT32), tensor((m,), FLOAT16),
            data.draw(st.sampled_from([1.0, 2, np.float32(0.5)])), tensor((4, m), FLOAT32))
    kw = data.draw(st.sampled_from([{}, {}, {"M": m}]))
    assert _outcome(fast, args, kw) == _outcome(b.bind_device, args, kw)


def test_specialize_declines_unsuitable_signatures():
    def spec(*ps):
        return Binder(list(ps), name="k").specialize(FakeTorchTensor, {"float32": [FLOAT32]})

    t = ParamSpec("A", "tensor", "float32", ".u64", ("M",))
    assert spec(t, ParamSpec("M", "symbol", "int32", ".s32")) is not None
    assert spec(ParamSpec("n", "scalar", "int32", ".s32")) is None               # no tensor
    assert spec(t, ParamSpec("s", "scalar", "bfloat16", ".b16"),
                ParamSpec("M", "symbol", "int32", ".s32")) is None               # bf16 scalar
    assert spec(t, ParamSpec("M", "symbol", "int32", ".s32"),
                ParamSpec("K", "symbol", "int32", ".s32")) is None               # keyword-only
    assert spec(ParamSpec("A", "tensor", "float32", ".u64", (4, 4),
                          strides=(8, 1))) is None                              # a layout


# ---- what importing and building load ------------------------------------------------------
def test_import_and_build_load_no_cuda_bindings():
    code = ("import sys, ptxgen as pg\n"
            "mods = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'cuda', 'jinja2'}"
            " | {m for m in sys.modules if m.startswith('ptxgen.runtime')})\n"
            "print(mods())\n"
            "N = pg.var('N')\n"
            "@pg.kernel(grid=(1,), block=(32,))\n"
            "def k(a: pg.Tensor((N,), 'float32')):\n"
            "    a[pg.thread_id(32)] = pg.float32(1.0)\n"
            "k.ptx('sm_90a')\n"
            "print([m for m in mods() if m == 'cuda' or m.startswith('ptxgen.runtime')])\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.splitlines()
    assert out == ["[]", "[]"]
