"""Instruction forms (templates/isa.ptx.j2 through ptxgen.target.forms): the exact text of
each form family, every library instruction records its form, and the disk cache of
rendered forms (stale / corrupt / tampered entries, template changes, unwritable
directories, a fresh process without jinja)."""
import os
import subprocess
import sys
import warnings

import pytest

import ptxgen as pg
from ptxgen.errors import ArchError
from ptxgen.target import check_opcode, gate_for, parse_target
from ptxgen.target import forms
from ptxgen.target.forms import form, opcode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- exact texts
@pytest.mark.parametrize("name,args,kw,text", [
    ("ld", ("global", "u32", 4, ".nc"), {}, "ld.global.nc.v4.u32"),
    ("st", ("shared", "u16"), {}, "st.shared.u16"),
    ("mov", ("b64",), {}, "mov.b64"),
    ("cvt", ("u16", "u32"), {}, "cvt.u16.u32"),
    ("cvt", ("bf16", "f32"), {"rnd": ".rn"}, "cvt.rn.bf16.f32"),
    ("ternary", ("bfe", "s32"), {}, "bfe.s32"),
    ("bfi", ("b32",), {}, "bfi.b32"),
    ("setp", ("ne", "b32"), {}, "setp.ne.b32"),
    ("cvta", ("global",), {}, "cvta.global.u64"),
    ("cvta", ("shared", True, "u32"), {}, "cvta.to.shared.u32"),
    ("ldmatrix", (4,), {}, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
    ("ldmatrix", (2, True), {}, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"),
    ("stmatrix", (1,), {"trans": True}, "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16"),
    ("mbarrier_init", (), {}, "mbarrier.init.shared.b64"),
    ("mbarrier_arrive", ("shared::cta",), {}, "mbarrier.arrive.shared::cta.b64"),
    ("mbarrier_arrive_expect_tx", (), {}, "mbarrier.arrive.expect_tx.shared.b64"),
    ("mbarrier_wait", ("try_wait",), {}, "mbarrier.try_wait.parity.shared.b64"),
    ("mbarrier_wait", ("test_wait",), {}, "mbarrier.test_wait.parity.shared.b64"),
    ("mbarrier_inval", (), {}, "mbarrier.inval.shared.b64"),
    ("fence_proxy_async", (), {}, "fence.proxy.async"),
    ("fence_proxy_async", ("shared::cta",), {}, "fence.proxy.async.shared::cta"),
    ("fence_mbarrier_init", (), {}, "fence.mbarrier_init.release.cluster"),
    ("cp_async_bulk", ("shared::cluster", "global", "mbarrier::complete_tx::bytes"), {},
     "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"),
    ("cp_async_bulk", ("global", "shared::cta", "bulk_group"), {},
     "cp.async.bulk.global.shared::cta.bulk_group"),
    ("cp_async_bulk_tensor", (2, "shared::cluster", "global", "mbarrier::complete_tx::bytes"), {},
     "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"),
    ("cp_async_bulk_commit_group", (), {}, "cp.async.bulk.commit_group"),
    ("cp_async_bulk_wait_group", (), {}, "cp.async.bulk.wait_group"),
    ("cp_async_bulk_wait_group", (True,), {}, "cp.async.bulk.wait_group.read"),
    ("prefetch_tensormap", (), {}, "prefetch.tensormap"),
    ("tcgen05_alloc", (2,), {}, "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32"),
    ("tcgen05_dealloc", (), {}, "tcgen05.dealloc.cta_group::1.sync.aligned.b32"),
    ("tcgen05_relinquish_alloc_permit", (1,), {},
     "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned"),
    ("tcgen05_fence", ("before",), {}, "tcgen05.fence::before_thread_sync"),
    ("tcgen05_fence", ("after",), {}, "tcgen05.fence::after_thread_sync"),
    ("tcgen05_mma", ("f16",), {}, "tcgen05.mma.cta_group::1.kind::f16"),
    ("tcgen05_mma", ("tf32", 2), {}, "tcgen05.mma.cta_group::2.kind::tf32"),
    ("tcgen05_commit", (), {},
     "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64"),
    ("tcgen05_ld", ("32x32b", 32), {}, "tcgen05.ld.sync.aligned.32x32b.x32.b32"),
    ("tcgen05_ld", ("16x256b", 4), {"pack": True},
     "tcgen05.ld.sync.aligned.16x256b.x4.pack::16b.b32"),
    ("tcgen05_st", ("32x32b", 8, True), {}, "tcgen05.st.sync.aligned.32x32b.x8.unpack::16b.b32"),
    ("tcgen05_wait", ("ld",), {}, "tcgen05.wait::ld.sync.aligned"),
    ("tcgen05_wait", ("st",), {}, "tcgen05.wait::st.sync.aligned"),
    ("tcgen05_cp", ("128x256b",), {}, "tcgen05.cp.cta_group::1.128x256b"),
])
def test_opcode_text(name, args, kw, text):
    assert opcode(name, *args, **kw) == text


@pytest.mark.parametrize("name,args,fields,text", [
    ("bfi", ("b32",), dict(d="%r1", a="%r2", b="%r1", c=8, n=8), "bfi.b32 %r1, %r2, %r1, 8, 8;"),
    ("bar_warp_sync", (), dict(a="0xffffffff"), "bar.warp.sync 0xffffffff;"),
    ("cvta_global", (), dict(d="%rd1", a="%rd1"), "cvta.to.global.u64 %rd1, %rd1;"),
    ("reg_decl", (), dict(t=".b32", p="%r", n=5), ".reg .b32 %r<5>;"),
    ("array_decl", ("shared",), dict(align=16, name="sm", n=512), ".shared .align 16 .b8 sm[512];"),
    ("extern_array_decl", ("shared",), dict(align=1024, name="arena"),
     ".extern .shared .align 1024 .b8 arena[];"),
    ("global_bytes_decl", (), dict(name="msg", n=3, v="104, 105, 0"),
     ".global .align 1 .b8 msg[3] = {104, 105, 0};"),
    ("param", ("s32",), dict(name="n"), ".param .s32 n"),
    ("param_ptr", (), dict(align=16, name="A"), ".param .u64 .ptr .global .align 16 A"),
    ("maxntid", (), dict(x=128, y=1, z=1), ".maxntid 128, 1, 1"),
])
def test_full_form_text(name, args, fields, text):
    assert form(name, *args).format(**fields) == text


def _seed_texts():
    with open(forms.SEED, "rb") as f:
        texts = forms.decode(forms.cache_key(), f.read())
    if texts is None:
        pytest.skip("the seed was made for other templates: run scripts/forms_seed.py")
    return list(texts.values()) + ["{d}{a}", "x {{{d}}} y", "ret;", "{a} {a}}}{{ {b}",
                                   "\\n 'q' \"{d}\""]


def test_a_compiled_form_is_the_eval_of_its_own_text():
    """_compiled reuses one code object per shape with the literals swapped in: the same
    function (instructions and the constants they load, parameters) as an eval of the text's
    own lambda (which shares equal literals in one constant slot), and the same text as
    str.format, for every form of the seed."""
    import dis

    def ops(f):
        c = f.__code__
        return [(i.opname, i.argval) for i in dis.get_instructions(c)], c.co_varnames, \
            c.co_argcount, c.co_flags & 0xffff   # not the __future__ flags of the caller

    for text in _seed_texts():
        fields = forms._fields(text)
        got = forms._compiled(text, fields)
        want = eval(f'lambda {"".join(f + ", " for f in fields)}**_: f{text!r}')
        assert ops(got) == ops(want), text
        operands = {f: f"<{i}>" for i, f in enumerate(fields)}
        assert got(**operands, unused=1) == text.format(**operands), text
    assert len(forms._SHAPES) < len(_seed_texts()) // 3


def test_the_shipped_shapes_cover_the_seed():
    """form_shapes.py (written with the seed) holds the code of every shape of the seed's
    forms, as an eval of its lambda compiles it: no form of the seed is compiled at run time."""
    import dis

    from ptxgen.target import form_shapes

    def ops(c):
        return [(i.opname, i.argval) for i in dis.get_instructions(c)], c.co_varnames
    for key, code in form_shapes.SHAPES.items():
        assert ops(code) == ops(eval(forms.shape_source(*key)).__code__), key
    for key, text in forms._disk.prime().items():
        if not key.startswith("('<module>'"):
            fields = forms._fields(text)
            assert (forms._shape(text)[0], "".join(f + ", " for f in fields)) in \
                form_shapes.SHAPES, text


def test_plain_is_fields_over_many_texts():
    """_plain(texts) (the seed's check on import) accepts exactly what _fields accepts."""
    good = _seed_texts()
    assert forms._plain(good)
    for bad in ("{x.y}", "{0}", "{if}", "{_}", "{d!r}", "{d:>4}", "{d", "d}", "{}", "{a[0]}",
                "{ d}"):
        with pytest.raises(ValueError):
            forms._fields(bad)
        assert not forms._plain([bad]) and not forms._plain(good[:5] + [bad] + good[5:]), bad


def test_debug_trap_block_text():
    text = form("debug_trap_block").format(l="$L_oob_1", r="%rd9", name="__oob_msg_0")
    assert text.split("\n") == [
        "$L_oob_1:", "    mov.u64 %rd9, __oob_msg_0;", "    cvta.global.u64 %rd9, %rd9;",
        "    {", "    .param .b64 fmt_param;", "    .param .b64 args_param;",
        "    .param .b32 ret_param;", "    st.param.b64 [fmt_param], %rd9;",
        "    st.param.b64 [args_param], 0;",
        "    call.uni (ret_param), vprintf, (fmt_param, args_param);", "    }", "    trap;"]


@pytest.mark.parametrize("name,args,arch", [
    ("ldmatrix", (4,), "sm_70"), ("stmatrix", (4,), "sm_80"), ("mbarrier_init", (), "sm_75"),
    ("mbarrier_arrive_expect_tx", (), "sm_80"), ("mbarrier_wait", ("try_wait",), "sm_80"),
    ("fence_proxy_async", (), "sm_80"), ("fence_mbarrier_init", (), "sm_80"),
    ("cp_async_bulk_commit_group", (), "sm_80"), ("prefetch_tensormap", (), "sm_80"),
    ("cp_async_bulk_tensor", (1, "shared::cluster", "global", "mbarrier::complete_tx::bytes"),
     "sm_80"),
    ("tcgen05_fence", ("after",), "sm_90a"), ("tcgen05_ld", ("32x32b", 1), "sm_100"),
])
def test_new_forms_are_gated(name, args, arch):
    op = opcode(name, *args)
    assert gate_for(op) is not None
    with pytest.raises(ArchError):
        check_opcode(op, parse_target(arch))


# ---------------------------------------------------------------- every library Instr has a form
def _kernels():
    """(label, build) over the examples, the emit benchmarks, one bench config per variant
    and dtype, and the tcgen05 / mbarrier / copy kernels of the other tests."""
    sys.path[:0] = [os.path.join(ROOT, "benchmarks")]
    import importlib

    import emit_speed
    from test_alloc import _mbar_kernel
    from test_copy_variants import reg_kernel
    from test_tcgen05_mma import gemm_kernel, io_kernel

    from ptxgen.bench import sweep
    from ptxgen.layout import S, TileLayout, laneid

    for name, f in emit_speed.factories():
        yield name, lambda f=f: f().ptx("sm_90a")
    for mod in ("gemm_sm100", "pool_sm100", "smem_pool_demo", "wgmma_desc_check", "phase_loop",
                "dyn_arena"):
        for k in getattr(importlib.import_module(mod), "KERNELS", []):
            for arch in ("sm_90a", "sm_100a"):   # traced again: the escapes must be seen
                yield f"{mod}:{k.name}@{arch}", \
                    lambda k=k, a=arch: emit_speed._retrace(k)().ptx(a)
    sweep.load_plugins()
    import ptxgen.runtime
    old = ptxgen.runtime.device_arch
    ptxgen.runtime.device_arch = lambda: "sm_90a"
    try:
        for cfg in sweep.expand(dtypes=["float16", "int8"], tiles=["32x64"], size_bytes=1 << 22):
            b = sweep._REGISTRY[cfg.variant].builder(cfg)
            if callable(getattr(b, "ptx", None)):
                yield cfg.label, b.ptx
    finally:
        ptxgen.runtime.device_arch = old
    for kw in ({}, {"scope": "thread"}):
        yield f"gemm {kw}", lambda kw=kw: gemm_kernel(**kw).ptx("sm_100a")
    for store in (True, False):
        yield f"tmem io store={store}", lambda s=store: io_kernel("32x32b", store=s).ptx("sm_100a")
    yield "mbarrier try_wait", lambda: _mbar_kernel(expect_tx=True).ptx("sm_90a")
    yield "mbarrier test_wait", lambda: _mbar_kernel(wait="test_wait", fence=False).ptx("sm_80")
    yield "8-bit registers", lambda: reg_kernel(
        (32, 16), "int8", TileLayout(S[(32, 16):(1 @ laneid, 1)]), "warp", 32).ptx("sm_90a")
    yield "tmem_copy, A from TMEM, inval, prefetch", lambda: _tcgen05_misc().ptx("sm_100a")
    from support import gemm_cases as G
    for c in (G.Case(), G.Case(a_regs=True, ab="float8_e4m3fn", swizzle="64B", ksteps=2),
              G.Case(ab="float16", d="float16")):
        yield f"wgmma {c.name}", lambda c=c: G.make_kernel(c).ptx("sm_90a")
    yield "warp specialization", lambda: G.make_warpspec_kernel().ptx("sm_90a")
    from test_mma_sync import gemm_kernel as mma_kernel
    yield "mma.sync", lambda: mma_kernel("int8", 16, 8, 32, runtime_acc=True).ptx("sm_80")


def _tcgen05_misc():
    from ptxgen.alloc import SMEMPool, TMEMPool

    def k(M: pg.Tensor((128,), "uint8", align=64)):
        tx = pg.thread_id(128)
        pool = SMEMPool()
        As = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        Bs = pool.alloc_tcgen05_mma_AB((128, 64), "bfloat16")
        bar = pool.alloc_mbarrier(2)
        slot = pool.alloc((1,), "uint32")
        pool.commit()
        tmem = TMEMPool(pool, total_cols=256, tmem_addr=slot)
        acc = tmem.alloc((128, 128), "float32")
        a_t = tmem.alloc((128, 64), "bfloat16")
        tmem.commit()
        with pg.if_(tx == 0):
            pg.ptx.tma.prefetch(pg.ptx.tma.map_address(M))
            pg.tile.thread.tmem_copy(a_t, As)
            pg.tile.thread.gemm_async(acc, a_t, Bs, accumulate=False)
            pg.tile.thread.mma_commit(bar)
            pg.ptx.mbarrier.inval(bar[1])
        tmem.dealloc()
    return pg.kernel(k, grid=(1,), block=(128,))


def test_every_library_instr_records_its_form(monkeypatch):
    import ptxgen.builder.ptx as ptxmod
    from ptxgen.emit.codegen import Codegen
    from ptxgen.ir import Instr

    seen, user = [], set()
    s_instr, emit_instr = Codegen.s_Instr, ptxmod.emit_instr

    def record(self, s):
        seen.append((s.opcode, s.form))
        return s_instr(self, s)

    def user_escape(opc, operands, **kw):   # pg.ptx[...] calls the module's emit_instr
        if kw.get("form") is None:
            user.add(opc)
        return emit_instr(opc, operands, **kw)

    monkeypatch.setitem(Codegen._DISPATCH, Instr, record)
    monkeypatch.setattr(ptxmod, "emit_instr", user_escape)
    warnings.simplefilter("ignore")
    built = 0
    for label, build in _kernels():
        try:
            build()
            built += 1
        except (ArchError, pg.PtxgenError):
            pass
    assert built > 30
    macros = forms._macros()
    missing = sorted({op for op, f in seen if f is None and op not in user})
    assert missing == [], f"library instructions without a form: {missing}"
    assert all(hasattr(macros, f) for _, f in seen if f is not None)
    used = {f for _, f in seen}
    assert used >= {"ld", "st", "mov", "cvt", "ternary", "bfi", "setp", "cvta", "ldmatrix",
                    "stmatrix", "mbarrier_init", "mbarrier_arrive", "mbarrier_arrive_expect_tx",
                    "mbarrier_wait", "mbarrier_inval", "fence_proxy_async", "fence_mbarrier_init",
                    "cp_async_bulk", "cp_async_bulk_commit_group", "cp_async_bulk_wait_group",
                    "cp_async_bulk_tensor", "prefetch_tensormap", "tcgen05_alloc",
                    "tcgen05_dealloc", "tcgen05_relinquish_alloc_permit", "tcgen05_fence",
                    "tcgen05_mma", "tcgen05_commit", "tcgen05_ld", "tcgen05_st", "tcgen05_wait",
                    "tcgen05_cp", "mma_sync"}


# ---------------------------------------------------------------- the disk cache
@pytest.fixture
def fresh_forms(monkeypatch, tmp_path):
    """Forms with an empty memory cache and the disk cache in tmp_path/cache, and no seed
    (its texts would come before the file's)."""
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PTXGEN_DISK_CACHE", raising=False)
    monkeypatch.setattr(forms, "SEED", str(tmp_path / "no-seed.txt"))
    forms._clear_memory()
    yield tmp_path / "cache"
    monkeypatch.undo()
    forms.templates_path.cache_clear()
    forms.environment.cache_clear()
    forms._macros.cache_clear()
    forms.module_template.cache_clear()
    forms._clear_memory()


def _cache_file(d):
    files = sorted(d.glob("forms-*.txt"))
    assert len(files) == 1, files
    return files[0]


def _render_some():
    return (opcode("tcgen05_ld", "32x32b", 4),
            form("ld", "global", "u32").format(d="%r1", a="%rd1"), forms._module_format(False))


def test_disk_cache_round_trip(fresh_forms):
    first = _render_some()
    assert forms.flush()
    path = _cache_file(fresh_forms)
    assert forms.cache_key()[:32] in path.name
    forms._clear_memory()
    calls = []
    real = forms._macros
    forms._macros = lambda: calls.append(1) or real()
    try:
        assert _render_some() == first
    finally:
        forms._macros = real
    assert calls == []          # every text came from the file, no render
    assert not forms.flush()    # nothing new to write


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other key", "bad sha",
                                    "tampered entry", "keyword field"])
