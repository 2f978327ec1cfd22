"""The ctypes binding of the CUDA driver (ptxgen/runtime/libcuda.py), without a GPU: struct
layouts against cuda.h, the entry-point names against cuda.h's mapping, what loads on the
hot path (no cuda-bindings, no cuda.pathfinder), the error without libcuda, the selection by
PTXGEN_DRIVER and the fallback to cuda-bindings; then, with the stand-in libcuda.so.1 of
tests/mockcuda (built with the C compiler), every bound call through real ctypes calls, and a
whole build-and-launch (plain, tensor-map, cluster, stream, JIT, error paths) in a child
process through each binding, which must see exactly the same launches."""
import ctypes
import glob
import json
import os
import re
import struct
import subprocess
import sys
import textwrap

import pytest

import _mockcuda
from ptxgen.errors import CudaError
from ptxgen.runtime import driver, libcuda
from ptxgen.runtime.libcuda import (CUlaunchAttribute, CUlaunchAttributeValue, CUlaunchConfig,
                                    CUtensorMap, CUtensorMap_st)

ROOT = _mockcuda.ROOT


def _cuda_h():
    cands = [os.path.join(os.environ[v], "include", "cuda.h") for v in ("CUDA_HOME", "CUDA_PATH")
             if os.environ.get(v)]
    cands += ["/usr/local/cuda/include/cuda.h",
              *sorted(glob.glob("/usr/local/cuda-*/include/cuda.h"), reverse=True)]
    cands += glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia", "*",
                                    "include", "cuda.h"))
    return next((c for c in cands if os.path.exists(c)), None)


CUDA_H = _cuda_h()
need_cuda_h = pytest.mark.skipif(CUDA_H is None, reason="no cuda.h (CUDA toolkit) here")
LIB = _mockcuda.build()
need_mock = pytest.mark.skipif(LIB is None, reason="no C compiler for the stand-in libcuda")


# ---- layouts ------------------------------------------------------------------------------
def test_struct_layouts_are_cuda_h_s():
    """The sizes and offsets of cuda.h (13.0) on a 64-bit platform."""
    assert ctypes.sizeof(CUlaunchAttributeValue) == 64
    assert ctypes.alignment(CUlaunchAttributeValue) == 8
    assert CUlaunchAttributeValue.clusterDim.offset == 0
    assert ctypes.sizeof(CUlaunchAttribute) == 72 and ctypes.alignment(CUlaunchAttribute) == 8
    assert (CUlaunchAttribute._id.offset, CUlaunchAttribute.value.offset) == (0, 8)
    offs = {n: getattr(CUlaunchConfig, n).offset for n, _ in CUlaunchConfig._fields_}
    assert offs == {"gridDimX": 0, "gridDimY": 4, "gridDimZ": 8, "blockDimX": 12,
                    "blockDimY": 16, "blockDimZ": 20, "sharedMemBytes": 24, "hStream": 32,
                    "_attrs": 40, "numAttrs": 48}
    assert ctypes.sizeof(CUlaunchConfig) == 56
    assert ctypes.sizeof(CUtensorMap_st) == 128
    maps = [CUtensorMap() for _ in range(8)]
    assert all(m.getPtr() % 128 == 0 for m in maps)     # 128 (CUDA 13), so also 64 (12.x)
    assert bytes(maps[0]) == bytes(128) and maps[0].opaque == [0] * 16


