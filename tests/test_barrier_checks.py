"""A barrier under an if_/else_/while_ condition that provably differs
between the threads it waits for (the CTA for cta_sync, a warp for warp_sync and named
barriers) is rejected; uniform, warp-uniform and memory-dependent conditions pass."""
import pytest

import ptxgen as pg
from support.located import fails, kernel


def _msg(what, cond, group, why):
    return (f"{what} is under the condition `{cond}`, which differs between threads of one "
            f"{group} ({why}): the threads that skip it never arrive, so the barrier hangs or "
            f"releases early; move the barrier out of the branch or make the condition uniform "
            f"across each {group}")


def test_cta_sync_under_a_thread_condition():
    def k(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        with pg.if_(tx < 64):
            pg.cta_sync()                                      # at: sync

    fails(lambda: kernel(k, block=(128,)), "sync",
          _msg("pg.cta_sync()", "tx < 64", "CTA", "it is True for thread 0 and False for thread "
               "64"), pg.TraceError)


def test_cta_sync_in_the_else_of_a_2d_block():
    def k(A: pg.Tensor((4, 32), "float32")):
        tx = pg.thread_id(32, "x")
        ty = pg.thread_id(4, "y")
        with pg.if_(ty == 3):
            A[ty, tx] = 0.0
        with pg.else_():
            pg.cta_sync()                                      # at: sync

    fails(lambda: kernel(k, block=(32, 4)), "sync",
          _msg("pg.cta_sync()", "~(ty == 3)", "CTA", "it is True for thread 0 and False for "
               "thread 96 (tid 0, 3, 0)"), pg.TraceError)


def test_barriers_in_a_thread_dependent_while():
    def k(A: pg.Tensor((64,), "float32")):
        tx = pg.thread_id(64)
        with pg.while_(tx % 3 == 0):
            pg.warp_sync()                                     # at: wsync

    fails(lambda: kernel(k, block=(64,)), "wsync",
          _msg("pg.warp_sync()", "tx % 3 == 0", "warp", "it is True for thread 0 and False for "
               "thread 1"), pg.TraceError)

    def k2(A: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        with pg.if_(tx < 48):
            pg.named_barrier(1, 64)                            # at: named

    fails(lambda: kernel(k2, block=(128,)), "named",
          _msg("pg.named_barrier(1, 64)", "tx < 48", "warp", "it is True for thread 32 and "
               "False for thread 48"), pg.TraceError)


@pytest.mark.parametrize("cond", ["warp", "param", "memory", "scalar"])
def test_uniform_or_unknown_conditions_pass(cond):
    def k(A: pg.Tensor((128,), "float32"), n: pg.int32):
        tx = pg.thread_id(128)
        s = pg.local_scalar("int32", 0)
        c = {"warp": lambda: pg.warp_id() == 1, "param": lambda: n > 3,
             "memory": lambda: A[0] > 1.0, "scalar": lambda: s < 4}[cond]()
        with pg.if_(c):
            if cond == "warp":
                pg.named_barrier(1, 32)
                pg.warp_sync()
            else:
                pg.cta_sync()

    assert ".entry" in kernel(k, block=(128,)).ptx("sm_90a")
