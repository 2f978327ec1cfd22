"""Cold start.  `import ptxgen` and a first build of a kernel without tile ops stay off numpy,
jinja2 (forms on disk), cuda-bindings, the runtime, the primitives and the pools; those load
on first use, and the names that bring them in still work.  A tile copy's build loads the
primitives but still not numpy.  First-use shortcuts of the build
(forms compiled on their 4th use, the arch parsed without a regex) give the same results."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("numpy", "jinja2", "cuda", "ptxgen.runtime", "ptxgen.primitives", "ptxgen.alloc",
         "ptxgen.builder.tile", "ptxgen.builder.tcgen05")

CHILD = r"""
import json, sys
heavy = %r
def loaded():
    return sorted(h for h in heavy if any(m == h or m.startswith(h + ".") for m in sys.modules))
out = {}
import ptxgen as pg
out["import"] = loaded()
out["dataclasses"] = sorted(f"{m.__name__}.{c.__name__}" for m in list(sys.modules.values())
                            if getattr(m, "__name__", "").startswith("ptxgen")
                            for c in vars(m).values()
                            if isinstance(c, type) and "__dataclass_fields__" in vars(c))
N = pg.var("N")
@pg.kernel(grid=(1,), block=(256,))
def affine(o: pg.Tensor((N,), "float32"), x: pg.Tensor((N,), "float32"), a: pg.float32):
    i = pg.let(pg.cta_id() * 256 + pg.thread_id(256))
    with pg.if_(i < N):
        o[i] = x[i] * a + 1.0
out["trace"] = loaded()
affine.ptx("sm_90a")
out["build"] = loaded()
from ptxgen.target import forms
out["cache file read"] = forms._disk.file is not None
out["dir"] = all(n in dir(pg) for n in ("tile", "ptx", "SMEMPool", "TMEMPool"))
tile = pg.tile
out["tile"] = callable(tile.warp.copy) and callable(pg.ptx.mbarrier.init)
out["after tile"] = loaded()
@pg.kernel(grid=(1,), block=(32,))
def tile_copy(A: pg.Tensor((32, 32), "float32"), B: pg.Tensor((32, 32), "float32")):
    sm = pg.alloc_shared((32, 32), "float32")
    pg.tile.warp.copy(sm[0:32, 0:32], A[0:32, 0:32])
    pg.cta_sync()
    pg.tile.warp.copy(B[0:32, 0:32], sm[0:32, 0:32])