def test_struct_python_side():
    cfg, a = CUlaunchConfig(), CUlaunchAttribute()
    a.id = libcuda.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = 2, 1, 1
    assert a._id == 4 and a.id.name == "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION"
    cfg.attrs, cfg.numAttrs = [a], 1
    assert cfg.attrs == [a] and cfg._attrs[0].value.clusterDim.x == 2
    cfg.hStream = libcuda.CUstream(0x1234)
    assert cfg.hStream == 0x1234
    cfg.attrs = []
    assert not cfg._attrs
    assert libcuda.cuuint64_t(2**64 - 1) == 2**64 - 1
    with pytest.raises(OverflowError):
        libcuda.cuuint32_t(2**32)
    h = libcuda.CUfunction(libcuda.CUfunction(0x40))
    assert int(h) == 0x40 and h == 0x40 and int(libcuda.CUcontext()) == 0
    assert libcuda.pointer_arg(0) is None and libcuda.pointer_arg(5).value == 5
    e = libcuda.CUdevice_attribute
    assert (e.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            e.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            e.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            e.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
            e.CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) == (16, 75, 97, 38, 120)
    f = libcuda.CUfunction_attribute
    assert (f.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.CU_FUNC_ATTRIBUTE_NUM_REGS,
            f.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) == (1, 4, 8)
    assert libcuda.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9
    assert libcuda.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B == 3
    assert libcuda.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B == 3
    assert libcuda.CUjit_option.CU_JIT_LOG_VERBOSE == 12
    assert libcuda.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == 9


LAYOUT_C = r"""
#include <stdio.h>
#include <stddef.h>
#include <cuda.h>
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu\n", sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, hStream),
           offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs),
           offsetof(CUlaunchConfig, sharedMemBytes), _Alignof(CUlaunchConfig));
    printf("%zu %zu %zu %zu\n", sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value),
           _Alignof(CUlaunchAttribute), sizeof(CUlaunchAttributeValue));
    printf("%zu %zu\n", sizeof(CUtensorMap), _Alignof(CUtensorMap));
    return 0;
}
"""


@need_cuda_h
def test_layouts_match_the_c_compiler_on_cuda_h(tmp_path):
    import shutil

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text(LAYOUT_C)
    subprocess.run([cc, "-std=c11", "-I", os.path.dirname(CUDA_H), "-o", str(exe), str(src)],
                   check=True, capture_output=True)
    cfg, attr, tmap = [list(map(int, ln.split()))
                       for ln in subprocess.run([str(exe)], capture_output=True, text=True,
                                                check=True).stdout.splitlines()]
    assert cfg == [ctypes.sizeof(CUlaunchConfig), CUlaunchConfig.hStream.offset,
                   CUlaunchConfig._attrs.offset, CUlaunchConfig.numAttrs.offset,
                   CUlaunchConfig.sharedMemBytes.offset, ctypes.alignment(CUlaunchConfig)]
    assert attr == [ctypes.sizeof(CUlaunchAttribute), CUlaunchAttribute.value.offset,
                    ctypes.alignment(CUlaunchAttribute), ctypes.sizeof(CUlaunchAttributeValue)]
    assert tmap[0] == ctypes.sizeof(CUtensorMap_st) and tmap[1] in (64, 128)
    assert CUtensorMap().getPtr() % tmap[1] == 0


