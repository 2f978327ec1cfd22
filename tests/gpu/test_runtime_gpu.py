"""Runtime on a real GPU: load, launch, argument errors, sticky faults, leaks, threads.

Every test is marked ``gpu`` and skipped cleanly where no CUDA device is visible.  Tests that
poison the CUDA context (an out-of-bounds store) or measure memory run in a child process.
"""
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from ptxgen.errors import CudaError, LaunchError, PTXCompileError
from ptxgen.runtime import (Launcher, Module, ParamSpec, compile_ptx, device_arch, has_gpu,
                            stats, synchronize)
from ptxgen.layout import row_major_strides as row_major

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HEADER = ".version 7.0\n.target sm_80\n.address_size 64\n"

AXPY = HEADER + textwrap.dedent("""
    .visible .entry axpy(.param .u64 y, .param .u64 x, .param .f32 a, .param .s32 n)
    {
        .reg .pred %p<2>;
        .reg .b32 %r<6>;
        .reg .b64 %rd<6>;
        .reg .f32 %f<4>;
        ld.param.u64 %rd1, [y];
        ld.param.u64 %rd2, [x];
        ld.param.f32 %f1, [a];
        ld.param.s32 %r1, [n];
        mov.u32 %r2, %ctaid.x;
        mov.u32 %r3, %ntid.x;
        mov.u32 %r4, %tid.x;
        mad.lo.s32 %r5, %r2, %r3, %r4;
        setp.ge.s32 %p1, %r5, %r1;
        @%p1 bra DONE;
        cvta.to.global.u64 %rd1, %rd1;
        cvta.to.global.u64 %rd2, %rd2;
        mul.wide.s32 %rd3, %r5, 4;
        add.s64 %rd4, %rd2, %rd3;
        add.s64 %rd5, %rd1, %rd3;
        ld.global.f32 %f2, [%rd4];
        ld.global.f32 %f3, [%rd5];
        fma.rn.f32 %f3, %f1, %f2, %f3;
        st.global.f32 [%rd5], %f3;
    DONE:
        ret;
    }
    """)

COPY16 = HEADER + textwrap.dedent("""
    .visible .entry copy16(.param .u64 dst, .param .u64 src, .param .s32 n)
    {
        .reg .pred %p<2>;
        .reg .b16 %h<2>;
        .reg .b32 %r<6>;
        .reg .b64 %rd<6>;
        ld.param.u64 %rd1, [dst];
        ld.param.u64 %rd2, [src];
        ld.param.s32 %r1, [n];
        mov.u32 %r2, %ctaid.x;
        mov.u32 %r3, %ntid.x;
        mov.u32 %r4, %tid.x;
        mad.lo.s32 %r5, %r2, %r3, %r4;
        setp.ge.s32 %p1, %r5, %r1;
        @%p1 bra DONE;
        cvta.to.global.u64 %rd1, %rd1;
        cvta.to.global.u64 %rd2, %rd2;
        mul.wide.s32 %rd3, %r5, 2;
        add.s64 %rd4, %rd2, %rd3;
        add.s64 %rd5, %rd1, %rd3;
        ld.global.b16 %h1, [%rd4];
        st.global.b16 [%rd5], %h1;
    DONE:
        ret;
    }
    """)

DSMEM = HEADER + textwrap.dedent("""
    .extern .shared .align 16 .b8 dsm[];
    .visible .entry dsmem(.param .u64 out, .param .s32 nbytes)
    {
        .reg .b32 %r<8>;
        .reg .b64 %rd<2>;
        ld.param.u64 %rd1, [out];
        ld.param.s32 %r1, [nbytes];
        mov.u32 %r2, dsm;
        add.s32 %r3, %r2, %r1;
        sub.s32 %r3, %r3, 4;
        mov.u32 %r4, 12345;
        st.shared.u32 [%r3], %r4;
        bar.sync 0;
        ld.shared.u32 %r5, [%r3];
        cvta.to.global.u64 %rd1, %rd1;
        st.global.u32 [%rd1], %r5;
        ret;
    }
    """)

OOB = HEADER + textwrap.dedent("""
    .visible .entry oob(.param .u64 p)
    {
        .reg .b32 %r<2>;
        .reg .b64 %rd<2>;
        ld.param.u64 %rd1, [p];
        mov.u32 %r1, 7;
        st.global.u32 [%rd1], %r1;
        ret;
    }
    """)

