"""The ctypes driver binding (ptxgen/runtime/libcuda.py) on a real GPU, against cuda-bindings:
the same device facts and tensor-map bytes in one process, and the same kernels (plain,
raw-pointer Launcher, TMA loads, cluster multicast and distributed shared memory, a torch
stream) run in a child process through each binding (PTXGEN_DRIVER=ctypes / bindings) with
bit-identical results, each checked against numpy.

Marked ``gpu``; skipped cleanly without a CUDA device, torch or cuda-bindings.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ptxgen.runtime import driver, has_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bindings():
    return pytest.importorskip("cuda.bindings.driver")


def test_the_default_binding_is_ctypes_and_imports_no_cuda_bindings():
    if os.environ.get("PTXGEN_DRIVER", "ctypes") != "ctypes":
        pytest.skip("PTXGEN_DRIVER selects another binding")
    assert driver.backend() == "ctypes" and not driver.backend_note
    code = ("import sys, ptxgen.runtime as rt\n"
            "assert rt.has_gpu() and rt.driver.backend() == 'ctypes'\n"
            "rt.device_arch(0); rt.driver.device_name(0); rt.synchronize(device=0)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cuda'))\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.split("\n")[-2]
    assert out == "[]"


def test_device_facts_agree_with_cuda_bindings():
    cb = _bindings()
    d = driver.drv()
    assert cb.cuInit(0)[0] == 0
    assert d.cuDeviceGetCount()[1] == cb.cuDeviceGetCount()[1] == driver.device_count()
    assert d.cuDriverGetVersion()[1] == cb.cuDriverGetVersion()[1]
    for dev in range(driver.device_count()):
        assert d.cuDeviceGetName(256, dev)[1].split(b"\0")[0] == \
            cb.cuDeviceGetName(256, cb.CUdevice(dev))[1].split(b"\0")[0]
        assert d.cuDeviceTotalMem(dev)[1] == cb.cuDeviceTotalMem(cb.CUdevice(dev))[1]
        for name in ("COMPUTE_CAPABILITY_MAJOR", "COMPUTE_CAPABILITY_MINOR",
                     "MULTIPROCESSOR_COUNT", "L2_CACHE_SIZE", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
                     "WARP_SIZE", "CLUSTER_LAUNCH", "TENSOR_MAP_ACCESS_SUPPORTED"):
            a = getattr(d.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
            b = getattr(cb.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
            assert d.cuDeviceGetAttribute(a, dev) == (0, cb.cuDeviceGetAttribute(b, dev)[1]), name
        ctx = driver.primary_context(dev)
        assert int(cb.cuDevicePrimaryCtxRetain(cb.CUdevice(dev))[1]) == int(ctx)
        cb.cuDevicePrimaryCtxRelease(cb.CUdevice(dev))
    err, name = d.cuGetErrorName(700)
    assert (err, name) == (0, cb.cuGetErrorName(cb.CUresult(700))[1])
    assert d.cuGetErrorString(719)[1] == cb.cuGetErrorString(cb.CUresult(719))[1]


def test_pointers_streams_and_events_through_ctypes():
    torch = pytest.importorskip("torch")
    d = driver.drv()
    x = torch.zeros(1 << 20, device="cuda")
    P = d.CUpointer_attribute
    assert d.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, x.data_ptr()) == \
        (0, x.device.index)
    s = torch.cuda.Stream()
    assert driver.stream_context(s.cuda_stream) == int(driver.primary_context(x.device.index))
    with driver.context_scope(driver.primary_context(x.device.index)):
        e0, e1 = (driver.call("cuEventCreate", d.CUevent_flags.CU_EVENT_DEFAULT)
                  for _ in range(2))
        driver.call("cuEventRecord", e0, s.cuda_stream)
        driver.call("cuMemsetD8Async", x.data_ptr(), 0x3F, x.numel() * 4, s.cuda_stream)
        driver.call("cuEventRecord", e1, s.cuda_stream)
        driver.call("cuEventSynchronize", e1)
        assert driver.call("cuEventElapsedTime", e0, e1) >= 0
        for e in (e0, e1):
            driver.call("cuEventDestroy", e)
    assert torch.all(x.view(torch.int32) == 0x3F3F3F3F)


def test_tensor_map_bytes_equal_cuda_bindings_s():
    cb = _bindings()
    torch = pytest.importorskip("torch")
    if int(driver.device_arch()[3:].rstrip("af")) < 90:
        pytest.skip("tensor maps need sm_90+")
    d = driver.drv()
    a = torch.zeros((40, 96), dtype=torch.float16, device="cuda")
    with driver.context_scope(driver.primary_context(a.device.index)):
        mine = d.cuTensorMapEncodeTiled(
            d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, a.data_ptr(),
            [d.cuuint64_t(96), d.cuuint64_t(40)], [d.cuuint64_t(192)],
            [d.cuuint32_t(64), d.cuuint32_t(16)], [d.cuuint32_t(1), d.cuuint32_t(1)],
            d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        theirs = cb.cuTensorMapEncodeTiled(
            cb.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, a.data_ptr(),
            [cb.cuuint64_t(96), cb.cuuint64_t(40)], [cb.cuuint64_t(192)],
            [cb.cuuint32_t(64), cb.cuuint32_t(16)], [cb.cuuint32_t(1), cb.cuuint32_t(1)],
            cb.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cb.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            cb.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            cb.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    assert mine[0] == 0 and int(theirs[0]) == 0
    assert mine[1].getPtr() % 64 == 0
    import ctypes
    assert bytes(mine[1]) == ctypes.string_at(theirs[1].getPtr(), 128)


# ---- the same kernels through each binding, in child processes ----------------------------
CHILD = textwrap.dedent(r'''
    import hashlib, json, sys
    import numpy as np
    import torch
    from ptxgen.runtime import Launcher, Module, ParamSpec, compile_ptx, device_arch, driver
    from support import async_cases as ac
    from _affine import make_affine

    out = {"backend": driver.backend(), "results": {}, "bad": []}

    def record(name, got, want):
        got = np.ascontiguousarray(got)
        out["results"][name] = hashlib.sha256(got.view(np.uint8)).hexdigest()
        if not np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8)):
            out["bad"].append(name)

    affine = make_affine()

    rng = np.random.default_rng(7)
    x = rng.standard_normal(100_003).astype(np.float32)
    xt = torch.from_numpy(x).cuda()
    ot = torch.full_like(xt, float("nan"))
    affine(ot, xt, 1.5, -0.25)
    record("affine", ot.cpu().numpy(), x * np.float32(1.5) + np.float32(-0.25))
    s = torch.cuda.Stream()
    ot2 = torch.full_like(xt, float("nan"))
    affine(ot2, xt, 3.0, 1.0, stream=s)
    s.synchronize()
    record("affine_stream", ot2.cpu().numpy(), x * np.float32(3.0) + np.float32(1.0))
    with torch.cuda.stream(s):                   # torch's current stream, a non-default one
        ot3 = torch.full_like(xt, float("nan"))
        affine(ot3, xt, -2.0, 0.5)
    s.synchronize()
    record("affine_current_stream", ot3.cpu().numpy(), x * np.float32(-2.0) + np.float32(0.5))

    ptx = affine.ptx(device_arch())
    entry = affine.built(device_arch()).entry
    L = Launcher(Module.load(cubin=compile_ptx(ptx, device_arch(), name=entry).cubin,
                             name=entry).function(entry), affine.params, name=entry)
    ot4 = torch.full_like(xt, float("nan"))
    L((ot4.data_ptr(), xt.data_ptr(), 0.5, 2.0), {"N": x.size}, grid=((x.size + 255) // 256,),
      block=(256,), stream=0)
    torch.cuda.synchronize()
    record("launcher_raw", ot4.cpu().numpy(), x * np.float32(0.5) + np.float32(2.0))

    def run_case(name, case, dtypes):
        k, arrays, scalars, outs, want = case
        dev = []
        for arr, dt in zip(arrays, dtypes):
            raw = torch.from_numpy(np.ascontiguousarray(arr).reshape(-1).view(np.uint8).copy())
            dev.append(raw.cuda().view(getattr(torch, dt)).reshape(arr.shape))
        k(*dev, *scalars)
        torch.cuda.synchronize()
        for i, w in zip(outs, want):
            got = dev[i].contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
            record(f"{name}[{i}]", got.view(w.dtype).reshape(w.shape), w)

    if int(device_arch()[3:].rstrip("af")) >= 90:
        crng = np.random.default_rng(2026)
        run_case("tma_load", ac.tma_load_case(crng, "float16", (40, 96), (16, 64), "128B",
                                              (30, 40)), ["float16"] * 2)
        run_case("tma_store_add", ac.tma_store_case(crng, "float32", (40, 96), (16, 32), "128B",
                                                    (30, 68), "add", "cta"), ["float32"] * 2)
        run_case("multicast", ac.multicast_case(crng, 2, "cluster", rows=32), ["float16"] * 2)
        run_case("dsmem", ac.dsmem_case(crng, 4), ["int32"] * 2)
    print(json.dumps(out))
''')


def _child(backend):
    env = dict(os.environ, PTXGEN_DRIVER=backend, PYTHONPATH=os.pathsep.join(
        [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "gpu"),
         os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_kernels_are_bit_identical_through_both_bindings():
    pytest.importorskip("torch")
    _bindings()
    mine, theirs = _child("ctypes"), _child("bindings")
    assert (mine["backend"], theirs["backend"]) == ("ctypes", "bindings")
    assert mine["bad"] == [] and theirs["bad"] == []
    assert len(mine["results"]) >= 4
    assert mine["results"] == theirs["results"]


def test_a_tensor_map_launch_and_a_cluster_launch_through_ctypes():
    """In this process (the default binding): the async cases' TMA and cluster kernels."""
    torch = pytest.importorskip("torch")
    if int(driver.device_arch()[3:].rstrip("af")) < 90:
        pytest.skip("needs sm_90+")
    from support import async_cases as ac

    rng = np.random.default_rng(11)
    for case, dts in [(ac.tma_load_case(rng, "bfloat16", (40, 96), (16, 32), "64B", (8, 64)),
                       ["bfloat16"] * 2),
                      (ac.multicast_case(rng, 4, "slice", rows=32), ["float16"] * 2),
                      (ac.dsmem_case(rng, 2), ["int32"] * 2)]:
        k, arrays, scalars, outs, want = case
        dev = [torch.from_numpy(np.ascontiguousarray(a).reshape(-1).view(np.uint8).copy())
               .cuda().view(getattr(torch, dt)).reshape(a.shape) for a, dt in zip(arrays, dts)]
        k(*dev, *scalars)
        torch.cuda.synchronize()
        for i, w in zip(outs, want):
            got = dev[i].contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
            assert np.array_equal(got, np.ascontiguousarray(w).reshape(-1).view(np.uint8)), k.name