@need_cuda_h
def test_each_bound_symbol_is_the_one_cuda_h_maps_the_api_name_to():
    """`#define cuX cuX_v2` (or __CUDA_API_PTDS/PTSZ(cuX_v2)): the symbol a program built
    against this cuda.h calls (its declarations name the API, which the macro renames);
    and the enums' values."""
    text = open(CUDA_H).read()
    defines = {}
    for m in re.finditer(r"^\s*#define\s+(cu\w+)\s+(?:__CUDA_API_PT(?:DS|SZ)\((\w+)\)|(cu\w+))\s*$",
                         text, re.M):
        if m.group(1) not in defines:        # the first (non per-thread) mapping
            defines[m.group(1)] = m.group(2) or m.group(3)
    declared = set(re.findall(r"CUresult CUDAAPI (cu\w+)\(", text))
    for api, syms in libcuda.BOUND.items():
        want = defines.get(api, api)
        assert syms[0] == want, (api, syms, want)
        assert api in declared, api
    for name, cls in [("CUdevice_attribute", libcuda.CUdevice_attribute),
                      ("CUfunction_attribute", libcuda.CUfunction_attribute),
                      ("CUjit_option", libcuda.CUjit_option),
                      ("CUtensorMapDataType", libcuda.CUtensorMapDataType),
                      ("CUtensorMapSwizzle", libcuda.CUtensorMapSwizzle),
                      ("CUlaunchAttributeID", libcuda.CUlaunchAttributeID)]:
        body = re.search(r"typedef enum %s_enum\s*\{(.*?)\}" % name, text, re.S).group(1)
        body = re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)
        values, v = {}, -1
        for item in body.split(","):
            item = "\n".join(ln for ln in item.splitlines() if not ln.strip().startswith("#"))
            item = item.strip()
            if not item:
                continue
            k, _, e = (s.strip() for s in item.partition("="))
            v = (int(e, 0) if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", e) else values[e]) if e \
                else v + 1
            values[k] = v
        for k, m in vars(cls).items():
            if k.startswith("CU_"):
                assert values[k] == m, (name, k)


# ---- what loads, and the errors -----------------------------------------------------------
def test_the_hot_path_imports_neither_cuda_bindings_nor_pathfinder():
    code = ("import ptxgen, ptxgen.runtime.driver as d, ptxgen.runtime.launcher, "
            "ptxgen.runtime.module, ptxgen.runtime.tensormap\n"
            "d.has_gpu()\n"
            "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] == 'cuda'))\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PTXGEN_DRIVER", None)
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                       text=True, env=env, cwd=ROOT, check=True)
    assert p.stdout.strip().splitlines()[-1] == "[]"
    imported = [ln.rsplit("|", 1)[-1].strip() for ln in p.stderr.splitlines() if "|" in ln]
    assert not [m for m in imported if m.startswith(("cuda.bindings", "cuda.pathfinder"))]


def _fresh(monkeypatch):
    monkeypatch.setattr(driver, "_drv", None)
    monkeypatch.setattr(driver, "_init_error", None)
    monkeypatch.setattr(driver, "_count", [])
    monkeypatch.setattr(driver, "_driver_version", None)
    monkeypatch.setattr(libcuda, "_opened", [])


