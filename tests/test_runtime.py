"""Runtime, offline half: nvJitLink compiles, PTXCompileError, the disk cache.  No GPU needed."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from ptxgen.errors import PTXCompileError
from ptxgen.runtime import cache, compile as comp, driver
from ptxgen.runtime import (clear_memory_cache, compile_ptx, driver_version, parse_info_log,
                            reset_stats, set_memory_cache_size, stats)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PTX_SM80 = textwrap.dedent("""\
    .version 7.0
    .target sm_80
    .address_size 64

    .visible .entry add1(
        .param .u64 p_out,
        .param .u64 p_in,
        .param .u32 n
    )
    {
        .reg .pred %p<2>;
        .reg .b32 %r<8>;
        .reg .b64 %rd<8>;
        .reg .f32 %f<4>;
        ld.param.u64 %rd1, [p_out];
        ld.param.u64 %rd2, [p_in];
        ld.param.u32 %r1, [n];
        mov.u32 %r2, %tid.x;
        setp.ge.u32 %p1, %r2, %r1;
        @%p1 bra DONE;
        mul.wide.u32 %rd3, %r2, 4;
        add.s64 %rd4, %rd2, %rd3;
        ld.global.f32 %f1, [%rd4];
        add.f32 %f1, %f1, 0f3F800000;
        add.s64 %rd5, %rd1, %rd3;
        st.global.f32 [%rd5], %f1;
    DONE:
        ret;
    }
    """)

PTX_SM90A = textwrap.dedent("""\
    .version 8.0
    .target sm_90a
    .address_size 64

    .visible .entry smem90(.param .u64 p)
    {
        .reg .b32 %r<4>;
        .reg .b64 %rd<2>;
        .shared .align 16 .b8 buf[4096];
        ld.param.u64 %rd1, [p];
        mov.u32 %r1, %tid.x;
        shl.b32 %r1, %r1, 2;
        mov.u32 %r2, buf;
        add.u32 %r2, %r2, %r1;
        st.shared.u32 [%r2], %r1;
        bar.sync 0;
        ld.shared.u32 %r3, [%r2+4];
        st.global.u32 [%rd1], %r3;
        ret;
    }
    """)

PTX_SM100A = PTX_SM90A.replace(".version 8.0", ".version 8.6").replace("sm_90a", "sm_100a") \
    .replace("smem90", "smem100")

# line 13 of this module adds a .b32 register to a .b64 one
PTX_BAD = PTX_SM90A.replace("add.u32 %r2, %r2, %r1;", "add.s64 %rd1, %rd1, %r1;")
BAD_LINE = PTX_BAD.splitlines().index("    add.s64 %rd1, %rd1, %r1;") + 1


def _spill_ptx(arch="sm_90a"):
    n = 64
    body = [f"ld.volatile.global.f32 %f{i}, [%rd1+{4 * i}];" for i in range(n)]
    body += [f"add.f32 %f{i}, %f{i}, %f{(i + 1) % n};" for i in range(n)]
    body += [f"st.volatile.global.f32 [%rd1+{4 * i}], %f{i};" for i in range(n)]
    return (f".version 8.0\n.target {arch}\n.address_size 64\n"
            ".visible .entry spill(.param .u64 p)\n.maxnreg 24\n{\n"
            ".reg .f32 %f<70>;\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\n"
            + "\n".join(body) + "\nret;\n}\n")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own disk cache and an empty in-process cache."""
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PTXGEN_DISK_CACHE", raising=False)
    monkeypatch.delenv("PTXGEN_DUMP_DIR", raising=False)
    monkeypatch.delenv("PTXGEN_JIT_ISOLATE", raising=False)
    clear_memory_cache()
    reset_stats()
    yield tmp_path


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(extra)
    return env


# ---- compiling ---------------------------------------------------------------------------
@pytest.mark.parametrize("ptx,arch,entry", [(PTX_SM80, "sm_80", "add1"),
                                            (PTX_SM80, "sm_90a", "add1"),
                                            (PTX_SM90A, "sm_90a", "smem90"),
                                            (PTX_SM100A, "sm_100a", "smem100")],
                         ids=["sm80", "sm80-on-sm90a", "sm90a", "sm100a"])
def test_compile_targets(ptx, arch, entry):
    r = compile_ptx(ptx, arch, name=entry)
    assert r.cubin[:4] == b"\x7fELF" and r.arch == arch
    assert r.registers > 0 and r.spill_bytes == 0
    assert entry in r.functions and f"Compiling entry function '{entry}'" in r.log
    if entry.startswith("smem"):
        assert r.shared_bytes == 4096


