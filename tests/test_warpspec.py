"""Warp specialization on the CPU: pg.warpgroup_role and pg.setmaxnreg.

The kernel of gemm_cases.make_warpspec_kernel (a producer warpgroup at 40 registers, two
wgmma consumers at 232) runs in ptxsim and matches numpy; its PTX carries the directive
ptxas needs to honour setmaxnreg; every misuse is a build error with the rule (exact text).
"""
import re
import shutil
import subprocess

import numpy as np
import pytest

from support import gemm_cases as G
import ptxgen as pg
from support.asm import assemble
from support.ptxsim import run


def test_warp_specialized_gemm_matches_numpy_in_the_simulator():
    k = G.make_warpspec_kernel()
    c = G.Case(M=128)
    a, b, ref = G.exact_inputs(c, seed=5)
    D = np.full((2, 64, 64), np.nan, np.float32)
    run(k, [a, b, D])
    assert np.array_equal(D.reshape(128, 64), ref)


def test_ptx_roles_and_register_directives():
    ptx = G.make_warpspec_kernel().ptx("sm_90a")
    lines = [ln.strip() for ln in ptx.splitlines() if not ln.strip().startswith("//")]
    assert lines[lines.index(".maxntid 384, 1, 1") + 1] == ".minnctapersm 1"
    assert [ln for ln in lines if ln.startswith("setmaxnreg")] == [
        "setmaxnreg.dec.sync.aligned.u32 40;", "setmaxnreg.inc.sync.aligned.u32 232;"]
    assert re.search(r"setp\.eq\.s32 %p\d+, %r\d+, 0;", ptx)          # tid / 128 == 0
    assert re.search(r"setp\.ge\.s32 %p\d+, %r\d+, 128;", ptx)        # warpgroups 1..2
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log