def test_no_libcuda_is_a_clean_error(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(libcuda, "LIBRARY", "libcuda-not-here.so.1")
    monkeypatch.delenv("PTXGEN_DRIVER", raising=False)
    with pytest.raises(libcuda.LibcudaNotFound, match=r"libcuda-not-here\.so\.1 could not be "
                                                       r"opened .*no NVIDIA driver"):
        libcuda.load()
    assert driver.has_gpu() is False and driver.backend() is None
    assert driver.driver_version() == "none"
    with pytest.raises(CudaError, match=r"no usable CUDA driver: the CUDA driver could not be "
                                        r"loaded \(LibcudaNotFound: libcuda-not-here"):
        driver.drv()
    assert "cuda.bindings.driver" not in driver._init_error and not driver.backend_note


def test_PTXGEN_DRIVER_is_checked(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setenv("PTXGEN_DRIVER", "cython")
    assert driver.has_gpu() is False
    with pytest.raises(CudaError, match=r"PTXGEN_DRIVER='cython': expected 'ctypes' \(the "
                                        r"default\) or 'bindings'"):
        driver.drv()


def test_a_ctypes_binding_that_cannot_serve_falls_back_to_cuda_bindings(monkeypatch):
    pytest.importorskip("cuda.bindings.driver")
    _fresh(monkeypatch)
    monkeypatch.delenv("PTXGEN_DRIVER", raising=False)
    monkeypatch.setattr(driver, "backend_note", [])

    def broken():
        raise AttributeError("libcuda.so.1: undefined symbol: cuCtxPushCurrent_v2")
    monkeypatch.setattr(libcuda, "load", broken)
    from cuda.bindings import driver as cb

    assert driver._module() is cb
    assert driver.backend_note == [
        "the ctypes binding of libcuda.so.1 failed (AttributeError: libcuda.so.1: undefined "
        "symbol: cuCtxPushCurrent_v2); using cuda-bindings"]
    monkeypatch.setenv("PTXGEN_DRIVER", "bindings")
    monkeypatch.setattr(libcuda, "load", lambda: pytest.fail("ctypes asked for"))
    assert driver._module() is cb


# ---- every call through ctypes, against the stand-in library ------------------------------
@pytest.fixture(scope="module")
def mock():
    if LIB is None:
        pytest.skip("no C compiler for the stand-in libcuda")
    lib = ctypes.CDLL(os.path.join(LIB, "libcuda.so.1"))
    d = libcuda.Driver(lib)
    assert d.cuInit(0) == (0,)
    return d, _mockcuda.Mock(lib)


def test_calls_through_ctypes(mock):
    d, m = mock
    assert d.cuDriverGetVersion() == (0, 13000)
    assert d.cuGetErrorName(700) == (0, b"CUDA_ERROR_ILLEGAL_ADDRESS")
    assert d.cuGetErrorString(700)[1].startswith(b"an illegal memory access")
    assert d.cuGetErrorName(12345) == (1, None)
    assert d.cuDeviceGetCount() == (0, 1) and d.cuDeviceGet(0) == (0, 0)
    assert d.cuDeviceGet(3)[0] == 101
    err, name = d.cuDeviceGetName(64, 0)
    assert err == 0 and len(name) == 64 and name.split(b"\0")[0] == b"Mock GPU 0"
    A = d.CUdevice_attribute
    assert d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == (0, 9)
    assert d.cuDeviceTotalMem(0) == (0, 80 << 30)
    err, ctx = d.cuDevicePrimaryCtxRetain(0)
    assert err == 0 and int(ctx) and isinstance(ctx, d.CUcontext)
    assert int(d.cuCtxGetCurrent()[1]) == 0 and d.cuCtxGetDevice()[0] == 201
    assert d.cuCtxPushCurrent(ctx) == (0,) and d.cuCtxGetCurrent()[1] == ctx
    assert d.cuCtxGetDevice() == (0, 0) and d.cuCtxSynchronize() == (0,)
    err, mod = d.cuModuleLoadData(b"\x7fELF cubin bytes")
    assert err == 0 and int(mod)
    info = bytearray(256)
    J = d.CUjit_option
    err, mod2 = d.cuModuleLoadDataEx(b".version 8.0\0", 3, [J.CU_JIT_INFO_LOG_BUFFER,
                                     J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, J.CU_JIT_LOG_VERBOSE],
                                     [info, len(info), 1])
    assert err == 0 and bytes(info).split(b"\0")[0] == b"mock JIT: compiled"
    err, fn = d.cuModuleGetFunction(mod, b"kern")
    assert err == 0 and isinstance(fn, d.CUfunction)
    assert d.cuModuleGetFunction(mod, "missing")[0] == 500
    F = d.CUfunction_attribute
    assert d.cuFuncSetAttribute(fn, F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 99) == (0,)
    assert d.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn) == (0, 99)

    # the launch: prepacked parameters, one raw ctypes call
    vals = (ctypes.c_uint64 * 2)(0x1122334455667788, 7)
    ptrs = (ctypes.c_void_p * 2)(ctypes.addressof(vals), ctypes.addressof(vals) + 8)
    kp = d.pointer_arg(ctypes.addressof(ptrs))
    m.set_param_sizes([8, 4])
    n0 = m.launches()
    assert d.launch_kernel_raw(fn, 3, 2, 1, 128, 1, 1, 1024, None, kp, None) == 0
    r = m.last()
    assert (r["f"], r["grid"], r["block"], r["smem"], r["stream"], r["extra"]) == (
        int(fn), [3, 2, 1], [128, 1, 1], 1024, 0, 0)
    assert r["params"] == ctypes.addressof(ptrs) and m.launches() == n0 + 1
    assert r["blob"] == struct.pack("<QI", 0x1122334455667788, 7)
    err, s = d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING)
    assert err == 0 and d.cuStreamGetCtx(s) == (0, ctx)
    assert d.launch_kernel_raw(fn, 1, 1, 1, 32, 1, 1, 0, d.pointer_arg(int(s)), kp, None) == 0
    assert m.last()["stream"] == int(s)
    assert d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, int(s), ctypes.addressof(ptrs), 0) == (0,)
    assert m.last()["stream"] == int(s) and m.last()["params"] == ctypes.addressof(ptrs)
    assert d.cuLaunchKernel(d.CUfunction(0), 1, 1, 1, 1, 1, 1, 0, 0, 0, 0) == (400,)

    cfg, at = d.CUlaunchConfig(), d.CUlaunchAttribute()
    at.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    at.value.clusterDim.x, at.value.clusterDim.y, at.value.clusterDim.z = 2, 1, 1
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = \
        4, 1, 1, 64, 1, 1
    cfg.sharedMemBytes, cfg.hStream, cfg.attrs, cfg.numAttrs = 512, s, [at], 1
    assert d.cuLaunchKernelEx(cfg, fn, kp, None) == (0,)
    r = m.last()
    assert (r["ex"], r["grid"], r["block"], r["smem"], r["stream"], r["num_attrs"], r["attr_id"],
            r["cluster"]) == (1, [4, 1, 1], [64, 1, 1], 512, int(s), 1, 4, [2, 1, 1])
    cfg.gridDimX = 3
    assert d.cuLaunchKernelEx(cfg, fn, kp, None) == (1,)   # the mock checks whole clusters
    # the bare cuLaunchKernelEx with a config argument made once (a Kernel's own launch)
    own = d.launch_config_arg((2, 3, 1, 96, 1, 1), 256, int(s))
    assert d.launch_kernel_ex_raw(own, fn, kp, None) == 0
    r = m.last()
    assert (r["ex"], r["grid"], r["block"], r["smem"], r["stream"], r["num_attrs"], r["params"],
            r["blob"]) == (1, [2, 3, 1], [96, 1, 1], 256, int(s), 0, ctypes.addressof(ptrs),
                           struct.pack("<QI", 0x1122334455667788, 7))
    assert d.launch_kernel_ex_raw(d.launch_config_arg((4, 1, 1, 64, 1, 1), 0, 0, [at]), fn, kp,
                                  None) == 0
    r = m.last()
    assert (r["stream"], r["num_attrs"], r["attr_id"], r["cluster"]) == (0, 1, 4, [2, 1, 1])

    # memory, pointers, copies, events
    err, buf = d.cuMemAlloc(4096)
    assert err == 0 and buf % 256 == 0
    P = d.CUpointer_attribute
    assert d.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buf + 100) == (0, 0)
    assert d.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, buf + 100) == (0, buf)
    assert d.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 16)[0] == 1
    src = (ctypes.c_ubyte * 16)(*range(16))
    dst = (ctypes.c_ubyte * 16)()
    assert d.cuMemcpyHtoD(buf, ctypes.addressof(src), 16) == (0,)
    assert d.cuMemcpyDtoD(buf + 64, buf, 16) == (0,)
    assert d.cuMemsetD8Async(buf + 64, 0xAB, 2, s) == (0,)
    assert d.cuMemcpyDtoDAsync(buf + 128, buf + 64, 16, d.CUstream(s)) == (0,)
    assert d.cuMemcpyDtoH(ctypes.addressof(dst), buf + 128, 16) == (0,)
    assert bytes(dst) == b"\xab\xab" + bytes(range(2, 16))
    err, free, total = d.cuMemGetInfo()
    assert err == 0 and free < total
    err, e0 = d.cuEventCreate(d.CUevent_flags.CU_EVENT_DEFAULT)
    err, e1 = d.cuEventCreate(0)
    assert d.cuEventRecord(e0, s) == d.cuEventRecord(e1, 0) == d.cuEventSynchronize(e1) == (0,)
    assert d.cuEventElapsedTime(e0, e1) == (0, 0.25)       # bound as cuEventElapsedTime_v2
    assert d.cuEventDestroy(e0) == d.cuEventDestroy(e1) == (0,)
    assert d.cuStreamSynchronize(s) == d.cuStreamDestroy(s) == (0,)
    assert d.cuMemFree(buf) == (0,) and d.cuModuleUnload(mod2) == (0,)
    assert d.cuCtxPopCurrent() == (0, ctx) and d.cuCtxSetCurrent(ctx) == (0,)
    d.cuCtxSetCurrent(None)


