"""Builder -> IR -> PTX, exact forms and exact error messages."""
import re

import pytest

import ptxgen as pg
from support.asm import assemble

ARCHS = ("sm_80", "sm_90a", "sm_100a")


def body(ptx: str) -> str:
    return ptx[ptx.index("{"):]


def test_smem_demo_ptx_forms():
    import smem_demo

    ptx = smem_demo.smem_demo.ptx("sm_90a")
    assert ".version 8.0\n.target sm_90a\n.address_size 64" in ptx
    assert ".param .u64 .ptr .global .align 16 A" in ptx
    assert ".shared .align 16 .b8 sm[512];" in ptx
    assert "mov.u32 %r2, sm;" in ptx            # 32-bit shared address
    assert "st.shared.f32" in ptx and "ld.shared.f32" in ptx
    assert "bar.sync 0;" in ptx
    assert "mul.rn.f32 %f3, %f2, 0f40000000;" in ptx
    assert "// sm[tx] = A[tx]" in ptx            # every IR statement is marked


@pytest.mark.parametrize("arch,version", [("sm_80", "7.0"), ("sm_90a", "8.0"), ("sm_100a", "8.6")])
def test_version_per_target(arch, version):
    import smem_demo

    assert f".version {version}\n.target {arch}\n" in smem_demo.smem_demo.ptx(arch)


def test_row_major_index_is_affine():
    import add_one

    k = add_one.KERNELS[0]
    ptx = k.ptx("sm_90a")
    seg = ptx[ptx.index("// B[i, j]"):]
    # i*8 + j: one shift and one add, nothing else before the scaling to bytes
    assert re.search(r"shl\.b32 (%r\d+), %r1, 3;\n\s+add\.s32 (%r\d+), \1, %r2;\n\s+mul\.wide\.s32", seg)
    assert "div" not in seg and "rem" not in seg


def test_serial_is_a_loop_and_unroll_copies():
    def make(kind):
        @pg.kernel(grid=(1,), block=(32,), name="loop_" + kind)
        def k(A: pg.Tensor((32, 8), "float32"), B: pg.Tensor((32,), "float32")):
            tx = pg.thread_id(32)
            acc = pg.local_scalar("float32", 0.0)
            for i in getattr(pg, kind)(8):
                acc += A[tx, i]
            B[tx] = acc
        return k

    ks, ku = make("serial"), make("unroll")
    serial, unrolled = ks.ptx("sm_90a"), ku.ptx("sm_90a")
    assert serial.count("ld.global.f32") == 1
    assert len(re.findall(r"@%p\d+ bra \$L_for_\d+;", serial)) == 1      # one back-branch
    assert unrolled.count("ld.global.f32") == 8
    assert "bra" not in body(unrolled)
    for arch in ARCHS:
        assert assemble(ks.ptx(arch), arch)[0] and assemble(ku.ptx(arch), arch)[0]


def test_scalar_sugar_and_explicit_local_identical():
    import phase_loop

    a, b = phase_loop.phase_scalar, phase_loop.phase_explicit
    assert str(a.ir) == str(b.ir)
    for arch in ARCHS:
        assert a.ptx(arch) == b.ptx(arch)


@pytest.mark.parametrize("mod", ["smem_demo", "dyn_arena", "phase_loop", "let_scalar", "add_one",
                                 "grid_stride_copy"])
@pytest.mark.parametrize("arch", ARCHS)
def test_examples_assemble(mod, arch):
    m = __import__(mod)
    for k in m.KERNELS:
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, log


def test_dynamic_arena_size_reaches_launch():
    import dyn_arena

    k = dyn_arena.dyn_arena
    assert k.ir.dynamic_smem_bytes == 512
    ptx = k.ptx("sm_90a")
    assert ".extern .shared .align 16 .b8 arena[];" in ptx
    assert "st.shared.f32 [%r" in ptx and "+256], " in ptx      # Bs = arena + 64 floats


def test_let_facts_prove_vector_alignment():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((256,), "float32")):
        tx = pg.thread_id(64)
        base = pg.let(tx * 4)
        B.vstore([base], A.vload([base], "float32x4"))

    ptx = k.ptx("sm_90a")
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx


def test_unprovable_vector_alignment_is_an_error():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((260,), "float32"), B: pg.Tensor((260,), "float32")):
        tx = pg.thread_id(64)
        B.vstore([tx * 4 + 1], A.vload([tx * 4 + 1], "float32x4"))

    with pytest.raises(pg.PtxgenError, match=r"test_core.py:\d+: 16-byte vector access to "
                       r"A\[tx \* 4 \+ 1\] cannot be proven 16-byte aligned"):
        k.ptx("sm_90a")


