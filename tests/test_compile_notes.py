"""ptxas's notes surfaced: a kernel's compile (k.compile(), the compile before its first launch)
turns each note its author should hear (ptxas warnings, C7xxx advice, spills) into a
PtxasWarning naming the kernel, once per compile; the setmaxnreg note of nvJitLink's
relocatable compile (and what follows from it) stays quiet where the runtime loads the kernel
from its PTX through the driver JIT.  CPU only: nvJitLink needs no GPU, launches go to the
stand-in driver."""
import warnings

import pytest

import ptxgen as pg
from ptxgen.errors import PtxasWarning
from ptxgen.runtime import CompileResult, clear_memory_cache
from ptxgen.runtime.compile import jit_from_ptx, user_notes
from support import gemm_cases as G
from support.fakecuda import (FLOAT32, FakeDriver, FakeTorchTensor, install,
                              install_fake_torch, register_torch_dtypes)

pytest.importorskip("cuda.bindings.nvjitlink")

C7504 = ("ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain "
         "compatibility across compilation units.")
C7512 = ("ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are "
         "serialized due to insufficient register resources for the function 'g'")
C7510 = ("ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are "
         "serialized due to the presence of Extern calls in the function 'g'")
LOG = "\n".join([C7504, "ptxas info    : Compiling entry function 'g' for 'sm_90a'",
                 "ptxas info    : Function properties for g",
                 "ptxas         .     0 bytes stack frame, 40 bytes spill stores, 48 bytes spill "
                 "loads", C7512, C7510,
                 "ptxas warning : Unresolved extern function 'h'",
                 "ptxas info    : Used 168 registers"]) + "\n"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """A compile of each test is new: its own disk cache, an empty memory cache."""
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PTXGEN_DISK_CACHE", raising=False)
    clear_memory_cache()
    yield
    clear_memory_cache()


def test_every_note_of_a_cubin_that_runs_is_heard():
    assert user_notes(CompileResult(b"", "sm_90a", LOG, "g"), jit=False) == [
        "ptxas info : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain "
        "compatibility across compilation units.",
        "ptxas info : (C7512) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to insufficient register resources for the function 'g'",
        "ptxas info : (C7510) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to the presence of Extern calls in the function 'g'",
        "ptxas warning : Unresolved extern function 'h'",
        "'g' spills registers to local memory (40 bytes spill stores, 48 bytes spill loads)"]


def test_a_kernel_the_driver_jit_loads_keeps_only_notes_not_about_setmaxnreg():
    """The relocatable compile ignored setmaxnreg; its register shortfall (C7512, spills) is
    not the whole-program code the driver JIT makes."""
    assert user_notes(CompileResult(b"", "sm_90a", LOG, "g"), jit=True) == [
        "ptxas info : (C7510) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to the presence of Extern calls in the function 'g'",
        "ptxas warning : Unresolved extern function 'h'"]


def test_a_quiet_log_has_no_notes():
    log = ("ptxas info    : Compiling entry function 'g' for 'sm_90a'\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 8 registers\n")
    assert user_notes(CompileResult(b"", "sm_90a", log, "g"), jit=False) == []


def test_the_runtime_jit_loads_exactly_the_kernels_with_setmaxnreg():
    ws = G.make_warpspec_kernel()
    assert jit_from_ptx(ws.ptx("sm_90a")) and ws.built("sm_90a").codegen.whole_program
    k = spilling_kernel()
    assert not jit_from_ptx(k.ptx("sm_90a")) and not k.built("sm_90a").codegen.whole_program


N = 320     # live values per thread: more than the 255 registers a thread has


def spilling_kernel():
    @pg.kernel(grid=(1,), block=(32,))
    def spilly(A: pg.Tensor((N * 32,), "float32"), B: pg.Tensor((N * 32,), "float32")):
        tx = pg.thread_id(32)
        r = pg.alloc_local((N,), "float32")
        for i in range(N):
            r[i] = A[i * 32 + tx]
        for i in range(N):
            B[i * 32 + tx] = r[N - 1 - i] * r[i]
    return spilly


def spill_message(res) -> str:
    f = res.functions["spilly"]
    return (f"kernel 'spilly' (sm_90a): 'spilly' spills registers to local memory "
            f"({f['spill_stores']} bytes spill stores, {f['spill_loads']} bytes spill loads)")


def test_a_spilling_kernel_warns_once_per_compile_at_the_compile_line():
    k = spilling_kernel()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = k.compile("sm_90a")
        again = k.compile("sm_90a")          # the memoized compile: nothing new to say
    assert again is res
    assert [(w.category, str(w.message)) for w in got] == [(PtxasWarning, spill_message(res))]
    assert got[0].filename == __file__


def test_a_warning_from_python_c_is_shown_not_raised():
    """In `python -c` (and the REPL) __main__'s loader has no source to give the warning's
    line: the warning still shows, at the user's line, and the call goes on."""
    import subprocess
    import sys
    code = "from ptxgen.errors import warn_user\nwarn_user('too many registers', UserWarning)\n" \
           "print('went on')"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "went on\n"
    assert p.stderr == "<string>:2: UserWarning: too many registers\n"


def test_the_setmaxnreg_note_of_a_jit_loaded_kernel_stays_quiet():
    k = G.make_warpspec_kernel()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = k.compile("sm_90a")
    assert [n for n in res.notes if "(C7504)" in n]          # nvJitLink did say it
    assert [w for w in got if w.category is PtxasWarning] == []


def test_the_first_launch_warns_and_later_launches_do_not(monkeypatch):
    fake = install(monkeypatch, FakeDriver(archs=((9, 0),)))
    register_torch_dtypes(monkeypatch)
    install_fake_torch(monkeypatch, initialized=True, stream=lambda dev: 0)
    k = spilling_kernel()
    a = FakeTorchTensor(fake.alloc(0), (N * 32,), 0, FLOAT32)
    b = FakeTorchTensor(fake.alloc(0), (N * 32,), 0, FLOAT32)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k(a, b)
        k(a, b)
        k.compile("sm_90a")                  # the launch's compile, memoized
    assert len(fake.launches) == 2
    assert [(w.category, str(w.message)) for w in got] == [
        (PtxasWarning, spill_message(k.compile("sm_90a")))]
