"""Pipeline: a ring of `stages` buffers guarded by full/empty mbarrier pairs, with phase
tracking, for producer / consumer kernels (sm_90+).

Why a helper: the ring's protocol is short but every detail is a hang or a race when wrong:
the producer must first wait on the empty barrier with the *opposite* parity (the slot is
free before anyone released it), the phase bit flips exactly when the stage index wraps, the
full barrier expects one arrival per copy that lands in the stage, the empty one one per
consumer, and a consumer may release only after all of its threads are done reading.

    pipe = pg.Pipeline(pool, stages=4, consumers=2)    # 2 consumer warpgroups release each stage
    pipe.init()                                        # every thread: init, fence, barrier
    with pg.if_(pg.warp_id() == 0):                    # the producer warp
        prod = pipe.producer()
        for k in pg.serial(K):
            prod.acquire()                             # wait until the stage is free
            pg.tile.warp.copy_async(As[prod.stage], A[..], mbar=prod.full)   # one arrival
            prod.commit()                              # on to the next stage
    with pg.else_():                                   # consumer warpgroups 1 and 2
        cons = pipe.consumer(scope="warpgroup")
        for k in pg.serial(K):
            cons.wait()                                # wait until the stage has landed
            ... read As[cons.stage] ...
            cons.release()                             # the warpgroup is done with it

Counts: a full barrier completes a phase after `producer_arrivals` arrivals (one per
copy_async(mbar=...) of the stage, or `commit(arrive=True)`), an empty one after `consumers`
releases.  A release in warp / warpgroup / cta scope first synchronizes that scope (bar.warp.sync,
named barrier 1 + warpgroup index with 128 threads, bar.sync 0), then its thread 0 arrives.

`cluster_ctas=n` (a kernel with a cluster of n CTAs): each CTA's producer also multicasts into
the stage of every CTA of the cluster (copy_async(..., multicast=mask)), so a stage is free
only when the consumers of all n CTAs have read it.  Each release then arrives on the stage's
empty barrier in every CTA of the cluster (n arrivals, through cluster_view), an empty barrier
expects `consumers` x n of them, and init() synchronizes the whole cluster, so no peer arrives
or multicasts before the barriers exist.  The kernel must end with pg.cluster_sync(), so no
CTA exits while a peer may still arrive on its barriers (refused otherwise).
"""
from __future__ import annotations

from ..builder.cluster import cluster_sync, cluster_view
from ..builder.context import current, user_site
from ..errors import TraceError
from ..analysis.uniform import keeps_whole_warps
from ..builder.control import bind_let, cta_sync, if_, named_barrier, warp_sync
from ..builder.resources import require_top_level, resource_error
from ..builder.scalar import local_scalar
from ..ir import Instr, SpecialReg, select
from . import mbarrier as mb

_SCOPES = ("thread", "warp", "warpgroup", "cta")


class _State:
    """A stage index and its phase bit in two local scalars; `advance` moves to the next."""

    def __init__(self, pipe, role):
        self.pipe = pipe
        self._stage = local_scalar("int32", 0, name=f"{pipe.name}_{role}_stage")
        self._phase = local_scalar("int32", 0, name=f"{pipe.name}_{role}_phase")

    @property
    def stage(self):
        """The current stage index (an int32 expression): index the ring's tiles with it.  It
        reads the position where it is used, so after advance() (or release()) the same
        expression names the next stage; keep one stage with pg.let(cons.stage)."""
        return self._stage.__ptxgen_expr__()

    @property
    def phase(self):
        return self._phase.__ptxgen_expr__()

    @property
    def full(self):
        """The current stage's full barrier (pass it as copy_async's mbar=)."""
        return self.pipe.full[self.stage]

    @property
    def empty(self):
        return self.pipe.empty[self.stage]

    def advance(self):
        nxt = self.stage + 1
        wrap = nxt == self.pipe.stages
        self._phase.set(self.phase ^ select(wrap, 1, 0))
        self._stage.set(select(wrap, 0, nxt))


class Producer(_State):
    def acquire(self):
        """Wait until the current stage is empty (its consumers released it); the first round
        passes at once."""
        self.pipe._note("acquire")
        mb.try_wait(self.empty, self.phase ^ 1)

    def commit(self, arrive: bool = False):
        """Done filling the current stage: `arrive=True` adds one plain arrival on its full
        barrier (for data that did not come by copy_async(mbar=...)); then the next stage."""
        self.pipe._note("commit")
        if arrive:
            mb.arrive(self.full)
        self.advance()


