"""Statements are located at the user's line (builder/context.user_site): calls on one line
and on successive lines, a mutable scalar's initial value and its in-place updates, and the
line of the Let a comprehension of calls makes."""
import inspect

import ptxgen as pg


def _line(fn, text):
    """Line number of the first line of `fn` that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _srcs(k, kind):
    return [s.src for s in k.ir.body if type(s).__name__ == kind]


def test_scalar_init_and_updates_name_their_lines():
    def body(A: pg.Tensor((32,), "int32")):
        acc = pg.local_scalar("int32", 0)                   # line: init
        acc += 1                                             # line: iadd
        acc *= 3                                             # line: imul
        acc.set(acc + 2)                                     # line: set
        A[pg.thread_id(32)] = acc

    k = pg.kernel(grid=(1,), block=(32,))(body)
    stores = _srcs(k, "Store")
    here = __file__.rsplit("/", 1)[-1]
    want = [f"{here}:{_line(body, '# line: ' + w)}" for w in ("init", "iadd", "imul", "set")]
    assert stores[:4] == want


def test_calls_on_one_line_and_on_successive_lines():
    def body(A: pg.Tensor((32,), "int32")):
        a = pg.let(pg.thread_id(32)); b = pg.let(a + 1)     # noqa: E702  line: both
        c = pg.let(b + 2)                                    # line: next
        A[a] = c

    k = pg.kernel(grid=(1,), block=(32,))(body)
    here = __file__.rsplit("/", 1)[-1]
    both, nxt = (f"{here}:{_line(body, '# ' + w)}" for w in ("noqa", "line: next"))
    assert _srcs(k, "Let")[-3:] == [both, both, nxt]
    # a second trace of the same function finds the same lines (the sites are cached)
    k2 = pg.kernel(grid=(1,), block=(32,))(body)
    assert _srcs(k2, "Let") == _srcs(k, "Let")
