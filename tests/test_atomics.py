"""pg.ptx.atom / red / fence (ptxgen/builder/atomic.py): the exact PTX of each form, every
admitted (op, dtype, sem, scope, space) assembled by nvJitLink for each arch that admits it
(and ptxas refusing what the table leaves out), the located refusals, how the protocol check
reads them, and their results in the simulator (tests/support/ptxsim_atomic.py); atomics on
another CTA's shared memory (a pg.cluster_view, .shared::cluster) likewise."""
import re

import numpy as np
import pytest

import ptxgen as pg
from ptxgen.builder.atomic import allowed_dtypes, ptx_type
from ptxgen.errors import ArchError, TraceAttributeError, TraceError
from ptxgen.target import (ATOM_SEMS, ATOMIC_CLUSTER_SPACE, ATOMIC_SCOPES, ATOMIC_TYPES,
                           FENCE_SEMS, RED_OPS, RED_SEMS, check_opcode, has_opcode, parse_target)
from ptxgen.target.forms import opcode
from support import atomic_cases as AC
from support import ptxsim
from support.asm import assemble
from support.located import at, fails
from support.ptxsim_atomic import apply

PY = {"and": "and_", "or": "or_"}       # PTX's operation -> the helper's name


def instrs(k, arch="sm_90a"):
    """The kernel's atom / red / fence lines."""
    return [ln.strip() for ln in k.ptx(arch).splitlines()
            if ln.strip().startswith(("atom.", "red.", "fence."))]


# ---------------------------------------------------------------- the forms
def test_each_form_is_spelled_in_full():
    @pg.kernel(grid=(1,), block=(32,))
    def k(C: pg.Tensor((4,), "uint32"), L: pg.Tensor((2,), "int64"),
          F: pg.Tensor((2,), "float32"), H: pg.Tensor((2,), "float16"),
          O: pg.Tensor((32,), "uint32")):
        tx = pg.thread_id(32)
        sm = pg.alloc_shared((4,), "int32")
        O[tx] = pg.ptx.atom.add(C[0], 1, sem="acq_rel")
        pg.ptx.atom.min(sm[1], tx, scope="cta")
        L[1] = pg.ptx.atom.add(L[0], pg.cast(tx, "int64"))
        pg.ptx.red.add(F[1], 1.0)
        H[0] = pg.ptx.atom.add(H[1], 1.0)
        F[0] = pg.ptx.atom.cas(F[1], 0.0, 1.0, sem="acquire", scope="sys")
        L[0] = pg.ptx.atom.exch(L[1], 7)
        O[1] = pg.ptx.atom.and_(C[2], 0xF0)
        O[2] = pg.ptx.atom.inc(C[3], 9, sem="release", scope="cluster")
        pg.ptx.red.or_(C[1], 4, sem="release")
        sm[0] = pg.ptx.atom.cas(sm.ptr_to([2]), 1, tx, scope="cta")
        pg.ptx.fence.acq_rel()
        pg.ptx.fence.sc("cluster")

    want = [r"atom\.acq_rel\.gpu\.global\.add\.u32 %r\d+, \[%rd\d+\], 1;",
            r"atom\.relaxed\.cta\.shared\.min\.s32 %r\d+, \[%r\d+\+4\], %r\d+;",
            r"atom\.relaxed\.gpu\.global\.add\.u64 %rd\d+, \[%rd\d+\], %rd\d+;",   # int64: .u64
            r"red\.relaxed\.gpu\.global\.add\.f32 \[%rd\d+\+4\], 0f3F800000;",
            r"atom\.relaxed\.gpu\.global\.add\.noftz\.f16 %rs\d+, \[%rd\d+\+2\], %rs\d+;",
            r"atom\.acquire\.sys\.global\.cas\.b32 %f\d+, \[%rd\d+\+4\], 0f00000000, "
            r"0f3F800000;",
            r"atom\.relaxed\.gpu\.global\.exch\.b64 %rd\d+, \[%rd\d+\+8\], 7;",
            r"atom\.relaxed\.gpu\.global\.and\.b32 %r\d+, \[%rd\d+\+8\], 240;",
            r"atom\.release\.cluster\.global\.inc\.u32 %r\d+, \[%rd\d+\+12\], 9;",
            r"red\.release\.gpu\.global\.or\.b32 \[%rd\d+\+4\], 4;",
            r"atom\.relaxed\.cta\.shared\.cas\.b32 %r\d+, \[%r\d+\+8\], 1, %r\d+;",
            r"fence\.acq_rel\.gpu;", r"fence\.sc\.cluster;"]
    got = instrs(k)
    assert len(got) == len(want), got
    for line, pattern in zip(got, want):
        assert re.fullmatch(pattern, line), (line, pattern)
    text = k.ptx("sm_90a")
    # a 16-bit float operand is a register: ptxas takes no immediate ("Arguments mismatch")
    assert re.search(r"mov\.b16 (%rs\d+), 0x3C00;\n(.*\n)*.*"
                     r"add\.noftz\.f16 %rs\d+, \[%rd\d+\+2\], \1;", text)