AXPY_PARAMS = [ParamSpec("y", "tensor", "float32", ".u64", ("N",)),
               ParamSpec("x", "tensor", "float32", ".u64", ("N",)),
               ParamSpec("a", "scalar", "float32", ".f32"),
               ParamSpec("N", "symbol", "int32", ".s32")]


def grid_for(env):
    return ((env["N"] + 255) // 256,)


def _axpy(via="cubin"):
    if via == "cubin":
        mod = Module.load(cubin=compile_ptx(AXPY, device_arch(), name="axpy").cubin, name="axpy")
    else:
        mod = Module.load(ptx=AXPY, name="axpy")
    return mod, Launcher(mod.function("axpy"), AXPY_PARAMS, name="axpy")


def _run(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_device_facts():
    arch = device_arch()
    assert arch.startswith("sm_") and has_gpu()
    if arch.startswith("sm_9"):
        assert arch == "sm_90a"


def test_axpy_torch_cubin():
    torch = pytest.importorskip("torch")
    mod, L = _axpy("cubin")
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    y = torch.ones(1000, dtype=torch.float32, device="cuda")
    L((y, x, 2.0), {}, grid=grid_for, block=(256,))     # torch's current stream
    synchronize()
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x + 1)
    s = torch.cuda.Stream()
    L((y, x, -2.0), {}, grid=grid_for, block=(256,), stream=s)
    s.synchronize()
    assert torch.equal(y, torch.ones_like(y))
    L((y.data_ptr(), x.data_ptr(), 1.0), {"N": 1000}, grid=(4,), block=(256,))  # raw pointers
    torch.cuda.synchronize()
    assert torch.equal(y, x + 1)
    mod.unload()


def test_axpy_cupy_driver_jit():
    cp = pytest.importorskip("cupy")
    mod, L = _axpy("ptx")
    x = cp.arange(777, dtype=cp.float32)
    y = cp.zeros(777, dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    L((y, x, 3.0), {}, grid=grid_for, block=(256,), stream=s)
    synchronize(s)
    assert (cp.asnumpy(y) == 3 * cp.asnumpy(x)).all()
    assert stats()["driver_jit"] >= 1


def test_dlpack_only_object():
    torch = pytest.importorskip("torch")

    class OnlyDL:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    mod, L = _axpy()
    x = torch.full((300,), 2.0, device="cuda")
    y = torch.zeros(300, device="cuda")
    L((OnlyDL(y), OnlyDL(x), 0.5), {}, grid=grid_for, block=(256,))
    torch.cuda.synchronize()
    assert torch.equal(y, torch.ones_like(y))


def test_array_interface_only_object_asks_the_driver_for_its_device():
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import driver
    from _affine import make_affine
    from _xp import OnlyCAI

    rng = np.random.default_rng(5)
    x = rng.standard_normal(4099).astype(np.float32)
    xt = torch.from_numpy(x).cuda()
    out = torch.full((4099,), float("nan"), device="cuda")
    assert driver.pointer_device(out.data_ptr()) == 0
    k = make_affine()
    k(OnlyCAI(out), OnlyCAI(xt), 1.5, -0.25)
    torch.cuda.synchronize()
    want = x * np.float32(1.5) + np.float32(-0.25)
    assert np.array_equal(out.cpu().numpy().view(np.uint32), want.view(np.uint32))
    assert sorted(k._plan.launchers) == [0]


def test_bad_arguments_with_torch():
    torch = pytest.importorskip("torch")
    mod, L = _axpy()
    x = torch.zeros(64, device="cuda")
    y = torch.zeros(64, device="cuda")

    def msg(*args, **kw):
        with pytest.raises(LaunchError) as ei:
            L(args, kw, grid=(1,), block=(64,))
        return str(ei.value)

    assert msg(y, torch.zeros(64), 1.0) == "argument 'x': is on the CPU; pass a CUDA tensor"
    assert msg(y, x.half(), 1.0) == "argument 'x': expected dtype float32, got float16"
    assert msg(y, torch.zeros(32, device="cuda"), 1.0) == \
        "argument 'x': dim 0 is symbol N = 64 (bound by 'y'), got 32"
    assert msg(y, torch.zeros(2, 32, device="cuda"), 1.0) == \
        "argument 'x': expected rank 1, got rank 2"
    big = torch.zeros(65, device="cuda")
    assert msg(y, big[1:], 1.0) == (f"argument 'x': base pointer {big.data_ptr() + 4:#x} is not "
                                    f"16-byte aligned (declared align=16)")
    assert msg(y, x) == "kernel 'axpy' takes 3 arguments (y, x, a), got 2: missing 'a'"
    # a 2-D signature that wants row-major strides, given a transposed view
    ps = [ParamSpec("A", "tensor", "float32", ".u64", ("M", "K"),
                    strides=lambda s: row_major((s["M"], s["K"])))]
    L2 = Launcher(mod.function("axpy"), ps, name="t")
    with pytest.raises(LaunchError) as ei:
        L2((torch.zeros(128, 64, device="cuda").t(),), {}, grid=(1,), block=(1,))
    assert str(ei.value) == \
        "argument 'A': expected strides (128, 1) elements (contiguous row-major), got (1, 64)"


def test_bfloat16_torch_and_uint16_cupy():
    torch = pytest.importorskip("torch")
    cubin = compile_ptx(COPY16, device_arch(), name="copy16").cubin
    mod = Module.load(cubin=cubin, name="copy16")
    ps = [ParamSpec("dst", "tensor", "bfloat16", ".u64", ("N",)),
          ParamSpec("src", "tensor", "bfloat16", ".u64", ("N",)),
          ParamSpec("N", "symbol", "int32", ".s32")]
    L = Launcher(mod.function("copy16"), ps, name="copy16")
    src = torch.randn(500, device="cuda").bfloat16()
    dst = torch.zeros_like(src)
    L((dst, src), {}, grid=grid_for, block=(256,))
    torch.cuda.synchronize()
    assert torch.equal(dst, src)
    with pytest.raises(LaunchError, match="expected dtype bfloat16, got float16"):
        L((dst, src.half()), {}, grid=grid_for, block=(256,))
    cp = pytest.importorskip("cupy")
    a = cp.arange(500, dtype=cp.uint16)
    b = cp.zeros(500, dtype=cp.uint16)
    L((b, a), {}, grid=grid_for, block=(256,))
    synchronize()
    assert (cp.asnumpy(a) == cp.asnumpy(b)).all()


def test_dynamic_shared_memory_over_48k():
    torch = pytest.importorskip("torch")
    mod = Module.load(cubin=compile_ptx(DSMEM, device_arch(), name="dsmem").cubin, name="dsmem")
    fn = mod.function("dsmem")
    ps = [ParamSpec("out", "tensor", "int32", ".u64", (1,)),
          ParamSpec("nbytes", "scalar", "int32", ".s32")]
    L = Launcher(fn, ps, name="dsmem", dynamic_smem_bytes=100 * 1024)
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    L((out, 100 * 1024), {}, grid=(1,), block=(32,))
    torch.cuda.synchronize()
    assert out.item() == 12345 and fn.max_dynamic_smem == 100 * 1024
    with pytest.raises(LaunchError, match="exceed the device's limit"):
        L((out, 4), {}, grid=(1,), block=(32,), dynamic_smem_bytes=10 * 1024 * 1024)


def test_module_errors():
    mod, L = _axpy()
    with pytest.raises(CudaError, match=r"CUDA_ERROR_NOT_FOUND.*no \.entry named 'nope'"):
        mod.function("nope")
    mod.unload()
    with pytest.raises(CudaError, match=r"module 'axpy' was unloaded"):
        L((256, 512, 1.0), {"N": 1}, grid=(1,), block=(1,))   # never dereferenced
    with pytest.raises(CudaError, match=r"was unloaded"):
        mod.function("axpy")
    mod.unload()  # idempotent
    assert not mod.loaded
    bad = AXPY.replace("fma.rn.f32 %f3, %f1, %f2, %f3;", "add.s64 %rd1, %rd1, %r1;")
    with pytest.raises(PTXCompileError) as ei:
        Module.load(ptx=bad, name="badjit", line_origin=lambda n: f"origin of {n}")
    msg = str(ei.value)
    line = bad.splitlines().index("    add.s64 %rd1, %rd1, %r1;") + 1
    assert "Arguments mismatch for instruction 'add'" in msg and f"origin of {line}" in msg
    assert f"ptxas -arch={device_arch()} " in msg and ei.value.ptx_line == line


def test_concurrent_launches_from_8_threads():
    torch = pytest.importorskip("torch")
    mod, L = _axpy()
    n, reps = 4096, 300
    xs = [torch.arange(n, dtype=torch.float32, device="cuda") * (i + 1) for i in range(8)]
    ys = [torch.zeros(n, dtype=torch.float32, device="cuda") for _ in range(8)]
    streams = [torch.cuda.Stream() for _ in range(8)]
    torch.cuda.synchronize()
    errors = []

    def work(i):  # no torch calls here: the thread starts with no current CUDA context
        try:
            for _ in range(reps):
                L((ys[i], xs[i], 1.0), {}, grid=grid_for, block=(256,), stream=streams[i])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    torch.cuda.synchronize()
    for i in range(8):
        assert torch.equal(ys[i], xs[i] * reps)


def test_out_of_bounds_store_is_a_sticky_error():
    out = _run(f"""
        from ptxgen.runtime import Launcher, Module, ParamSpec, compile_ptx, device_arch
        from ptxgen.runtime import synchronize
        from ptxgen.errors import CudaError
        mod = Module.load(cubin=compile_ptx({OOB!r}, device_arch(), name="oob").cubin,
                          name="oob")
        L = Launcher(mod.function("oob"), [ParamSpec("p", "tensor", "int32", ".u64", (1,))],
                     name="oob")
        L((16,), {{}}, grid=(1,), block=(1,))
        try:
            synchronize()
            print("NO ERROR")
        except CudaError as e:
            print(e)
            print("sticky" if e.sticky else "not sticky")
        try:
            L((16,), {{}}, grid=(1,), block=(1,))
            synchronize()
        except CudaError as e:
            print("again:", e)
    """)
    first, flag, again = out.strip().splitlines()[:3]
    assert "CUDA_ERROR_ILLEGAL_ADDRESS (700)" in first and "kernel 'oob'" in first
    assert first.endswith("the CUDA context is now unusable (sticky error); re-run under "
                          "compute-sanitizer to find the faulting access")
    assert flag == "sticky" and again.startswith("again:") and "sticky error" in again


def test_load_launch_unload_cycles_do_not_leak():
    out = _run(f"""
        import json, os
        from cuda.bindings import driver as d
        from ptxgen.runtime import Launcher, Module, ParamSpec, compile_ptx, device_arch
        from ptxgen.runtime import synchronize
        params = [ParamSpec("y", "tensor", "float32", ".u64", ("N",)),
                  ParamSpec("x", "tensor", "float32", ".u64", ("N",)),
                  ParamSpec("a", "scalar", "float32", ".f32"),
                  ParamSpec("N", "symbol", "int32", ".s32")]
        cubin = compile_ptx({AXPY!r}, device_arch(), name="axpy").cubin

        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

        def free():
            return d.cuMemGetInfo()[1]

        err, buf = None, None
        def cycle(i):
            global buf
            m = Module.load(cubin=cubin, name="axpy")
            if buf is None:
                buf = d.cuMemAlloc(8 * 1024)[1]
            L = Launcher(m.function("axpy"), params, name="axpy")
            L((int(buf), int(buf) + 4096, 1.0), {{"N": 1024}}, grid=(4,), block=(256,))
            if i % 100 == 0:
                synchronize()
            m.unload()

        for i in range(1000):
            cycle(i)
        synchronize()
        r0, f0 = rss(), free()
        for i in range(10000):
            cycle(i)
        synchronize()
        print(json.dumps(dict(rss=rss() - r0, dev=f0 - free())))
    """)
    grown = json.loads(out.strip().splitlines()[-1])
    assert grown["rss"] < 16 * 2**20, grown
    assert grown["dev"] < 8 * 2**20, grown


# ---- pg.Kernel launches: checks before the driver, streams, dynamic shared memory -----------
def _kernels():
    import ptxgen as pg
    from _affine import make_affine

    affine = make_affine()

    @pg.kernel(grid=(1,), block=(128,))
    def pooled(out: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        t = pool.alloc((256,), "float32")           # 1 KiB of dynamic shared memory
        pool.commit()
        t[tx + 128] = pg.float32(2.0)
        pg.cta_sync()
        out[tx] = t[255 - tx]
    return affine, pooled


def test_kernel_launch_checks_raise_before_the_driver():
    torch = pytest.importorskip("torch")
    affine, pooled = _kernels()
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    out = torch.zeros(1000, device="cuda")
    affine(out, x, 2.0, 1.0)                            # builds and loads
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x + 1)
    assert affine._plan.bind.__name__ == "bind_fast"         # generated for torch tensors
    launcher = affine._plan.launchers[torch.cuda.current_device()]
    real, calls = launcher._launch, []
    launcher._launch = lambda *a: calls.append(a) or real(*a)
    out.fill_(-1.0)
    torch.cuda.synchronize()

    def msg(*args, **kw):
        with pytest.raises(LaunchError) as ei:
            affine(*args, **kw)
        return str(ei.value)

    big, wide = torch.zeros(1001, device="cuda"), torch.zeros(2000, device="cuda")
    cases = {
        msg(out, x.cpu(), 2.0, 1.0): "argument 'x': is on the CPU; pass a CUDA tensor",
        msg(out, x.half(), 2.0, 1.0): "argument 'x': expected dtype float32, got float16",
        msg(out, x[:999], 2.0, 1.0): "argument 'x': dim 0 is symbol N = 1000 (bound by 'out'), "
                                     "got 999",
        msg(out, big[1:], 2.0, 1.0): f"argument 'x': base pointer {big.data_ptr() + 4:#x} is "
                                     f"not 16-byte aligned (declared align=16)",
        msg(out, wide[::2], 2.0, 1.0):
            "argument 'x': expected strides (1,) elements (contiguous row-major), got (2,)",
        msg(out.data_ptr(), 0, 2.0, 1.0, N=1000):
            "argument 'x': pointer is null (0); pass an allocated CUDA tensor or device address",
        msg(out.data_ptr(), x.data_ptr(), 2.0, 1.0, N=0):
            "kernel 'affine': symbol N = 0 (passed as N=0) must be at least 1",
        msg(out, x, 1e39, 1.0): "argument 'a': 1e+39 is out of range for float32 (max 3.40282e+38)",
        msg(out, x, 2.0, 1.0, dynamic_smem_bytes=-1):
            "kernel 'affine': dynamic_smem_bytes=-1 is negative",
    }
    for got, want in cases.items():
        assert got == want
    empty = torch.zeros(0, device="cuda")       # no data pointer, or one: either is refused
    assert msg(empty, empty, 2.0, 1.0) in (
        "argument 'out': is empty (shape (0,)); a launch needs every dim to be at least 1",
        "argument 'out': dim 0 is symbol N = 0; shape symbols must be at least 1 (an empty "
        "tensor cannot be launched on)")
    assert not calls                                     # the driver never saw one of them
    torch.cuda.synchronize()
    assert (out == -1.0).all()
    affine(out, x, np.float32(3.0), np.int64(1), grid=(np.int64(4),))    # numpy scalars
    torch.cuda.synchronize()
    assert len(calls) == 1 and torch.equal(out, 3 * x + 1)


def test_kernel_stream_from_the_device():
    torch = pytest.importorskip("torch")
    affine, _ = _kernels()
    x = torch.arange(4096, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(x)
    s = torch.cuda.Stream()          # non-blocking: wait for x and out to be made first
    torch.cuda.synchronize()
    with torch.cuda.stream(s):                           # stream=None: torch's current one
        affine(out, x, 2.0, 0.0)
    s.synchronize()
    assert torch.equal(out, 2 * x)
    for stream in (s, s.cuda_stream):                    # object (says its device), raw handle
        out.zero_()
        torch.cuda.synchronize()
        affine(out, x, 3.0, 0.0, stream=stream)
        s.synchronize()
        assert torch.equal(out, 3 * x)


def test_kernel_cupy_stream():
    torch = pytest.importorskip("torch")
    cp = pytest.importorskip("cupy")
    affine, _ = _kernels()
    x = torch.arange(4096, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(x)
    torch.cuda.synchronize()
    cs = cp.cuda.Stream(non_blocking=True)
    affine(out, x, 4.0, 0.0, stream=cs)
    cs.synchronize()
    assert torch.equal(out, 4 * x)


def test_kernel_dynamic_smem_override_is_checked():
    torch = pytest.importorskip("torch")
    _, pooled = _kernels()
    out = torch.zeros(128, device="cuda")
    for smem in (None, 1024, np.int64(4096), 100 * 1024):  # > 48 KiB: opted in first
        out.zero_()
        pooled(out, dynamic_smem_bytes=smem)
        torch.cuda.synchronize()
        assert (out == 2.0).all(), smem
    launcher = pooled._plan.launchers[torch.cuda.current_device()]
    assert launcher.min_dynamic_smem_bytes == 1024 and launcher.fn.max_dynamic_smem == 100 * 1024
    real, calls = launcher._launch, []
    launcher._launch = lambda *a: calls.append(a) or real(*a)
    with pytest.raises(LaunchError) as ei:
        pooled(out, dynamic_smem_bytes=512)
    assert str(ei.value) == ("kernel 'pooled': dynamic_smem_bytes=512 is less than the 1024 "
                             "bytes its dynamic shared memory (pool or shared.dyn arena) uses; "
                             "pass at least 1024, or leave it out to get 1024")
    with pytest.raises(LaunchError, match="exceed the device's limit"):
        pooled(out, dynamic_smem_bytes=10 * 1024 * 1024)
    assert not calls


def test_launch_with_no_current_context_is_refused_then_made_in_ours():
    """The launcher does not ask which context is current before a launch: it relies on the
    driver refusing one when its context is not current.  A new thread has none: the first
    launch there must be refused (counted in launch_retries) and made again in ours."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import driver

    affine, _ = _kernels()
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(x)
    affine(out, x, 2.0, 1.0)                     # built, loaded, launched here
    torch.cuda.synchronize()
    out.zero_()
    torch.cuda.synchronize()
    before, seen = stats()["launch_retries"], {}

    def work():      # no torch calls in this thread: none may make a context current
        seen["before"] = int(driver.drv().cuCtxGetCurrent()[1])
        affine(out, x, 2.0, 1.0, stream=0)
        affine(out, x, 2.0, 1.0, stream=0)
        seen["after"] = int(driver.drv().cuCtxGetCurrent()[1])

    t = threading.Thread(target=work)
    t.start()
    t.join()
    if seen["before"]:
        pytest.skip("a context was already current in the new thread")
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2.0 + 1.0)
    assert stats()["launch_retries"] - before == 1      # refused once, then made current
    assert seen["after"] == int(driver.primary_context(0))


def test_prepared_launch_computes_what_the_kernel_call_does():
    """Kernel.prepare on torch tensors: new tensors of the same metadata by their pointers, on
    the current stream of each call, and a CUDA graph capture of a prepared launch replays
    it (the wrappers' tensor-map kernels are covered by the gemm tests)."""
    torch = pytest.importorskip("torch")
    import ptxgen as pg

    N = pg.var("N")

    @pg.kernel(grid=lambda a: (a["N"] // 128,), block=(128,))
    def axpb(y: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32"), a: pg.float32):
        i = pg.cta_id() * 128 + pg.thread_id(128)
        y[i] = x[i] * a + 1.0

    x0, y0 = torch.randn(1024, device="cuda"), torch.empty(1024, device="cuda")
    run = axpb.prepare(y0, x0, 2.0)
    s = torch.cuda.Stream()
    for a in (3.0, -0.5):
        x, y = torch.randn(1024, device="cuda"), torch.full((1024,), float("nan"), device="cuda")
        with torch.cuda.stream(s):
            run(y.data_ptr(), x.data_ptr(), a)
        s.synchronize()
        assert torch.equal(y, x * a + 1.0)
    x, y = torch.randn(1024, device="cuda"), torch.full((1024,), float("nan"), device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run(y.data_ptr(), x.data_ptr(), 4.0)
    y.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x * 4.0 + 1.0)
    with pytest.raises(LaunchError, match="argument 'x': base pointer .* is not 16-byte"):
        run(y.data_ptr(), x.data_ptr() + 4, 1.0)
