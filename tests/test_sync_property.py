"""The protocol check's verdict on generated producer / consumer programs, checked against
their execution in ptxsim.

A program the check accepts must run to completion in ptxsim with the right data; one it
refuses, built with the check switched off, must hang (ptxsim's deadlock), fault (a trap) or
leave stale data there.  ptxsim lands a TMA copy when a thread waits on its barrier; here a
wait that its parity already satisfies returns without landing anything, as on the GPU, where
such a wait does not wait for the copies in flight.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptxgen as pg
import ptxgen.passes
from support import ptxsim
from support import ptxsim_async
from ptxgen.errors import TraceError

ROWS = 8


def _eager_waits(monkeypatch):
    orig = ptxsim_async.AsyncOps._mbarrier

    def mbarrier(self, th, ctx, parts, ops):
        if parts[1] in ("try_wait", "test_wait") and "parity" in parts:
            bar = ctx["mbar"].get(self._addr(th, ctx, ops[1]))
            if bar is not None and bar["phase"] != (self._read(th, ctx, ops[2]) & 1):
                self._write(th, ops[0], True, 1)
                return True
        return orig(self, th, ctx, parts, ops)
    monkeypatch.setattr(ptxsim_async.AsyncOps, "_mbarrier", mbarrier)


# ---- a ring of stages: pg.Pipeline ----------------------------------------------------------
def ring(stages, extra, copies, producer_arrivals, consumers):
    """The trip count is a runtime argument (the check cannot lean on it); ptxsim runs
    stages + extra trips, so the ring always wraps."""
    iters = stages + extra

    def k(src: pg.Tensor((iters * ROWS, 64), "float16"),
          dst: pg.Tensor((iters * ROWS, 64), "float16"), n: pg.int32):
        tx = pg.thread_id(64)
        pool = pg.SMEMPool()
        tiles = [pool.alloc((stages, ROWS, 32), "float16", align=128) for _ in range(copies)]
        pipe = pg.Pipeline(pool, stages=stages, consumers=consumers,
                           producer_arrivals=producer_arrivals)
        pool.commit()
        pipe.init()
        with pg.if_(tx == 0):
            prod = pipe.producer()
            for i in pg.serial(n):
                s = prod.stage
                prod.acquire()
                for c, t in enumerate(tiles):
                    pg.tile.thread.copy_async(t[s:s + 1, 0:ROWS, 0:32],
                                              src[i * ROWS:i * ROWS + ROWS, 32 * c:32 * c + 32],
                                              mbar=prod.full)
                prod.commit()
        with pg.if_(tx == 32):
            cons = pipe.consumer()
            for i in pg.serial(n):
                s = cons.stage
                cons.wait()
                for c, t in enumerate(tiles):
                    pg.tile.thread.copy_async(dst[i * ROWS:i * ROWS + ROWS, 32 * c:32 * c + 32],
                                              t[s:s + 1, 0:ROWS, 0:32])
                pg.tile.thread.async_commit(kind="bulk")
                pg.tile.thread.async_wait(0, read=True, kind="bulk")
                cons.release()
            pg.tile.thread.async_wait(0, kind="bulk")
    k.__name__ = f"ring_{stages}_{extra}_{copies}_{producer_arrivals}_{consumers}"
    k = pg.kernel(k, grid=(1,), block=(64,))
    a = np.arange(iters * ROWS * 64, dtype=np.uint16).reshape(iters * ROWS, 64).view(np.float16)
    out = np.full_like(a, np.float16(-1.0))
    want = a.copy()
    want[:, 32 * copies:] = out[:, 32 * copies:]
    return k, [a, out], [(1, want)], [iters]


# ---- one barrier, TMA loads, waits on given parities ----------------------------------------
def single(count, copies, parities, init):
    n = len(parities)

    def k(A: pg.Tensor((ROWS, 64), "float16"), O: pg.Tensor((n, 2, ROWS, 32), "float16")):
        tx = pg.thread_id(128)
        pool = pg.SMEMPool()
        T = pool.alloc((2, ROWS, 32), "float16", align=128)
        bar = pool.alloc_mbarrier(1)
        pool.commit()
        if init:
            with pg.if_(tx == 0):
                pg.ptx.mbarrier.init(bar, count)
        pg.cta_sync()
        with pg.if_(tx == 0):
            for c in range(copies):
                pg.tile.thread.copy_async(T[c:c + 1, 0:ROWS, 0:32], A[0:ROWS, 32 * c:32 * c + 32],
                                          mbar=bar)
        for w, p in enumerate(parities):
            pg.ptx.mbarrier.try_wait(bar, p)
            pg.tile.cta.copy(O[w:w + 1, 0:2, 0:ROWS, 0:32], T)
    k.__name__ = f"single_{count}_{copies}_{''.join(map(str, parities))}_{int(init)}"
    k = pg.kernel(k, grid=(1,), block=(128,))
    a = np.arange(ROWS * 64, dtype=np.uint16).reshape(ROWS, 64).view(np.float16)
    out = np.full((n, 2, ROWS, 32), np.float16(-1.0))
    want = out.copy()
    for w in range(n):
        for c in range(copies):
            want[w, c] = a[:, 32 * c:32 * c + 32]
    return k, [a, out], [(1, want)], []


# ---- cp.async: one warp copies and waits, another reads ----------------------------------------
def cp_seen(copier, reader, wait, barrier):
    """Warp `copier` copies a tile with cp.async and waits in `wait` scope (a warp's wait ends
    with bar.warp.sync, a thread's with nothing); `barrier` ("cta", "named" or None) follows;
    warp `reader` copies the tile out.  ptxsim runs the threads in order up to each barrier,
    so a reader warp before the copier reads what has landed so far, as it may on the GPU."""
    def k(A: pg.Tensor((ROWS, 32), "float16"), O: pg.Tensor((ROWS, 32), "float16")):
        tx = pg.thread_id(128)
        T = pg.alloc_shared((ROWS, 32), "float16", align=128)
        with pg.if_(tx // 32 == copier):
            pg.tile.warp.copy_async(T, A, dispatch="cp_async")
            pg.tile.warp.async_commit()
            getattr(pg.tile, wait).async_wait(0)
            if barrier == "named":
                pg.named_barrier_arrive(1, 64)
        if barrier == "cta":
            pg.cta_sync()
        with pg.if_(tx // 32 == reader):
            if barrier == "named":
                pg.named_barrier(1, 64)
            pg.tile.warp.copy(O, T)
    k.__name__ = f"cp_seen_{copier}_{reader}_{wait}_{barrier}"
    k = pg.kernel(k, grid=(1,), block=(128,))
    a = (np.arange(ROWS * 32, dtype=np.uint16) + 1).reshape(ROWS, 32).view(np.float16)
    out = np.full_like(a, np.float16(-1.0))
    return k, [a, out], [(1, a.copy())], []


def _sim(k, arrays, scalars, max_steps=50_000):
    """ptxsim.run with a small step budget: a waiter that spins past it is a hang."""
    sim = ptxsim.Sim(k.ptx("sm_90a"))
    bases = [sim.mem.alloc_global(np.ascontiguousarray(a).tobytes()) for a in arrays]
    args = list(bases) + list(scalars)
    f = k.ir
    given = {p.name: a for p, a in zip(f.params, args)}
    for p in f.params[len(args):]:
        if p.kind == "tmap":
            args.append(ptxsim.tensor_map_blob(p.spec, given[p.spec.tensor], given))
    sim.launch(args, f.grid, f.block, max(f.dynamic_smem_bytes, f.dynamic_smem_reserve or 0),
               max_steps=max_steps)
    for a, b in zip(arrays, bases):
        a.reshape(-1)[...] = np.frombuffer(bytes(sim.mem.view(b)), dtype=a.dtype)[:a.size]


def _runs_right(k, arrays, checks, scalars) -> tuple:
    arrays = [x.copy() for x in arrays]
    try:
        _sim(k, arrays, scalars)
    except ptxsim.Trap as e:
        return False, f"trap: {e}"
    for i, want in checks:
        mask = want != np.float16(-1.0)
        got = arrays[i]
        if not np.array_equal(got.view(np.uint16)[mask], want.view(np.uint16)[mask]):
            return False, "stale data"
    return True, ""


_SEEN: dict = {}     # parameters -> verdict: hypothesis repeats small spaces, the run is pure


def _verdict(monkeypatch, make, *params):
    key = (make.__name__,) + params
    if key in _SEEN:
        return _SEEN[key]
    _SEEN[key] = _check(monkeypatch, make(*params))


def _check(monkeypatch, case):
    k, arrays, checks, scalars = case
    try:
        k.ptx("sm_90a")
        refused = None
    except TraceError as e:
        refused = str(e)
    if refused is not None:
        with monkeypatch.context() as m:
            m.setattr(ptxgen.passes, "check_protocol", lambda f, t=None: [])
            k.ptx("sm_90a")
    ok, why = _runs_right(k, arrays, checks, scalars)
    if refused is None:
        assert ok, f"{k.name}: accepted, but in ptxsim: {why}"
    else:
        assert not ok, f"{k.name}: refused ({refused}), but runs right in ptxsim"


SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


@SETTINGS
@given(stages=st.integers(1, 3), extra=st.integers(1, 2), copies=st.integers(1, 2),
       producer_arrivals=st.integers(1, 3), consumers=st.integers(1, 2))
def test_generated_rings_agree_with_ptxsim(stages, extra, copies, producer_arrivals,
                                          consumers):
    with pytest.MonkeyPatch.context() as mp:
        _eager_waits(mp)
        _verdict(mp, ring, stages, extra, copies, producer_arrivals, consumers)


@SETTINGS
@given(count=st.integers(1, 2), copies=st.integers(1, 2),
       parities=st.lists(st.integers(0, 1), min_size=1, max_size=2), init=st.booleans())
def test_generated_barrier_waits_agree_with_ptxsim(count, copies, parities, init):
    with pytest.MonkeyPatch.context() as mp:
        _eager_waits(mp)
        _verdict(mp, single, count, copies, tuple(parities), init)


@SETTINGS
@given(copier=st.integers(0, 3), data=st.data(), wait=st.sampled_from(["warp", "thread"]),
       barrier=st.sampled_from([None, "cta", "named"]))
def test_generated_cp_async_readers_agree_with_ptxsim(copier, data, wait, barrier):
    """Only readers up to the copier: ptxsim runs a later warp after the copies landed, so a
    race there would not show.  A warp reading its own copies with no barrier after a
    thread's wait is left out: the check leaves it undecided (whose copy each lane reads)."""
    reader = data.draw(st.integers(0, copier))
    if wait == "thread" and reader == copier and barrier is None:
        return
    with pytest.MonkeyPatch.context() as mp:
        _verdict(mp, cp_seen, copier, reader, wait, barrier)