def test_spills_are_counted():
    r = compile_ptx(_spill_ptx(), "sm_90a", name="spill")
    f = r.functions["spill"]
    assert f["spill_stores"] > 0 and f["spill_loads"] > 0
    assert r.spill_bytes == f["spill_stores"] + f["spill_loads"]
    assert r.registers <= 24


def test_parse_info_log_exact():
    log = ("ptxas info    : 0 bytes gmem\n"
           "ptxas info    : Compiling entry function 'a' for 'sm_90a'\n"
           "ptxas info    : Function properties for a\n"
           "ptxas         .     488 bytes stack frame, 560 bytes spill stores, 552 bytes spill loads\n"
           "ptxas info    : Used 24 registers, used 1 barriers, 4096 bytes smem\n"
           "ptxas info    : Compiling entry function 'b' for 'sm_90a'\n"
           "ptxas info    : Function properties for b\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 8 registers, used 0 barriers\n"
           "info    : Function properties for 'a':\n"
           "info    : used 24 registers, used 7 barriers, 488 stack, 5120 bytes smem\n")
    assert parse_info_log(log) == {
        "a": dict(registers=24, shared_bytes=4096, spill_stores=560, spill_loads=552,
                  stack_bytes=488),
        "b": dict(registers=8, shared_bytes=0, spill_stores=0, spill_loads=0, stack_bytes=0)}
    r = comp._result(b"x", "sm_90a", log, "b")
    assert (r.registers, r.shared_bytes, r.spill_bytes) == (8, 0, 0)
    r = comp._result(b"x", "sm_90a", log, "kernel")  # unknown name: the whole module
    assert (r.registers, r.shared_bytes, r.spill_bytes) == (24, 4096, 1112)


def test_compile_error_message():
    def origin(n):
        return f"add(%rd1, %r1)  at user_kernel.py:{n + 100}" if n == BAD_LINE else None

    with pytest.raises(PTXCompileError) as ei:
        compile_ptx(PTX_BAD, "sm_90a", name="badk", line_origin=origin)
    e = ei.value
    msg = str(e)
    assert (f"ptxas application ptx input, line {BAD_LINE}; "
            "error   : Arguments mismatch for instruction 'add'") in msg
    assert "ptxas fatal   : Ptx assembly aborted due to errors" in msg
    lines = PTX_BAD.splitlines()
    assert f"> {BAD_LINE:5d} | {lines[BAD_LINE - 1]}" in msg
    for k in (-3, -1, 1, 3):  # +-3 lines of context
        assert f"   {BAD_LINE + k:5d} | {lines[BAD_LINE + k - 1]}" in msg
    assert f"   {BAD_LINE - 4:5d} |" not in msg
    assert f"from: add(%rd1, %r1)  at user_kernel.py:{BAD_LINE + 100}" in msg
    assert "ptxas -arch=sm_90a " in msg
    assert e.ptx_line == BAD_LINE and "Arguments mismatch" in e.log
    path = e.repro.split()[-1]
    assert e.repro == f"ptxas -arch=sm_90a {path}" and open(path).read() == PTX_BAD
    assert stats()["disk_writes"] == 0  # failures are never cached


