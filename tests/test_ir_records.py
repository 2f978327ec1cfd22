"""The IR's record classes (written out rather than made by @dataclass, for import time) keep
a dataclass's contract: constructors with the same positional order and defaults and `src`
keyword-only, a fresh dict per default, a field-by-field repr, identity equality, and
immutability where the class promised it (BufferRegion, DType)."""
import pytest

import ptxgen as pg
from ptxgen import ir
from ptxgen.builder.resources import Resources
from ptxgen.dtypes import dtype
from ptxgen.target.table import Gate, parse_target


def test_statement_constructors_take_src_by_keyword_only():
    c = ir.Comment("hello", src="k.py:3")
    assert (c.text, c.src) == ("hello", "k.py:3")
    assert repr(c) == "Comment(src='k.py:3', text='hello')"
    with pytest.raises(TypeError):
        ir.Comment("hello", "k.py:3")
    assert ir.Barrier().src == "" and (ir.Barrier().kind, ir.Barrier().id) == ("cta", 0)


def test_positional_order_and_defaults_are_the_fields_order():
    v = pg.var("i")
    f = ir.For(v, ir.const(0), ir.const(4), 1, "serial", [], src="k.py:9")
    assert (f.var, f.start.value, f.stop.value, f.step, f.kind, f.body, f.src) == \
        (v, 0, 4, 1, "serial", [], "k.py:9")
    assert ir.For._fields == ("src", "var", "start", "stop", "step", "kind", "body")
    i = ir.Instr("mov.b32", (v, v))
    assert (i.form, i.attrs, i.outs, i.guard, i.src) == (None, None, 0, None, "")
    assert repr(ir.Mem(v, 8)) == f"Mem(ptr={v!r}, offset=8)"
    assert repr(ir.VecOperand((1, 2))) == "VecOperand(items=(1, 2))"


def test_default_dicts_are_fresh_per_instance():
    a, b = ir.TileCall("copy", (), "warp"), ir.TileCall("copy", (), "warp")
    a.options["dispatch"] = "x"
    assert b.options == {} and a.active == (True, "")
    f, g = ir.PrimFunc("k", [], []), ir.PrimFunc("k", [], [])
    f.attrs["cluster"] = (2, 1, 1)
    assert g.attrs == {} and g.grid == (1, 1, 1) and g.register_buffers == frozenset()


def test_records_compare_by_identity():
    assert ir.Comment("a") != ir.Comment("a")
    c = ir.Comment("a")
    assert c == c and hash(c) == object.__hash__(c)


def test_region_and_dtype_are_immutable():
    buf = ir.Buffer("A", (4,), dtype("float32"))
    r = ir.BufferRegion(buf, ((0, 4),))
    with pytest.raises(AttributeError, match="a BufferRegion is immutable: cannot assign to "
                                             "field 'region'"):
        r.region = ((0, 2),)
    with pytest.raises(AttributeError, match="a DType is immutable: cannot assign to field "
                                             "'bits'"):
        dtype("float16").bits = 8
    assert repr(r) == f"BufferRegion(buffer={buf!r}, region=((0, 4),))"
    f16x2 = dtype("float16x2")
    assert (f16x2.scalar, f16x2.lanes, f16x2.storage_bits) == (dtype("float16"), 2, 16)
    assert dtype("bool").storage_bits == 8 and dtype("int8").is_int


def test_value_records_compare_by_value():
    assert parse_target("sm_90a") == parse_target("sm_90a")
    assert parse_target("sm_90a").min_ptx and str(parse_target("sm_100a")) == "sm_100a"
    assert Gate("ld") == Gate("ld", 0, (0, 0))
    r = Resources(1024, 4096, 2, 128)
    assert r + r == Resources(2048, 8192, 4, 256)
    assert (r | Resources(2048, 0, 1, 0)) == Resources(2048, 4096, 2, 128)
    assert r.as_dict() == {"smem_static_bytes": 1024, "smem_dynamic_bytes": 4096,
                           "barriers": 2, "tmem_cols": 128, "smem_bytes": 5120}
    assert repr(Resources()) == ("Resources(smem_static_bytes=0, smem_dynamic_bytes=0, "
                                 "barriers=0, tmem_cols=0)")


def test_traced_statements_visits_nested_bodies_but_not_lowered_ones():
    from ptxgen.ir import Comment, For, If, Lowered, While, traced_statements
    from ptxgen.expr import Const, Var, INT32

    i = Var("i", INT32)
    c = [Comment(f"c{n}") for n in range(6)]
    inner = For(i, Const(0, INT32), Const(2, INT32), 1, "serial", [c[2]])
    branch = If(Const(1, INT32), [inner], [c[3]])
    loop = While(Const(1, INT32), [branch])
    hidden = Lowered("tile op", [c[5]])
    body = [c[0], loop, c[1], hidden, c[4]]
    got = list(traced_statements(body))
    assert sorted(map(id, got)) == sorted(map(id, [*body, branch, inner, *c[2:4]]))
    assert c[5] not in got and len(got) == len(set(map(id, got)))
