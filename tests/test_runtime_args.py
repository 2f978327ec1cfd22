"""Runtime, launch half, without a GPU: argument checks (exact messages), packing, and the
Launcher's call into the driver (a recording stand-in replaces cuLaunchKernel)."""
import struct
import sys

import numpy as np
import pytest

from ptxgen.errors import CudaError, LaunchError
from ptxgen.runtime import Binder, Launcher, ParamPacker, ParamSpec, driver, has_gpu
from ptxgen.layout import row_major_strides as row_major
from ptxgen.runtime.describe import dlpack_describe
from ptxgen.runtime.launcher import stream_handle


class CAI:
    """A stand-in CUDA array: just the __cuda_array_interface__ dict (as cupy/numba give)."""

    def __init__(self, shape, typestr="<f4", ptr=0x7F0000000000, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "strides": strides,
                                         "version": 3}


class HostDL:
    """A DLPack producer that says it lives on the CPU."""

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("a CPU tensor must be rejected before export")


def rowmajor(shape):
    return lambda sym: row_major(tuple(sym.get(d, d) if isinstance(d, str) else d for d in shape))


GEMV = [
    ParamSpec("A", "tensor", "float32", ".u64", ("M", "K"), strides=rowmajor(("M", "K"))),
    ParamSpec("x", "tensor", "float32", ".u64", ("K",)),
    ParamSpec("alpha", "scalar", "float32", ".f32"),
    ParamSpec("n", "scalar", "int32", ".s32"),
    ParamSpec("M", "symbol", "int32", ".s32"),
    ParamSpec("K", "symbol", "int32", ".s32"),
]
P = 0x7F0000000000


def bind(*args, params=GEMV, **kw):
    return Binder(params, name="gemv").bind(args, kw)[0]


def err(*args, params=GEMV, **kw):
    with pytest.raises(LaunchError) as ei:
        Binder(params, name="gemv").bind(args, kw)
    return str(ei.value)


# ---- binding -----------------------------------------------------------------------------
def test_bind_values_in_parameter_order():
    v = bind(CAI((128, 64)), CAI((64,), ptr=P + 4096), 2.0, 7)
    assert v == [P, P + 4096, 2.0, 7, 128, 64]


def test_keywords_and_raw_pointers():
    assert bind(P, P + 16, n=3, alpha=1.5, M=4, K=8) == [P, P + 16, 1.5, 3, 4, 8]
    assert bind(CAI((4, 8)), x=CAI((8,)), alpha=0, n=1, M=4) == [P, P, 0, 1, 4, 8]


def test_argument_count_and_keywords():
    assert err(P, P, 1.0) == "kernel 'gemv' takes 4 arguments (A, x, alpha, n), got 3: missing 'n'"
    assert err(P, P, 1.0, 2, 3) == "kernel 'gemv' takes 4 arguments (A, x, alpha, n), got 5"
    assert err(P, P, 1.0, 2, bogus=1) == "kernel 'gemv': unexpected keyword argument 'bogus'"
    assert err(P, P, 1.0, 2, n=2) == "kernel 'gemv': got multiple values for argument 'n'"
    assert err(P, P, 1.0, 2) == ("kernel 'gemv': symbol M is not bound: no tensor argument has "
                                 "it in its shape; pass M=<int> by keyword")


def test_rank_shape_dtype_place():
    x = CAI((64,))
    assert err(CAI((128,)), x, 1.0, 1) == "argument 'A': expected rank 2, got rank 1"
    one = [ParamSpec("A", "tensor", "float32", ".u64", (128, 64))]
    assert err(CAI((128, 32)), params=one) == \
        "argument 'A': expected shape (128, 64), got (128, 32)"
    assert err(CAI((128, 64), "<f2"), x, 1.0, 1) == \
        "argument 'A': expected dtype float32, got float16"
    assert err(np.zeros((128, 64), np.float32), x, 1.0, 1) == \
        "argument 'A': is on the CPU; pass a CUDA tensor"
    assert err(HostDL(), x, 1.0, 1) == "argument 'A': is on the CPU; pass a CUDA tensor"
    assert err("A", x, 1.0, 1) == ("argument 'A': expected a CUDA tensor (__cuda_array_interface__"
                                   " or __dlpack__) or a device pointer (int), got str")