def test_symbolic_shape_and_scalar_param():
    M = pg.var("M")

    @pg.kernel(grid=(4,), block=(128,))
    def k(A: pg.Tensor((M, 64), "float16"), B: pg.Tensor((M, 64), "float16"), alpha: pg.float32):
        tx = pg.thread_id(128)
        bx = pg.cta_id(4)
        for r in pg.serial(bx, M, 4):
            with pg.if_(tx < 64):
                B[r, tx] = pg.cast(pg.cast(A[r, tx], "float32") * alpha, "float16")

    ptx = k.ptx("sm_90a")
    assert ".param .s32 M" in ptx and ".param .f32 alpha" in ptx
    assert "cvt.f32.f16" in ptx and "cvt.rn.f16.f32" in ptx
    assert [p.name for p in k.ir.params] == ["A", "B", "alpha", "M"]
    for arch in ARCHS:
        assert assemble(k.ptx(arch), arch)[0]


def test_ir_printer_readable():
    import let_scalar

    text = str(let_scalar.let_scalar.ir)
    assert text.splitlines()[1] == ("def let_scalar(A: pg.Tensor((256,), \"int32\"), "
                                    "B: pg.Tensor((256,), \"int32\"), n: pg.int32):")
    assert "    half = pg.let(n // 2)" in text
    assert "    with pg.if_(tx < half):\n        B[tx] = A[tx] * 2 + half" in text
    assert "    with pg.else_():\n        B[tx] = A[tx] - half" in text


def test_arch_error_before_ptxas():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        pg.ptx["tcgen05.fence::before_thread_sync"]()

    with pytest.raises(pg.ArchError, match=r"instruction 'tcgen05.fence::before_thread_sync' "
                       r"needs one of sm_100a, .*; the target is sm_90a"):
        k.ptx("sm_90a")
    assert assemble(k.ptx("sm_100a"), "sm_100a")[0]

    @pg.kernel(grid=(1,), block=(32,))
    def s(A: pg.Tensor((32,), "float32")):
        pg.ptx["stmatrix.sync.aligned.m8n8.x1.shared.b16"](A.data, [A[0]])

    with pytest.raises(pg.ArchError, match=r"'stmatrix' needs sm_90 or newer; the target is sm_80"):
        s.ptx("sm_80")


def test_256bit_needs_sm100():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((256,), "float32", align=32), B: pg.Tensor((256,), "float32", align=32)):
        tx = pg.thread_id(32)
        B.vstore([tx * 8], A.vload([tx * 8], "float32x8"))

    with pytest.raises(pg.ArchError, match=r"'256 bit wide load/store' needs sm_100 or newer"):
        k.ptx("sm_90a")
    ptx = k.ptx("sm_100a")
    assert ".version 8.8" in ptx and "ld.global.v8.b32" in ptx
    assert assemble(ptx, "sm_100a")[0]


def test_int8_and_bf16_paths_assemble():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((64,), "int8"), B: pg.Tensor((64,), "int8"),
          X: pg.Tensor((64,), "bfloat16"), Y: pg.Tensor((64,), "bfloat16")):
        tx = pg.thread_id(64)
        B[tx] = A[tx] * 3 + 1
        Y[tx] = X[tx] * pg.bfloat16(2.0) + X[tx]

    for arch in ARCHS:
        ptx = k.ptx(arch)
        assert "ld.global.s8" in ptx and "st.global.s8" in ptx and "bfe.s32" in ptx
        ok, log = assemble(ptx, arch)
        assert ok, log


# ---- bad input: each message is asserted ------------------------------------------------
def _trace(fn, **kw):
    return pg.kernel(grid=(1,), block=(32,), **kw)(fn)


def test_unknown_dtype():
    with pytest.raises(pg.PtxgenError, match=r"unknown dtype 'float17'; known dtypes: bool, int8"):
        pg.Tensor((4,), "float17")


