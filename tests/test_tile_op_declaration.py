"""One declaration per tile op: tile_op, @register and the builder's front end fill the same
TileOp in any order; predicates carry rule names into explain's rows; a predicate that
raises rejects its variant with a row naming the rule and the error, and dispatch goes on."""
import pytest

import ptxgen as pg
from ptxgen.builder import tile_ops
from ptxgen.builder.tile import record_call, region_of
from ptxgen.errors import DispatchError
from ptxgen.ir import Comment
from ptxgen.primitives import registry
from ptxgen.primitives.registry import predicate, register, tile_op


def _shape_known(call):
    return 1 // 0, "unreachable"


def _plain_ok(call):
    return True, "the plain path takes any region"


@pytest.fixture
def probe():
    """A scratch op `probe` with three variants, removed again after the test."""
    def front(scope, dst, src, dispatch=None, **options):
        record_call("probe", scope, (region_of(dst, "dst"), region_of(src, "src")), options,
                    dispatch=dispatch)

    register("probe", "broken", 30, when=[predicate("shape_known", _shape_known)])(
        lambda call: [Comment("probe broken")])     # registered before the op is declared
    tile_op("probe")
    register("probe", "named", 20, when=[predicate("aligned_16B",
                                                   lambda call: (False, "not 16-byte aligned"))])(
        lambda call: [Comment("probe named")])
    register("probe", "plain", 10, when=[_plain_ok])(lambda call: [Comment("probe plain")])
    tile_ops.register("probe", front)
    yield
    registry._OPS.pop("probe")


def _kernel(seen, dispatch=None):
    @pg.kernel(grid=(1,), block=(32,))
    def k(A: pg.Tensor((32,), "float32"), B: pg.Tensor((32,), "float32")):
        pg.lane_id()
        seen["t"] = pg.tile.explain("probe", B, A, scope="warp", dispatch=dispatch)
        pg.tile.warp.probe(B, A, dispatch=dispatch)
    return k


def test_one_declaration_holds_record_front_end_and_variants(probe):
    op = registry.tile_ops()["probe"]
    assert op.call is registry.Call and op.front is tile_ops.get("probe")
    assert [v.name for v in op.variants] == ["broken", "named", "plain"]
    assert "probe" in tile_ops.names()


def test_rows_name_their_rule_and_a_raising_rule_does_not_stop_dispatch(probe):
    seen = {}
    ptx = _kernel(seen).ptx("sm_90a")
    rows = [(r.name, r.ok, r.reason, r.rule, r.chosen) for r in seen["t"]]
    assert rows == [
        ("broken", False, "shape_known raised ZeroDivisionError: integer division or modulo "
                          "by zero", "shape_known", False),
        ("named", False, "not 16-byte aligned", "aligned_16B", False),
        ("plain", True, "the plain path takes any region", "plain_ok", True),
    ]
    assert "// probe plain" in ptx and "probe broken" not in ptx


def test_a_raising_rule_is_reported_when_no_variant_accepts(probe):
    with pytest.raises(DispatchError) as ei:
        _kernel({}, dispatch="broken").ptx("sm_90a")
    assert "  broken: shape_known raised ZeroDivisionError: integer division or modulo by " \
           "zero\n  named: not requested (dispatch='broken')\n  plain: not requested " \
           "(dispatch='broken')" in str(ei.value)


def test_rule_names():
    assert registry.rule_name(predicate("aligned_16B", _plain_ok)) == "aligned_16B"
    assert registry.rule_name(_plain_ok) == "plain_ok"
    assert repr(predicate("aligned_16B", _plain_ok)) == "predicate('aligned_16B')"
