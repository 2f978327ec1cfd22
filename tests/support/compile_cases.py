"""The bare kernel call inside torch.compile that the CPU tests (with a stand-in launch) and the
GPU tests both run: a kernel between two torch ops."""
import ptxgen as pg


def add_one_between_torch_ops(torch, name: str = "add_one"):
    """(kernel y = x + 1, f(x) = kernel(x * 2) * 3)."""
    N = pg.var("N")

    @pg.kernel(grid=lambda a: ((a["N"] + 127) // 128,), block=(128,), name=name)
    def add_one(x: pg.Tensor((N,), pg.float32), y: pg.Tensor((N,), pg.float32)):
        i = pg.let(pg.cta_id() * 128 + pg.thread_id(128))
        with pg.if_(i < N):
            y[i] = x[i] + 1.0

    def f(x):
        y = torch.empty_like(x)
        add_one(x * 2, y)
        return y * 3

    return add_one, f