def test_float_into_int_without_cast():
    def k(A: pg.Tensor((32,), "int32"), B: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = B[tx]

    with pytest.raises(pg.TraceError, match=r"test_core.py:\d+: storing a float32 value into int32 "
                       r"buffer 'A' needs an explicit pg.cast\(value, 'int32'\)"):
        _trace(k)

    def k2(A: pg.Tensor((32,), "int32")):
        A[0] = 1.5

    with pytest.raises(pg.TraceError, match=r"storing float 1.5 into int32 buffer 'A' needs an "
                       r"explicit pg.cast\(value, 'int32'\)"):
        _trace(k2)


def test_shape_mismatch():
    def k(A: pg.Tensor((4, 8), "float32")):
        A[1] = 2.0

    with pytest.raises(pg.TraceError, match=r"test_core.py:\d+: shape mismatch: 'A' has 2 "
                       r"dimension\(s\) \(4, 8\) but was indexed with 1"):
        _trace(k)

    def k2(A: pg.Tensor((64,), "float32")):
        A.view(4, 8)

    with pytest.raises(pg.TraceError, match=r"view of 'A' as \(4, 8\) has 32 elements but the "
                       r"storage has 64; a view must cover the same storage"):
        _trace(k2)


def test_constant_index_out_of_range():
    def k(A: pg.Tensor((4, 8), "float32")):
        A[3, 8] = 1.0

    with pytest.raises(pg.TraceError, match=r"test_core.py:\d+: index 8 is out of range for "
                       r"dimension 1 of 'A' \(extent 8\)"):
        _trace(k)


def test_else_without_if():
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = 1.0
        with pg.else_():
            A[tx] = 2.0

    with pytest.raises(pg.TraceError, match=r"test_core.py:\d+: pg.else_\(\) must come directly "
                       r"after a `with pg.if_\(...\)` block"):
        _trace(k)


def test_loop_variable_after_loop():
    def k(A: pg.Tensor((32,), "float32")):
        for i in pg.serial(4):
            A[i] = 1.0
        A[i] = 2.0   # noqa: F821 - the point of the test

    with pytest.raises(pg.TraceError, match=r"test_core.py:\d+: loop variable 'i' is used after "
                       r"its loop ended \(the loop is at test_core.py:\d+\)"):
        _trace(k)


def test_second_dynamic_arena():
    def k(A: pg.Tensor((32,), "float32")):
        a = pg.alloc_buffer((64,), "float32", scope="shared.dyn")
        b = pg.alloc_buffer((64,), "float32", scope="shared.dyn")

    with pytest.raises(pg.TraceError, match=r"only one shared.dyn allocation \(the dynamic arena\) "
                       r"is allowed per kernel; 'a' already is it\. Declare views into it with "
                       r"pg.decl_buffer\(\.\.\., data=a.data"):
        _trace(k)


def test_name_injection_is_sanitized():
    evil = "k;\n.entry pwn() { trap; }\n//"

    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = 1.0

    kk = pg.kernel(grid=(1,), block=(32,), name=evil)(k)
    ptx = kk.ptx("sm_90a")
    assert "\n.entry pwn" not in ptx and "trap;" not in ptx
    assert ".visible .entry k___entry_pwn_____trap______(" in ptx
    assert ptx.count(".entry") == 1
    assert assemble(ptx, "sm_90a")[0]
    with pytest.raises(pg.TraceError, match=r"is not a PTX opcode"):
        _trace(lambda A: pg.ptx["add.s32 %r1; trap"](A[0]), name="x") if False else \
            pg.kernel(grid=(1,), block=(1,))(_raw_injection)


def _raw_injection(A: pg.Tensor((32,), "float32")):
    pg.ptx["add.s32 %r1, %r1, 1; trap"]()


def test_python_truth_value_of_expression():
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        if tx < 4:
            A[tx] = 1.0

    with pytest.raises(pg.TraceError, match=r"a traced expression has no Python truth value; use "
                       r"pg.if_"):
        _trace(k)

    def builtin_max(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        A[tx] = max(A[tx], 0.0)

    with pytest.raises(pg.TraceError, match=r"and pg.max / pg.min instead of Python's max / min$"):
        _trace(builtin_max)


def test_static_smem_limit():
    def k(A: pg.Tensor((32,), "float32")):
        s = pg.alloc_shared((16384,), "float32")
        s[0] = A[0]

    kk = _trace(k)
    with pytest.raises(pg.ResourceError, match=r"^test_core.py:\d+: static shared memory is "
                       r"65536 bytes but sm_80 allows 49152 \(48 KiB\) per CTA \(largest: 's' "
                       r"65536 B at test_core.py:\d+\); move tiles into the dynamic arena"):
        kk.ptx("sm_80")
    assert assemble(kk.ptx("sm_90a"), "sm_90a")[0]


def test_static_smem_limit_names_the_allocation_that_crosses_it():
    def k(A: pg.Tensor((32,), "float32")):
        a = pg.alloc_shared((8192,), "float32")
        b = pg.alloc_shared((8192,), "float32")
        a[0] = A[0]
        b[0] = A[1]

    with pytest.raises(pg.ResourceError) as e:
        _trace(k).ptx("sm_80")
    msg = str(e.value)
    line_b = k.__code__.co_firstlineno + 2
    assert msg.startswith(f"test_core.py:{line_b}: static shared memory is 65536 bytes")
    assert f"(largest: 'a' 32768 B at test_core.py:{line_b - 1}, 'b' 32768 B at " \
        f"test_core.py:{line_b})" in msg


def test_unknown_arch_is_located_at_the_users_call():
    def k(A: pg.Tensor((32,), "float32")):
        A[0] = 1.0
    kern = _trace(k)
    with pytest.raises(pg.ArchError, match=r"^test_core.py:\d+: unknown target 'sm_91'; known "
                       r"targets: sm_70"):
        kern.ptx("sm_91")


def test_block_too_large():
    def k(A: pg.Tensor((32,), "float32")):
        pg.thread_id(2048)

    with pytest.raises(pg.TraceError, match=r"a CTA holds at most 1024 threads; blockDim "
                       r"\(2048, 1, 1\) has 2048"):
        pg.kernel(k)


def test_int_into_float_buffer_needs_cast():
    def k(A: pg.Tensor((32,), "float32"), B: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        A[tx] = B[tx]

    with pytest.raises(pg.TraceError, match=r"storing a int32 value into float32 buffer 'A'; "
                       r"use pg.cast\(value, 'float32'\)"):
        pg.kernel(k)


def test_buffer_name_cannot_break_out_of_a_comment():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        s = pg.alloc_shared((32,), "float32", name="s\r trap;\n exit;")
        s[tx] = A[tx]

    ptx = k.ptx("sm_90a")
    assert "\r" not in ptx
    assert not any(line.strip() in ("trap;", "exit;") or line.lstrip().startswith(("trap", "exit"))
                   for line in ptx.splitlines())
    assert assemble(ptx, "sm_90a")[0]


def test_errors_inside_the_body_say_where():
    def k(A: pg.Tensor((32,), "float32")):
        pg.alloc_shared((4,), "float17")

    with pytest.raises(pg.PtxgenError, match=r"^test_core.py:\d+: unknown dtype 'float17'"):
        pg.kernel(k)


def test_vector_cache_hints():
    @pg.kernel(grid=(1,), block=(64,))
    def k(A: pg.Tensor((256,), "float32"), B: pg.Tensor((256,), "float32")):
        tx = pg.thread_id(64)
        B.vstore([tx * 4], A.vload([tx * 4], "float32x4", cache_hint=["L1::no_allocate", "nc"]),
                 cache_hint="cs")

    ptx = k.ptx("sm_80")
    assert "ld.global.nc.L1::no_allocate.v4.b32" in ptx and "st.global.cs.v4.b32" in ptx
    assert ".version 7.4" in ptx          # L1:: modifiers raise the PTX version
    assert "cache_hint=['nc', 'L1::no_allocate']" in str(k.ir)
    for arch in ARCHS:
        assert assemble(k.ptx(arch), arch)[0]


def test_cache_hint_on_shared_is_rejected():
    def k(A: pg.Tensor((256,), "float32")):
        tx = pg.thread_id(64)
        s = pg.alloc_shared((256,), "float32")
        A.vstore([tx * 4], s.vload([tx * 4], "float32x4", cache_hint="nc"))

    with pytest.raises(pg.TraceError, match=r"test_core.py:\d+: 's': cache hints \(nc\) apply "
                       r"only to global loads; the source is shared"):
        pg.kernel(grid=(1,), block=(64,))(k)


def test_unrolled_copies_do_not_share_facts():
    """The inner loop's range differs per unrolled copy; j // 8 is 0 only in the first."""
    @pg.kernel(grid=(1,), block=(1,))
    def k(B: pg.Tensor((2, 16), "int32")):
        for u in pg.unroll(2):
            for j in pg.serial(0, 8 * (u + 1)):
                B[u, j] = j // 8

    ptx = k.ptx("sm_90a")
    second = ptx[ptx.index("pg.serial(16):"):]
    assert "shr.s32" in second          # j // 8 must be computed in the 0..15 copy
    assert assemble(ptx, "sm_90a")[0]


def test_launch_cannot_change_a_declared_extent():
    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((256,), "float32")):
        tx = pg.thread_id(128)
        A[tx // 128 * 128 + tx] = 1.0

    with pytest.raises(pg.LaunchError, match=r"kernel 'k' was traced with blockDim.x = 128 "
                       r"\(the generated code relies on it: thread/CTA ids, warp ids or tile "
                       r"scopes\); launched with 256"):
        k._check_launch_dims(None, (256,))
    k._check_launch_dims(None, (128,))       # the traced extent is fine


@pytest.mark.parametrize("dt,lanes", [("int8", 2), ("int8", 4), ("uint8", 16), ("float64", 2),
                                      ("float16", 8), ("bfloat16", 2), ("float32", 4),
                                      ("int64", 2)])
def test_register_vectors_pack_and_unpack(dt, lanes):
    @pg.kernel(grid=(1,), block=(32,), name=f"pack_{dt}_{lanes}")
    def k(A: pg.Tensor((32 * lanes,), dt), B: pg.Tensor((32 * lanes,), dt)):
        tx = pg.thread_id(32)
        r = pg.alloc_local((lanes,), dt)
        r.vstore([0], A.vload([tx * lanes], f"{dt}x{lanes}"))
        B.vstore([tx * lanes], r.vload([0], f"{dt}x{lanes}"))

    for arch in ARCHS:
        ptx = k.ptx(arch)
        assert ".local" not in ptx
        ok, log = assemble(ptx, arch)
        assert ok, log


def test_select_of_bools_and_bool_logic():
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "int32"), n: pg.int32):
        tx = pg.thread_id(32)
        c = pg.select(n > 0, tx < 8, (tx > 20) & (tx < 30))
        with pg.if_(c | (tx == 31)):
            A[tx] = pg.cast(~c, "int32") + 1

    for arch in ARCHS:
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, log


def test_names_and_locations_when_imported_through_dotdot_path(tmp_path):
    """A sys.path entry like "benchmarks/.." makes frames carry unnormalized paths; the
    builder must still see ptxgen's own frames as its own (names from the user's line)."""
    import os
    import subprocess
    import sys
    import textwrap

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "user_kernel.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.join(repo, "tests", "..")!r})
        import ptxgen as pg
        N = pg.var("N")
        @pg.kernel(grid=(1,), block=(32,))
        def k(a: pg.Tensor((N,), "float32")):
            tx = pg.thread_id(32)
            my_index = pg.let(tx * 2)
            a[my_index] = pg.float32(1.0)
        print("my_index = pg.let" in k.ptx("sm_90a"))
    """))
    env = dict(os.environ, PYTHONPATH="")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path).stdout.split()
    assert out[0] == "True"


def test_callable_grid_and_cta_id_without_extent():
    N = pg.var("N")

    def per_128(args):
        return (args["N"] // 128,)

    @pg.kernel(grid=per_128, block=(128,))
    def k(a: pg.Tensor((N,), "float32")):
        tx = pg.thread_id(128)
        bx = pg.cta_id()
        a[bx * 128 + tx] = pg.float32(1.0)
    assert str(k.ir).startswith("@pg.kernel(grid=<per_128>, block=(128, 1, 1))")
    assert k._grid_fn({"N": 1024}) == (8,)
    assert "mov.u32 %r3, %ctaid.x;" in k.ptx("sm_90a")

    with pytest.raises(pg.TraceError, match=r"test_core.py:\d+: the kernel's grid is a callable "
                       r"\(computed per launch\), but gridDim.x is fixed to 4 here; use "
                       r"pg.cta_id\(\) without an extent"):
        @pg.kernel(grid=per_128, block=(128,))
        def bad(a: pg.Tensor((N,), "float32")):
            bx = pg.cta_id(4)
            a[bx] = pg.float32(1.0)

    with pytest.raises(pg.TraceError, match="dim must be 'x', 'y' or 'z', got 'w'"):
        @pg.kernel(grid=per_128, block=(128,))
        def bad_dim(a: pg.Tensor((N,), "float32")):
            pg.cta_id(dim="w")


def test_run_all_dumps_every_example_without_a_gpu(tmp_path):
    """The README's main job on a machine without a GPU: every example's PTX for the three
    targets (or the arch error), exit status 0."""
    import os
    import subprocess
    import sys

    from ptxgen.runtime import has_gpu

    if has_gpu():
        pytest.skip("a GPU is present: run_all launches the examples (tests/gpu covers that)")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, os.path.join(repo, "examples", "run_all.py"),
                        str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no CUDA GPU here: PTX written, nothing launched" in r.stdout
    for arch in ("sm_80", "sm_90a", "sm_100a"):
        assert (tmp_path / "out" / arch / "grid_stride_copy.ptx").is_file()
    assert (tmp_path / "out" / "sm_100a" / "gemm_sm100_128x256.ptx").is_file()
    assert "gemm_sm100_128x256: not for this target" in r.stdout
