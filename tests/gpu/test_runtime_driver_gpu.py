"""The driver through cuda-bindings on a real GPU: what a first launch loads, device facts,
pointers, streams and events through ``driver.call``, and kernels (plain, on a torch stream, a
raw-pointer Launcher, TMA loads and stores, cluster multicast and distributed shared memory,
the generated fast launch) run in a fresh process, each checked against numpy bit for bit.

Marked ``gpu``; skipped cleanly without a CUDA device or torch.
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


def test_a_first_launch_loads_the_driver_binding_and_no_nvjitlink_from_the_disk_cache(tmp_path):
    """The second process finds the cubin on disk: it loads cuda.bindings.driver, not
    cuda.bindings.nvjitlink (whose library is a large file to open)."""
    pytest.importorskip("torch")
    code = ("import sys, torch, ptxgen.runtime as rt\n"
            "from _affine import make_affine_fixed\n"
            "k = make_affine_fixed()\n"
            "x = torch.ones(16384, device='cuda'); o = torch.empty_like(x)\n"
            "k(o, x, 2.0, 1.0); torch.cuda.synchronize()\n"
            "assert bool((o == 3.0).all())\n"
            "print(rt.stats()['jit_compiles'], "
            "sorted(m for m in sys.modules if m.startswith('cuda.bindings.')))\n")
    env = dict(os.environ, PTXGEN_CACHE_DIR=str(tmp_path), PYTHONPATH=os.pathsep.join(
        [ROOT, os.path.join(ROOT, "tests", "gpu"), os.environ.get("PYTHONPATH", "")]))
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, check=True).stdout.strip().splitlines()[-1]
            for _ in range(2)]
    assert outs[0].startswith("1 ") and "'cuda.bindings.nvjitlink'" in outs[0]
    assert outs[1].startswith("0 ") and "'cuda.bindings.driver'" in outs[1]
    assert "nvjitlink" not in outs[1]


def test_device_facts():
    d = driver.drv()
    assert driver.device_count() == d.cuDeviceGetCount()[1] >= 1
    assert int(driver.driver_version()) >= 12000
    for dev in range(driver.device_count()):
        assert driver.device_name(dev)
        assert driver.device_arch(dev).startswith("sm_")
        assert driver.device_attribute("WARP_SIZE", dev) == 32
        assert driver.context_device(driver.primary_context(dev)) == dev
    err, name = d.cuGetErrorName(d.CUresult(700))
    assert (int(err), name) == (0, b"CUDA_ERROR_ILLEGAL_ADDRESS")


def test_pointers_streams_and_events():
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


# ---- kernels in a fresh process -----------------------------------------------------------
CHILD = textwrap.dedent(r'''
    import hashlib, json, sys
    import numpy as np
    import torch
    from ptxgen.runtime import Launcher, Module, ParamSpec, compile_ptx, device_arch, driver
    from support import async_cases as ac
    from _affine import make_affine

    out = {"results": {}, "bad": []}

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


def test_kernels_match_numpy_in_a_fresh_process():
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "gpu"),
         os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["bad"] == [] and len(out["results"]) >= 4


def test_a_tensor_map_launch_and_a_cluster_launch():
    """In this process: the async cases' TMA and cluster kernels."""
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