def test_kernels_without_setmaxnreg_get_no_directive():
    ptx = G.kernel_for(G.Case()).ptx("sm_90a")
    assert ".minnctapersm" not in ptx


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (whole-program mode)")
def test_whole_program_ptxas_honours_setmaxnreg(tmp_path):
    """With .maxntid 384 + .minnctapersm 1 ptxas fixes the entry count at 168 (65536 / 384,
    per 8) and keeps setmaxnreg.  nvJitLink compiles PTX as relocatable code and drops it
    (C7504 'ignored to maintain compatibility across compilation units'): the kernel stays
    correct, only the reallocation is lost -- see the report in tests/gpu."""
    p = tmp_path / "ws.ptx"
    p.write_text(G.make_warpspec_kernel().ptx("sm_90a"))
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(p), "-o", str(tmp_path / "ws.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Used 168 registers" in r.stderr
    assert "setmaxnreg' ignored" not in r.stderr


def _kernel(body, block=384):
    def k(D: pg.Tensor((1,), "float32")):
        tx = pg.thread_id(block)
        body(tx)
    return pg.kernel(k, grid=(1,), block=(block,))


def _msg(e):
    return str(e.value).split(": ", 1)[1]


def _dec(n):
    def body(tx):
        with pg.warpgroup_role(0):
            pg.setmaxnreg(n, "dec")
    return body


@pytest.mark.parametrize("n", [16, 20, 44, 260, 264])
def test_count_outside_range(n):
    with pytest.raises(pg.TraceError) as e:
        _kernel(_dec(n))
    assert _msg(e) == (f"setmaxnreg({n}, 'dec'): the register count must be a multiple of 8 in "
                       f"[24, 256] (PTX ISA setmaxnreg)")


def test_action_is_checked():
    def body(tx):
        pg.setmaxnreg(40, "down")
    with pytest.raises(pg.TraceError) as e:
        _kernel(body)
    assert _msg(e) == "setmaxnreg action must be 'inc' or 'dec', got 'down'"


@pytest.mark.parametrize("cond", ["half", "warp"])
def test_refused_under_a_branch_that_splits_a_warpgroup(cond):
    def body(tx):
        with pg.warpgroup_role(0):
            with pg.if_(tx < 64 if cond == "half" else tx % 128 < 32):
                pg.setmaxnreg(40, "dec")
    with pytest.raises(pg.TraceError) as e:
        _kernel(body)
    assert _msg(e) == ("setmaxnreg must be issued by all 4 warps of a warpgroup, but an "
                       "enclosing branch splits one (the branch condition differs between "
                       "threads 0..127 of one group); call it directly under "
                       "pg.warpgroup_role(...), outside branches on the thread id")


def test_allowed_under_a_branch_uniform_over_warpgroups():
    def body(tx):
        with pg.if_(tx >= 128):
            pg.setmaxnreg(160, "dec")
    assert "setmaxnreg.dec.sync.aligned.u32 160;" in _kernel(body).ptx("sm_90a")


def test_dec_cannot_raise_and_inc_cannot_lower():
    with pytest.raises(pg.TraceError) as e:
        _kernel(_dec(200))
    assert _msg(e) == ("setmaxnreg(200, 'dec') on warpgroup 0, which has 168 registers per "
                       "thread (at kernel entry): 'dec' can only lower the count (use inc)")

    def body(tx):
        with pg.warpgroup_role(1):
            pg.setmaxnreg(120, "inc")
    with pytest.raises(pg.TraceError) as e:
        _kernel(body)
    assert _msg(e) == ("setmaxnreg(120, 'inc') on warpgroup 1, which has 168 registers per "
                       "thread (at kernel entry): 'inc' can only raise the count (use dec)")


def test_counts_must_fit_the_sm():
    def body(tx):
        with pg.warpgroup_role(0):
            pg.setmaxnreg(40, "dec")
        with pg.warpgroup_role(range(1, 3)):
            pg.setmaxnreg(240, "inc")
    with pytest.raises(pg.TraceError) as e:
        _kernel(body)
    assert _msg(e) == ("setmaxnreg: the warpgroups ask for 66560 registers (warpgroup 0: 40, "
                       "warpgroup 1: 240, warpgroup 2: 240 per thread, x 128 threads), more than "
                       "the 65536 an SM has; a setmaxnreg.inc that cannot be satisfied waits "
                       "forever: lower the counts so they sum to at most 512 per thread")


def test_role_checks():
    def outside(tx):
        with pg.warpgroup_role(3):
            pass

    def nested(tx):
        with pg.warpgroup_role(0):
            with pg.warpgroup_role(1):
                pass

    def bad(tx):
        with pg.warpgroup_role(range(0, 4, 2)):
            pass
    for body, msg in (
            (outside, "warpgroup_role(3): the block has 3 warpgroup(s) (384 threads)"),
            (nested, "warpgroup_role(1) is nested in the role of warpgroups [0] (at "),
            (bad, "warpgroup_role takes a warpgroup index or a range of them (range(1, 3)), "
                  "got range(0, 4, 2)")):
        with pytest.raises(pg.TraceError) as e:
            _kernel(body)
        assert _msg(e).startswith(msg)
    with pytest.raises(pg.TraceError) as e:
        _kernel(lambda tx: _dec(40)(tx), block=96)
    assert _msg(e) == ("warp specialization needs a 1-D block of whole warpgroups (a multiple "
                       "of 128 threads); the block is (96, 1, 1)")


def test_role_rank_and_nesting():
    ranks = []

    def body(tx):
        with pg.warpgroup_role(range(1, 3)) as c:
            ranks.append(c)
            with pg.warpgroup_role(2):
                pass
    k = _kernel(body)
    assert "role_rank = pg.let(%tid.x // 128 - 1)" in str(k.ir)
    assert ranks[0].dtype.name == "int32"


def _rank_kernel(guard=None):
    """Each thread of warpgroups 1..2 writes its role rank; warpgroup 0 writes -1."""
    def k(D: pg.Tensor((384,), "int32")):
        tx = pg.thread_id(384)
        D[tx] = -1
        with pg.if_(guard(tx)) if guard else _nothing():
            with pg.warpgroup_role(range(1, 3)) as c:
                D[tx] = c
    return pg.kernel(k, grid=(1,), block=(384,))


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_BROADCAST = re.compile(r"shfl\.sync\.idx\.b32 %r\d+, %r\d+, 0, 31, -1;")


def test_role_rank_is_lane_zeros_copy_and_runs():
    """The rank is taken from lane 0 (shfl.sync.idx: ptxas then keeps it uniform); every
    thread still gets its warpgroup's rank."""
    k = _rank_kernel()
    ptx = k.ptx("sm_90a")
    assert len(_BROADCAST.findall(ptx)) == 1
    assert "role_rank = pg.let(%tid.x // 128 - 1)  # lane 0's copy (shfl.sync.idx)" in str(k.ir)
    D = np.full(384, 7, np.int32)
    run(k, [D])
    assert np.array_equal(D, np.arange(384) // 128 - 1)
    ok, log = assemble(ptx, "sm_90a")
    assert ok, log


def test_role_rank_is_not_broadcast_where_a_branch_splits_warps():
    """Inside a branch that leaves part of a warp (lanes 48..63 of warp 1 out), a full-mask
    shuffle would be undefined: the rank is the plain value, still right in every thread."""
    k = _rank_kernel(lambda tx: tx % 64 < 48)
    ptx = k.ptx("sm_90a")
    assert not _BROADCAST.search(ptx)
    D = np.full(384, 7, np.int32)
    run(k, [D])
    t = np.arange(384)
    assert np.array_equal(D, np.where((t >= 128) & (t % 64 < 48), t // 128 - 1, -1))


def test_single_warpgroup_role_has_no_broadcast():
    def body(tx):
        with pg.warpgroup_role(1):
            pass
    assert not _BROADCAST.search(_kernel(body).ptx("sm_90a"))


def test_setmaxnreg_needs_sm90a():
    k = _kernel(_dec(40))
    with pytest.raises(pg.ArchError) as e:
        k.ptx("sm_80")
    assert _msg(e) == ("instruction 'setmaxnreg.dec.sync.aligned.u32' needs one of sm_100a, "
                       "sm_101a, sm_103a, sm_120a, sm_90a; the target is sm_80")


def test_named_barrier_arrive_signals_without_waiting():
    """Ping-pong between two warpgroups: each waits on its own barrier (bar.sync id, 256)
    and lets the other go (bar.arrive other, 256); in ptxsim both finish, in turn."""
    def k(Out: pg.Tensor((256,), "int32")):
        tx = pg.thread_id(256)
        turn = pg.alloc_shared((1,), "int32")
        with pg.if_(tx == 0):
            turn[0] = 0
        pg.cta_sync()
        with pg.warpgroup_role(range(0, 2)) as c:
            with pg.if_(c == 1):
                pg.named_barrier_arrive(10, 256)          # warpgroup 0 goes first
            for i in pg.serial(3):
                pg.named_barrier(10 + c, 256)
                with pg.if_(tx % 128 == 0):
                    turn[0] = turn[0] * 2 + c
                pg.named_barrier_arrive(11 - c, 256)
            Out[tx] = turn[0]
    kern = pg.kernel(k, grid=(1,), block=(256,))
    ptx = kern.ptx("sm_90a")
    assert re.search(r"bar\.arrive %r\d+, 256;", ptx) and "bar.arrive 10, 256;" in ptx
    assert "pg.named_barrier_arrive(10, 256)" in str(kern.ir)
    out = np.zeros(256, np.int32)
    run(kern, [out])
    # turns alternate 0, 1, 0, 1, 0, 1: the bits of 0b010101
    assert int(out[255]) == 0b010101


def test_broadcast_let_takes_32_bit_values_only():
    """ir.Let(broadcast=True) is emitted as shfl.sync.idx.b32: a 64-bit value is refused at
    the build, not left to ptxas."""
    from ptxgen.builder.context import current, user_site
    from ptxgen.builder.control import bind_let

    def k(D: pg.Tensor((32,), "int64")):
        tx = pg.thread_id(32)
        D[tx] = bind_let(current(), user_site(), "w", pg.cast(tx // 32, "int64"), None,
                         broadcast=True)
    with pytest.raises(pg.PtxgenError) as e:
        pg.kernel(k, grid=(1,), block=(32,)).ptx("sm_90a")
    assert str(e.value).endswith("a broadcast let takes a 32-bit value (shfl.sync.idx.b32); "
                                 "'w' is int64")