tile_copy.ptx("sm_90a")
out["tile build"] = loaded()
print(json.dumps(out))
"""


def run_child(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PTXGEN_CACHE_DIR=str(tmp_path))
    env.pop("PTXGEN_DISK_CACHE", None)
    p = subprocess.run([sys.executable, "-c", CHILD % (HEAVY,)], capture_output=True,
                       text=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def seed_is_current() -> bool:
    from ptxgen.target import forms

    try:
        with open(forms.SEED, "rb") as f:
            return forms.decode(forms.cache_key(), f.read()) is not None
    except OSError:
        return False


def test_import_and_a_plain_build_load_nothing_heavy(tmp_path):
    first = run_child(tmp_path)             # an empty cache: forms from the seed, or jinja2
    if seed_is_current():                   # the seed (read on import) has every form
        assert first["build"] == [] and not first["cache file read"]
        assert not os.listdir(tmp_path)     # and nothing was written
    out = run_child(tmp_path)
    assert out["import"] == [] and out["trace"] == [] and out["build"] == []
    # a dataclass compiles its generated methods on every import (~0.3-1 ms a class, 9 ms of
    # a 30 ms import when the IR's records were dataclasses): none on the import path
    assert out["dataclasses"] == []
    assert out["dir"] and out["tile"]
    assert {"ptxgen.primitives", "ptxgen.alloc", "ptxgen.builder.tile",
            "ptxgen.builder.tcgen05"} <= set(out["after tile"])
    # the primitives import numpy in the functions that need it: a tile copy does not
    assert "numpy" not in out["tile build"] and "ptxgen.primitives" in out["tile build"]


def test_unknown_attribute_is_an_attribute_error():
    import ptxgen as pg

    assert not hasattr(pg, "no_such_name")
    assert pg.SMEMPool is pg.__getattr__("SMEMPool")


def test_a_form_is_compiled_on_its_fourth_use_with_the_same_text():
    from ptxgen.target.forms import _COMPILE_AFTER, Form

    f = Form("ld.global.v2.f32 {{{d}, {a}}}, [{p}];")
    want = "ld.global.v2.f32 {%f1, %f2}, [%rd3];"
    texts = []
    for i in range(2 * _COMPILE_AFTER):
        assert (f.format.__name__ == "<lambda>") == (i >= _COMPILE_AFTER)
        if i % 2:
            texts.append(f.format("%f1", "%f2", "%rd3"))                   # positional
        else:
            texts.append(f.format(d="%f1", a="%f2", p="%rd3", unused=0))   # extras ignored
    assert set(texts) == {want}


def test_parse_target_without_a_regex_reads_every_known_arch():
    import re

    from ptxgen.errors import ArchError
    from ptxgen.target.table import MIN_PTX, parse_target

    for arch in MIN_PTX:
        m = re.fullmatch(r"sm_(\d+)([af]?)", arch)
        t = parse_target(arch)
        assert (t.arch, t.sm, t.suffix) == (arch, int(m.group(1)), m.group(2))
    for bad in ("sm_91", "sm90a", "", "sm_"):
        try:
            parse_target(bad)
        except ArchError:
            continue
        raise AssertionError(bad)


# ---- the shipped form seed -------------------------------------------------------------------
def _build_smem_demo():
    import ptxgen as pg

    @pg.kernel(grid=(1,), block=(128,))
    def smem_demo(A: pg.Tensor((128,), "float32"), B: pg.Tensor((128,), "float32")):
        tx = pg.thread_id(128)
        sm = pg.alloc_shared((128,), "float32")
        sm[tx] = A[tx]
        pg.cta_sync()
        B[tx] = sm[tx] * 2.0
    return smem_demo.ptx("sm_90a")


def test_an_empty_cache_takes_forms_from_a_seed_of_its_key(tmp_path, monkeypatch):
    from ptxgen.target import forms

    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "rendered"))
    forms._clear_memory()
    want = _build_smem_demo()                       # rendered (or seeded): the reference
    texts = dict(forms._disk.texts)
    seed = tmp_path / "seed.txt"
    seed.write_bytes(forms.encode(forms.cache_key(), texts))
    monkeypatch.setattr(forms, "SEED", str(seed))
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "empty"))

    def no_jinja():
        raise AssertionError("rendered although the seed has the text")
    monkeypatch.setattr(forms, "_macros", no_jinja)
    monkeypatch.setattr(forms, "module_template", no_jinja)
    forms._clear_memory()
    assert _build_smem_demo() == want
    forms.flush()
    assert not os.path.exists(tmp_path / "empty")     # nothing to write: the seed has them
    forms._clear_memory()


def test_a_seed_of_another_key_or_damaged_is_ignored(tmp_path, monkeypatch):
    from ptxgen.target import forms

    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "a"))
    forms._clear_memory()
    want = _build_smem_demo()
    texts = {k: "bad {x.y}" for k in forms._disk.texts}          # fails the placeholder check
    for data in (forms.encode("0" * 128, dict(forms._disk.texts)),
                 forms.encode(forms.cache_key(), texts), b"garbage"):
        seed = tmp_path / "seed.txt"
        seed.write_bytes(data)
        monkeypatch.setattr(forms, "SEED", str(seed))
        monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / str(len(data))))
        forms._clear_memory()
        assert _build_smem_demo() == want
    forms._clear_memory()


def test_the_shipped_seed_matches_the_templates():
    """Every text of ptxgen/target/forms_seed.txt is what the templates render now; a seed
    made for other templates (scripts/forms_seed.py not run since) is ignored by design."""
    import ast

    from ptxgen.target import forms

    with open(forms.SEED, "rb") as f:
        texts = forms.decode(forms.cache_key(), f.read())
    if texts is None:
        import pytest

        pytest.skip("the seed was made for other templates: run scripts/forms_seed.py")
    assert texts
    for key, text in texts.items():
        name, *rest = ast.literal_eval(key)
        if name == "<module>":
            assert forms._render_module_format(rest[0]) == text, key
        else:
            args, attrs = rest
            assert str(getattr(forms._macros(), name)(*args, **dict(attrs))).strip() == text, key


def test_the_builder_reaches_the_runtime_through_one_lazy_hook():
    """Compiling and launching are the runtime's (runtime/launch_plan.py): the builder imports
    it in one place, kernel._launch_plan, which the first compile or launch calls."""
    import ast

    found = []
    for name in sorted(os.listdir(os.path.join(ROOT, "ptxgen", "builder"))):
        if not name.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(ROOT, "ptxgen", "builder", name)).read())
        scopes = [(tree, "<module>")] + [(f, f.name) for f in ast.walk(tree)
                                         if isinstance(f, ast.FunctionDef)]
        for scope, where in scopes:
            for node in ast.walk(scope):
                if isinstance(node, ast.ImportFrom) and "runtime" in \
                        (node.module or "").split(".")[:1] + [a.name for a in node.names]:
                    found.append((name, where))
    # ast.walk of the module also reaches the function's import: both scopes name it
    assert sorted(set(found)) == [("kernel.py", "<module>"), ("kernel.py", "_launch_plan")]
