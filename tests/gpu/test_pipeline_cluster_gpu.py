"""pg.Pipeline(cluster_ctas=2) on the H200: each CTA's producer stores its half of every stage
into both CTAs and publishes it with a cluster-scope release on the peer's full barrier; the
consumers release in both CTAs at CTA scope.  ptxsim does not model memory ordering, so this
run is what shows the publishing arrive orders the remote stores."""
import pytest

from test_pipeline_cluster import ROUNDS, ring_kernel  # noqa: E402  (the CPU test's kernel)

pytestmark = pytest.mark.gpu


def test_cluster_ring_sums_both_ctas_halves_every_round():
    torch = pytest.importorskip("torch")
    k = ring_kernel()
    want = [[20 * i + 1 for i in range(ROUNDS)]] * 2
    for _ in range(200):            # the ordering bug this guards against is a race
        o = torch.full((2, ROUNDS), -1, dtype=torch.int32, device="cuda")
        k(o)
        assert o.tolist() == want
