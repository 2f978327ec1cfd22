"""pg.debug_bounds: every index checked, trap with the buffer name; off = identical PTX."""
import ptxgen as pg
from support.asm import assemble


def make():
    @pg.kernel(grid=(1,), block=(64,))
    def oob(A: pg.Tensor((32,), "float32"), n: pg.int32):
        tx = pg.thread_id(64)
        A[tx + n] = 1.0
    return oob


def test_debug_bounds_checks_and_off_is_identical():
    k = make()
    plain = k.ptx("sm_90a")
    prev = pg.debug_bounds(True)
    try:
        dbg = make().ptx("sm_90a")
    finally:
        pg.debug_bounds(prev)
    assert make().ptx("sm_90a") == plain
    assert "vprintf" not in plain and "trap" not in plain
    assert "setp.ge.u32" in dbg and "trap;" in dbg and "call.uni (ret_param), vprintf" in dbg
    msg = "index out of range in buffer 'A' dimension 0 (extent 32)"
    assert ", ".join(str(b) for b in msg.encode()) in dbg
    for arch in ("sm_80", "sm_90a", "sm_100a"):
        prev = pg.debug_bounds(True)
        try:
            ok, log = assemble(make().ptx(arch), arch)
        finally:
            pg.debug_bounds(prev)
        assert ok, log


def test_proven_indices_are_not_checked():
    @pg.kernel(grid=(1,), block=(32,))
    def fine(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = 1.0

    prev = pg.debug_bounds(True)
    try:
        assert "trap" not in fine.ptx("sm_90a")
    finally:
        pg.debug_bounds(prev)
