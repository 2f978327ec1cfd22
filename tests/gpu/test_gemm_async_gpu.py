"""gemm_async (wgmma) on an H200: the kernels of tests/support/gemm_cases.py against numpy.

Each case multiplies A (M, K) @ B (N, K)^T through shared tiles laid out by canonical_layout
(K- or MN-major, each swizzle), several instruction K steps, A from shared memory or from
registers, and copies the accumulator out with pg.tile.warpgroup.copy.  D is poisoned
(NaN) first.  Two kinds of data:
  * exact: small dyadic values whose products and partial sums every accumulator (f32, f16)
    holds exactly, so the result must equal numpy bit for bit whatever the summation order;
  * random normal bf16/f16: within fp32 accumulation error of numpy in float64.
Plus the warp-specialized kernel (a producer warpgroup at 40 registers, two consumers at
232) and whether the driver JIT keeps its setmaxnreg (nvJitLink drops it: C7504).
"""
import importlib.util

import numpy as np
import pytest

from ptxgen.runtime import has_gpu

_ARRAYS = any(importlib.util.find_spec(m) is not None for m in ("torch", "cupy"))
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not _ARRAYS, reason="needs torch or cupy for device arrays")]

from support import gemm_cases as G  # noqa: E402

Case = G.Case

CASES = (
    [Case(N=n, ab=ab) for n in (8, 64, 128, 256) for ab in ("bfloat16", "float16")]
    + [Case(N=n, ab="bfloat16", a_major="MN", b_major="MN",
            swizzle="none" if n == 8 else "128B") for n in (8, 64, 128, 256)]
    + [Case(N=64, ab="float16", a_major="MN", b_major="K", swizzle="64B"),
       Case(N=128, ab="float16", a_major="K", b_major="MN", swizzle="32B"),
       Case(N=64, ab="float16", d="float16"),
       Case(N=256, ab="float16", d="float16", swizzle="64B")]
    + [Case(N=n, ab="float32") for n in (8, 64, 128)]                         # tf32
    + [Case(N=n, ab="float8_e4m3fn") for n in (64, 256)]                     # K = 128
    + [Case(N=64, ab="float8_e5m2", swizzle="64B", ksteps=2),
       Case(N=64, ab="float8_e4m3fn", d="float16", swizzle="64B", ksteps=2)]
    + [Case(N=n, a_regs=True) for n in (8, 64, 256)]                          # A in registers
    + [Case(N=64, ab="float16", a_regs=True, swizzle="none"),
       Case(N=64, ab="float32", a_regs=True),
       Case(N=64, ab="float8_e4m3fn", a_regs=True, swizzle="64B", ksteps=2)]
    + [Case(M=128, N=128, splits=2), Case(M=128, N=64, splits=4, swizzle="64B")]
)


def _need_sm90a():
    from ptxgen.runtime import device_arch

    if device_arch() != "sm_90a":
        pytest.skip(f"wgmma needs sm_90a (Hopper); this device is {device_arch()}")


def _launch(c, a, b):
    from _xp import xp

    dA, dB = xp.asarray(a), xp.asarray(b)
    D = xp.full((c.M, c.N), np.nan, G.d_storage(c))
    G.kernel_for(c)(xp.ptr(dA), xp.ptr(dB), xp.ptr(D))
    xp.sync()
    return G.decode_d(xp.asnumpy(D), c.d)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_exact_data_is_bit_identical_to_numpy(c):
    _need_sm90a()
    a, b, ref = G.exact_inputs(c, seed=c.N + c.ksteps)
    got = _launch(c, a, b)
    assert np.isfinite(got).all(), f"{int(np.sum(~np.isfinite(got)))} outputs never written"
    bad = np.argwhere(got != ref)
    assert bad.size == 0, (f"{len(bad)} of {ref.size} outputs differ; first at "
                           f"{tuple(bad[0])}: {got[tuple(bad[0])]} vs numpy "
                           f"{ref[tuple(bad[0])]}")


