"""The build-time synchronization protocol check (ptxgen/passes/protocol.py) and its trace-time
companions (Pipeline, cluster_view, while_): each class of mistake is refused with its located
message, and the correct counterpart builds."""
import re

import pytest

import ptxgen as pg
from ptxgen.errors import TraceError
from ptxgen.layout import ComposeLayout, S, Swizzle, TileLayout
from support.located import at as line_of

HERE = "test_sync_protocol.py"


def at(text):
    """The line of this file whose code starts with `text` (messages name user lines)."""
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.strip().startswith(text):
                return n
    raise AssertionError(text)


def refused(build, message):
    """`build()` raises a TraceError located in this file whose text after `file:line: ` is
    exactly `message`."""
    with pytest.raises(TraceError) as e:
        build()
    text = str(e.value)
    m = re.match(rf"{HERE}:\d+: ", text)
    assert m, text
    assert text[m.end():] == message


def ptx(k, arch="sm_90a"):
    return k.ptx(arch)


# ---- one mbarrier, one TMA load ---------------------------------------------------------------
def tma_kernel(count=1, copies=1, parity=(0,), init=True, sync=True, inval=False,
               init_after=False):
    def k(A: pg.Tensor((64, 64), "float16"), O: pg.Tensor((64, 64), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((64, 64), "float16", align=1024)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        if init and not init_after:
            with pg.if_(tx == 0):
                pg.ptx.mbarrier.init(bar, count)
                pg.ptx.fence.mbarrier_init()
        if sync:
            pg.cta_sync()
        with pg.if_(tx == 0):
            for c in range(copies):
                pg.tile.thread.copy_async(T[0:64, 32 * c:32 * c + 32] if copies > 1 else T,
                                          A[0:64, 32 * c:32 * c + 32] if copies > 1 else A,
                                          mbar=bar)
        if inval:
            with pg.if_(tx == 0):
                pg.ptx.mbarrier.inval(bar)
        for p in parity:
            pg.ptx.mbarrier.try_wait(bar, p)
        if init_after:
            with pg.if_(tx == 0):
                pg.ptx.mbarrier.init(bar, count)
        pg.tile.cta.copy(O, T)
    return pg.kernel(k, grid=(1,), block=(128,))


def test_a_correct_tma_load_builds():
    assert "mbarrier.try_wait.parity" in ptx(tma_kernel())
    assert "mbarrier.try_wait.parity" in ptx(tma_kernel(count=2, copies=2))


def test_wait_on_parity_one_of_a_fresh_barrier_is_refused():
    refused(lambda: ptx(tma_kernel(parity=(1,))),
            "this mbarrier wait waits on parity 1 of mbarrier 'bar', fresh from its init at "
            f"{HERE}:{at('pg.ptx.mbarrier.init(bar, count)')}"
            ": the phase before the first counts as complete, so this wait passes at "
            "once and what it guards is read early; wait on parity 0 first (phases go 0, 1, "
            "0, ...: pass phase & 1 of a counter)")


def two_loads(second_parity):
    """Two TMA loads through one barrier, each waited for: phases 0 and 1."""
    def k(A: pg.Tensor((64, 64), "float16"), O: pg.Tensor((64, 64), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((64, 64), "float16", align=1024)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        for parity in (0, second_parity):
            with pg.if_(tx == 0):
                pg.tile.thread.copy_async(T, A, mbar=bar)
            pg.ptx.mbarrier.try_wait(bar, parity)
            pg.tile.cta.copy(O, T)
            pg.cta_sync()
    return pg.kernel(k, grid=(1,), block=(128,))


def test_waiting_the_same_parity_twice_is_refused():
    assert "mbarrier.try_wait" in ptx(two_loads(1))
    refused(lambda: ptx(two_loads(0)),
            "this mbarrier wait waits on parity 0 of mbarrier 'bar' again (as at "
            f"{HERE}:{at('pg.ptx.mbarrier.try_wait(bar, parity)')}"
            ") "
            "with no other parity between, after new arrivals: that phase is already "
            "complete, so this wait passes at once and does not wait for them; wait on parity "
            "1 for the next phase")


def test_a_redundant_wait_with_no_new_arrival_builds():
    assert "mbarrier.try_wait" in ptx(tma_kernel(parity=(0, 0)))


def test_waiting_for_more_phases_than_arrive_is_refused():
    refused(lambda: ptx(tma_kernel(parity=(0, 1))),
            "mbarrier 'bar' is initialised for 1 arrival(s) per phase and waited on for 2 "
            f"phases, but the program makes 1 (at {HERE}:{at('pg.tile.thread.copy_async(T[0:64')}"
            "): the last phase never completes "
            "(a hang); make one phase's arrivals equal the init count, and wait only for "
            "phases that arrive")


def test_init_count_above_the_arrivals_is_refused():
    refused(lambda: ptx(tma_kernel(count=2)),
            "mbarrier 'bar' is initialised for 2 arrival(s) per phase, but the program makes 1 "
            f"(at {HERE}:{at('pg.tile.thread.copy_async(T[0:64')}"
            "): the phase never completes (a hang); make the init count "
            "(pg.Pipeline's producer_arrivals / consumers) equal the arrivals of one phase: one "
            "per copy_async(mbar=...) and per arrive, times the threads that run it")


def test_init_count_below_the_arrivals_is_refused():
    refused(lambda: ptx(tma_kernel(count=1, copies=2)),
            "mbarrier 'bar' is initialised for 1 arrival(s) per phase, but the program makes 2 "
            f"(at {HERE}:{at('pg.tile.thread.copy_async(T[0:64')}"
            f", {HERE}:{at('pg.tile.thread.copy_async(T[0:64')}"
            "): the extra arrivals and their bytes spill into the next "
            "phase (a fault or stale data); make the init count (pg.Pipeline's "
            "producer_arrivals / consumers) equal the arrivals of one phase: one per "
            "copy_async(mbar=...) and per arrive, times the threads that run it")


def test_wait_on_an_uninitialized_barrier_is_refused():
    refused(lambda: ptx(tma_kernel(init=False)),
            "copy_async(mbar=...) uses mbarrier 'bar' before it is initialised: call "
            "pg.ptx.mbarrier.init (one thread), then pg.cta_sync(), before any arrive or wait "
            "(for a pg.Pipeline: pipe.init())")
    refused(lambda: ptx(tma_kernel(init_after=True)),
            "copy_async(mbar=...) uses mbarrier 'bar' before it is initialised: call "
            "pg.ptx.mbarrier.init (one thread), then pg.cta_sync(), before any arrive or wait "
            "(for a pg.Pipeline: pipe.init())")


def test_a_use_racing_the_init_is_refused():
    refused(lambda: ptx(tma_kernel(sync=False)),
            "this mbarrier wait uses mbarrier 'bar' initialised at "
            f"{HERE}:{at('pg.ptx.mbarrier.init(bar, count)')}"
            " with no CTA "
            "barrier in between: other threads may arrive or wait before the init lands; call "
            "pg.cta_sync() after the init block")


def test_the_initialising_thread_may_use_its_barrier_at_once():
    @pg.kernel(grid=(1,), block=(128,))
    def k(A: pg.Tensor((64, 64), "float16"), O: pg.Tensor((64, 64), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((64, 64), "float16", align=1024)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
            pg.tile.thread.copy_async(T, A, mbar=bar)
            pg.ptx.mbarrier.try_wait(bar, 0)
        pg.cta_sync()
        pg.tile.cta.copy(O, T)
    assert "mbarrier.init" in ptx(k)


def test_a_wait_after_inval_is_refused():
    refused(lambda: ptx(tma_kernel(inval=True)),
            "this mbarrier wait uses mbarrier 'bar' after mbarrier.inval at "
            f"{HERE}:{at('pg.ptx.mbarrier.inval(bar)')}"
            ": an "
            "invalidated barrier is ordinary memory; initialise it again first, or move the "
            "inval after the last use")


def test_arrivals_are_counted_per_running_thread():
    """An arrive by every thread of warp 1 is 32 arrivals; an init of 32 matches."""
    def make(count):
        @pg.kernel(grid=(1,), block=(128,))
        def k(O: pg.Tensor((128,), "int32")):
            tx = pg.thread_id(128)
            bar = pg.alloc_shared((1,), "uint64", align=8)
            with pg.if_(tx == 0):
                pg.ptx.mbarrier.init(bar, count)
            pg.cta_sync()
            with pg.if_(pg.warp_id() == 1):
                pg.ptx.mbarrier.arrive(bar)
            pg.ptx.mbarrier.try_wait(bar, 0)
            O[tx] = tx
        return k
    assert "mbarrier.arrive" in ptx(make(32))
    refused(lambda: ptx(make(1)),
            "mbarrier 'bar' is initialised for 1 arrival(s) per phase, but the program makes 32 "
            f"(at {HERE}:{at('pg.ptx.mbarrier.arrive(bar)')}"
            "): the extra arrivals and their bytes spill into the next phase (a "
            "fault or stale data); make the init count (pg.Pipeline's producer_arrivals / "
            "consumers) equal the arrivals of one phase: one per copy_async(mbar=...) and per "
            "arrive, times the threads that run it")


def test_a_runtime_guard_leaves_the_count_undecided():
    from ptxgen.passes.protocol import protocol_notes

    @pg.kernel(grid=(1,), block=(128,))
    def k(O: pg.Tensor((128,), "int32"), n: pg.int32):
        tx = pg.thread_id(128)
        bar = pg.alloc_shared((1,), "uint64", align=8)
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        with pg.if_(tx < n):
            pg.ptx.mbarrier.arrive(bar)#n
        pg.ptx.mbarrier.try_wait(bar, 0)
        O[tx] = tx
    assert "mbarrier.arrive" in ptx(k)
    notes = protocol_notes(k)
    assert (f"{HERE}:{at('pg.ptx.mbarrier.arrive(bar)#n')}: how many threads run this "
            "mbarrier.arrive depends on n") in notes
    assert "arrivals per phase of 'bar' not checked: a thread guard it cannot evaluate" in notes


# ---- pipelines ------------------------------------------------------------------------------
R, STAGES = 64, 2
SW = ComposeLayout(Swizzle.mma("128B", 16), TileLayout(S[(STAGES, R, 64)]))


def ring_kernel(producer_arrivals=2, copies=2, init=True, release=True, commit=True):
    def k(src: pg.Tensor((512, 128), "float16"), dst: pg.Tensor((512, 128), "float16")):
        tx = pg.thread_id(64)
        pool = pg.SMEMPool()
        lo = pool.alloc((STAGES, R, 64), "float16", align=1024, layout=SW)
        hi = pool.alloc((STAGES, R, 64), "float16", align=1024, layout=SW)
        pipe = pg.Pipeline(pool, stages=STAGES, consumers=1, producer_arrivals=producer_arrivals)
        pool.commit()
        if init:
            pipe.init()
        with pg.if_(tx == 0):
            prod = pipe.producer()
            for i in pg.serial(8):
                s = prod.stage
                prod.acquire()
                for h, t in ((0, lo), (1, hi))[:copies]:
                    pg.tile.thread.copy_async(t[s:s + 1, 0:R, 0:64],
                                              src[i * R:i * R + R, 64 * h:64 * h + 64],
                                              mbar=prod.full)
                if commit:
                    prod.commit()
        with pg.if_(tx == 32):
            cons = pipe.consumer()
            for i in pg.serial(8):
                s = cons.stage
                cons.wait()
                pg.tile.thread.copy_async(dst[i * R:i * R + R, 0:64], lo[s:s + 1, 0:R, 0:64])
                pg.tile.thread.copy_async(dst[i * R:i * R + R, 64:128], hi[s:s + 1, 0:R, 0:64])
                pg.tile.thread.async_commit(kind="bulk")
                pg.tile.thread.async_wait(0, read=True, kind="bulk")
                if release:
                    cons.release()
            pg.tile.thread.async_wait(0, kind="bulk")
    return pg.kernel(k, grid=(1,), block=(64,))


def test_a_correct_ring_builds():
    assert "cp.async.bulk.tensor" in ptx(ring_kernel())


def test_producer_arrivals_below_the_copies_per_stage_is_refused():
    refused(lambda: ptx(ring_kernel(producer_arrivals=1)),
            "mbarrier 'pipe_full' is initialised for 1 arrival(s) per phase, but the program "
            "makes 2 per loop iteration (one stage) (at "
            f"{HERE}:{at('pg.tile.thread.copy_async(t[s:s')}"
            f", {HERE}:{at('pg.tile.thread.copy_async(t[s:s')}"
            "): the extra "
            "arrivals and their bytes spill into the next phase (a fault or stale data); make "
            "the init count (pg.Pipeline's producer_arrivals / consumers) equal the arrivals of "
            "one phase: one per copy_async(mbar=...) and per arrive, times the threads that run "
            "it")


def test_producer_arrivals_above_the_copies_per_stage_is_refused():
    with pytest.raises(TraceError, match=r"initialised for 2 arrival\(s\) per phase, but the "
                                         r"program makes 1 per loop iteration"):
        ptx(ring_kernel(producer_arrivals=2, copies=1))


def test_a_pipeline_never_initialised_is_refused():
    refused(lambda: ring_kernel(init=False),
            f"Pipeline 'pipe' is used (at {HERE}:{at('prod.acquire()')}"
            ") but never initialised: its mbarriers hold "
            "garbage; call pipe.init() in every thread, at the top level, after pool.commit() "
            "and before the producer and consumer branches")


def test_a_consumer_that_never_releases_is_refused():
    refused(lambda: ring_kernel(release=False),
            "the consumer of Pipeline 'pipe' waits on its stages but never releases them: the "
            "producer's acquire of a stage hangs once the ring wraps; call cons.release() when "
            "the stage has been read, on every path")


def test_a_producer_that_never_commits_is_refused():
    refused(lambda: ring_kernel(commit=False),
            "the producer of Pipeline 'pipe' acquires stages but never commits them: it stays "
            "on one stage and the consumers wait on the others forever; call prod.commit() "
            "after issuing the stage's copies")


# ---- cp.async groups ------------------------------------------------------------------------
def cp_kernel(commit=True, wait=True):
    def k(A: pg.Tensor((32, 64), "float32"), O: pg.Tensor((32, 64), "float32")):
        tx = pg.thread_id(128)
        T = pg.alloc_shared((32, 64), "float32", align=16)
        pg.tile.cta.copy_async(T, A, dispatch="cp_async")
        if commit:
            pg.tile.cta.async_commit()
        if wait:
            pg.tile.cta.async_wait(0)
        pg.tile.cta.copy(O, T)
    return pg.kernel(k, grid=(1,), block=(128,))


def test_cp_async_read_after_commit_and_wait_builds():
    assert "cp.async.wait_group 0" in ptx(cp_kernel())


def test_cp_async_read_before_commit_is_refused():
    refused(lambda: ptx(cp_kernel(commit=False, wait=False)),
            "this reads shared tile 'T', written by cp.async copy_async at "
            f"{HERE}:{at('pg.tile.cta.copy_async(T, A, dispatch=')}"
            ", before async_commit() and async_wait(): the copy may not have landed "
            "(stale data); call pg.tile.<scope>.async_commit() and then async_wait(0) before "
            "the read")


def test_cp_async_read_before_wait_is_refused():
    refused(lambda: ptx(cp_kernel(wait=False)),
            "this reads shared tile 'T', written by cp.async copy_async at "
            f"{HERE}:{at('pg.tile.cta.copy_async(T, A, dispatch=')}"
            ", before an async_wait() covers its group: the copy may not have landed "
            "(stale data); call pg.tile.<scope>.async_wait(0) (or a pending count that leaves "
            "its group out) before the read")


def warp_cp_kernel(commit_in, wait_in):
    """Warp 0 copies T with cp.async; the commit and the wait run in the threads
    `commit_in` / `wait_in` choose (cp.async groups are per thread)."""
    def k(A: pg.Tensor((32, 64), "float32"), O: pg.Tensor((32, 64), "float32")):
        tx = pg.thread_id(128)
        T = pg.alloc_shared((32, 64), "float32", align=16)
        with pg.if_(tx < 32):
            pg.tile.warp.copy_async(T, A, dispatch="cp_async")      # at: cp copy
        with pg.if_(commit_in(tx)):
            pg.tile.thread.async_commit()                            # at: cp commit
        with pg.if_(wait_in(tx)):
            pg.tile.thread.async_wait(0)                             # at: cp wait
        pg.cta_sync()
        pg.tile.cta.copy(O, T)                                       # at: cp read
    return pg.kernel(k, grid=(1,), block=(128,))


def test_cp_async_waited_in_the_threads_that_issued_it_builds():
    assert "cp.async.wait_group 0;" in ptx(warp_cp_kernel(lambda tx: tx < 32, lambda tx: tx < 64))


def test_cp_async_waited_by_other_threads_is_refused():
    """A wait in warps 1..3 does not wait for warp 0's copies."""
    with pytest.raises(TraceError) as e:
        ptx(warp_cp_kernel(lambda tx: tx < 32, lambda tx: tx >= 32))
    assert str(e.value) == (
        f"{line_of('cp read')}: this reads shared tile 'T', written by cp.async copy_async at "
        f"{line_of('cp copy')}, but the async_wait() at {line_of('cp wait')} does not run in "
        "threads 0..31, which issued it: cp.async groups are per thread (commit_group and "
        "wait_group cover only the calling thread's copies), so their copies may not have "
        "landed (stale data); call async_commit() and async_wait() in the scope and branch "
        "that issued the copy")


def test_cp_async_committed_by_part_of_its_threads_is_refused():
    with pytest.raises(TraceError) as e:
        ptx(warp_cp_kernel(lambda tx: tx < 16, lambda tx: tx < 128))
    assert str(e.value) == (
        f"{line_of('cp read')}: this reads shared tile 'T', written by cp.async copy_async at "
        f"{line_of('cp copy')}, but the async_commit() at {line_of('cp commit')} does not run "
        "in threads 16..31, which issued it: cp.async groups are per thread (commit_group and "
        "wait_group cover only the calling thread's copies), so their copies may not have "
        "landed (stale data); call async_commit() and async_wait() in the scope and branch "
        "that issued the copy")


def test_cp_async_under_a_runtime_guard_is_left_to_the_program():
    """Which threads a runtime guard runs is not known: the commit and wait cover it."""
    def k(A: pg.Tensor((32, 64), "float32"), O: pg.Tensor((32, 64), "float32"), n: pg.int32):
        T = pg.alloc_shared((32, 64), "float32", align=16)
        with pg.if_(n > 0):
            pg.tile.cta.copy_async(T, A, dispatch="cp_async")
        pg.tile.cta.async_commit()
        pg.tile.cta.async_wait(0)
        pg.tile.cta.copy(O, T)
    assert "cp.async.wait_group 0;" in ptx(pg.kernel(k, grid=(1,), block=(128,)))


def seen_kernel(scope="warp", barrier=None, reads=None, n=None):
    """Warp 0 copies T with cp.async (`scope` thread: thread 0 alone), commits and waits in
    that scope (a warp's wait ends with bar.warp.sync; a thread's with nothing); `barrier`
    ("cta", "named", "before": a CTA barrier between the commit and the wait) comes after it,
    then the threads `reads` picks read T (all of them: a CTA copy)."""
    def k(A: pg.Tensor((32, 64), "float32"), O: pg.Tensor((32, 64), "float32"), m: pg.int32):
        tx = pg.thread_id(128)
        T = pg.alloc_shared((32, 64), "float32", align=16)
        sc = getattr(pg.tile, scope)
        with pg.if_(tx < (32 if scope == "warp" else 1)):
            sc.copy_async(T, A, dispatch="cp_async")                 # at: vis copy
            sc.async_commit()
            if barrier == "before":
                pg.named_barrier(1, 32)
            sc.async_wait(0)                                         # at: vis wait
            if barrier == "named":
                pg.named_barrier_arrive(1, 64)
        if barrier == "cta":
            pg.cta_sync()
        if reads is None:
            pg.tile.cta.copy(O, T)                                   # at: vis read
        else:
            with pg.if_(reads(tx, m)):
                if barrier == "named":
                    pg.named_barrier(1, 64)
                pg.tile.thread.copy(O[0:1, 0:4], T[0:1, 0:4])        # at: vis part read
    return pg.kernel(k, grid=(1,), block=(128,))


def seen_message(read, readers):
    return (f"{line_of(read)}: this reads shared tile 'T', written by cp.async copy_async at "
            f"{line_of('vis copy')}, in {readers}, which did not issue it, with no barrier "
            f"after the async_wait() at {line_of('vis wait')}: a wait makes a thread's own "
            "copies visible to that thread only, so these threads may read the tile before the "
            "copy lands (stale data); add pg.cta_sync() after the wait (or a named barrier "
            "over the waiting and the reading threads)")


def test_cp_async_read_by_other_warps_with_no_barrier_is_refused():
    """A warp's wait (and its bar.warp.sync) covers that warp: warps 1..3 need a CTA barrier."""
    with pytest.raises(TraceError) as e:
        ptx(seen_kernel())
    assert str(e.value) == seen_message("vis read", "threads 32..127")


def test_cp_async_read_by_other_threads_after_a_thread_wait_is_refused():
    with pytest.raises(TraceError) as e:
        ptx(seen_kernel("thread", reads=lambda tx, m: tx < 32))
    assert str(e.value) == seen_message("vis part read", "threads 1..31")
    with pytest.raises(TraceError) as e:     # a barrier before the wait does not count
        ptx(seen_kernel("warp", barrier="before", reads=lambda tx, m: tx < 64))
    assert str(e.value) == seen_message("vis part read", "threads 32..63")


def test_cp_async_read_after_the_wait_and_a_cta_barrier_builds():
    assert "bar.sync 0;" in ptx(seen_kernel(barrier="cta"))
    assert "bar.sync 0;" in ptx(seen_kernel("thread", barrier="cta"))


def test_cp_async_read_after_a_named_barrier_over_both_sides_builds():
    assert "bar.arrive 1, 64;" in ptx(seen_kernel(barrier="named",
                                                  reads=lambda tx, m: (tx >= 32) & (tx < 64)))


def test_cp_async_read_by_the_threads_that_issued_it_builds():
    """The copying warp (its wait syncs the warp) or thread reads what it waited for."""
    assert "bar.warp.sync" in ptx(seen_kernel(reads=lambda tx, m: tx < 32))
    assert "cp.async.wait_group 0;" in ptx(seen_kernel("thread", reads=lambda tx, m: tx == 0))

    def k(A: pg.Tensor((128, 4), "float32"), O: pg.Tensor((128, 4), "float32")):
        tx = pg.thread_id(128)
        T = pg.alloc_shared((128, 4), "float32", align=16)
        pg.tile.thread.copy_async(T[tx:tx + 1, 0:4], A[tx:tx + 1, 0:4], dispatch="cp_async")
        pg.tile.thread.async_commit()
        pg.tile.thread.async_wait(0)
        pg.tile.thread.copy(O[tx:tx + 1, 0:4], T[tx:tx + 1, 0:4])   # each thread its own row
    assert "cp.async.wait_group 0;" in ptx(pg.kernel(k, grid=(1,), block=(128,)))


def test_cp_async_read_under_a_runtime_guard_is_left_to_the_program():
    assert "cp.async.wait_group 0;" in ptx(seen_kernel(reads=lambda tx, m: m > 0))


# ---- wgmma: proxy fence and accumulator --------------------------------------------------------
def wgmma_kernel(fence=True, wait=True):
    from ptxgen.primitives.tcgen05 import canonical_layout

    LA, LB = (canonical_layout(r, 64, "bfloat16") for r in (64, 32))

    def k(A: pg.Tensor((64, 64), "bfloat16"), B: pg.Tensor((32, 64), "bfloat16"),
          D: pg.Tensor((64, 32), "float32")):
        tx = pg.thread_id(128)
        As = pg.alloc_shared((64, 64), "bfloat16", layout=LA, align=1024)
        Bs = pg.alloc_shared((32, 64), "bfloat16", layout=LB, align=1024)
        pg.tile.cta.copy(As, A)
        pg.tile.cta.copy(Bs, B)
        if fence:
            pg.ptx.fence.proxy_async()
        pg.cta_sync()
        acc = pg.tile.warpgroup.mma_accumulator((64, 32))
        pg.tile.warpgroup.gemm_async(acc, As, Bs, accumulate=False)
        if wait:
            pg.tile.warpgroup.gemm_wait(0)
        pg.tile.warpgroup.copy(D, acc)
    return pg.kernel(k, grid=(1,), block=(128,))


def test_a_fenced_wgmma_builds():
    assert "wgmma.mma_async" in ptx(wgmma_kernel())


def test_wgmma_reading_unfenced_plain_stores_is_refused():
    refused(lambda: ptx(wgmma_kernel(fence=False)),
            "gemm_async reads shared tile 'As', written by plain stores at "
            f"{HERE}:{at('pg.tile.cta.copy(As, A)')}"
            " with no "
            "fence.proxy.async in between: wgmma reads through the async proxy and may see "
            "stale bytes; call pg.ptx.fence.proxy_async() after the writes and before the "
            "barrier that precedes the gemm")


def test_reading_an_accumulator_before_gemm_wait_is_refused():
    refused(lambda: ptx(wgmma_kernel(wait=False)),
            "this reads the wgmma accumulator 'acc' of the gemm_async at "
            f"{HERE}:{at('pg.tile.warpgroup.gemm_async(acc, As')}"
            " before a "
            "gemm_wait covers its group: call pg.tile.warpgroup.gemm_wait(0) before reading it")


# ---- clusters ---------------------------------------------------------------------------------
def dsmem_kernel(sync=True, rank_of=lambda r: r ^ 1):
    def k(A: pg.Tensor((4, 128), "int32"), O: pg.Tensor((4, 128), "int32")):
        tx = pg.thread_id(128)
        bx = pg.cta_id(4)
        rank = pg.cta_rank_in_cluster()
        sm = pg.alloc_shared((128,), "int32")
        peer = pg.cluster_view(sm, rank_of(rank))
        peer[tx] = A[bx, tx]
        if sync:
            pg.cluster_sync()
        O[bx, tx] = sm[tx]
        pg.cluster_sync()
    return pg.kernel(k, grid=(4,), block=(128,), cluster=(2, 1, 1))


def test_a_synchronized_dsmem_exchange_builds():
    assert "mapa" in ptx(dsmem_kernel())


def test_a_dsmem_read_with_no_cluster_sync_is_refused():
    refused(lambda: ptx(dsmem_kernel(sync=False)),
            "this reads shared tile 'sm', written through a cluster_view of it at "
            f"{HERE}:{at('peer[tx] = A[bx, tx]')}"
            " "
            "with no cluster_sync in between: the peer CTA's write may not be visible yet; call "
            "pg.cluster_sync() between the write and the read")


def test_a_constant_rank_outside_the_cluster_is_refused():
    assert "mapa" in ptx(dsmem_kernel(rank_of=lambda r: 1))
    refused(lambda: dsmem_kernel(rank_of=lambda r: 2),
            "cluster_view rank 2 is outside the cluster: its 2 CTA(s) have ranks 0..1 "
            "(cluster=(2, 1, 1)); mapa of a rank past the cluster faults")


# ---- loops ------------------------------------------------------------------------------------
def test_a_while_that_never_exits_is_refused():
    def make(step):
        @pg.kernel(grid=(1,), block=(32,))
        def k(A: pg.Tensor((32, 4), "float32"), B: pg.Tensor((32,), "float32")):
            tx = pg.thread_id(32)
            acc = pg.local_scalar("float32", 0.0)
            i = pg.local_scalar("int32", 0)
            with pg.while_(i < 4):
                acc += A[tx, i]
                if step:
                    i += 1
            B[tx] = acc
        return k
    assert "bra" in ptx(make(True))
    refused(lambda: make(False),
            "this pg.while_ never exits once entered: its condition `i[0] < 4` reads no value "
            "the body changes; update a value of the condition in the body (e.g. `i += 1`), or "
            "loop with pg.serial")


def test_a_constant_true_while_is_refused():
    def k(B: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        with pg.while_(True):
            B[tx] = 1.0
    refused(lambda: pg.kernel(k, grid=(1,), block=(32,)),
            "this pg.while_ never exits once entered: its condition is the constant True; "
            "update a value of the condition in the body (e.g. `i += 1`), or loop with "
            "pg.serial")


def test_a_while_on_memory_is_left_to_the_program():
    @pg.kernel(grid=(1,), block=(32,))
    def k(F: pg.Tensor((1,), "int32"), B: pg.Tensor((32,), "float32")):
        tx = pg.thread_id(32)
        with pg.while_(F[0] == 0):       # another kernel or thread may set the flag
            B[tx] = 1.0
    assert "ld.global" in ptx(k)


def test_a_non_positive_constant_step_is_refused():
    def k(B: pg.Tensor((32,), "float32")):
        for i in pg.serial(0, 32, 0):
            B[i] = 1.0
    with pytest.raises(TraceError, match=r"pg.serial step must be positive, got 0"):
        pg.kernel(k, grid=(1,), block=(1,))


# ---- older gaps: clusters, register pressure, int32 wrap --------------------------------
def test_cluster_errors_are_located():
    def body(B: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        B[tx] = tx
    refused(lambda: pg.kernel(body, grid=(16,), block=(32,), cluster=(3, 0, 1)),
            "cluster=(3, 0, 1) must be 1 to 3 positive ints, e.g. (2, 1, 1)")
    refused(lambda: pg.kernel(body, grid=(32,), block=(32,), cluster=(32, 1, 1)),
            "cluster=(32, 1, 1) has 32 CTAs; clusters hold at most 8 (the portable size), or 16 "
            "on sm_90 with the non-portable launch attribute (set by the runtime)")
    k = pg.kernel(body, grid=(16,), block=(32,), cluster=(2, 1, 1))
    with pytest.raises(pg.ArchError) as e:
        k.ptx("sm_80")
    assert re.fullmatch(rf"{HERE}:\d+: cluster=\(2, 1, 1\) needs sm_90 or newer \(thread-block "
                        r"clusters, \.reqnctapercluster\); the target is sm_80: build for sm_90a, "
                        r"or drop cluster=", str(e.value))


def test_a_cluster_of_16_builds_for_sm_90():
    @pg.kernel(grid=(32,), block=(32,), cluster=(16, 1, 1))
    def k(B: pg.Tensor((32,), "int32")):
        tx = pg.thread_id(32)
        B[tx] = tx
    assert ".reqnctapercluster 16, 1, 1" in ptx(k)


def test_accumulators_past_the_register_file_warn():
    def make(n):
        @pg.kernel(grid=(1,), block=(128,))
        def k(D: pg.Tensor((64, 256), "float32")):
            from ptxgen.primitives.tcgen05 import canonical_layout

            As = pg.alloc_shared((64, 64), "bfloat16", layout=canonical_layout(64, 64, "bfloat16"),
                                 align=1024)
            Bs = pg.alloc_shared((256, 64), "bfloat16",
                                 layout=canonical_layout(256, 64, "bfloat16"), align=1024)
            accs = [pg.tile.warpgroup.mma_accumulator((64, 256)) for _ in range(n)]
            for acc in accs:
                pg.tile.warpgroup.gemm_async(acc, As, Bs, accumulate=False)
            pg.tile.warpgroup.gemm_wait(0)
            for acc in accs:
                pg.tile.warpgroup.copy(D, acc)
        return k
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ptx(make(1))
    with pytest.warns(UserWarning, match=r"wgmma accumulators 'accs' \(128 registers, first used "
                                         r"at .*\), 'accs_1' \(128 registers, first used at .*\) "
                                         r"need 256 registers per thread, more than the 255"):
        ptx(make(2))


def test_the_simplifier_keeps_a_division_whose_product_may_wrap():
    @pg.kernel(grid=(1,), block=(32,))
    def k(B: pg.Tensor((32,), "int32"), x: pg.int32):
        tx = pg.thread_id(32)
        B[tx] = x * 4 // 4 + tx * 4 // 4
    text = ptx(k)
    assert re.search(r"shl\.b32 (%r\d+), %r\d+, 2;\n\s+shr\.s32 %r\d+, \1, 2;", text)
    assert text.count("shl.b32") == 1         # tx * 4 // 4 == tx: tx < 32 cannot wrap


def inner_loop_ring(producer_arrivals):
    """The copies of a stage issued by a serial loop inside the stage loop: two per stage."""
    def k(src: pg.Tensor((64, 64), "float16"), n: pg.int32):
        tx = pg.thread_id(64)
        pool = pg.SMEMPool()
        t = pool.alloc((2, 2, 8, 32), "float16", align=128)
        pipe = pg.Pipeline(pool, stages=2, consumers=1, producer_arrivals=producer_arrivals)
        pool.commit()
        pipe.init()
        with pg.if_(tx == 0):
            prod = pipe.producer()
            for i in pg.serial(n):
                s = prod.stage
                prod.acquire()
                for h in pg.serial(2):
                    pg.tile.thread.copy_async(t[s:s + 1, h:h + 1, 0:8, 0:32],
                                              src[i * 8:i * 8 + 8, 32 * h:32 * h + 32],
                                              mbar=prod.full)
                prod.commit()
        with pg.if_(tx == 32):
            cons = pipe.consumer()
            for i in pg.serial(n):
                cons.wait()
                cons.release()
    return pg.kernel(k, grid=(1,), block=(64,))


def test_copies_in_an_inner_loop_count_once_per_trip():
    assert "cp.async.bulk.tensor" in ptx(inner_loop_ring(2))
    with pytest.raises(TraceError, match=r"initialised for 1 arrival\(s\) per phase, but the "
                                         r"program makes 2 per loop iteration"):
        ptx(inner_loop_ring(1))


# ---- more of the same kind: who initialises, reading before the wait, loop parities ---------
def test_an_init_by_every_thread_is_refused():
    def k(O: pg.Tensor((128,), "int32")):
        tx = pg.thread_id(128)
        bar = pg.alloc_shared((1,), "uint64", align=8)
        pg.ptx.mbarrier.init(bar, 128)                       # every thread
        pg.cta_sync()
        pg.ptx.mbarrier.arrive(bar)
        pg.ptx.mbarrier.try_wait(bar, 0)
        O[tx] = tx
    refused(lambda: ptx(pg.kernel(k, grid=(1,), block=(128,))),
            "mbarrier.init of 'bar' runs in 128 threads of each CTA: every init resets the "
            "barrier, racing the arrivals of the threads past it; initialise from one thread "
            "(with pg.if_(tx == 0)), then pg.cta_sync()")


def test_reading_a_tma_tile_before_its_wait_is_refused():
    def k(A: pg.Tensor((64, 64), "float16"), O: pg.Tensor((64, 64), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((64, 64), "float16", align=1024)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        with pg.if_(tx == 0):
            pg.tile.thread.copy_async(T, A, mbar=bar)        # at: early copy
        pg.tile.cta.copy(O, T)
        pg.ptx.mbarrier.try_wait(bar, 0)
    refused(lambda: ptx(pg.kernel(k, grid=(1,), block=(128,))),
            f"this reads shared tile 'T', filled by the TMA copy at {HERE}:"
            f"{at('pg.tile.thread.copy_async(T, A, mbar=bar)        # at: early')}, before any "
            "wait on its mbarrier 'bar': the bytes may not have landed; wait first "
            "(pg.ptx.mbarrier.try_wait(bar, phase) or the pipeline consumer's wait())")


def looped_loads(flip):
    def k(A: pg.Tensor((256, 64), "float16"), O: pg.Tensor((256, 64), "float16"), n: pg.int32):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((64, 64), "float16", align=1024)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        with pg.if_(tx == 0):
            pg.ptx.mbarrier.init(bar, 1)
        pg.cta_sync()
        phase = pg.local_scalar("int32", 0)
        for i in pg.serial(n):
            with pg.if_(tx == 0):
                pg.tile.thread.copy_async(T, A[i * 64:i * 64 + 64, 0:64], mbar=bar)
            pg.ptx.mbarrier.try_wait(bar, phase if flip else 0)     # at: loop wait
            pg.tile.cta.copy(O[i * 64:i * 64 + 64, 0:64], T)
            pg.cta_sync()
            if flip:
                phase.set(phase ^ 1)
    return pg.kernel(k, grid=(1,), block=(128,))


def test_a_constant_parity_in_a_loop_of_phases_is_refused():
    assert "mbarrier.try_wait" in ptx(looped_loads(True))
    refused(lambda: ptx(looped_loads(False)),
            "this wait on mbarrier 'bar' uses the constant parity 0 in a loop that completes a "
            "new phase each iteration: from the second iteration on it passes at once (the "
            "phase with that parity is complete), so the data is read early; keep a phase bit "
            "that flips each iteration and wait on it")


def test_a_step_that_is_a_constant_in_disguise_is_checked():
    def k(B: pg.Tensor((32,), "float32")):
        step = pg.let(0)
        for i in pg.serial(0, 32, step):
            B[i] = 1.0
    with pytest.raises(TraceError, match=r"pg.serial step must be positive, got step = 0 \(the "
                                         r"loop would never end\)"):
        pg.kernel(k, grid=(1,), block=(1,))

    @pg.kernel(grid=(1,), block=(1,))
    def ok(B: pg.Tensor((32,), "float32"), s: pg.int32):
        for i in pg.serial(0, 32, s):           # a runtime step: the program's to keep positive
            B[i] = 1.0
    assert "bra" in ptx(ok)


def test_a_16_cta_cluster_exchanges_in_ptxsim():
    import numpy as np

    from support import async_cases as ac

    ac.run_sim(ac.dsmem_case(np.random.default_rng(0), 16))


# ---- pipeline stages on the paths of an if_ -------------------------------------------------
def branchy_ring(consume, produce=None):
    """A one-copy ring (thread 0 produces, thread 32 consumes, 8 stages' worth) whose loop
    bodies are `produce(prod, t, src, i, n)` and `consume(cons, t, dst, i, n, tx)`."""
    def k(src: pg.Tensor((512, 64), "float16"), dst: pg.Tensor((512, 64), "float16"),
          n: pg.int32):
        tx = pg.thread_id(64)
        pool = pg.SMEMPool()
        t = pool.alloc((STAGES, R, 64), "float16", align=1024, layout=SW)
        pipe = pg.Pipeline(pool, stages=STAGES, consumers=1, producer_arrivals=1)
        pool.commit()
        pipe.init()
        with pg.if_(tx == 0):
            prod = pipe.producer()
            for i in pg.serial(8):
                (produce or fill)(prod, t, src, i, n)
        with pg.if_(tx == 32):
            cons = pipe.consumer()
            for i in pg.serial(8):
                consume(cons, t, dst, i, n, tx)
            pg.tile.thread.async_wait(0, kind="bulk")
    return pg.kernel(k, grid=(1,), block=(64,))


def fill(prod, t, src, i, n):
    prod.acquire()
    s = prod.stage
    pg.tile.thread.copy_async(t[s:s + 1, 0:R, 0:64], src[i * R:i * R + R, 0:64], mbar=prod.full)
    prod.commit()


def drain(cons, t, dst, i):
    s = cons.stage
    pg.tile.thread.copy_async(dst[i * R:i * R + R, 0:64], t[s:s + 1, 0:R, 0:64])
    pg.tile.thread.async_commit(kind="bulk")
    pg.tile.thread.async_wait(0, read=True, kind="bulk")


def test_a_release_in_one_branch_only_is_refused():
    def consume(cons, t, dst, i, n, tx):
        cons.wait()                                  # at: wait
        drain(cons, t, dst, i)
        with pg.if_(n > 3):                          # at: if
            cons.release()                           # at: release
    with pytest.raises(TraceError) as e:
        ptx(branchy_ring(consume))
    assert str(e.value) == (
        f"{line_of('release')}: this releases the pipeline stage of 'pipe_full' waited on at "
        f"{line_of('wait')} in one branch of the if_ at {line_of('if')} only: on the other "
        "path the stage is never released, so that side stays on it (its next wait passes on "
        "the old phase) and the other side's wait for the stage hangs once the ring wraps; "
        "release on every path: call cons.release() (a producer: prod.commit()) after the "
        "if_, or in both branches")


def test_a_commit_in_one_branch_only_is_refused():
    def produce(prod, t, src, i, n):
        prod.acquire()                               # at: acquire
        s = prod.stage
        pg.tile.thread.copy_async(t[s:s + 1, 0:R, 0:64], src[i * R:i * R + R, 0:64],
                                  mbar=prod.full)
        with pg.if_(i < n):                          # at: if
            prod.commit()                            # at: commit

    def consume(cons, t, dst, i, n, tx):
        cons.wait()
        drain(cons, t, dst, i)
        cons.release()
    with pytest.raises(TraceError) as e:
        ptx(branchy_ring(consume, produce))
    assert str(e.value) == (
        f"{line_of('commit')}: this releases the pipeline stage of 'pipe_empty' waited on at "
        f"{line_of('acquire')} in one branch of the if_ at {line_of('if')} only: on the other "
        "path the stage is never released, so that side stays on it (its next wait passes on "
        "the old phase) and the other side's wait for the stage hangs once the ring wraps; "
        "release on every path: call cons.release() (a producer: prod.commit()) after the "
        "if_, or in both branches")


def test_a_wait_in_one_branch_released_on_both_paths_is_refused():
    def consume(cons, t, dst, i, n, tx):
        with pg.if_(n > 3):                          # at: if
            cons.wait()                              # at: wait
        drain(cons, t, dst, i)
        cons.release()
    with pytest.raises(TraceError) as e:
        ptx(branchy_ring(consume))
    assert str(e.value) == (
        f"{line_of('wait')}: this waits on a pipeline stage of 'pipe_full' in one branch of "
        f"the if_ at {line_of('if')} only and does not release it there: after the if_ the "
        "stage is held on one path and free on the other, so a release frees a stage the "
        "other path never waited on (the other side reuses it early); wait and release on the "
        "same paths: put cons.release() (a producer: prod.commit()) in the branch of the wait")


def test_a_runtime_branch_around_both_the_wait_and_the_release_builds():
    def consume(cons, t, dst, i, n, tx):
        with pg.if_(n > 3):
            cons.wait()
            drain(cons, t, dst, i)
            cons.release()
    assert "mbarrier.try_wait" in ptx(branchy_ring(consume))


def test_a_release_in_both_branches_builds():
    def consume(cons, t, dst, i, n, tx):
        cons.wait()
        drain(cons, t, dst, i)
        with pg.if_(n > 3):
            cons.release()
        with pg.else_():
            cons.release()
    assert "mbarrier.try_wait" in ptx(branchy_ring(consume))


def test_a_branch_every_consumer_thread_takes_builds():
    def consume(cons, t, dst, i, n, tx):
        cons.wait()
        drain(cons, t, dst, i)
        with pg.if_(tx < 64):                        # thread 32, the consumer, always takes it
            cons.release()
    assert "mbarrier.try_wait" in ptx(branchy_ring(consume))


def test_guards_are_evaluated_per_thread_with_selects_taking_one_side():
    """The threads a guard lets through, evaluated over the whole block at once: a select
    evaluates only the side each thread takes (the other divides by zero there)."""
    from ptxgen.dtypes import dtype
    from ptxgen.ir import BinOp, Const, Select, SpecialReg
    from ptxgen.passes.protocol_threads import Threads

    i32, b = dtype("int32"), dtype("bool")
    tid = SpecialReg("tid.x")
    lane = SpecialReg("laneid")
    # tid < 32 ? 64 // (32 - tid) : tid % 7   -- the true side divides by zero for tid = 32
    picked = Select(BinOp("lt", tid, Const(32), b),
                    BinOp("floordiv", Const(64), BinOp("sub", Const(32), tid, i32), i32),
                    BinOp("floormod", tid, Const(7), i32), i32)
    guard = BinOp("eq", picked, Const(2), b)
    odd_lane = BinOp("eq", BinOp("floormod", lane, Const(2), i32), Const(1), b)
    th = Threads([], (64, 1, 1))
    want = [t for t in range(64) if (64 // (32 - t) if t < 32 else t % 7) == 2]
    assert th.running((guard, True, None)) == want
    assert th.running((odd_lane, False, (guard, True, None))) == \
        [t for t in want if t % 32 % 2 == 0]
    assert th.value(picked, 40) == 5 and th.value(Const(3), 7) == 3
