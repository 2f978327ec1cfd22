"""Sync debug mode (PTXGEN_DEBUG=sync / pg.debug(sync=True)): bounded waits that record the
site and trap.  The CPU side: what the build emits, that the mode off changes nothing, and
how a record becomes a SyncError.  tests/gpu/test_sync_gpu.py runs a hang on the GPU."""
import os
import re
import struct
import subprocess
import sys

import pytest

import ptxgen as pg
from ptxgen.passes import syncdebug
from ptxgen.runtime.syncdebug import decode

HERE = "test_sync_debug.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def sync_mode():
    prev = pg.debug(sync=True)
    yield
    pg.debug(sync=prev["sync"])


def waiting_kernel():
    @pg.kernel(grid=(1,), block=(128,))
    def k(O: pg.Tensor((128,), "int32"), n: pg.int32):
        tx = pg.thread_id(128)
        bar = pg.alloc_shared((1,), "uint64", align=8)
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        with pg.if_(tx < n):             # n = 0 at run time: nobody arrives (a hang)
            pg.ptx.mbarrier.arrive(bar)
        pg.ptx.mbarrier.try_wait(bar, 0)
        i = pg.local_scalar("int32", 0)
        with pg.while_(i < n):
            i += 1
        O[tx] = i
    return k


def test_mode_off_changes_nothing():
    k = waiting_kernel()
    text = k.ptx("sm_90a")
    assert "globaltimer" not in text and "trap" not in text and syncdebug.SYMBOL not in text


def test_waits_and_while_loops_are_bounded(sync_mode):
    k = waiting_kernel()
    text = k.ptx("sm_90a")
    assert ".address_size 64\n.global .align 8 .u64 __ptxgen_sync_rec;\n" in text
    assert text.count("mov.u64 %rd") >= 4 and text.count("%globaltimer;") == 4   # 2 loops
    assert text.count("trap;") == 2
    assert re.search(r"setp\.gt\.u64 %p\d+, %rd\d+, 2000000000;", text)
    assert re.search(r"st\.volatile\.global\.v4\.u32 \[%rd\d+\], \{%r\d+, %r\d+, %r\d+, %r\d+\};"
                     r"\n(\s*//.*\n)*\s*fence\.sc\.sys;\n(\s*//.*\n)*\s*trap;", text)
    sites = k.built("sm_90a").codegen.func.attrs["sync_sites"]
    wait_line = next(n for n, ln in enumerate(open(__file__), 1)
                     if "pg.ptx.mbarrier.try_wait(bar, 0)" in ln)
    while_line = wait_line + 2
    assert sites == [("wait", "bar", "0", f"{HERE}:{wait_line}"),
                     ("while", "", "", f"{HERE}:{while_line}")]
    from ptxgen.runtime import compile_ptx

    assert compile_ptx(text, "sm_90a", name=k.name).cubin


def test_the_mode_builds_apart_and_back(sync_mode):
    k = waiting_kernel()
    on = k.ptx("sm_90a")
    pg.debug(sync=False)
    assert k.ptx("sm_90a") != on and "trap" not in k.ptx("sm_90a")
    pg.debug(sync=True)
    assert k.ptx("sm_90a") == on


def test_a_ring_in_sync_mode_assembles(sync_mode):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import async_copy
    finally:
        sys.path.pop(0)
    from ptxgen.runtime import compile_ptx

    text = async_copy.ring_copy.ptx("sm_90a")
    assert text.count("trap;") == 2           # the producer's acquire, the consumer's wait
    assert compile_ptx(text, "sm_90a", name="ring_copy").cubin


def test_a_record_becomes_a_sync_error():
    sites = [("wait", "pipe_full[<stage>]", "<computed>", "gemm.py:12"),
             ("wait", "bar", "1", "k.py:7"), ("while", "", "", "k.py:9")]
    raw = struct.pack("<4I", syncdebug.MAGIC, 1, 1, 37)
    e = decode(raw, sites, "k", syncdebug.RECORD)
    assert isinstance(e, pg.SyncError)
    assert str(e) == (
        "k.py:7: kernel 'k': thread 37 waited more than 2 s on mbarrier 'bar' for phase parity 1 "
        "and the phase never completed (sync debug mode): too few arrivals for its count, a "
        "wrong parity, or a stage never released.  The kernel trapped; the CUDA context of this "
        "device is lost, so restart the process before launching again")
    e = decode(struct.pack("<4I", syncdebug.MAGIC, 0, 0, 130), sites, "gemm",
               syncdebug.RECORD)
    assert "gemm.py:12: kernel 'gemm': thread 130 waited more than 2 s on mbarrier " \
           "'pipe_full[<stage>]' for phase parity 0 (computed)" in str(e)
    e = decode(struct.pack("<4I", syncdebug.MAGIC, 2, 0, 5), sites, "k", syncdebug.RECORD)
    assert str(e).startswith("k.py:9: kernel 'k': thread 5 ran this pg.while_ loop for more "
                             "than 2 s (sync debug mode)")
    assert decode(bytes(16), sites, "k", syncdebug.RECORD) is None     # nothing timed out
    assert decode(struct.pack("<4I", syncdebug.MAGIC, 9, 0, 0), sites, "k",
                  syncdebug.RECORD) is None


def test_the_environment_switches_the_mode_on():
    code = "import ptxgen.passes.syncdebug as s; print(s.enabled())"
    for env, want in (("sync", "True"), ("bounds,sync", "True"), ("", "False")):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, PTXGEN_DEBUG=env, PYTHONPATH=ROOT), cwd=ROOT)
        assert r.stdout.strip() == want, r.stderr


def test_compile_results_carry_ptxas_notes():
    from ptxgen.runtime import CompileResult

    log = ("ptxas info    : Compiling entry function 'g' for 'sm_90a'\n"
           "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions "
           "are serialized due to insufficient register resources for the wgmma pipeline in "
           "the function 'g'\n"
           "ptxas info    : Used 168 registers\n")
    r = CompileResult(b"", "sm_90a", log, "g")
    assert r.notes == [log.splitlines()[1].strip()] and r.registers == 168
    assert CompileResult(b"", "sm_90a", "ptxas info    : Used 8 registers\n", "g").notes == []
