"""pg.ptx.atom / red / fence on a real GPU: the simulator's atomics cases (tests/support/
atomic_cases.py) against numpy.  A grid-wide counter hands out each old value once, and the
last CTA to arrive (fence.acq_rel.gpu + atom.acq_rel.gpu.add) sees every CTA's partial sum;
the CTAs of a cluster count into rank 0's shared memory (red / atom .shared::cluster).

Marked ``gpu``; skipped where no CUDA device is visible.  Device arrays come from torch if
importable, else cupy (tests/gpu/_xp.py); the kernels take raw pointers, so uint32 data moves
as int32 bits.
"""
import numpy as np
import pytest

from ptxgen.runtime import has_gpu
from support import atomic_cases as AC

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]


def _dev(a):
    from _xp import xp

    return xp.asarray(a.view(np.int32) if a.dtype == np.uint32 else a)


def _host(t, dtype):
    from _xp import xp

    return xp.asnumpy(t).view(dtype)


@pytest.mark.parametrize("ctas,threads", [(4, 256), (132, 1024)])
def test_a_grid_wide_counter_hands_out_each_value_once(ctas, threads):
    from _xp import xp

    cnt = _dev(np.zeros(1, np.uint32))
    old = _dev(np.full(ctas * threads, 0xFFFFFFFF, np.uint32))     # poisoned
    AC.counter_kernel(ctas, threads)(xp.ptr(cnt), xp.ptr(old))
    AC.check_counter(_host(cnt, np.uint32), _host(old, np.uint32), ctas * threads)


@pytest.mark.parametrize("ctas,threads", [(8, 128), (264, 256)])
def test_the_last_cta_sums_every_partial(ctas, threads):
    from _xp import xp

    x = np.random.default_rng(ctas).standard_normal(ctas * threads).astype(np.float32)
    dx, part = _dev(x), _dev(np.full(ctas, np.nan, np.float32))
    cnt, out = _dev(np.zeros(1, np.uint32)), _dev(np.full(1, np.nan, np.float32))
    AC.last_cta_kernel(ctas, threads)(xp.ptr(dx), xp.ptr(part), xp.ptr(cnt), xp.ptr(out))
    want_parts, want = AC.last_cta_reference(x, ctas, threads)
    assert np.array_equal(_host(part, np.float32), want_parts)
    assert _host(out, np.float32)[0] == want and _host(cnt, np.uint32)[0] == ctas


@pytest.mark.parametrize("clusters,size,threads", [(2, 4, 64), (66, 2, 256)])
def test_a_cluster_counts_into_rank_0s_shared_memory(clusters, size, threads):
    """red.add / atom.add.shared::cluster through pg.cluster_view (sm_90+)."""
    from _xp import xp

    from ptxgen.runtime import device_arch
    if int(device_arch()[3:].rstrip("af")) < 90:
        pytest.skip("needs sm_90+ (thread-block clusters)")
    n = clusters * size * threads
    x = np.random.default_rng(n).integers(0, 1 << 24, n, dtype=np.uint32)
    dx, total = _dev(x), _dev(np.full(clusters, 0xFFFFFFFF, np.uint32))
    cnt, old = _dev(np.zeros(clusters, np.uint32)), _dev(np.full(n, 0xFFFFFFFF, np.uint32))
    AC.cluster_counter_kernel(clusters, size, threads)(xp.ptr(dx), xp.ptr(total), xp.ptr(cnt),
                                                        xp.ptr(old))
    AC.check_cluster_counter(x, _host(total, np.uint32), _host(cnt, np.uint32),
                             _host(old, np.uint32), clusters, size, threads)