class Consumer(_State):
    def __init__(self, pipe, scope):
        if scope not in _SCOPES:
            raise resource_error(f"Pipeline consumer scope={scope!r}: one of {', '.join(_SCOPES)}")
        super().__init__(pipe, "consumer")
        self.scope = scope
        # cluster: the empty barriers of every CTA (mapa'd once, here, not per release)
        self._empties = [cluster_view(pipe.empty, r) for r in range(pipe.cluster_ctas)] \
            if pipe.cluster_ctas > 1 else None

    @property
    def uniform_stage(self):
        """The current stage, bound as lane 0's copy (shfl.sync.idx): pick the stage's
        shared-memory operands with it.  Every thread of a warp, warpgroup or CTA consumer
        advances the stage together, so it is warp-uniform, and ptxas then keeps the wgmma
        descriptors and addresses made from it in uniform registers.  For a thread-scope
        consumer, or under a branch that splits a warp, it is a plain binding."""
        ctx = current()
        whole = self.scope != "thread" and keeps_whole_warps(ctx, ctx.active_mask)
        return bind_let(ctx, user_site(), f"{self.pipe.name}_stage", self.stage,
                        (0, self.pipe.stages - 1), broadcast=whole)

    def wait(self):
        """Wait until the current stage is full (every expected copy landed)."""
        self.pipe._note("wait")
        mb.try_wait(self.full, self.phase)

    def release(self):
        """This consumer is done with the current stage: one arrival on its empty barrier
        (after the consumer's scope synchronized), then the next stage."""
        self.pipe._note("release")
        tid = SpecialReg("tid.x")
        if self.scope == "thread":
            self._arrive()
        else:
            if self.scope == "warp":
                warp_sync()
                first = tid % 32 == 0
            elif self.scope == "warpgroup":
                named_barrier(tid // 128 + 1, 128)
                first = tid % 128 == 0
            else:
                cta_sync()
                first = tid == 0
            with if_(first):
                self._arrive()
        self.advance()

    def _arrive(self):
        if self._empties is None:
            mb.arrive(self.empty)
        else:
            for peer in self._empties:   # publishes no data, only that the reads are done
                mb.arrive(peer[self.stage], scope="cta")
            # the top-level statements from here on follow this release (Pipeline._check)
            self.pipe._released_at = (len(current().func.body), user_site().src)


class Pipeline:
    """`stages` full/empty mbarrier pairs from an SMEMPool; see the module docstring."""

    def __init__(self, pool, stages: int, consumers: int = 1, producer_arrivals: int = 1,
                 name: str = "pipe", cluster_ctas: int = 1):
        for what, v in (("stages", stages), ("consumers", consumers),
                        ("producer_arrivals", producer_arrivals), ("cluster_ctas", cluster_ctas)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise resource_error(f"Pipeline {what}={v!r} must be a positive int")
        cluster = current().func.attrs.get("cluster") or (1, 1, 1)
        if cluster_ctas > 1 and cluster_ctas != cluster[0] * cluster[1] * cluster[2]:
            raise resource_error(f"Pipeline cluster_ctas={cluster_ctas}: the kernel's cluster "
                                 f"{tuple(cluster)} has {cluster[0] * cluster[1] * cluster[2]} "
                                 f"CTA(s); declare @pg.kernel(..., cluster=({cluster_ctas}, 1, 1))")
        self.pool, self.stages, self.name = pool, stages, current().unique(name)
        self.consumers, self.producer_arrivals = consumers, producer_arrivals
        self.cluster_ctas = cluster_ctas
        self._released_at = None       # (top-level index, site) of the last release into peers
        self.full = pool.alloc_mbarrier(stages, name=f"{self.name}_full")
        self.empty = pool.alloc_mbarrier(stages, name=f"{self.name}_empty")
        self._src = user_site().src
        self._uses: dict = {}          # "init" / "acquire" / ... -> the first site
        current().finalizers.append(self._check)

    def _note(self, what):
        self._uses.setdefault(what, user_site().src)

    def _check(self):
        """When the trace ends: a ring that is used but never initialised faults, one whose
        stages are waited on but never released (or acquired but never committed) hangs."""
        u = self._uses
        used = [u[k] for k in ("acquire", "wait", "commit", "release") if k in u]
        if used and "init" not in u:
            raise TraceError(f"{self._src}: Pipeline '{self.name}' is used (at {used[0]}) but "
                             f"never initialised: its mbarriers hold garbage; call "
                             f"{self.name}.init() in every thread, at the top level, after "
                             f"pool.commit() and before the producer and consumer branches")
        if "wait" in u and "release" not in u:
            raise TraceError(f"{u['wait']}: the consumer of Pipeline '{self.name}' waits on "
                             f"its stages but never releases them: the producer's acquire "
                             f"of a stage hangs once the ring wraps; call cons.release() "
                             f"when the stage has been read, on every path")
        if "acquire" in u and "commit" not in u:
            raise TraceError(f"{u['acquire']}: the producer of Pipeline '{self.name}' "
                             f"acquires stages but never commits them: it stays on one stage "
                             f"and the consumers wait on the others forever; call "
                             f"prod.commit() after issuing the stage's copies")
        at, site = self._released_at or (None, None)
        if at is not None and not any(
                type(st) is Instr and st.opcode.startswith("barrier.cluster.wait")
                for st in current().func.body[at:]):
            raise TraceError(f"{site}: Pipeline '{self.name}' (cluster_ctas="
                             f"{self.cluster_ctas}) releases stages in the other CTAs of the "
                             f"cluster, but the kernel does not call pg.cluster_sync() at the "
                             f"top level after its last release: a CTA that exits while a "
                             f"peer still arrives on its barriers faults; end the kernel with "
                             f"pg.cluster_sync()")

    def init(self):
        """Thread 0 initialises every barrier and publishes them (fence.mbarrier_init); then
        the CTA synchronizes.  Every thread calls it, at the top level, before any use."""
        require_top_level("Pipeline.init()")
        self._note("init")
        with if_(SpecialReg("tid.x") == 0):
            for s in range(self.stages):
                mb.init(self.full[s], self.producer_arrivals)
                mb.init(self.empty[s], self.consumers * self.cluster_ctas)
            mb.fence_mbarrier_init()
        if self.cluster_ctas > 1:
            cluster_sync()
        else:
            cta_sync()

    def producer(self) -> Producer:
        """A producer's position in the ring (its own local scalars)."""
        return Producer(self, "producer")

    def consumer(self, scope: str = "thread") -> Consumer:
        """A consumer's position; `scope` is who reads a stage and releases it together."""
        return Consumer(self, scope)


__all__ = ["Pipeline", "Producer", "Consumer"]
