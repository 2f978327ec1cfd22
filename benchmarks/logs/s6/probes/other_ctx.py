"""Does the driver refuse a ptxgen launch while another context of the same device is
current (the case a second GPU's context makes), and does ptxgen then launch in its own
context and leave the other one current?  One GPU: the other context is a cuCtxCreate one."""
import ctypes, os, sys
sys.path.insert(0, os.getcwd())
import numpy as np
import torch
import ptxgen as pg
from ptxgen.runtime import driver, stats

N = pg.var("N")


@pg.kernel(grid=lambda a: ((a["N"] + 255) // 256,), block=(256,))
def affine(out: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32"),
           a: pg.float32, b: pg.float32):
    i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
    with pg.if_(i < N):
        out[i] = x[i] * a + b


@pg.kernel(grid=(64,), block=(256,))
def affine_fixed(out: pg.Tensor((16384,), "float32"), x: pg.Tensor((16384,), "float32"),
                 a: pg.float32, b: pg.float32):
    i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
    out[i] = x[i] * a + b


lib = ctypes.CDLL("libcuda.so.1")
d = driver.drv()
for k, n in ((affine, 100_003), (affine_fixed, 16384)):
    rng = np.random.default_rng(1)
    xh = rng.standard_normal(n).astype(np.float32)
    want = (xh * np.float32(1.5) + np.float32(-0.25)).view(np.uint32)
    x = torch.from_numpy(xh).cuda()
    out = torch.full_like(x, float("nan"))
    k(out, x, 1.5, -0.25)
    k(out, x, 1.5, -0.25)
    torch.cuda.synchronize()
    ok0 = np.array_equal(out.cpu().numpy().view(np.uint32), want)
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    prim = int(d.cuCtxGetCurrent()[1])
    ctx = ctypes.c_void_p()
    r = lib.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0)          # made current (pushed)
    cur = int(d.cuCtxGetCurrent()[1])
    before = stats()["launch_retries"]
    err = None
    try:
        for _ in range(3):
            k(out, x, 1.5, -0.25)
    except Exception as e:   # report, do not hide
        err = f"{type(e).__name__}: {e}"
    after = int(d.cuCtxGetCurrent()[1])
    retries = stats()["launch_retries"] - before
    popped = ctypes.c_void_p()
    lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
    lib.cuCtxDestroy_v2(ctx)
    torch.cuda.synchronize()
    ok = np.array_equal(out.cpu().numpy().view(np.uint32), want)
    print(f"{k.name}: before {ok0}; cuCtxCreate rc {r}, other ctx current {cur != prim and cur == ctx.value}; "
          f"3 launches under it: error {err}; launch_retries +{retries}; other ctx still current "
          f"after {after == ctx.value}; popped it {popped.value == ctx.value}; bit-exact {ok}; "
          f"primary current again {int(d.cuCtxGetCurrent()[1]) == prim}")
