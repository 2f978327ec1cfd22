"""Programmatic dependent launch on the H200 (builder/griddep.py): a kernel that waits on the
kernel ahead is scheduled while that one still runs, and still reads its finished output."""
import pytest

import ptxgen as pg

pytestmark = pytest.mark.gpu

N = 1 << 16


def _kernels():
    @pg.kernel(grid=(132,), block=(256,))
    def slow_writer(X: pg.Tensor((N,), "int32"), v: pg.int32, n: pg.int32):
        """Triggers its dependents at once, then spins n steps per thread before writing:
        a dependent that did not wait would read the old X."""
        pg.launch_dependent_grids()
        tx = pg.thread_id(256)
        b = pg.cta_id(132)
        acc = pg.local_scalar("int32")
        acc.set(v)
        for _ in pg.serial(n):
            acc.set(acc * 3 % 1000003)
        for i in pg.serial(b * 256 + tx, N, 132 * 256):
            X[i] = v + acc // 1000003       # v (acc < 1000003), known only after the spin

    @pg.kernel(grid=(64,), block=(256,))
    def reader(X: pg.Tensor((N,), "int32"), Y: pg.Tensor((N,), "int32")):
        pg.wait_on_dependent_grids()
        tx = pg.thread_id(256)
        b = pg.cta_id(64)
        for i in pg.serial(b * 256 + tx, N, 64 * 256):
            Y[i] = X[i] + 1
    return slow_writer, reader


def test_dependent_reads_the_finished_output_eagerly_and_in_a_graph():
    torch = pytest.importorskip("torch")
    writer, reader = _kernels()
    X = torch.zeros(N, dtype=torch.int32, device="cuda")
    Y = torch.full((N,), -1, dtype=torch.int32, device="cuda")
    for v in range(1, 21):
        writer(X, v, 20000)
        reader(X, Y)
        torch.cuda.synchronize()
        assert (Y == v + 1).all(), v
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        writer(X, 100, 20000)         # warm-up launches outside the capture
        reader(X, Y)
    torch.cuda.synchronize()
    V = 7
    with torch.cuda.graph(g):
        writer(X, V, 20000)
        reader(X, Y)
    for _ in range(10):
        X.zero_()
        Y.fill_(-1)
        g.replay()
        torch.cuda.synchronize()
        assert (Y == V + 1).all()