def test_a_kernel_of_sm_80_forms_needs_no_newer_ptx():
    @pg.kernel(grid=(1,), block=(32,))
    def k(C: pg.Tensor((2,), "uint32"), H: pg.Tensor((2,), "float16")):
        sm = pg.alloc_shared((2,), "uint64")
        C[1] = pg.ptx.atom.add(C[0], 1, sem="acq_rel", scope="sys")
        pg.ptx.red.max(sm[0], 3, scope="cta")
        pg.ptx.atom.add(H[0], 2.0)
        pg.ptx.fence.sc("gpu")
    text = k.ptx("sm_80")
    assert ".version 7.0" in text
    assert "atom.relaxed.cta.shared" not in text and "red.relaxed.cta.shared.max.u64" in text
    ok, log = assemble(text, "sm_80")
    assert ok, log


def test_the_returned_old_value_is_a_scalar_of_the_element_type():
    @pg.kernel(grid=(1,), block=(32,))
    def k(C: pg.Tensor((1,), "int32"), O: pg.Tensor((1,), "int32")):
        old = pg.ptx.atom.add(C[0], 1)
        assert isinstance(old, pg.LocalScalar) and old.buffer.dtype == pg.dtype("int32")
        with pg.if_(old == 31):
            O[0] = old * 2 + 1
    text = k.ptx("sm_90a")
    reg = re.search(r"atom\.relaxed\.gpu\.global\.add\.s32 (%r\d+),", text).group(1)
    assert re.search(rf"setp\.eq\.s32 %p\d+, {reg}, 31;", text)


def test_helpers_share_the_fence_namespace_and_take_shared_scalars():
    @pg.kernel(grid=(1,), block=(32,))
    def k(O: pg.Tensor((1,), "uint32")):
        n = pg.shared_scalar("uint32")
        pg.ptx.fence.proxy_async()
        O[0] = pg.ptx.atom.add(n, 1, scope="cta")
        pg.ptx.fence.acq_rel("cta")
    first, atom, last = instrs(k)
    assert (first, last) == ("fence.proxy.async.shared::cta;", "fence.acq_rel.cta;")
    assert re.fullmatch(r"atom\.relaxed\.cta\.shared\.add\.u32 %r\d+, \[%r\d+\], 1;", atom)


# ---------------------------------------------------------------- every admitted form assembles
DTYPES = ("bfloat16", "float16", "float32", "float64", "int32", "int64", "uint32", "uint64")


def test_the_admitted_table():
    ints = ["int32", "int64", "uint32", "uint64"]
    assert {op: allowed_dtypes(op) for op in ATOMIC_TYPES} == {
        "add": ints + ["float16", "bfloat16", "float32", "float64"], "min": ints, "max": ints,
        "inc": ["uint32"], "dec": ["uint32"], "and": ints, "or": ints, "xor": ints,
        "exch": ints + ["float32", "float64"],
        "cas": ints + ["float16", "bfloat16", "float32", "float64"]}
    assert sorted({d for op in ATOMIC_TYPES for d in allowed_dtypes(op)}) == list(DTYPES)
    assert [ptx_type("add", d) for d in ("int32", "int64", "uint64", "bfloat16")] == \
        ["s32", "u64", "u64", "bf16"]
    assert [ptx_type("max", d) for d in ("int64", "uint32")] == ["s64", "u32"]
    assert [ptx_type(op, "float16") for op in ("cas", "exch")] == ["b16", None]
    assert ptx_type("cas", "int16") is None     # int16 lives in a 32-bit register


def _every_form(arch, space):
    """A kernel with every admitted atom / red / fence of `space` that `arch` has by its gate
    (traced, not built), the opcodes in it and the opcodes left out.  .shared::cluster: the
    tiles of the other CTA of a pair (through pg.cluster_view), with no scope cta (refused at
    the call) and no fences (they name no space)."""
    t = parse_target(arch)
    left_out, made = [], []
    dsmem = space == ATOMIC_CLUSTER_SPACE

    def k(BF: pg.Tensor((4,), "bfloat16"), F16: pg.Tensor((4,), "float16"),
          F32: pg.Tensor((4,), "float32"), F64: pg.Tensor((4,), "float64"),
          I32: pg.Tensor((4,), "int32"), I64: pg.Tensor((4,), "int64"),
          U32: pg.Tensor((4,), "uint32"), U64: pg.Tensor((4,), "uint64")):
        bufs = dict(zip(DTYPES, (BF, F16, F32, F64, I32, I64, U32, U64)))
        if space == "shared":
            bufs = {d: pg.alloc_shared((4,), d) for d in DTYPES}
        elif dsmem:
            peer = pg.cta_rank_in_cluster() ^ 1
            bufs = {d: pg.cluster_view(pg.alloc_shared((4,), d), peer) for d in DTYPES}
        for op in ATOMIC_TYPES:
            for d in allowed_dtypes(op):
                for ins, sems in (("atom", ATOM_SEMS), ("red", RED_SEMS)):
                    if ins == "red" and op not in RED_OPS:
                        continue
                    for sem in sems:
                        for scope in ATOMIC_SCOPES:
                            if dsmem and scope == "cta":
                                continue
                            code = opcode(ins, sem, scope, space, op, ptx_type(op, d))
                            if not has_opcode(code, t):
                                left_out.append(code)
                                continue
                            made.append(code)
                            fn = getattr(getattr(pg.ptx, ins), PY.get(op, op))
                            fn(bufs[d][1], *((1, 2) if op == "cas" else (1,)), sem=sem,
                               scope=scope)
        for sem in FENCE_SEMS if not dsmem else ():
            for scope in ATOMIC_SCOPES:
                code = opcode("fence", sem, scope)
                (made if has_opcode(code, t) else left_out).append(code)
                if has_opcode(code, t):
                    getattr(pg.ptx.fence, sem)(scope)
    kern = pg.kernel(k, grid=(2,) if dsmem else (1,), block=(32,),   # at: every form
                     cluster=(2, 1, 1) if dsmem else None)
    return kern, made, left_out


