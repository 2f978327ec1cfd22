"""Instruction forms (templates/isa.ptx.j2 through ptxgen.target.forms): the exact text of
each form family, every library instruction records its form, and the shipped table of
rendered forms (ptxgen/target/forms_table.py): what the templates render, what
scripts/forms_seed.py writes, enough for a fresh process to build without jinja, and a form
it lacks is rendered."""
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


def _import_every_ptxgen_module():
    """A module first imported while emit_instr is patched would bind the wrapper for good,
    and later traces would report the wrapper's line in this file as the user's."""
    import importlib
    import pkgutil
    for info in pkgutil.walk_packages(pg.__path__, "ptxgen."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:          # the torch-only modules, on a machine without torch
            pass


def test_every_library_instr_records_its_form(monkeypatch):
    import ptxgen.builder.ptx as ptxmod
    _import_every_ptxgen_module()
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
    macros = forms.macros()
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


# ---------------------------------------------------------------- the shipped table
def test_the_table_is_what_the_templates_render():
    assert len(forms.FORMS) > 100
    for key, text in forms.FORMS.items():
        if key[0] == "<module>":
            assert forms.render_module_format(key[1]) == text, key
        else:
            name, args, attrs = key
            assert forms.render_form(name, args, dict(attrs)) == text, key


def test_regenerating_the_table_gives_the_same_module():
    """scripts/forms_seed.py --check rebuilds every kernel it covers with an empty table and
    compares the module it would write with the shipped one (stale after a template edit)."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "forms_seed.py"),
                        "--check"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]


def test_a_form_the_table_lacks_is_rendered(monkeypatch):
    key = ("ld", ("global", "u32", 4, ".nc"), ())
    want = forms.render_form(key[0], key[1], {})
    monkeypatch.setitem(forms.FORMS, key, "stale text")
    forms.form.cache_clear()
    forms.opcode.cache_clear()
    try:
        assert forms.form("ld", "global", "u32", 4, ".nc") == "stale text"     # the table comes first
        monkeypatch.delitem(forms.FORMS, key)
        forms.form.cache_clear()
        assert forms.form("ld", "global", "u32", 4, ".nc") == want == "ld.global.nc.v4.u32 {d}, [{a}];"
    finally:
        monkeypatch.undo()
        forms.form.cache_clear()
        forms.opcode.cache_clear()


def test_a_module_format_the_table_lacks_is_rendered(monkeypatch):
    want = forms.module_format(False)
    monkeypatch.delitem(forms.FORMS, ("<module>", False))
    forms.module_format.cache_clear()
    try:
        assert forms.module_format(False) == want
        assert "{{" in want and "{body}" in want and "{tail}" not in want
    finally:
        monkeypatch.undo()
        forms.module_format.cache_clear()


# ---------------------------------------------------------------- fresh processes
_CHILD = r"""
import sys
import ptxgen as pg
assert "jinja2" not in sys.modules, "import ptxgen imported jinja2"
if sys.argv[1:] == ["no-table"]:    # every form rendered by jinja
    from ptxgen.target import forms
    forms.FORMS.clear()

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


def test_fresh_process_builds_from_the_table_without_jinja(tmp_path):
    env = dict(os.environ, PTXGEN_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    runs = [subprocess.run([sys.executable, "-c", _CHILD, *arg], env=env, capture_output=True,
                           text=True, check=True).stdout.split("\n", 1)
            for arg in ((), ("no-table",))]
    (table_jinja, table_ptx), (rendered_jinja, rendered_ptx) = runs
    assert table_jinja == "False"          # every form of the kernel is in the table
    assert rendered_jinja == "True"        # ... and without it jinja renders the same text
    assert table_ptx == rendered_ptx
    assert not os.listdir(tmp_path)        # a build writes no cache of forms


def test_import_ptxgen_leaves_jinja_out():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", "import sys, ptxgen; print(sorted(m for m in "
                          "sys.modules if m.split('.')[0] in ('jinja2', 'markupsafe')))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_shipped_form_fills_as_str_format_does():
    """Every shipped text whose fields are plain names has its generated f-string function,
    and form() fills through it: str.format's text for operands of any type, operands the
    text does not name ignored."""
    import string

    class Reg:
        def __format__(self, spec):
            return "%r7"

    for key, text in forms.FORMS.items():
        if key[0] == "<module>":
            continue
        names = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        fill = forms.FILL.get(text)
        assert (fill is not None) == all(n.isidentifier() for n in names), text
        if fill is None:
            continue
        ops = {n: (Reg() if i % 3 == 0 else i if i % 3 == 1 else f"x{i}")
               for i, n in enumerate(sorted(names))}
        assert fill(**ops, unused=1) == str.format(text, **ops), text
        f = forms.form(key[0], *key[1], **dict(key[2]))
        assert vars(f)["format"] is fill and f.format(**ops) == str.format(text, **ops)


def test_a_form_the_table_lacks_fills_through_str_format(monkeypatch):
    key = ("binary", ("add", "s32"), ())
    monkeypatch.delitem(forms.FORMS, key)     # rendered by jinja
    monkeypatch.delitem(forms.FILL, "add.s32 {d}, {a}, {b};")   # ... and no function for it
    forms.form.cache_clear()
    try:
        f = forms.form("binary", "add", "s32")
        assert "format" not in vars(f)
        assert f.format(d="%r3", a="%r1", b=4, n=3) == "add.s32 %r3, %r1, 4;"
    finally:
        monkeypatch.undo()
        forms.form.cache_clear()