def test_compile_error_without_line_and_broken_origin(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_DUMP_DIR", str(tmp_path / "dump"))
    with pytest.raises(PTXCompileError) as ei:  # .target higher than -arch: no line number
        compile_ptx(PTX_SM90A, "sm_80", name="k")
    assert ("ptxas fatal   : SM version specified by .target is higher than default SM "
            "version assumed") in str(ei.value)
    assert ei.value.ptx_line is None and "PTX line" not in str(ei.value)
    assert ei.value.repro == f"ptxas -arch=sm_80 {tmp_path / 'dump' / 'k.ptx'}"

    def boom(n):
        raise KeyError(n)
    with pytest.raises(PTXCompileError, match=r"line_origin failed: KeyError"):
        compile_ptx(PTX_BAD, "sm_90a", name="k2", line_origin=boom)


def test_ptxas_crash_is_an_error():
    """ld.global.v8.b16 segfaults ptxas; it is compiled in a child and reported."""
    ptx = PTX_SM100A.replace("ld.shared.u32 %r3, [%r2+4];",
                             ".reg .b16 %h<8>;\n    ld.global.v8.b16 {%h0,%h1,%h2,%h3,%h4,%h5,%h6,"
                             "%h7}, [%rd1];\n    ld.shared.u32 %r3, [%r2+4];")
    line = ptx.splitlines().index(next(l for l in ptx.splitlines() if ".v8.b16" in l)) + 1
    with pytest.raises(PTXCompileError) as ei:
        compile_ptx(ptx, "sm_100a", name="crash")
    msg = str(ei.value)
    assert "crashed with signal" in msg and "gave no message" in msg
    assert f"line {line}: a .v8 vector of 16-bit elements" in msg
    assert ei.value.ptx_line == line and "ptxas -arch=sm_100a" in msg


def test_isolated_mode_compiles_normally(monkeypatch):
    monkeypatch.setenv("PTXGEN_JIT_ISOLATE", "1")
    r = compile_ptx(PTX_SM80, "sm_80", name="add1")
    monkeypatch.delenv("PTXGEN_JIT_ISOLATE")
    clear_memory_cache()
    monkeypatch.setenv("PTXGEN_DISK_CACHE", "0")
    r2 = compile_ptx(PTX_SM80, "sm_80", name="add1")
    assert r.cubin == r2.cubin and r.functions == r2.functions


# ---- caches ------------------------------------------------------------------------------
def test_memory_cache():
    r1 = compile_ptx(PTX_SM80, "sm_80", name="add1")
    r2 = compile_ptx(PTX_SM80, "sm_80", name="add1")
    assert r1 is r2
    s = stats()
    assert (s["jit_compiles"], s["memory_hits"], s["disk_writes"]) == (1, 1, 1)
    assert compile_ptx(PTX_SM80, "sm_90a", name="add1") is not r1       # arch in the key
    assert compile_ptx(PTX_SM80, "sm_80", name="add1", options=("-lineinfo",)) is not r1


def test_cache_key_and_format():
    k = cache.key("x", "sm_90a")
    assert len(k) == 64 and k != cache.key("x", "sm_100a") != cache.key("x", "sm_90a", ("-O3",))
    meta = {"nvjitlink": "13.0", "driver": "none"}
    blob = cache.encode(k, meta, "log text", b"\x7fELFabc")
    assert blob.startswith(cache.MAGIC)
    assert cache.decode(blob) == cache.Entry(k, meta, "log text", b"\x7fELFabc")
    assert cache.decode(blob[:-1]) is None                      # truncated
    assert cache.decode(blob[:-1] + b"X") is None               # corrupted
    assert cache.decode(b"junk" + blob[4:]) is None             # bad magic


def test_cache_key_loads_no_library():
    """The key is a hash of PTX, arch and options: computing it (and missing the cache) must
    not import the driver bindings or nvJitLink."""
    code = ("import sys; from ptxgen.runtime import cache\n"
            "k = cache.key('x', 'sm_90a'); assert cache.load(k) is None\n"
            "print(sorted(m for m in sys.modules if m.startswith('cuda')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_env(PTXGEN_CACHE_DIR=os.path.join(ROOT, "no-such-dir")),
                         check=True).stdout
    assert out.strip() == "[]"


def test_disk_cache_hit_in_second_process(isolated_cache):
    r = compile_ptx(PTX_SM90A, "sm_90a", name="smem90")
    files = os.listdir(isolated_cache / "cache")
    assert len(files) == 1 and files[0].endswith(".cubin")
    code = ("import json, hashlib; from ptxgen.runtime import compile_ptx, stats\n"
            "import sys; ptx = sys.stdin.read()\n"
            "r = compile_ptx(ptx, 'sm_90a', name='smem90')\n"
            "print(json.dumps(dict(stats(), sha=hashlib.sha256(r.cubin).hexdigest(),"
            " shared=r.shared_bytes, regs=r.registers)))")
    out = subprocess.run([sys.executable, "-c", code], input=PTX_SM90A, capture_output=True,
                         text=True, env=_env(), check=True).stdout
    s = json.loads(out)
    assert s["jit_compiles"] == 0 and s["disk_hits"] == 1
    import hashlib
    assert s["sha"] == hashlib.sha256(r.cubin).hexdigest()
    assert (s["shared"], s["regs"]) == (r.shared_bytes, r.registers)  # log survives the disk


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_cache_entry_is_rebuilt(isolated_cache, damage):
    r = compile_ptx(PTX_SM80, "sm_80", name="add1")
    path = cache.path_for(cache.key(PTX_SM80, "sm_80"))
    data = open(path, "rb").read()
    bad = {"truncate": data[:len(data) // 2], "flip": data[:-10] + b"\x00" * 10,
           "empty": b""}[damage]
    open(path, "wb").write(bad)
    clear_memory_cache()
    reset_stats()
    r2 = compile_ptx(PTX_SM80, "sm_80", name="add1")
    s = stats()
    assert s["disk_hits"] == 0 and s["jit_compiles"] == 1 and s["disk_writes"] == 1
    assert s["disk_corrupt"] == 1
    assert r2.cubin == r.cubin
    e = cache.decode(open(path, "rb").read())                   # rewritten, valid
    assert (e.key, e.log, e.cubin) == (cache.key(PTX_SM80, "sm_80"), r2.log, r.cubin)


def test_swapped_or_renamed_entry_is_rebuilt(isolated_cache):
    """Each entry records its own key: a file holding another kernel's cubin (renamed, or
    two swapped) is detected, rebuilt and rewritten, never loaded for the wrong PTX."""
    ra = compile_ptx(PTX_SM80, "sm_80", name="add1")
    rb = compile_ptx(PTX_SM90A, "sm_90a", name="smem90")
    pa = cache.path_for(cache.key(PTX_SM80, "sm_80"))
    pb = cache.path_for(cache.key(PTX_SM90A, "sm_90a"))
    a, b = open(pa, "rb").read(), open(pb, "rb").read()
    open(pa, "wb").write(b)          # swap the two files
    open(pb, "wb").write(a)
    clear_memory_cache()
    reset_stats()
    ra2 = compile_ptx(PTX_SM80, "sm_80", name="add1")
    rb2 = compile_ptx(PTX_SM90A, "sm_90a", name="smem90")
    s = stats()
    assert (s["disk_mismatch"], s["disk_hits"], s["jit_compiles"], s["disk_writes"]) == \
        (2, 0, 2, 2)
    assert (ra2.cubin, rb2.cubin) == (ra.cubin, rb.cubin)
    for path, k, cubin in ((pa, cache.key(PTX_SM80, "sm_80"), ra.cubin),
                           (pb, cache.key(PTX_SM90A, "sm_90a"), rb.cubin)):
        e = cache.decode(open(path, "rb").read())       # rewritten in place, with its own key
        assert (e.key, e.cubin) == (k, cubin)
    clear_memory_cache()
    reset_stats()
    compile_ptx(PTX_SM80, "sm_80", name="add1")
    assert stats()["disk_hits"] == 1 and stats()["disk_mismatch"] == 0


def test_entry_records_tool_versions(isolated_cache, monkeypatch):
    """Versions live in the entry, checked when it is read: another nvJitLink (or, once a
    driver is in use, another driver) makes the entry stale and it is rebuilt."""
    compile_ptx(PTX_SM80, "sm_80", name="add1")
    k = cache.key(PTX_SM80, "sm_80")
    e = cache.decode(open(cache.path_for(k), "rb").read())
    assert e.meta["nvjitlink"] == comp.nvjitlink_version() != "none"
    assert e.meta["python"] == sys.prefix and e.meta["driver"] in ("none", driver_version())
    path = e.meta["nvjitlink_lib"].rsplit("|", 2)[0]
    assert path and os.path.isfile(path)

    def rewrite(**changes):
        open(cache.path_for(k), "wb").write(
            cache.encode(k, dict(e.meta, **changes), e.log, e.cubin))
        clear_memory_cache()
        reset_stats()
        compile_ptx(PTX_SM80, "sm_80", name="add1")
        s = stats()
        return s["disk_hits"], s["disk_stale"]

    assert rewrite() == (1, 0)
    # the library file that made it is unchanged: its recorded version is not re-asked
    monkeypatch.setattr(comp, "_nvjitlink_version", ["99.9"])
    assert rewrite() == (1, 0)
    monkeypatch.setattr(comp, "_nvjitlink_version", [])
    # another library file (or the same one changed): nvJitLink is asked, and it differs
    assert rewrite(nvjitlink="12.0", nvjitlink_lib="/gone/libnvJitLink.so|1|2") == (0, 1)
    assert rewrite(nvjitlink_lib="/gone/libnvJitLink.so|1|2") == (1, 0)   # same version
    assert rewrite(nvjitlink="12.0", python="/another/venv") == (0, 1)
    # the driver counts once one is in use; an offline entry ("none") suits any driver
    monkeypatch.setattr(driver, "loaded_driver_version", lambda: "12080")
    assert rewrite(driver="13000") == (0, 1)
    assert rewrite(driver="12080") == (1, 0)
    assert rewrite(driver="none") == (1, 0)


def test_environments_sharing_a_cache_keep_their_own_entries(isolated_cache, monkeypatch):
    """Two Python environments (say, with different nvJitLink versions) using one cache
    directory each keep their entry, instead of rebuilding and overwriting the other's."""
    monkeypatch.setattr(cache, "_ENV_TAG", "venv0001")
    compile_ptx(PTX_SM80, "sm_80", name="add1")
    monkeypatch.setattr(cache, "_ENV_TAG", "venv0002")
    clear_memory_cache()
    compile_ptx(PTX_SM80, "sm_80", name="add1")
    k = cache.key(PTX_SM80, "sm_80")
    assert sorted(os.listdir(isolated_cache / "cache")) == [f"{k}.venv0001.cubin",
                                                             f"{k}.venv0002.cubin"]
    monkeypatch.setattr(cache, "_ENV_TAG", "venv0001")
    clear_memory_cache()
    reset_stats()
    compile_ptx(PTX_SM80, "sm_80", name="add1")
    assert (stats()["disk_hits"], stats()["jit_compiles"]) == (1, 0)


def test_memory_cache_is_bounded_lru():
    prev = set_memory_cache_size(2)
    try:
        a = compile_ptx(PTX_SM80, "sm_80", name="add1")
        b = compile_ptx(PTX_SM80, "sm_90a", name="add1")
        assert compile_ptx(PTX_SM80, "sm_80", name="add1") is a       # a is now the newest
        compile_ptx(PTX_SM90A, "sm_90a", name="smem90")               # evicts b
        assert len(comp._memo) == 2
        assert compile_ptx(PTX_SM80, "sm_80", name="add1") is a
        reset_stats()
        b2 = compile_ptx(PTX_SM80, "sm_90a", name="add1")
        assert b2 is not b and b2.cubin == b.cubin
        assert (stats()["memory_hits"], stats()["disk_hits"]) == (0, 1)   # from disk again
        assert set_memory_cache_size(0) == 2 and len(comp._memo) == 0
        compile_ptx(PTX_SM80, "sm_80", name="add1")
        assert len(comp._memo) == 0
        with pytest.raises(ValueError, match="memory cache size must be >= 0, got -1"):
            set_memory_cache_size(-1)
    finally:
        set_memory_cache_size(prev)
    assert prev == 128


def test_memory_cache_size_from_environment():
    code = ("from ptxgen.runtime import compile as c; print(c._memo_max[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_env(PTXGEN_MEMORY_CACHE_SIZE="7"), check=True).stdout
    assert out.strip() == "7"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_env(PTXGEN_MEMORY_CACHE_SIZE="lots"))
    assert p.returncode != 0 and ("PTXGEN_MEMORY_CACHE_SIZE='lots': expected a count of "
                                  "cubins >= 0 (0 turns the in-memory cache off)") in p.stderr


def test_disk_cache_disabled(isolated_cache, monkeypatch):
    monkeypatch.setenv("PTXGEN_DISK_CACHE", "0")
    compile_ptx(PTX_SM80, "sm_80", name="add1")
    assert not (isolated_cache / "cache").exists() and stats()["disk_writes"] == 0


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("PTXGEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == str(tmp_path / "xdg" / "ptxgen")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == str(tmp_path / "home" / ".cache" / "ptxgen")


def test_concurrent_writers_leave_a_valid_entry(isolated_cache):
    """4 processes compile the same kernel and rewrite its entry 50 times each, at once."""
    code = ("import sys; from ptxgen.runtime import compile_ptx, cache\n"
            "ptx = sys.stdin.read()\n"
            "r = compile_ptx(ptx, 'sm_80', name='add1')\n"
            "k = cache.key(ptx, 'sm_80')\n"
            "for _ in range(50):\n"
            "    assert cache.store(k, r.log, r.cubin, {'nvjitlink': 'x'})\n"
            "    e = cache.load(k)\n"
            "    assert e is not None and e[1] == r.cubin, 'torn read'\n"
            "print('ok')")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env()) for _ in range(4)]
    for p in procs:
        p.stdin.write(PTX_SM80)
        p.stdin.close()
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    assert all(rc == 0 and out.strip() == "ok" for rc, out, _ in results), results
    names = os.listdir(isolated_cache / "cache")
    assert len(names) == 1 and not names[0].startswith(".tmp")
    entry = cache.load(cache.key(PTX_SM80, "sm_80"))
    assert entry is not None and entry[1][:4] == b"\x7fELF"


def test_dump_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_DUMP_DIR", str(tmp_path / "dump"))
    r = compile_ptx(PTX_SM80, "sm_80", name="my kernel/1")
    assert (tmp_path / "dump" / "my_kernel_1.ptx").read_text() == PTX_SM80
    assert (tmp_path / "dump" / "my_kernel_1.cubin").read_bytes() == r.cubin


def test_no_pickle_in_runtime():
    src = "".join(open(os.path.join(ROOT, "ptxgen", "runtime", f)).read()
                  for f in os.listdir(os.path.join(ROOT, "ptxgen", "runtime")) if f.endswith(".py"))
    assert "import pickle" not in src and "import marshal" not in src