@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_every_admitted_form_assembles(arch, space):
    kern, made, left_out = _every_form(arch, space)
    text = kern.ptx(arch)
    emitted = [ln.strip().split(" ")[0].rstrip(";") for ln in text.splitlines()
               if ln.strip().startswith(("atom.", "red.", "fence."))]
    assert emitted == made
    # atom: 44 (op, dtype) pairs x 16 (sem, scope); red: 30 x 8; fences: 8
    assert len(made) + len(left_out) == 44 * 16 + 30 * 8 + 8
    if arch == "sm_80":   # what sm_80 lacks: cluster scope, and a bfloat16 add
        assert left_out and all(".cluster" in c or c.endswith("add.noftz.bf16") for c in left_out)
        assert not any(".cluster" in c or c.endswith("add.noftz.bf16") for c in made)
    else:
        assert left_out == []
    ok, log = assemble(text, arch)
    assert ok, log[-2000:]


_REG = {"b16": "%rs", "u16": "%rs", "s16": "%rs", "f16": "%rs", "bf16": "%rs", "b32": "%r",
        "u32": "%r", "s32": "%r", "f32": "%f", "b64": "%rd", "u64": "%rd", "s64": "%rd",
        "f64": "%fd"}


def _module(line):
    return (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".visible .entry k(.param .u64 p)\n{\n"
            "  .reg .b16 %rs<4>; .reg .b32 %r<4>; .reg .f32 %f<4>; .reg .b64 %rd<4>;\n"
            "  .reg .f64 %fd<4>;\n  ld.param.u64 %rd1, [p];\n  cvta.to.global.u64 %rd1, %rd1;\n"
            f"  {line}\n  ret;\n}}\n")


@pytest.mark.parametrize("op", list(ATOMIC_TYPES))
def test_ptxas_refuses_what_the_table_leaves_out(op):
    """Every type of the candidates that the table does not list for `op` fails in ptxas
    (sm_90a, where the most is legal), as atom and, for RED_OPS, as red."""
    for t in _REG:
        if t in ATOMIC_TYPES[op]:
            continue
        r = _REG[t]
        args = f", {r}2, {r}3" if op == "cas" else f", {r}2"
        lines = [f"{opcode('atom', 'relaxed', 'gpu', 'global', op, t)} {r}1, [%rd1]{args};"]
        if op in RED_OPS:
            lines.append(f"{opcode('red', 'relaxed', 'gpu', 'global', op, t)} [%rd1]{args};")
        for line in lines:
            ok, log = assemble(_module(line), "sm_90a")
            assert not ok and "error" in log, line


def test_ptxas_refuses_the_memory_orders_left_out():
    for line in ("red.acquire.gpu.global.add.u32 [%rd1], %r2;",
                 "red.acq_rel.gpu.global.add.u32 [%rd1], %r2;",
                 "atom.sc.gpu.global.add.u32 %r1, [%rd1], %r2;"):
        ok, log = assemble(_module(line), "sm_90a")
        assert not ok and "Illegal modifier" in log, line


# ---------------------------------------------------------------- refusals
def _k(body, arch="sm_90a"):
    return lambda: pg.kernel(body, grid=(1,), block=(32,)).ptx(arch)


def test_an_op_the_element_type_lacks_is_refused():
    def k(F: pg.Tensor((4,), "float32")):
        pg.ptx.atom.and_(F[0], 1)   # at: and
    fails(_k(k), "and", "pg.ptx.atom.and_: ptr 'F' holds float32 elements, which and_ does "
          "not take; and_ takes int32, int64, uint32, uint64 elements", TraceError)

    def k2(C: pg.Tensor((4,), "int16")):
        pg.ptx.atom.cas(C[0], 1, 2)   # at: cas16
    fails(_k(k2), "cas16", "pg.ptx.atom.cas: ptr 'C' holds int16 elements, which cas does "
          "not take; cas takes int32, int64, uint32, uint64, float16, bfloat16, float32, "
          "float64 elements", TraceError)

    def k3(C: pg.Tensor((4,), "int32")):
        pg.ptx.red.inc(C[0], 1)   # at: inc
    fails(_k(k3), "inc", "pg.ptx.red.inc: ptr 'C' holds int32 elements, which inc does not "
          "take; inc takes uint32 elements", TraceError)


