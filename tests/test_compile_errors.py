"""A JIT/assembly failure names the PTX line, the IR statement, the user's line and a
repro command; an arch mismatch is a ptxgen error before ptxas."""
import re
import threading

import pytest

import ptxgen as pg


def test_bad_raw_ptx_line_maps_to_ir_statement():
    @pg.kernel(grid=(1,), block=(32,))
    def bad(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = 1.0
        pg.ptx["add.s64"](A[0], A[0], 1)      # f32 register with a 64-bit add: ptxas rejects it

    with pytest.raises(pg.PTXCompileError) as ei:
        bad.compile("sm_90a")
    msg = str(ei.value)
    assert "Arguments mismatch for instruction 'add'" in msg
    assert re.search(r">>\s*\d+ \|\s+add\.s64 %f\d+, %f\d+, 1;", msg) or "add.s64 %f" in msg
    assert "IR statement: pg.ptx['add.s64'](A[0], A[0], 1)" in msg
    assert "test_compile_errors.py:" in msg
    assert re.search(r"ptxas -arch=sm_90a \S+\.ptx", msg)


def test_arch_mismatch_is_reported_before_ptxas():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        pg.ptx["wgmma.fence.sync.aligned"]()

    with pytest.raises(pg.ArchError, match=r"test_compile_errors.py:\d+: instruction "
                       r"'wgmma.fence.sync.aligned' needs one of sm_90a; the target is sm_100a"):
        k.compile("sm_100a")


def test_threads_build_identical_ptx():
    def make(i):
        @pg.kernel(grid=(1,), block=(64,), name=f"k{i % 4}")
        def k(A: pg.Tensor((64,), "float32"), B: pg.Tensor((64,), "float32")):
            tx = pg.thread_id(64)
            B[tx] = A[tx] * float(i % 4 + 1)
        return k.ptx("sm_90a")

    out = [None] * 32
    errors = []

    def work(i):
        try:
            out[i] = make(i)
        except Exception as e:   # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(32):
        assert out[i] == out[i % 4]
    assert len({out[i] for i in range(4)}) == 4
