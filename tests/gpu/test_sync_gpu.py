"""Sync debug mode on the GPU: a wait that never completes raises SyncError naming the barrier,
its parity, the thread and the line within 10 s (in a child process: the trap loses the
context)."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HANG = textwrap.dedent("""
    import time, torch, ptxgen as pg
    {mode}
    @pg.kernel(grid=(1,), block=(128,))
    def hang(O: pg.Tensor((128,), "int32"), n: pg.int32):
        tx = pg.thread_id(128)
        bar = pg.alloc_shared((1,), "uint64", align=8)
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        with pg.if_(tx < n):
            pg.ptx.mbarrier.arrive(bar)
        pg.ptx.mbarrier.try_wait(bar, 0)
        O[tx] = tx
    o = torch.zeros(128, dtype=torch.int32, device="cuda")
    hang(o, 1)                 # one arrival: completes
    torch.cuda.synchronize()
    print("FIRST-OK", int(o[5]))
    t = time.time()
    try:
        hang(o, 0)             # no arrival: hangs without the mode
        torch.cuda.synchronize()
        print("NO-ERROR")
    except pg.SyncError as e:
        print("SYNCERROR", round(time.time() - t, 2), e)
""")


def _run(mode, tmp_path, env_extra=None, timeout=60):
    """The program in a file of its own (its source lines name the barrier and the line)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **(env_extra or {}))
    script = tmp_path / "hang.py"
    script.write_text(HANG.format(mode=mode))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=timeout)
    return r.stdout + r.stderr


@pytest.mark.parametrize("how", ["api", "env"])
def test_a_hang_raises_sync_error_naming_barrier_and_line(how, tmp_path):
    out = _run("pg.debug(sync=True)" if how == "api" else "", tmp_path,
               {"PTXGEN_DEBUG": "sync"} if how == "env" else None)
    assert "FIRST-OK 5" in out, out
    m = [ln for ln in out.splitlines() if ln.startswith("SYNCERROR")]
    assert m, out
    assert "hang.py:13: kernel 'hang': thread " in m[0], m[0]
    assert "on mbarrier 'bar' for phase parity 0" in m[0], m[0]
    assert float(m[0].split()[1]) < 10, m[0]      # from the launch to the SyncError


@pytest.mark.parametrize("n", [8, 16])
def test_dsmem_exchange_in_large_clusters(n):
    """16 CTAs per cluster is past the portable 8: the launch sets the non-portable attribute."""
    import numpy as np

    from support import async_cases as ac
    from test_async_gpu import need, run_gpu

    need(90)
    run_gpu(ac.dsmem_case(np.random.default_rng(0), n), ["int32"] * 2)