def test_tensor_map_encode_through_ctypes(mock):
    d, m = mock
    T = d
    err, tmap = d.cuTensorMapEncodeTiled(
        T.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, 1 << 20,
        [d.cuuint64_t(96), d.cuuint64_t(40)], [d.cuuint64_t(192)],
        [d.cuuint32_t(64), d.cuuint32_t(16)], [d.cuuint32_t(1), d.cuuint32_t(1)],
        T.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        T.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        T.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        T.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    assert err == 0 and tmap.getPtr() % 128 == 0
    assert m.lib.mock_misaligned_maps() == 0
    w = tmap.opaque
    assert w[:5] == [6, 2, 1 << 20, 96, 40] and w[8] == 192
    assert w[11:13] == [(64 << 32) | 1, (16 << 32) | 1] and w[15] == (3 << 16) | (2 << 32)
    assert bytes(tmap) == struct.pack("<16Q", *w)
    assert d.cuTensorMapEncodeTiled(6, 2, (1 << 20) + 8, [96, 40], [192], [64, 16], [1, 1],
                                    0, 3, 2, 0)[0] == 1      # the mock's alignment rule


def test_unbound_and_missing_entry_points(mock, monkeypatch):
    d, _ = mock
    with pytest.raises(AttributeError, match=r"cuGraphLaunch is not bound by ptxgen's ctypes "
                                             r"CUDA driver .*PTXGEN_DRIVER=bindings"):
        d.cuGraphLaunch
    monkeypatch.setitem(libcuda._LAZY, "cuNotInThisDriver", (("cuNotInThisDriver",), []))
    assert d._call("cuNotInThisDriver") == (500,)
    assert d._lazy("cuNotInThisDriver") is None     # asked once, remembered


# ---- a whole process through each binding -------------------------------------------------
PIPELINE = textwrap.dedent(r'''
    import ctypes, json, struct, sys, threading
    import ptxgen as pg
    from ptxgen.errors import CudaError, LaunchError
    from ptxgen.runtime import driver, Module
    from ptxgen.runtime.args import _fmt
    import _mockcuda
    from support import async_cases as ac

    mock = _mockcuda.Mock(ctypes.CDLL("libcuda.so.1"))   # the library the driver loaded
    out = {"backend": driver.backend(), "arch": driver.device_arch(0),
           "name": driver.device_name(0), "version": driver.driver_version(),
           "sms": driver.device_attribute("MULTIPROCESSOR_COUNT", 0), "has_gpu": driver.has_gpu()}
    with driver.context_scope(driver.primary_context(0)):
        a = int(driver.call("cuMemAlloc", 1 << 16))
        b = int(driver.call("cuMemAlloc", 1 << 16))

    def sizes(k):
        L = next(iter(k._launchers.values()))
        return [struct.calcsize("<" + _fmt(p)) for p in L.params]

    def last():
        r = mock.last()
        mock.set_param_sizes([])      # the next kernel's pointer array may be shorter
        r["f"] = bool(r["f"])
        r["params"] = bool(r["params"])
        r["blob"] = r["blob"].hex()
        return r

    N = pg.var("N")

    @pg.kernel(grid=lambda e: ((e["N"] + 127) // 128,), block=(128,))
    def affine(o: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32"), s: pg.float32):
        i = pg.let(pg.cta_id() * 128 + pg.thread_id(128))
        with pg.if_(i < N):
            o[i] = x[i] * s + 1.0

    mock.set_param_sizes([])
    affine(a, b, 2.5, N=1000)
    mock.set_param_sizes(sizes(affine))
    affine(a, b, 2.5, N=1000)
    r = last()
    out["affine_blob_ok"] = bytes.fromhex(r.pop("blob")) == struct.pack("<QQfi", a, b, 2.5, 1000)
    out["affine"] = r                               # (the pointers differ between processes)
    s = driver.create_stream()
    affine(a, b, 1.0, N=300, stream=s)
    out["stream_ok"] = mock.last()["stream"] == s
    affine(a, b, 1.0, N=300, stream=s)              # the stream's argument is kept
    out["stream_again_ok"] = mock.last()["stream"] == s
    affine(a, b, 1.0, N=300, stream=0)
    out["stream0"] = mock.last()["stream"]
    affine(a, b, 1.0, N=300, dynamic_smem_bytes=100 * 1024)
    out["big_smem"] = mock.last()["smem"]

    def in_thread():                                 # no context current there at first
        affine(a, b, 3.0, N=64)
        out["thread_launch"] = last()["grid"]
    t = threading.Thread(target=in_thread)
    t.start()
    t.join()

    mock.set_launch_result(700)
    try:
        affine(a, b, 1.0, N=5)
    except CudaError as e:
        out["sticky"] = [str(e), e.sticky, e.code]
    mock.set_launch_result(0)

    k = ac.tma_load_kernel("float16", (40, 96), (16, 64), "128B")
    k(a, b, 0, 0, 0)
    mock.set_param_sizes(sizes(k))
    k(a, b, 0, 8, 16)
    r = last()
    blob = bytes.fromhex(r["blob"])
    w = list(struct.unpack("<16Q", blob[-128:]))
    w[2] -= a                                       # the address, relative to the tensor's
    out["tma"] = [r["grid"], r["block"], blob[:-128].hex()[32:], w]

    @pg.kernel(grid=(4,), block=(64,), cluster=(2, 1, 1))
    def clus(O: pg.Tensor((4,), "int32")):
        pg.thread_id(64)
        O[pg.cta_id(4)] = pg.cta_rank_in_cluster()
    clus(a)
    r = last()
    out["cluster"] = [r["ex"], r["grid"], r["block"], r["num_attrs"], r["attr_id"], r["cluster"]]
    clus(a, stream=s)
    out["cluster_stream_ok"] = mock.last()["stream"] == s

    m = Module.load(ptx=affine.ptx("sm_90a"), name="affine_jit")
    f = m.function(affine.built("sm_90a").entry)
    try:
        m.function("missing_entry")
    except CudaError as e:
        out["missing"] = str(e)
    out["jit"] = [bool(int(f.handle)), f.attribute("NUM_REGS")]
    m.unload()
    out["unloaded_handle"] = int(f.handle)
    driver.synchronize()
    driver.synchronize(s)
    from ptxgen.bench import timing
    timing.init_device(0)
    out["bench"] = timing.do_bench(lambda: None, rep_ms=2, warmup_ms=1, flush_l2=False)["n"] > 0
    out["launches"] = mock.launches()
    out["misaligned_maps"] = mock.lib.mock_misaligned_maps() if out["backend"] == "ctypes" else 0
    out["cuda_modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "cuda")
    print(json.dumps(out))
''')


@need_mock
def test_a_build_and_launch_through_each_binding_sees_the_same_driver_calls(tmp_path):
    runs = {}
    for backend in ("ctypes", "bindings"):
        if backend == "bindings":
            pytest.importorskip("cuda.bindings.driver")
        runs[backend] = r = _mockcuda.run_child(PIPELINE, LIB, PTXGEN_DRIVER=backend,
                                                PTXGEN_CACHE_DIR=str(tmp_path / "cache"))
        assert r.pop("backend") == backend
        mods = r.pop("cuda_modules")
        if backend == "ctypes":
            assert not [m for m in mods if m.startswith("cuda.bindings.driver")]
    r = runs["ctypes"]
    assert (r["arch"], r["name"], r["version"], r["sms"], r["has_gpu"]) == (
        "sm_90a", "Mock GPU 0", "13000", 132, True)
    a = r["affine"]
    assert a["f"] and a["params"] and (a["grid"], a["block"], a["smem"], a["stream"], a["extra"],
                                       a["ex"]) == ([8, 1, 1], [128, 1, 1], 0, 0, 0, 0)
    assert r["affine_blob_ok"] and r["stream_ok"] and r["stream_again_ok"] and r["stream0"] == 0
    assert r["big_smem"] == 100 * 1024 and r["thread_launch"] == [1, 1, 1]
    assert r["sticky"] == [
        "cuLaunchKernel failed for kernel 'affine': CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal "
        "memory access was encountered (mock); the CUDA context is now unusable (sticky error); "
        "re-run under compute-sanitizer to find the faulting access", True, 700]
    grid, block, scalars, w = r["tma"]
    assert grid == [1, 1, 1] and block == [128, 1, 1]
    assert scalars == struct.pack("<iii", 0, 8, 16).hex()
    assert w[:5] == [6, 2, 0, 96, 40] and w[8] == 192          # FLOAT16, rank 2, A's dims
    assert w[11:13] == [(64 << 32) | 1, (16 << 32) | 1]       # box 64x16, element strides 1
    assert w[15] == 3 << 16 | 2 << 32                          # 128B swizzle, L2_128B
    assert r["cluster"] == [1, [4, 1, 1], [64, 1, 1], 1, 4, [2, 1, 1]] and r["cluster_stream_ok"]
    assert r["missing"].startswith("cuModuleGetFunction('missing_entry') failed for kernel "
                                   "'affine_jit': CUDA_ERROR_NOT_FOUND (500)")
    assert r["missing"].endswith("the module has no .entry named 'missing_entry'")
    assert r["jit"] == [True, 32] and r["unloaded_handle"] == 0 and r["bench"]
    assert r["misaligned_maps"] == 0           # our maps are 128-byte aligned
    if "bindings" in runs:
        assert runs["bindings"] == r          # the same launches, bit for bit, and messages


WARM = textwrap.dedent(r'''
    import json, sys
    import ptxgen as pg
    N = pg.var("N")

    @pg.kernel(grid=(1,), block=(32,))
    def k(a: pg.Tensor((N,), "float32")):
        a[pg.thread_id(32)] = pg.float32(1.0)
    from ptxgen.runtime import driver
    with driver.context_scope(driver.primary_context(0)):
        p = int(driver.call("cuMemAlloc", 4096))
    k(p, N=32)
    from ptxgen.runtime import stats
    print(json.dumps({"cuda": sorted(m for m in sys.modules if m.split(".")[0] == "cuda"),
                      "stats": {k: v for k, v in stats().items() if v}}))
''')


@need_mock
def test_a_launch_from_the_disk_cache_loads_no_cuda_python_module(tmp_path):
    """The first process compiles (nvJitLink through its ctypes binding, runtime/nvjitlink.py),
    the next reads the cubin from disk; neither loads any cuda.* module."""
    env = {"PTXGEN_CACHE_DIR": str(tmp_path / "cache")}
    first = _mockcuda.run_child(WARM, LIB, **env)
    assert first["stats"].get("jit_compiles") == 1 and first["cuda"] == [], first
    warm = _mockcuda.run_child(WARM, LIB, **env)
    assert warm["stats"].get("disk_hits") == 1 and warm["cuda"] == [], warm
    assert json.dumps(warm)
