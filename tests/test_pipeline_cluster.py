"""pg.Pipeline(..., cluster_ctas=2): a ring whose stages each CTA's producer fills in both CTAs
of a cluster, so a stage is free only once the consumers of both have read it.  The counts
and synchronization in the PTX, the refusal of a cluster size the kernel does not have, and
a run on the CPU simulator where the ring wraps several times."""
import numpy as np
import pytest

import ptxgen as pg
from ptxgen.errors import ResourceError
from support import ptxsim

STAGES, ROUNDS = 2, 5


def ring_kernel(cluster_ctas=2, end_sync=True):
    """Each CTA's producer thread writes its half of a 2-element stage into both CTAs' stage
    (st.shared::cluster) and arrives on both full barriers (the peer's through its view); the
    consumer warp adds the stage into O[rank, round] once full, then releases it in both."""
    @pg.kernel(grid=(2,), block=(64,), cluster=(2, 1, 1))
    def ring(O: pg.Tensor((2, ROUNDS), "int32")):
        tx = pg.thread_id(64)
        rank = pg.cta_rank_in_cluster()
        pool = pg.SMEMPool()
        buf = pool.alloc((STAGES, 2), "int32")
        pipe = pg.Pipeline(pool, stages=STAGES, consumers=1, producer_arrivals=2,
                           cluster_ctas=cluster_ctas)
        pool.commit()
        pipe.init()
        views = [pg.cluster_view(buf, r) for r in range(2)]
        peer_full = pg.cluster_view(pipe.full, rank ^ 1)
        with pg.if_(tx == 0):                           # the producer
            prod = pipe.producer()
            for i in pg.serial(ROUNDS):
                prod.acquire()
                for r in range(2):
                    views[r][prod.stage, rank] = 10 * i + rank
                pg.ptx.mbarrier.arrive(peer_full[prod.stage])   # release: orders the stores
                prod.commit(arrive=True)                        # and this CTA's own
        with pg.if_(tx // 32 == 1):                     # the consumer warp
            cons = pipe.consumer(scope="warp")
            for i in pg.serial(ROUNDS):
                cons.wait()
                with pg.if_(tx == 32):
                    O[rank, i] = buf[cons.stage, 0] + buf[cons.stage, 1]
                cons.release()
        if end_sync:
            pg.cluster_sync()
    return ring


def test_a_cluster_ring_counts_both_ctas_consumers_and_syncs_the_cluster():
    lines = [ln.strip() for ln in ring_kernel().ptx("sm_90a").splitlines()
             if not ln.lstrip().startswith("//")]
    inits = [ln for ln in lines if ln.startswith("mbarrier.init")]
    assert sum(ln.endswith(", 2;") for ln in inits) == 2 * STAGES    # full: 2; empty: 1 x 2
    # the producer's arrive on the peer publishes its stores (cluster-scope release); the
    # consumer's release in both CTAs publishes nothing (CTA scope, as CUTLASS)
    published = [ln for ln in lines
                 if ln.startswith("mbarrier.arrive.release.cluster.shared::cluster.b64 _,")]
    freed = [ln for ln in lines if ln.startswith("mbarrier.arrive.shared::cluster.b64 _,")]
    assert (len(published), len(freed)) == (1, 2)
    assert lines.count("barrier.cluster.arrive;") + lines.count("barrier.cluster.arrive.aligned;") \
        >= 2                       # init and the end


def test_each_round_sums_both_ctas_halves():
    """Both CTAs see stage contents 10 i + 0 and 10 i + 1 in every round: no stage was
    overwritten before both consumers had read it, and nothing hangs as the ring wraps."""
    o = np.full((2, ROUNDS), -1, np.int32)
    ptxsim.run(ring_kernel(), [o])
    want = [20 * i + 1 for i in range(ROUNDS)]
    assert o.tolist() == [want, want]


def test_cluster_ctas_must_match_the_kernel_cluster():
    with pytest.raises(ResourceError, match=r"Pipeline cluster_ctas=4: the kernel's cluster "
                                            r"\(2, 1, 1\) has 2 CTA\(s\); declare "
                                            r"@pg.kernel\(..., cluster=\(4, 1, 1\)\)"):
        ring_kernel(cluster_ctas=4)


def test_a_cluster_ring_must_end_with_a_cluster_sync():
    """Without it a CTA may exit while its peer's consumer still arrives on its empty
    barriers: refused at the release."""
    with pytest.raises(pg.TraceError, match=r"test_pipeline_cluster.py:\d+: Pipeline 'pipe' "
                       r"\(cluster_ctas=2\) releases stages in the other CTAs of the cluster, "
                       r"but the kernel does not call pg.cluster_sync\(\) at the top level "
                       r"after its last release"):
        ring_kernel(end_sync=False)
