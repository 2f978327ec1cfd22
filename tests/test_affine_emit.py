"""The emitter's affine shortcuts against the general path they stand for.

`affine_val(aff)` must emit exactly what `val(aff.to_expr())` emits (same lines, same
value-table keys in the same scopes, same registers), and `affine_facts(aff)` must equal
`bounds()`/`modset()` of `aff.to_expr()`: later statements reuse those keys and facts, so a
difference would change other code, not just this value.  Random forms over variables with
random facts, special registers, a non-affine atom and an impure load; negative, power-of-2
and mad-fusing coefficients; constants; scopes opened and closed between forms.
"""
import random

from hypothesis import given, settings, strategies as st

from ptxgen.dtypes import dtype
from ptxgen.emit.values import ValueEmitter
from ptxgen.ir import BinOp, Const, Load, SpecialReg, Var, expr_key
from ptxgen.analysis.simplify import Affine, Analyzer

I32, I64 = dtype("int32"), dtype("int64")


class _Emitter(ValueEmitter):
    def __init__(self, an):
        self.an, self.lines, self.target = an, [], None
        self._init_values()

    def emit(self, line):
        self.lines.append("    " + line)

    def load(self, e):   # an impure atom: a fresh register per read
        r = self.new_reg("b64" if e.dtype.bits == 64 else "b32")
        self.emit(f"ld.global.b{e.dtype.bits} {r}, [x];")
        return r


class _Buf:
    uid, name = 12345, "buf"


def _copy(dt, terms, const):
    return Affine(dt, {k: [a, c] for k, (a, c) in terms.items()}, const)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_affine_val_and_facts_match_the_expression_path(seed):
    rnd = random.Random(seed)
    dt = rnd.choice([I32, I32, I64])
    an = Analyzer()
    xs = [Var(f"x{i}", dt) for i in range(4)]
    for v in xs:
        an.bind_range(v, rnd.choice([0, 3, -5, None]), rnd.choice([100, 7, None]),
                      rnd.choice([1, 4, 16]), Const(rnd.choice([0, 3, 4]), dt))
    atoms = xs + [Load(_Buf, (Const(1),), dt), BinOp("floordiv", xs[0], Const(3, dt), dt)]
    if dt is I32:
        atoms.append(SpecialReg("tid.x"))
    fast, general = _Emitter(an), _Emitter(an)
    for em in (fast, general):
        em.var_reg.update({v.uid: f"%x{i}" for i, v in enumerate(xs)})
    for _ in range(10):
        terms = {expr_key(a): [a, rnd.choice([1, 1, -1, 2, 3, 6, 12, 256, -3, -4, 0])]
                 for a in rnd.sample(atoms, rnd.randint(1, 3))}
        const = rnd.choice([0, 0, 5, -7, 16])
        got = fast.affine_val(_copy(dt, terms, const))
        want = general.val(_copy(dt, terms, const).to_expr())
        assert got == want
        expr = _copy(dt, terms, const).to_expr()
        assert an.affine_facts(_copy(dt, terms, const)) == (an.bounds(expr), an.modset(expr))
        if rnd.random() < 0.25:
            fast.push_scope()
            general.push_scope()
        elif rnd.random() < 0.15 and len(fast._scope_keys) > 1:
            fast.pop_scope()
            general.pop_scope()
    assert fast.lines == general.lines
    assert fast.known == general.known and fast._scope_keys == general._scope_keys
    assert fast.reg_counts == general.reg_counts
