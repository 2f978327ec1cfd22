"""The analyzer's affine shortcut against the general path it stands for.

`affine_facts(aff)` must equal `bounds()`/`modset()` of `aff.to_expr()`: later statements
reuse those facts, so a difference would change other code, not just this value.  Random
forms over variables with random facts, special registers, a non-affine atom and a load;
negative, power-of-2 and zero coefficients; constants.  (The emitter's walk of its own,
affine_val, is gone: it emits val(aff.to_expr()).)
"""
import random

from hypothesis import given, settings, strategies as st

from ptxgen.dtypes import dtype
from ptxgen.ir import BinOp, Const, Load, SpecialReg, Var, expr_key
from ptxgen.analysis.simplify import Affine, Analyzer

I32, I64 = dtype("int32"), dtype("int64")


class _Buf:
    uid, name = 12345, "buf"


def _copy(dt, terms, const):
    return Affine(dt, {k: [a, c] for k, (a, c) in terms.items()}, const)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_affine_facts_match_the_expression_path(seed):
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
    for _ in range(10):
        terms = {expr_key(a): [a, rnd.choice([1, 1, -1, 2, 3, 6, 12, 256, -3, -4, 0])]
                 for a in rnd.sample(atoms, rnd.randint(1, 3))}
        const = rnd.choice([0, 0, 5, -7, 16])
        expr = _copy(dt, terms, const).to_expr()
        assert an.affine_facts(_copy(dt, terms, const)) == (an.bounds(expr), an.modset(expr))