def test_corrupt_or_stale_cache_is_ignored_and_rebuilt(fresh_forms, damage):
    first = _render_some()
    forms.flush()
    path = _cache_file(fresh_forms)
    data = path.read_bytes()
    key = forms.cache_key()
    texts = forms.decode(key, data)
    assert texts is not None and forms.encode(key, texts) == data
    if damage == "garbage":
        data = b"\x00not a cache file"
    elif damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "other key":
        data = forms.encode("0" * 64, texts)
    elif damage == "bad sha":
        data = data.replace(b"x4", b"x8")
    else:   # well-formed files whose entry would smuggle an expression into a form's f-string
        entry = next(k for k in texts if "'ld'" in k)   # or not compile as a lambda
        texts[entry] = ("ld.global.u32 {__import__('os').getpid()}, [{a}];"
                        if damage == "tampered entry" else "ld.global.u32 {if}, [{_}];")
        data = forms.encode(key, texts)
    assert data != path.read_bytes()
    path.write_bytes(data)
    forms._clear_memory()
    assert _render_some() == first
    forms.flush()
    forms._clear_memory()
    texts = forms._disk.load()          # the file is whole again
    assert any("tcgen05_ld" in k for k in texts)
    assert not any("__import__" in v or "{if}" in v for v in texts.values())