def test_symbols_bind_consistently():
    assert err(CAI((128, 64)), CAI((32,)), 1.0, 1) == \
        "argument 'x': dim 0 is symbol K = 64 (bound by 'A'), got 32"
    two = [ParamSpec("A", "tensor", "float16", ".u64", ("M", 64)),
           ParamSpec("B", "tensor", "float16", ".u64", ("M", 64)),
           ParamSpec("M", "symbol", "int32", ".s32")]
    assert err(CAI((128, 64), "<f2"), CAI((64, 64), "<f2"), params=two) == \
        "argument 'B': dim 0 is symbol M = 128 (bound by 'A'), got 64"
    assert err(CAI((128, 64), "<f2"), CAI((128, 64), "<f2"), params=two, M=256) == \
        "argument 'A': dim 0 is symbol M = 256 (passed as M=256), got 128"
    # a fixed dim after a bound symbol shows the expected shape with the symbol's value
    assert err(CAI((128, 32), "<f2"), CAI((128, 64), "<f2"), params=two) == \
        "argument 'A': expected shape (128, 64), got (128, 32)"


def test_strides():
    x = CAI((64,))
    assert err(CAI((128, 64), strides=(4, 512)), x, 1.0, 1) == \
        "argument 'A': expected strides (64, 1) elements (contiguous row-major), got (1, 128)"
    assert bind(CAI((128, 64), strides=(256, 4)), x, 1.0, 1)[4:] == [128, 64]  # explicit = ok
    assert bind(CAI((1, 64), strides=(4096, 4)), x, 1.0, 1)[4] == 1  # size-1 dims: any stride
    assert err(CAI((128, 64), strides=(256, 6)), x, 1.0, 1) == \
        "argument 'A': byte strides (256, 6) are not multiples of the element size 4"
    padded = [ParamSpec("A", "tensor", "float32", ".u64", (4, 8), strides=lambda s: (16, 1))]
    assert bind(CAI((4, 8), strides=(64, 4)), params=padded) == [P]
    assert err(CAI((4, 8)), params=padded) == \
        "argument 'A': expected strides (16, 1) elements, got (8, 1)"


def test_alignment():
    x = CAI((64,))
    assert err(CAI((128, 64), ptr=P + 4), x, 1.0, 1) == \
        "argument 'A': base pointer 0x7f0000000004 is not 16-byte aligned (declared align=16)"
    assert err(P + 8, x, 1.0, 1, M=128) == \
        "argument 'A': base pointer 0x7f0000000008 is not 16-byte aligned (declared align=16)"
    four = [ParamSpec("A", "tensor", "float32", ".u64", (4,), align=4)]
    assert bind(CAI((4,), ptr=P + 4), params=four) == [P + 4]


def test_scalars_range_checked_when_packed():
    b = Binder(GEMV, name="gemv")
    pk = ParamPacker(GEMV)
    cases = [
        ((P, P, 1.0, 2**31), "argument 'n': expected int32 in [-2147483648, 2147483647], "
                             "got 2147483648"),
        ((P, P, 1.0, 3.5), "argument 'n': expected an integer (int32), got float 3.5"),
        ((P, P, 1e39, 1), "argument 'alpha': 1e+39 is out of range for float32 (max 3.40282e+38)"),
        ((P, P, "1", 1), "argument 'alpha': expected a number (float32), got str '1'"),
    ]
    for args, msg in cases:
        values, _ = b.bind(args, {"M": 1, "K": 1})
        with pytest.raises((struct.error, OverflowError, TypeError)):
            pk.pack(values)
        with pytest.raises(LaunchError) as ei:
            b.scalar_error(values)
        assert str(ei.value) == msg
    assert err(P, P, 1.0, 1, M=2**40) == \
        "argument 'M': expected int32 in [-2147483648, 2147483647], got 1099511627776"
    pk.pack(b.bind((P, P, np.float32(0.5), np.int64(-3)), {"M": 1, "K": 1})[0])  # numpy ok


