"""An out-of-bounds index under pg.debug_bounds traps and prints the buffer's name."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_oob_traps_with_buffer_name():
    code = textwrap.dedent("""
        import torch, ptxgen as pg
        pg.debug_bounds(True)
        @pg.kernel(grid=(1,), block=(64,))
        def oob(Data: pg.Tensor((32,), "float32"), n: pg.int32):
            tx = pg.thread_id(64)
            Data[tx + n] = 1.0
        a = torch.zeros(32, device="cuda")
        oob(a, 0)          # tx 32..63 are out of range
        try:
            torch.cuda.synchronize()
            print("NO-ERROR")
        except Exception as e:
            print("ERROR", type(e).__name__)
    """)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    out = r.stdout + r.stderr
    assert "index out of range in buffer 'Data' dimension 0 (extent 32)" in out, out
    assert "NO-ERROR" not in out, out