def test_templates_change_gives_a_new_key(fresh_forms, tmp_path, monkeypatch):
    before = forms.cache_key()
    tdir = tmp_path / "templates"
    tdir.mkdir()
    for n in ("isa.ptx.j2", "module.ptx.j2"):
        (tdir / n).write_text((forms.templates_dir() / n).read_text())
    with open(tdir / "isa.ptx.j2", "a") as f:
        f.write('\n{% macro probe_form() -%}\nprobe.form\n{%- endmacro %}\n')
    monkeypatch.setattr(forms, "templates_path", lambda: str(tdir))
    forms.environment.cache_clear()
    forms._macros.cache_clear()
    forms._clear_memory()
    assert forms.cache_key() != before
    assert opcode("probe_form") == "probe.form"
    forms.flush()
    assert len(list(fresh_forms.glob("forms-*.txt"))) == 1
    (tdir / "isa.ptx.j2").write_text((tdir / "isa.ptx.j2").read_text().replace("probe.form",
                                                                               "probe.changed"))
    forms.environment.cache_clear()
    forms._macros.cache_clear()
    forms._clear_memory()
    assert opcode("probe_form") == "probe.changed"     # not the stale text of the old key
    forms.flush()
    assert len(list(fresh_forms.glob("forms-*.txt"))) == 2