def test_bfloat16_and_fp8_accept_bits_arrays():
    p = [ParamSpec("A", "tensor", "bfloat16", ".u64", (8,)),
         ParamSpec("B", "tensor", "float8_e4m3fn", ".u64", (8,)),
         ParamSpec("s", "scalar", "bfloat16", ".b16")]
    v = bind(CAI((8,), "<u2"), CAI((8,), "|u1"), 1.0, params=p)
    assert v == [P, P, 0x3F80]
    assert err(CAI((8,), "<f2"), CAI((8,), "|u1"), 1.0, params=p) == \
        "argument 'A': expected dtype bfloat16, got float16"
    assert err(CAI((8,), "<u2"), CAI((8,), "|i1"), 1.0, params=p) == \
        "argument 'B': expected dtype float8_e4m3fn, got int8"


def test_dlpack_reader_on_a_numpy_capsule():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:]
    ptr, shape, strides, name, dev = dlpack_describe(a.__dlpack__())
    assert (ptr, shape, strides, name, dev) == (a.ctypes.data, (3, 3), (4, 1), "float32", "cpu")


# ---- packing -----------------------------------------------------------------------------
def test_packer_layout_and_bytes():
    ps = [ParamSpec("A", "tensor", "float16", ".u64", (4,)),
          ParamSpec("n", "scalar", "int32", ".s32"),
          ParamSpec("h", "scalar", "float16", ".b16"),
          ParamSpec("B", "tensor", "float16", ".u64", (4,)),
          ParamSpec("f", "scalar", "float32", ".f32"),
          ParamSpec("q", "scalar", "uint8", ".u8")]
    pk = ParamPacker(ps)
    assert pk.offsets == [0, 8, 12, 16, 24, 28]
    pk.pack([0x1122334455667788, -2, 1.5, 0xAB, 2.0, 255])
    assert pk.bytes() == (struct.pack("<Qi", 0x1122334455667788, -2) + struct.pack("<e", 1.5)
                          + b"\0\0" + struct.pack("<Qf", 0xAB, 2.0) + b"\xff")
    import ctypes
    ptrs = [ctypes.c_void_p.from_address(pk.kernel_params + 8 * i).value for i in range(6)]
    assert ptrs == [ctypes.addressof(pk.buffer) + o for o in pk.offsets]
    assert ParamPacker([]).kernel_params == 0


# ---- the Launcher against a recording driver ---------------------------------------------
class FakeDriver:
    def __init__(self, result=0):
        self.calls, self.result = [], result

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        import ctypes
        blob = ctypes.string_at(ctypes.c_void_p.from_address(params).value, 16)
        self.calls.append(((f, gx, gy, gz, bx, by, bz, smem, stream, extra), blob))
        return (self.result,)

    def cuCtxGetCurrent(self):
        return (0, 0)       # FakeFunction's context: launches take the direct path

    def cuGetErrorName(self, e):
        return (0, {700: b"CUDA_ERROR_ILLEGAL_ADDRESS", 1: b"CUDA_ERROR_INVALID_VALUE"}[int(e)])

    def cuGetErrorString(self, e):
        return (0, b"described")


class FakeFunction:
    handle, ctx, device, max_dynamic_smem = "FN", 0, 0, 48 * 1024

    def __init__(self):
        self.smem_calls = []

    def ensure_dynamic_smem(self, n, kernel):
        self.smem_calls.append(n)
        self.max_dynamic_smem = n


@pytest.fixture
def fake(monkeypatch):
    d = FakeDriver()
    monkeypatch.setattr(driver, "drv", lambda: d)
    monkeypatch.setattr(driver, "_drv", d)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    return d


