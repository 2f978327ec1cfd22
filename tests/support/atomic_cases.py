"""Atomics kernels checked both in the simulator (tests/test_atomics.py) and on the GPU
(tests/gpu/test_atomics_gpu.py), with their numpy references: a grid-wide counter, and the
last-CTA reduction (each CTA publishes a partial sum; the CTA whose atom sees n - 1 sums them)."""
import numpy as np

import ptxgen as pg


def counter_kernel(ctas=4, threads=256):
    """Every thread adds 1 to one counter and stores the old value it got."""
    @pg.kernel(grid=(ctas,), block=(threads,))
    def counter(CNT: pg.Tensor((1,), "uint32"), OLD: pg.Tensor((ctas * threads,), "uint32")):
        i = pg.let(pg.cta_id(ctas) * threads + pg.thread_id(threads))
        OLD[i] = pg.ptx.atom.add(CNT[0], 1)
    return counter


def check_counter(cnt, old, n):
    """The counter saw every add once, and each thread got a distinct old value."""
    assert int(cnt[0]) == n
    assert np.array_equal(np.sort(old), np.arange(n, dtype=np.uint32))


def last_cta_kernel(ctas=8, threads=128):
    """Each CTA sums its slice of X in order (thread 0, from shared memory) into PART[c], then
    fence.acq_rel.gpu and atom.acq_rel.gpu.add on CNT: the CTA that sees ctas - 1 is the
    last, and every partial is visible to it; it sums them in CTA order into OUT."""
    @pg.kernel(grid=(ctas,), block=(threads,))
    def last_cta(X: pg.Tensor((ctas * threads,), "float32"), PART: pg.Tensor((ctas,), "float32"),
                 CNT: pg.Tensor((1,), "uint32"), OUT: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(threads)
        c = pg.cta_id(ctas)
        sm = pg.alloc_shared((threads,), "float32")
        sm[tx] = X[c * threads + tx]
        pg.cta_sync()
        with pg.if_(tx == 0):
            acc = pg.local_scalar("float32", 0.0)
            for j in pg.serial(threads):
                acc += sm[j]
            PART[c] = acc
            pg.ptx.fence.acq_rel("gpu")
            old = pg.ptx.atom.add(CNT[0], 1, sem="acq_rel", scope="gpu")
            with pg.if_(old == ctas - 1):
                total = pg.local_scalar("float32", 0.0)
                for j in pg.serial(ctas):
                    total += PART[j]
                OUT[0] = total
    return last_cta


def last_cta_reference(x, ctas, threads):
    """(partials, total) summed in the kernel's order, in float32."""
    parts = np.zeros(ctas, np.float32)
    for c in range(ctas):
        acc = np.float32(0)
        for v in x[c * threads:(c + 1) * threads]:
            acc = np.float32(acc + v)
        parts[c] = acc
    total = np.float32(0)
    for p in parts:
        total = np.float32(total + p)
    return parts, total


def cluster_counter_kernel(clusters=2, size=4, threads=64):
    """Distributed shared memory: after a cluster_sync (rank 0's counters zeroed), every thread
    of every CTA of a cluster adds its X value into rank 0's shared SUM counter
    (red.add.shared::cluster through pg.cluster_view) and 1 into its CNT counter (atom.add,
    keeping the old value in OLD); after another cluster_sync rank 0 writes both to global."""
    ctas = clusters * size

    @pg.kernel(grid=(ctas,), block=(threads,), cluster=(size, 1, 1))
    def cluster_counter(X: pg.Tensor((ctas * threads,), "uint32"),
                        SUM: pg.Tensor((clusters,), "uint32"),
                        CNT: pg.Tensor((clusters,), "uint32"),
                        OLD: pg.Tensor((ctas * threads,), "uint32")):
        tx = pg.thread_id(threads)
        rank = pg.cta_rank_in_cluster()
        i = pg.let(pg.cta_id(ctas) * threads + tx)
        acc = pg.alloc_shared((2,), "uint32")
        with pg.if_(tx < 2):
            acc[tx] = 0
        pg.cluster_sync()
        root = pg.cluster_view(acc, 0)
        pg.ptx.red.add(root[0], X[i], scope="cluster")
        OLD[i] = pg.ptx.atom.add(root[1], 1, scope="cluster")
        pg.cluster_sync()
        with pg.if_((rank == 0) & (tx == 0)):
            c = pg.cluster_id()
            SUM[c] = acc[0]
            CNT[c] = acc[1]
    return cluster_counter


def check_cluster_counter(x, total, cnt, old, clusters, size, threads):
    """Each cluster's rank 0 counted its cluster's threads once each: SUM is the sum of their
    X values (mod 2**32), CNT their number, and their old values a permutation of 0..n-1."""
    n = size * threads
    per = x.reshape(clusters, n).astype(np.uint64).sum(axis=1) % (1 << 32)
    assert np.array_equal(total, per.astype(np.uint32))
    assert np.array_equal(cnt, np.full(clusters, n, np.uint32))
    for c in range(clusters):
        assert np.array_equal(np.sort(old[c * n:(c + 1) * n]), np.arange(n, dtype=np.uint32))
