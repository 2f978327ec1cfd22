"""What a body binds (pg.let, local_scalar, allocations, views, thread ids)
is dead after the body: threads that skipped it (or a loop that ran no iteration) never wrote
it.  Rejected at the use, like a loop variable after its loop."""
import ptxgen as pg
from support.located import at, fails, kernel

SKIP = "threads that skipped the body never wrote it"
NONE = "it is unset when the loop runs no iteration"


def test_let_in_if_used_after():
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        with pg.if_(tx < 4):                                   # at: if
            x = pg.let(tx * 2)
        A[x] = 1.0                                             # at: use

    fails(lambda: kernel(k), "use",
          f"'x' was bound inside the pg.if_ body at {at('if')} and is used after that body "
          f"ended ({SKIP}); bind it before the pg.if_ (pg.local_scalar, assigned inside) or use "
          f"it only inside the body", pg.TraceError)


def test_local_scalar_in_else_used_after():
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        with pg.if_(tx < 4):
            A[tx] = 0
        with pg.else_():                                       # at: else
            s = pg.local_scalar("int32", 7)
        A[tx] = s + 1                                          # at: use

    fails(lambda: kernel(k), "use",
          f"buffer 's' was allocated inside the pg.else_ body at {at('else')} and is used after "
          f"that body ended ({SKIP}); allocate it before the pg.else_ or use it only inside the "
          f"body", pg.TraceError)


def test_value_from_a_while_body_used_after():
    def k(A: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        i = pg.local_scalar("int32", 0)
        with pg.while_(i < 3):                                 # at: while
            v = pg.let(pg.cast(i, "float32") * 2.0)
            i += 1
        A[tx] = v                                              # at: use

    fails(lambda: kernel(k), "use",
          f"'v' was bound inside the pg.while_ body at {at('while')} and is used after that body "
          f"ended ({NONE}); bind it before the pg.while_ (pg.local_scalar, assigned inside) or "
          f"use it only inside the body", pg.TraceError)


def test_expression_built_inside_used_after():
    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        for j in pg.serial(4):                                 # at: loop
            w = pg.warp_id()
            e = w * 4 + j
        A[tx] = e - j + tx                                     # at: use

    # `e` holds the warp id bound in the loop body (and the loop variable j): the first dead
    # name in the expression, depth first, is reported
    fails(lambda: kernel(k), "use",
          f"'w' was bound inside the pg.serial body at {at('loop')} and is used after that body "
          f"ended ({NONE}); bind it before the pg.serial (pg.local_scalar, assigned inside) or "
          f"use it only inside the body", pg.TraceError)


def test_view_declared_inside_used_after_and_in_raw_ptx():
    def k(A: pg.Tensor((64,), "float32")):
        tx = pg.thread_id(32)
        with pg.if_(tx < 32):                                  # at: if
            v = A.view(2, 32)
        r = pg.alloc_local((1,), "float32")
        pg.ptx["ld.global.f32"](r[0], v.ptr_to([1, tx]))       # at: use

    fails(lambda: kernel(k), "use",
          f"buffer 'v' was declared inside the pg.if_ body at {at('if')} and is used after that "
          f"body ended ({SKIP}); declare it before the pg.if_ or use it only inside the body",
          pg.TraceError)


def test_tile_copy_of_a_buffer_from_a_closed_body():
    def k(A: pg.Tensor((32, 32), "float32")):
        for i in pg.unroll(1):                                 # at: loop
            sm = pg.alloc_shared((32, 32), "float32")
        pg.tile.warp.copy(sm, A)                               # at: use

    fails(lambda: kernel(k), "use",
          f"buffer 'sm' was allocated inside the pg.unroll body at {at('loop')} and is used after "
          f"that body ended (each iteration binds its own); allocate it before the pg.unroll or "
          f"use it only inside the body", pg.TraceError)


def test_bindings_before_and_inside_stay_valid():
    import numpy as np
    from support import ptxsim

    def k(A: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        s = pg.local_scalar("int32", 0)
        with pg.if_(tx < 4):
            x = pg.let(tx * 2)
            s.set(x)
        with pg.else_():
            s.set(tx + 100)
        A[tx] = s + 1

    a = np.zeros(32, np.int32)
    ptxsim.run(kernel(k), [a])
    t = np.arange(32)
    assert (a == np.where(t < 4, t * 2, t + 100) + 1).all()