def _bits16(x, dt):
    if dt == "float16":
        return x.astype(np.float16).view(np.uint16), x.astype(np.float16).astype(np.float64)
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)     # round to nearest even
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


RANDOM = [Case(N=n, ab=ab) for n in (64, 256) for ab in ("bfloat16", "float16")] + \
    [Case(N=128, a_major="MN", b_major="MN"), Case(N=64, a_regs=True),
     Case(M=128, N=128, splits=4, swizzle="64B")]


@pytest.mark.parametrize("c", RANDOM, ids=lambda c: c.name)
def test_random_data_within_fp32_accumulation_error(c):
    _need_sm90a()
    rng = np.random.default_rng(c.N)
    a, av = _bits16(rng.standard_normal((c.M, c.K)), c.ab)
    b, bv = _bits16(rng.standard_normal((c.N, c.K)), c.ab)
    ref = av @ bv.T
    got = _launch(c, a, b).astype(np.float64)
    assert np.isfinite(got).all(), f"{int(np.sum(~np.isfinite(got)))} outputs never written"
    # fp32 accumulation: a few ulps of the running sum of |products| (K terms)
    tol = 4 * c.K * np.finfo(np.float32).eps * (np.abs(av) @ np.abs(bv).T) + 1e-6
    err = np.abs(got - ref)
    assert (err <= tol).all(), (f"{int(np.sum(err > tol))} outputs outside fp32 accumulation "
                                f"error; worst {err.max():.3g} at "
                                f"{np.unravel_index(err.argmax(), err.shape)}")


def test_repeat_launch_is_stable():
    _need_sm90a()
    c = Case(N=128)
    a, b, _ = G.exact_inputs(c, seed=3)
    assert np.array_equal(_launch(c, a, b), _launch(c, a, b))


# ---------------------------------------------------------------- warp specialization
def test_warp_specialized_gemm_with_setmaxnreg():
    _need_sm90a()
    from _xp import xp

    k = G.make_warpspec_kernel()
    a, b, ref = G.exact_inputs(Case(M=128), seed=7)
    dA, dB = xp.asarray(a), xp.asarray(b)
    D = xp.full((2, 64, 64), np.nan, np.float32)
    k(xp.ptr(dA), xp.ptr(dB), xp.ptr(D))
    xp.sync()
    got = xp.asnumpy(D).reshape(128, 64)
    assert np.array_equal(got, ref), f"{int(np.sum(got != ref))} outputs differ"


def test_driver_jit_keeps_setmaxnreg():
    """The driver's PTX JIT compiles the whole module, so with .maxntid 384 + .minnctapersm 1
    the kernel's register count is the entry count setmaxnreg adjusts: 168.  (The cubin that
    nvJitLink builds, relocatable code, has dropped setmaxnreg: its count is lower.)  A failure
    here means the reallocation never happens on this driver, not that results are wrong."""
    _need_sm90a()
    from ptxgen.runtime import Module

    k = G.make_warpspec_kernel()
    fn = Module.load(ptx=k.ptx("sm_90a"), name=k.name).function(k.name)
    assert fn.attribute("NUM_REGS") == 168



def test_kernel_launch_keeps_setmaxnreg():
    """A pg.Kernel that uses setmaxnreg is loaded from its PTX (the driver's whole-program
    JIT), not from nvJitLink's relocatable cubin, so its launches get the reallocation: the
    launched function's register count is setmaxnreg's entry count."""
    _need_sm90a()
    from _xp import xp

    k = G.make_warpspec_kernel()
    assert k.built("sm_90a").codegen.whole_program
    a, b, _ = G.exact_inputs(Case(M=128), seed=7)
    dA, dB = xp.asarray(a), xp.asarray(b)
    D = xp.full((2, 64, 64), np.nan, np.float32)
    k(xp.ptr(dA), xp.ptr(dB), xp.ptr(D))
    xp.sync()
    (launcher,) = k._plan.launchers.values()
    assert launcher.fn.attribute("NUM_REGS") == 168
