"""Asynchronous copies on a real GPU: TMA loads of 2-D and 3-D boxes (unswizzled and
32/64/128B-swizzled tiles; int8, float16, bfloat16, float32, float8; interior and edge
positions with zero fill; runtime region starts), TMA stores and reduce-add, 1-D bulk copies,
cp.async of 4/8/16 bytes in warp/warpgroup/cta scopes, multicast loads in clusters of 2 and 4,
a distributed-shared-memory exchange, and the Pipeline example.  The cases (kernels and numpy
references) are tests/support/async_cases.py, the ones tests/test_async_sim.py runs on the simulator.
Bit-exact on random data; every output is poisoned (0xA5 bytes) before the launch.

Marked ``gpu``; skipped without a CUDA device, torch, or (per test) the architecture.
"""
import importlib.util

import numpy as np
import pytest

from support import async_cases as ac
from ptxgen.runtime import has_gpu

_TORCH = importlib.util.find_spec("torch") is not None
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not _TORCH, reason="needs torch for device arrays")]

from test_async_sim import CP, LOADS, STORES  # noqa: E402  (the same cases as on the CPU)

RNG = np.random.default_rng(2026)


def _sm():
    from ptxgen.runtime import device_arch

    return int(device_arch()[3:].rstrip("af"))


def need(sm):
    if _sm() < sm:
        pytest.skip(f"needs sm_{sm}+")


def _device(a: np.ndarray, dt: str):
    """A torch CUDA tensor of ptxgen dtype `dt` holding the bytes of `a`."""
    import torch

    raw = torch.from_numpy(np.ascontiguousarray(a).reshape(-1).view(np.uint8).copy()).cuda()
    return raw.view(getattr(torch, dt)).reshape(a.shape)


def _host(t, like: np.ndarray) -> np.ndarray:
    import torch

    torch.cuda.synchronize()
    b = t.contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
    return b.view(like.dtype).reshape(like.shape)


def run_gpu(case, dtypes):
    """Launch a case on the GPU and compare its outputs bit for bit."""
    k, arrays, scalars, outs, want = case
    dev = [_device(a, dt) for a, dt in zip(arrays, dtypes)]
    k(*dev, *scalars)
    for i, w in zip(outs, want):
        got = _host(dev[i], w)
        bad = int(np.sum(got.view(np.uint8) != w.view(np.uint8)))
        assert bad == 0, f"{k.name}: {bad} bytes differ"


@pytest.mark.parametrize("case", LOADS, ids=lambda c: f"{c[0]}-{c[3]}-{len(c[1])}d-{c[4]}")
def test_tma_load(case):
    need(90)
    run_gpu(ac.tma_load_case(RNG, *case), [case[0]] * 2)


@pytest.mark.parametrize("scope", ["warp", "cta"])
def test_tma_load_elected_by_a_scope(scope):
    need(90)
    run_gpu(ac.tma_load_case(RNG, "float16", (40, 96), (16, 64), "128B", (30, 40), scope),
            ["float16"] * 2)



@pytest.mark.parametrize("case", STORES, ids=lambda c: f"{c[0]}-{c[3]}-{c[5] or 'store'}-{c[6]}")
def test_tma_store_and_reduce_add(case):
    need(90)
    run_gpu(ac.tma_store_case(RNG, *case), [case[0]] * 2)


@pytest.mark.parametrize("dt,n", [("float16", 512), ("float32", 64), ("int8", 2048)])
def test_bulk(dt, n):
    need(90)
    run_gpu(ac.bulk_case(RNG, dt, 8192, n, 3), [dt, dt])


@pytest.mark.parametrize("case", CP, ids=lambda c: f"{c[0]}-{c[3]}-{c[4]}")
def test_cp_async(case):
    need(80)
    run_gpu(ac.cp_async_case(RNG, *case, r0=5), [case[0]] * 2)


def test_cp_async_thread_scope_with_mbar():
    need(90)
    run_gpu(ac.cp_async_case(RNG, "float16", (64, 64), 16, 64, "thread", 8, use_mbar=True),
            ["float16"] * 2)


@pytest.mark.parametrize("n,how", [(2, "cluster"), (4, "cluster"), (2, "slice"), (4, "slice")])
def test_multicast(n, how):
    need(90)
    run_gpu(ac.multicast_case(RNG, n, how, rows=32), ["float16"] * 2)


@pytest.mark.parametrize("n", [2, 4])
def test_dsmem_exchange(n):
    need(90)
    run_gpu(ac.dsmem_case(RNG, n), ["int32"] * 2)


@pytest.mark.parametrize("rows", [64, 1000, 4096 + 17])
def test_pipeline_example(rows):
    need(90)
    import async_copy as ex
    from _xp import same_bits, xp

    for label, got, want in ex.check(xp, RNG, rows=rows):
        assert same_bits(xp.asnumpy(got), want), label


def test_tensor_maps_follow_the_arguments():
    """One kernel, launched on buffers of several sizes (a symbolic extent) and addresses:
    each launch gets the maps of its own arguments (the encoder's cache is keyed on them)."""
    need(90)
    import async_copy as ex
    import torch

    for rows in (128, 333, 128):
        a = torch.randint(-2**15, 2**15, (rows, 128), dtype=torch.int16,
                          device="cuda").view(torch.float16)
        out = torch.full((rows, 128), float("nan"), dtype=torch.float16, device="cuda")
        ex.ring_copy(a, out)
        torch.cuda.synchronize()
        assert torch.equal(out.view(torch.int16), a.view(torch.int16)), rows
