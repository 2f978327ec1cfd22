"""Facts the protocol check (protocol.py) evaluates: which threads run a statement (its if_
conditions on thread ids, evaluated for every thread of the block), constant trip counts,
linked guard and loop chains."""
from __future__ import annotations

from ..errors import TraceError
from ..ir import BinOp, Cast, Const, For, If, Let, Load, Not, Select, SpecialReg, Var, While, subexpressions


_SHARED = ("shared", "shared.dyn")
_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
        "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
        "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b, "min": min, "max": max,
        "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
_GROUP = {"thread": 1, "warp": 32, "warpgroup": 128, "cta": None, "cluster": None}


class _Unknown(Exception):
    """A guard or index the pass cannot evaluate per thread."""


def _loaded(exprs) -> set:
    """Root uids of the local buffers an index reads (a pipeline's stage scalar)."""
    out, stack = set(), list(exprs)
    while stack:
        x = stack.pop()
        t = type(x)
        if t is Load and x.buffer.root.scope == "local":
            out.add(x.buffer.root.uid)
        stack += subexpressions(x)
    return out


def _trips(loop):
    """A serial loop's constant trip count, or None."""
    if type(loop) is not For or type(loop.start) is not Const or type(loop.stop) is not Const \
            or type(loop.step) is not int:
        return None
    return max(0, -(-(loop.stop.value - loop.start.value) // loop.step))


def _chain(node, n=2) -> list:
    """A linked (item..., parent) chain as a list, outermost first: guards and loops are
    linked, so a deeply nested kernel costs linear memory."""
    out = []
    while node is not None:
        out.append(node[:n])
        node = node[n]
    out.reverse()
    return out


def _fail(src, msg):
    return TraceError(f"{src or '?'}: {msg}")


class _Threads:
    """Which threads of the block run a statement, from its enclosing if_ conditions, when
    those depend on thread ids alone (lets of tid expressions are followed)."""

    def __init__(self, body, block):
        self.binds = {}
        self.block = block
        self.memo = {}
        stack = [body]
        while stack:
            for s in stack.pop():
                t = type(s)
                if t is Let:
                    self.binds[s.var.uid] = s.value
                elif t is For or t is While:
                    stack.append(s.body)
                elif t is If:
                    stack.append(s.then)
                    if s.else_:
                        stack.append(s.else_)

    def _eval(self, e, tid):
        t = type(e)
        if t is Const:
            return e.value
        if t is SpecialReg:
            if e.name == "tid.x":
                return tid
            if e.name == "laneid":
                return tid % 32
            if e.name in ("tid.y", "tid.z"):
                return 0
            raise _Unknown(e.name)
        if t is Var:
            v = self.binds.get(e.uid)
            if v is None:
                raise _Unknown(e.name)
            return self._eval(v, tid)
        if t is BinOp:
            f = _OPS.get(e.op)
            if f is None:
                raise _Unknown(e.op)
            a, b = self._eval(e.a, tid), self._eval(e.b, tid)
            if e.op in ("floordiv", "floormod") and not b:
                raise _Unknown("division by zero")
            return f(a, b)
        if t is Not:
            return not self._eval(e.a, tid)
        if t is Cast:
            return self._eval(e.a, tid)
        if t is Select:
            return self._eval(e.t if self._eval(e.cond, tid) else e.f, tid)
        raise _Unknown(type(e).__name__)

    def running(self, guards) -> list:
        """The thread ids (x; the block must be 1-D) that satisfy every guard."""
        guards = _chain(guards)
        key = tuple([(id(c), pol) for c, pol in guards])
        r = self.memo.get(key)
        if r is None:
            bx, by, bz = self.block
            if by * bz != 1 and guards:
                raise _Unknown("a 2-D or 3-D block")
            r = [t for t in range(bx)
                 if all(bool(self._eval(c, t)) == pol for c, pol in guards)]
            self.memo[key] = r
        return r

    def instances(self, guards, scope) -> int:
        """How many instances of `scope` (threads, warps, ...) run a statement."""
        tids = self.running(guards)
        n = _GROUP.get(scope)
        if n is None:
            return 1 if tids else 0
        return len({t // n for t in tids})


class _CpGroups:
    """cp.async groups per thread (a mixin of _Check).  cp.async.commit_group and wait_group
    act on the calling thread's own copies, so a commit or wait that some issuing threads do
    not run leaves their part of the copy uncommitted or in flight: a reader that a CTA-wide
    list would let through (a producer warp copies and commits, a consumer warp waits).  Each
    copy carries the threads that issued it, where thread ids decide them; where they do not
    (a runtime guard), the commit or wait covers it, as before: never a guess."""

    def _cp_threads(self, guards):
        try:
            return frozenset(self.threads.running(guards))
        except _Unknown:
            return None

    def _cp_split(self, entries, guards, src) -> tuple:
        """(the part of each copy that a commit / wait running under `guards` covers, the
        part it leaves, marked with `src`)."""
        mine = self._cp_threads(guards)
        done, rest = {}, {}
        for u, (name, wsrc, who, missed) in entries.items():
            if mine is None or who is None or who <= mine:
                done[u] = (name, wsrc, who, None)
                continue
            if who & mine:
                done[u] = (name, wsrc, who & mine, None)
            rest[u] = (name, wsrc, who - mine, src)
        return done, rest

    def _cp_missed(self, buf, e, uncommitted, src):
        _, wsrc, who, missed = e
        op = "async_commit" if uncommitted else "async_wait"
        lo, hi = min(who), max(who)
        some = (f"thread {lo}" if lo == hi else f"threads {lo}..{hi}" if hi - lo + 1 == len(who)
                else f"{len(who)} threads ({lo}, ...)")
        return _fail(src, f"this reads shared tile '{buf.name}', written by cp.async copy_async "
                          f"at {wsrc}, but the {op}() at {missed} does not run in {some}, "
                          f"which issued it: cp.async groups are per thread (commit_group and "
                          f"wait_group cover only the calling thread's copies), so their copies "
                          f"may not have landed (stale data); call async_commit() and "
                          f"async_wait() in the scope and branch that issued the copy")