def test_a_memory_order_the_instruction_lacks_is_refused():
    def k(C: pg.Tensor((4,), "uint32")):
        pg.ptx.red.add(C[0], 1, sem="acquire")   # at: red
    fails(_k(k), "red", "pg.ptx.red.add: sem='acquire' is not allowed; sem must be one of "
          "'relaxed', 'release' (a red returns no value to acquire with: use pg.ptx.atom.add "
          "for 'acquire' or 'acq_rel')", TraceError)

    def k2(C: pg.Tensor((4,), "uint32")):
        pg.ptx.atom.xor(C[0], 1, sem="sc")   # at: sc
    fails(_k(k2), "sc", "pg.ptx.atom.xor: sem='sc' is not allowed; sem must be one of "
          "'relaxed', 'acquire', 'release', 'acq_rel'", TraceError)


def test_a_scope_ptx_lacks_is_refused():
    def k(C: pg.Tensor((4,), "uint32")):
        pg.ptx.atom.add(C[0], 1, scope="block")   # at: atom
    fails(_k(k), "atom", "pg.ptx.atom.add: scope='block' is not allowed; scope must be one "
          "of 'cta', 'cluster', 'gpu', 'sys'", TraceError)

    def k2(C: pg.Tensor((4,), "uint32")):
        pg.ptx.fence.sc("device")   # at: fence
    fails(_k(k2), "fence", "pg.ptx.fence.sc: scope='device' is not allowed; scope must be "
          "one of 'cta', 'cluster', 'gpu', 'sys'", TraceError)


def test_ptr_must_be_an_element_of_global_or_shared_memory():
    def k(C: pg.Tensor((4,), "uint32")):
        pg.ptx.atom.add(pg.thread_id(32), 1)   # at: expr
    fails(_k(k), "expr", "pg.ptx.atom.add: ptr must be an element of a global or shared "
          "tensor (t[i], t.ptr_to([i]) or a tensor, meaning its first element), got the int32 "
          "value tx", TraceError)

    def k2(C: pg.Tensor((4,), "uint32")):
        L = pg.alloc_local((4,), "uint32")
        pg.ptx.atom.add(L[1], 1)   # at: local
    fails(_k(k2), "local", "pg.ptx.atom.add: ptr 'L' is in local memory (per thread: no other "
          "thread can race on it); atomics act on global or shared memory only", TraceError)


def test_a_value_is_converted_as_a_store_would_be():
    def k(C: pg.Tensor((4,), "uint32")):
        pg.ptx.atom.add(C[0], pg.thread_id(32))   # at: expr
    fails(_k(k), "expr", "pg.ptx.atom.add: value is int32, but 'C' holds uint32 elements; "
          "use pg.cast(value, 'uint32')", TraceError)

    def k2(C: pg.Tensor((4,), "int64")):
        pg.ptx.atom.cas(C[0], 0, 1.5)   # at: float
    fails(_k(k2), "float", "pg.ptx.atom.cas: desired=1.5 is a float, but 'C' holds int64 "
          "elements; use an integer or pg.cast(desired, 'int64')", TraceError)


def test_unknown_helpers_are_attribute_errors():
    def k(C: pg.Tensor((4,), "uint32")):
        pg.ptx.atom.mul(C[0], 2)   # at: mul
    fails(_k(k), "mul", "pg.ptx.atom has no helper 'mul'; use pg.ptx['atom.mul...'] for raw "
          "PTX", TraceAttributeError)


def test_cluster_scope_and_a_bfloat16_add_need_sm_90():
    def k(C: pg.Tensor((4,), "uint32")):
        pg.ptx.atom.add(C[0], 1, scope="cluster")   # at: cluster
    fails(_k(k, "sm_80"), "cluster", "'atom scope=cluster' needs sm_90 or newer; the target "
          "is sm_80", ArchError)
    assert "atom.relaxed.cluster.global.add.u32" in _k(k, "sm_90a")()

    def k2(B: pg.Tensor((4,), "bfloat16")):
        pg.ptx.red.add(B[0], 1.0, sem="release", scope="cta")   # at: bf16
    fails(_k(k2, "sm_80"), "bf16", "'bfloat16 red.add' needs sm_90 or newer; the target is "
          "sm_80", ArchError)

    def k3(C: pg.Tensor((4,), "uint32")):
        pg.ptx.fence.acq_rel("cluster")   # at: fence
    fails(_k(k3, "sm_80"), "fence", "'fence scope=cluster' needs sm_90 or newer; the target "
          "is sm_80", ArchError)