@pytest.mark.parametrize("how", ["dir is a file", "disabled"])
def test_unwritable_or_disabled_cache_still_works(fresh_forms, tmp_path, monkeypatch, how):
    if how == "disabled":
        monkeypatch.setenv("PTXGEN_DISK_CACHE", "0")
    else:
        (tmp_path / "blocker").write_text("")
        monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "blocker" / "cache"))
    forms._clear_memory()
    assert opcode("tcgen05_wait", "ld") == "tcgen05.wait::ld.sync.aligned"

    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = A[tx] + 1.0

    assert "add.rn.f32 %f2, %f1, 0f3F800000;" in k.ptx("sm_90a")
    assert not forms.flush()


# ---------------------------------------------------------------- fresh processes
_CHILD = r"""
import sys
import ptxgen as pg
assert "jinja2" not in sys.modules, "import ptxgen imported jinja2"
if sys.argv[1:] == ["no-seed"]:     # the shipped seed (read on import) has these texts
    from ptxgen.target import forms
    forms.SEED = "/nonexistent/forms_seed.txt"
    forms._clear_memory()

@pg.kernel(grid=(1,), block=(128,))
def k(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
    tx = pg.thread_id(128)
    sm = pg.alloc_shared((128,), "float32")
    sm[tx] = A[tx]
    pg.cta_sync()
    B[tx] = sm[tx] * 2.0

text = k.ptx("sm_90a")
print("jinja2" in sys.modules)
print(text)
"""


def test_fresh_process_needs_no_jinja_once_cached(tmp_path):
    env = dict(os.environ, PTXGEN_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    env.pop("PTXGEN_DISK_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", _CHILD, "no-seed"], env=env,
                           capture_output=True, text=True, check=True).stdout.split("\n", 1)
            for _ in range(2)]
    (cold_jinja, cold_ptx), (warm_jinja, warm_ptx) = runs
    assert cold_jinja == "True"            # the empty cache was filled by rendering
    assert warm_jinja == "False"           # ... and read back without jinja
    assert warm_ptx == cold_ptx


def test_import_ptxgen_leaves_jinja_out():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", "import sys, ptxgen; print(sorted(m for m in "
                          "sys.modules if m.split('.')[0] in ('jinja2', 'markupsafe')))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