def test_launcher_calls_the_driver(fake):
    fn = FakeFunction()
    L = Launcher(fn, GEMV, name="gemv", dynamic_smem_bytes=1024)
    A, x = CAI((128, 64)), CAI((64,), ptr=P + 256)
    L((A, x, 1.0, 5), {}, grid=(4,), block=128)
    (args, blob), = fake.calls
    assert args == ("FN", 4, 1, 1, 128, 1, 1, 1024, 0, 0)
    assert blob == struct.pack("<QQ", P, P + 256)
    assert driver.last_kernel[0] == "gemv"
    seen = {}
    L((A, x, 1.0, 5), {}, grid=lambda e: seen.update(e) or (e["M"] // 32, 2),
      block=[32, 4], stream=7, dynamic_smem_bytes=100_000)
    assert fake.calls[-1][0] == ("FN", 4, 2, 1, 32, 4, 1, 100_000, 7, 0)
    assert seen["A"] is A and (seen["M"], seen["K"], seen["n"], seen["alpha"]) == (128, 64, 5, 1.0)
    assert fn.smem_calls == [100_000]
    with pytest.raises(LaunchError, match=r"block \(2048,\) has 2048 threads; a block holds at "):
        L((A, x, 1.0, 5), {}, grid=(1,), block=(2048,))
    with pytest.raises(LaunchError, match=r"grid must be 1 to 3 positive integers, got \(0, 1\)"):
        L((A, x, 1.0, 5), {}, grid=(0, 1), block=(32,))
    with pytest.raises(LaunchError, match=r"got None; pass grid="):
        L((A, x, 1.0, 5), {}, grid=None, block=(32,))
    with pytest.raises(LaunchError, match=r"argument 'n': expected int32 in"):
        L((A, x, 1.0, 2**33), {}, grid=(1,), block=(32,))


def test_launch_failure_names_kernel_and_sticky(fake):
    fake.result = 700
    L = Launcher(FakeFunction(), GEMV, name="gemv")
    with pytest.raises(CudaError) as ei:
        L((P, P, 1.0, 1), {"M": 1, "K": 1}, grid=(1,), block=(1,))
    assert str(ei.value) == (
        "cuLaunchKernel failed for kernel 'gemv': CUDA_ERROR_ILLEGAL_ADDRESS (700): described; "
        "the CUDA context is now unusable (sticky error); re-run under compute-sanitizer to find "
        "the faulting access")
    assert ei.value.sticky and ei.value.code == 700 and ei.value.kernel == "gemv"


def test_stream_handles(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)

    class TorchLike:
        cuda_stream = 0x1234

    class CupyLike:
        ptr = 0x5678

    assert stream_handle(None) == 0 and stream_handle(99) == 99
    assert stream_handle(TorchLike()) == 0x1234 and stream_handle(CupyLike()) == 0x5678
    with pytest.raises(LaunchError, match="stream must be None"):
        stream_handle("s")


def test_errors_and_arch_without_gpu():
    e = driver.error(700, "cuCtxSynchronize", "k")
    assert str(e).startswith("cuCtxSynchronize failed for kernel 'k': CUDA_ERROR_ILLEGAL_ADDRESS")
    assert str(e).endswith(driver.STICKY_HINT) and e.sticky
    assert not driver.error(1, "cuX").sticky
    assert [driver.arch_for(*cc) for cc in [(8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0)]] \
        == ["sm_80", "sm_89", "sm_90a", "sm_100a", "sm_103a", "sm_120"]
    assert isinstance(has_gpu(), bool)
    if not has_gpu():
        with pytest.raises(CudaError, match="no usable CUDA driver"):
            driver.drv()


# ---- property: every int either packs exactly or is named with its range -----------------
from hypothesis import given, strategies as st  # noqa: E402


@given(ptx=st.sampled_from([(".s32", "int32", "i"), (".u32", "uint32", "I"),
                            (".s64", "int64", "q"), (".u16", "uint16", "H"),
                            (".s8", "int8", "b")]),
       v=st.integers(-2**65, 2**65))
def test_int_scalars_pack_or_name_the_range(ptx, v):
    ptype, dt, code = ptx
    ps = [ParamSpec("n", "scalar", dt, ptype)]
    b, pk = Binder(ps, name="k"), ParamPacker(ps)
    values, _ = b.bind((v,), {})
    try:
        pk.pack(values)
    except (struct.error, OverflowError):
        with pytest.raises(LaunchError, match=rf"^argument 'n': expected {dt} in \[-?\d+, \d+\], "
                                              rf"got {v}$"):
            b.scalar_error(values)
        return
    assert pk.bytes() == struct.pack("<" + code, v)
