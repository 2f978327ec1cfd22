"""The affine kernel of the runtime's device tests: out = x * a + b over N floats, which
mul.rn + add.rn make numpy's float32 result bit for bit."""
import ptxgen as pg

N = pg.var("N")


def make_affine():
    """A fresh kernel object with a per-launch grid (the general launch path)."""
    @pg.kernel(grid=lambda a: ((a["N"] + 255) // 256,), block=(256,))
    def affine(out: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32"),
               a: pg.float32, b: pg.float32):
        i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
        with pg.if_(i < N):
            out[i] = x[i] * a + b
    return affine


def make_affine_fixed(n: int = 16384):
    """The same for n = 256 * k elements with constant dims (a Kernel's own launch)."""
    assert n % 256 == 0

    @pg.kernel(grid=(n // 256,), block=(256,))
    def affine_fixed(out: pg.Tensor((n,), "float32"), x: pg.Tensor((n,), "float32"),
                     a: pg.float32, b: pg.float32):
        i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
        out[i] = x[i] * a + b
    return affine_fixed