# ---------------------------------------------------------------- the protocol check
def test_the_protocol_check_accepts_a_counter_and_its_branch():
    """A kernel the check follows (an mbarrier) with thread 0's acq_rel counter and a branch
    on the old value builds."""
    @pg.kernel(grid=(4,), block=(128,))
    def k(CNT: pg.Tensor((4,), "uint32"), O: pg.Tensor((4,), "uint32")):
        tx = pg.thread_id(128)
        bar = pg.alloc_shared((1,), "uint64")
        flag = pg.alloc_shared((1,), "uint32")
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 128)
        pg.cta_sync()
        with pg.if_(tx == 0):
            old = pg.ptx.atom.add(CNT[pg.cta_id(4)], 1, sem="acq_rel")
            with pg.if_(old == 3):
                O[0] = old
            pg.ptx.red.add(flag[0], 1, scope="cta")
        pg.ptx.mbarrier.arrive(bar)
        pg.ptx.mbarrier.try_wait(bar, 0)
        O[1] = flag[0]
    assert "atom.acq_rel.gpu.global.add.u32" in k.ptx("sm_90a")


def _cp_then(atomic, space="shared"):
    def k(A: pg.Tensor((32, 64), "float32"), C: pg.Tensor((4,), "float32")):
        pg.thread_id(128)
        T = pg.alloc_shared((32, 64), "float32", align=16)
        pg.tile.cta.copy_async(T, A, dispatch="cp_async")   # at: copy
        pg.tile.cta.async_commit()
        atomic(T if space == "shared" else C)
        pg.tile.cta.async_wait(0)
    return lambda: pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_90a")


def test_an_atom_on_shared_memory_is_a_read_for_the_protocol_check():
    fails(_cp_then(lambda T: pg.ptx.atom.add(T[0, 0], 1.0)), "atom",   # at: atom
          f"this reads shared tile 'T', written by cp.async copy_async at {at('copy')}, before "
          "an async_wait() covers its group: the copy may not have landed (stale data); call "
          "pg.tile.<scope>.async_wait(0) (or a pending count that leaves its group out) before "
          "the read", TraceError)


def test_an_atomic_on_global_memory_is_invisible_to_the_protocol_check():
    for atomic in (lambda C: pg.ptx.atom.add(C[0], 1.0), lambda C: pg.ptx.red.add(C[1], 2.0)):
        assert "cp.async.wait_group 0" in _cp_then(atomic, "global")()


def test_a_red_on_shared_memory_is_a_write_the_proxy_fence_check_sees():
    def k(S_: pg.Tensor((16, 64), "float16"), B: pg.Tensor((64, 64), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((16, 64), "float16", align=1024, name="T")
        pool.commit()
        pg.ptx.red.add(T[0, tx % 64], 1.0, scope="cta")
        pg.cta_sync()
        with pg.if_(tx == 0):
            pg.tile.thread.copy_async(B[0:16, 0:64], T)
    with pytest.raises(pg.PtxgenError) as e:
        pg.kernel(k, grid=(1,), block=(128,)).ptx("sm_90a")
    assert "this store reads shared tile 'T', written by plain stores at test_atomics.py:" \
        in str(e.value)
    assert "with no fence.proxy.async in between" in str(e.value)


def test_an_atomic_is_a_write_for_the_read_only_path_check():
    def k(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(32)
        A.vload([tx * 4], "float32x4", cache_hint="nc")        # at: load
        pg.ptx.red.add(A[0], 1.0)                               # at: red
    fails(lambda: pg.kernel(k, grid=(1,), block=(32,)), "load",
          f"'A' is loaded through the read-only data path (cache_hint 'nc', ld.global.nc) but "
          f"this kernel also writes it (at {at('red')}); that cache is not coherent with the "
          f"kernel's own writes and may return stale data: drop the 'nc' hint or write another "
          f"buffer", TraceError)


# ---------------------------------------------------------------- the simulator
def test_sim_a_grid_wide_counter_hands_out_each_value_once():
    cnt, old = np.zeros(1, np.uint32), np.full(1024, 0xFFFFFFFF, np.uint32)
    ptxsim.run(AC.counter_kernel(4, 256), [cnt, old])
    AC.check_counter(cnt, old, 1024)


def test_sim_the_last_cta_sums_every_partial():
    x = np.random.default_rng(3).standard_normal(8 * 128).astype(np.float32)
    part, cnt, out = np.zeros(8, np.float32), np.zeros(1, np.uint32), np.zeros(1, np.float32)
    ptxsim.run(AC.last_cta_kernel(8, 128), [x, part, cnt, out])
    want_parts, want = AC.last_cta_reference(x, 8, 128)
    assert np.array_equal(part, want_parts) and out[0] == want and cnt[0] == 8


def test_sim_red_add_sums_float32_in_the_element_precision():
    @pg.kernel(grid=(2,), block=(128,))
    def k(X: pg.Tensor((256,), "float32"), S: pg.Tensor((2,), "float32")):
        i = pg.let(pg.cta_id(2) * 128 + pg.thread_id(128))
        pg.ptx.red.add(S[0], X[i])
        pg.ptx.red.add(S[1], X[i], sem="release", scope="cta")
    x = (np.arange(256, dtype=np.float32) - 100.0) / 8     # every partial sum is exact
    s = np.array([0.5, 1e8], np.float32)
    ptxsim.run(k, [x, s])
    seq = np.float32(1e8)
    for v in x:                        # the simulator's order: CTA 0's threads, then CTA 1's
        seq = np.float32(seq + v)
    assert s[0] == np.float32(0.5 + x.sum(dtype=np.float64)) and s[1] == seq != 1e8 + x.sum()


def test_sim_cas_swaps_only_from_the_expected_bits():
    @pg.kernel(grid=(1,), block=(64,))
    def k(X: pg.Tensor((64,), "uint32"), O: pg.Tensor((128,), "uint32"),
          F: pg.Tensor((2,), "float32"), G: pg.Tensor((2,), "float32")):
        tx = pg.thread_id(64)
        u = pg.cast(tx, "uint32")
        O[tx] = pg.ptx.atom.cas(X[tx], u, u + 1000)          # X[t] == t: swaps
        O[tx + 64] = pg.ptx.atom.cas(X[tx], u, u + 5, sem="acq_rel")   # stale: does not
        with pg.if_(tx == 0):
            G[0] = pg.ptx.atom.cas(F[0], 0.0, 1.0)            # F[0] is -0.0: bits differ
            G[1] = pg.ptx.atom.cas(F[1], 0.0, 2.0)
    x, o = np.arange(64, dtype=np.uint32), np.zeros(128, np.uint32)
    f, g = np.array([-0.0, 0.0], np.float32), np.zeros(2, np.float32)
    ptxsim.run(k, [x, o, f, g])
    t = np.arange(64, dtype=np.uint32)
    assert np.array_equal(x, t + 1000) and np.array_equal(o, np.concatenate([t, t + 1000]))
    assert f.view(np.uint32).tolist() == [0x80000000, 0x40000000]
    assert g.view(np.uint32).tolist() == [0x80000000, 0]


def test_sim_inc_and_dec_wrap_at_their_bound():
    @pg.kernel(grid=(1,), block=(10,))
    def k(C: pg.Tensor((2,), "uint32"), O: pg.Tensor((20,), "uint32")):
        tx = pg.thread_id(10)
        O[tx] = pg.ptx.atom.inc(C[0], 3)
        O[tx + 10] = pg.ptx.atom.dec(C[1], 3)
    c, o = np.zeros(2, np.uint32), np.zeros(20, np.uint32)
    ptxsim.run(k, [c, o])
    # inc: (old >= 3) ? 0 : old + 1;  dec: (old == 0 || old > 3) ? 3 : old - 1
    assert o[:10].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1] and c[0] == 2
    assert o[10:].tolist() == [0, 3, 2, 1, 0, 3, 2, 1, 0, 3] and c[1] == 2


def test_sim_every_operation_on_shared_and_global_elements():
    @pg.kernel(grid=(1,), block=(1,))
    def k(I: pg.Tensor((6,), "int32"), L: pg.Tensor((2,), "int64"),
          U: pg.Tensor((2,), "uint64"), O: pg.Tensor((9,), "int64")):
        sm = pg.alloc_shared((4,), "int32")
        sm[0] = -5
        sm[1] = 12
        pg.cta_sync()
        O[0] = pg.cast(pg.ptx.atom.min(sm[0], 3, scope="cta"), "int64")    # signed: -5 stays
        O[1] = pg.cast(pg.ptx.atom.max(sm[1], -7, scope="cta"), "int64")
        O[2] = pg.cast(pg.ptx.atom.xor(sm[1], 0xFF, scope="cta"), "int64")
        I[0] = sm[0]
        I[1] = sm[1]
        O[3] = pg.cast(pg.ptx.atom.and_(I[2], 0x0F), "int64")
        O[4] = pg.cast(pg.ptx.atom.or_(I[3], 0x30), "int64")
        O[5] = pg.cast(pg.ptx.atom.exch(I[4], -9), "int64")
        O[6] = pg.ptx.atom.add(L[0], -3)                     # .u64: wraps like int64
        O[7] = pg.ptx.atom.min(L[1], -(1 << 40))
        O[8] = pg.cast(pg.ptx.atom.max(U[0], 1 << 63), "int64")
        pg.ptx.red.min(U[1], 5)                              # unsigned: 5 < 2**63
        pg.ptx.red.xor(I[5], 6)
    i = np.array([0, 0, 0x3C, 0x03, 7, 5], np.int32)
    l_, u = np.array([2, 1], np.int64), np.array([1, 1 << 63], np.uint64)
    o = np.zeros(9, np.int64)
    ptxsim.run(k, [i, l_, u, o])
    assert o.tolist() == [-5, 12, 12, 0x3C, 0x03, 7, 2, 1, 1]
    assert i.tolist() == [-5, 12 ^ 0xFF, 0x0C, 0x33, -9, 3]
    assert l_.tolist() == [-1, -(1 << 40)] and u.tolist() == [1 << 63, 5]


def test_sim_float_adds_round_in_the_element_format():
    f16 = lambda x: int(np.float16(x).view(np.uint16))   # noqa: E731
    f32 = lambda x: int(np.float32(x).view(np.uint32))   # noqa: E731
    assert apply("add", "f16", f16(2048.0), f16(1.0)) == f16(2048.0)       # ties to even
    assert apply("add", "f16", f16(2048.0), f16(3.0)) == f16(2052.0)
    assert apply("add", "f16", f16(2.0 ** -24), f16(2.0 ** -24)) == f16(2.0 ** -23)   # noftz
    assert apply("add", "bf16", 0x3F80, 0x3B80) == 0x3F80                  # 1 + 2**-8: even
    assert apply("add", "f32", f32(1.0), f32(2.0 ** -24)) == f32(1.0)
    assert apply("add", "f32", f32(0.0), f32(1e-40)) == 0                   # .f32 flushes
    assert apply("add", "f32", 0x80000000, 0x80000000) == 0x80000000       # -0 + -0
    assert apply("add", "f64", int(np.float64(0.1).view(np.uint64)),
                 int(np.float64(0.2).view(np.uint64))) == int(np.float64(0.1 + 0.2).view(np.uint64))


# ---------------------------------------------------------------- another CTA's shared memory
def test_an_atomic_on_a_cluster_view_is_shared_cluster_at_the_mapa_address():
    @pg.kernel(grid=(2,), block=(32,), cluster=(2, 1, 1))
    def k(O: pg.Tensor((64,), "int32")):
        tx = pg.thread_id(32)
        sm = pg.alloc_shared((4,), "int32")
        peer = pg.cluster_view(sm, 0)
        pg.ptx.red.add(peer[0], tx)
        O[tx] = pg.ptx.atom.max(peer[2], tx, sem="acq_rel", scope="cluster")
    text = k.ptx("sm_90a")
    mapa = re.search(r"mapa\.shared::cluster\.u32 (%r\d+), %r\d+, 0;", text).group(1)
    red, atom = instrs(k)
    assert red == f"red.relaxed.gpu.shared::cluster.add.s32 [{mapa}], %r1;"
    assert re.fullmatch(rf"atom\.acq_rel\.cluster\.shared::cluster\.max\.s32 %r\d+, "
                        rf"\[{re.escape(mapa)}\+8\], %r1;", atom), atom
    assert re.search(r"mov\.u32 %r1, %tid\.x;", text) and ".version 8.0" in text


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_every_admitted_form_assembles_on_another_ctas_shared_memory(arch):
    kern, made, left_out = _every_form(arch, ATOMIC_CLUSTER_SPACE)
    text = kern.ptx(arch)
    emitted = [ln.strip().split(" ")[0] for ln in text.splitlines()
               if ln.strip().startswith(("atom.", "red."))]
    assert emitted == made and left_out == []
    # atom: 44 (op, dtype) pairs x 4 sems x 3 scopes (not cta); red: 30 x 2 x 3
    assert len(made) == 44 * 12 + 30 * 6
    assert all(".shared::cluster." in c and ".cta." not in c for c in made)
    ok, log = assemble(text, arch)
    assert ok, log[-2000:]


def test_atomics_on_another_ctas_shared_memory_need_sm_90():
    kern, made, left_out = _every_form("sm_80", ATOMIC_CLUSTER_SPACE)
    assert made == [] and len(left_out) == 44 * 12 + 30 * 6
    for code in left_out:
        ins = code.split(".")[0]
        with pytest.raises(ArchError) as e:
            check_opcode(code, parse_target("sm_80"))
        assert str(e.value) == (f"'distributed shared memory ({ins}.shared::cluster)' needs "
                                f"sm_90 or newer; the target is sm_80")
    with pytest.raises(ArchError) as e:       # a kernel of them: its cluster says it first
        kern.ptx("sm_80")
    assert str(e.value) == (
        f"{at('every form')}: cluster=(2, 1, 1) needs sm_90 or newer (thread-block "
        f"clusters, .reqnctapercluster); the target is sm_80: build for sm_90a, or drop cluster=")
    # ptxas agrees: the same form on sm_80
    ok, log = assemble(_module("red.relaxed.gpu.shared::cluster.add.u32 [%r1], %r2;")
                       .replace("sm_90a", "sm_80").replace(".version 8.0", ".version 7.8"),
                       "sm_80")
    assert not ok and "Feature '::cluster' requires .target sm_90 or higher" in log


def test_the_gate_holds_a_raw_shared_cluster_atomic_too():
    def k(O: pg.Tensor((32,), "uint32")):
        sm = pg.alloc_shared((4,), "uint32")
        old = pg.local_scalar("uint32")
        pg.ptx["atom.relaxed.cluster.shared::cluster.add.u32"](old, sm[0], 1)   # at: raw
        O[0] = old
    fails(_k(k, "sm_80"), "raw", "'distributed shared memory (atom.shared::cluster)' needs "
          "sm_90 or newer; the target is sm_80", ArchError)
    assert "atom.relaxed.cluster.shared::cluster.add.u32" in _k(k, "sm_90a")()


def _dsmem(body, arch="sm_90a"):
    return lambda: pg.kernel(body, grid=(2,), block=(32,), cluster=(2, 1, 1)).ptx(arch)


def test_a_cta_scope_on_another_ctas_shared_memory_is_refused():
    def k(C: pg.Tensor((4,), "uint32")):
        sm = pg.alloc_shared((4,), "uint32", name="cnt")
        peer = pg.cluster_view(sm, 1)
        pg.ptx.red.add(peer[0], 1, scope="cta")   # at: cta
    fails(_dsmem(k), "cta", "pg.ptx.red.add: scope='cta' on 'peer', a cluster_view (another "
          "CTA's shared memory): two atomics are indivisible against each other only when each "
          "one's scope includes the other's thread (PTX ISA, memory consistency model: morally "
          "strong operations), and .cta leaves out the CTA that owns the memory and the "
          "cluster's other CTAs; use scope='cluster' (or 'gpu', 'sys')", TraceError)
    # ptxas itself takes it: the rule is the memory model's
    ok, log = assemble(_module("atom.relaxed.cta.shared::cluster.add.u32 %r1, [%r2], %r3;"),
                       "sm_90a")
    assert ok, log

    def k2(F: pg.Tensor((4,), "float32")):
        sm = pg.alloc_shared((4,), "float32")
        peer = pg.cluster_view(sm, 1)
        pg.ptx.atom.xor(peer[0], 1, scope="cluster")   # at: xor
    fails(_dsmem(k2), "xor", "pg.ptx.atom.xor: ptr 'peer' holds float32 elements, which xor "
          "does not take; xor takes int32, int64, uint32, uint64 elements", TraceError)


def test_the_protocol_check_accepts_a_cluster_counter():
    """Every CTA's red.add into rank 0's tile after a cluster_sync, rank 0's read after
    another: no error (and none for tests/support/atomic_cases.py's red + atom counter); the
    read with no second cluster_sync is refused."""
    assert "atom.relaxed.cluster.shared::cluster.add.u32" in AC.cluster_counter_kernel().ptx(
        "sm_90a")

    def kernel(sync):
        def k(X: pg.Tensor((64,), "uint32"), S: pg.Tensor((1,), "uint32")):
            tx = pg.thread_id(32)
            acc = pg.alloc_shared((2,), "uint32")
            with pg.if_(tx == 0):
                acc[0] = 0
            pg.cluster_sync()
            pg.ptx.red.add(pg.cluster_view(acc, 0)[0], X[tx])   # at: red
            if sync:
                pg.cluster_sync()
            with pg.if_((pg.cta_rank_in_cluster() == 0) & (tx == 0)):
                S[0] = acc[0]   # at: read
        return _dsmem(k)
    assert re.search(r"red\.relaxed\.gpu\.shared::cluster\.add\.u32 \[%r\d+\], %r\d+;\n"
                     r"(.*\n){1,4}\s*barrier\.cluster\.arrive;", kernel(True)())
    fails(kernel(False), "read", f"this reads shared tile 'acc', written through a cluster_view "
          f"of it at {at('red')} with no cluster_sync in between: the peer CTA's write may not "
          f"be visible yet; call pg.cluster_sync() between the write and the read", TraceError)


def test_an_atom_after_plain_writes_through_a_cluster_view_is_still_a_stale_read():
    def k(O: pg.Tensor((32,), "uint32")):
        tx = pg.thread_id(32)
        peer = pg.cluster_view(pg.alloc_shared((2,), "uint32", name="acc"), 0)
        O[tx] = pg.ptx.atom.add(peer[0], 1, scope="cluster")
        O[tx] = pg.ptx.atom.add(peer[0], 1, scope="gpu")     # after an atomic: no stale read
        peer[1] = 5                                                   # at: st
        O[tx] = pg.ptx.atom.add(peer[0], 1, scope="cluster")          # at: atom
    fails(_dsmem(k), "atom", f"this reads shared tile 'acc', written through a cluster_view of "
          f"it at {at('st')} with no cluster_sync in between: the peer CTA's write may not be "
          f"visible yet; call pg.cluster_sync() between the write and the read", TraceError)


@pytest.mark.parametrize("clusters", [1, 2])
def test_sim_a_cluster_counts_into_rank_0s_shared_memory(clusters):
    size, threads = 4, 64
    x = np.random.default_rng(clusters).integers(0, 1 << 24, clusters * size * threads,
                                                 dtype=np.uint32)
    total, cnt = np.zeros(clusters, np.uint32), np.zeros(clusters, np.uint32)
    old = np.full(clusters * size * threads, 0xFFFFFFFF, np.uint32)
    ptxsim.run(AC.cluster_counter_kernel(clusters, size, threads), [x, total, cnt, old])
    AC.check_cluster_counter(x, total, cnt, old, clusters, size, threads)
    assert total.tolist() == [int(v) % (1 << 32) for v in
                              x.astype(np.uint64).reshape(clusters, -1).sum(axis=1)]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_the_gpu_cases_assemble(arch):
    """tests/gpu/test_atomics_gpu.py's kernels, at its sizes."""
    for k in (AC.counter_kernel(132, 1024), AC.last_cta_kernel(264, 256)):
        ok, log = assemble(k.ptx(arch), arch)
        assert ok, log[-2000:]
