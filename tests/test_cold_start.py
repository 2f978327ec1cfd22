"""Cold start.  `import ptxgen` and a first build of a kernel without tile ops stay off numpy,
jinja2 (forms from the shipped table), cuda-bindings, the runtime, the primitives and the
pools; those load on first use, and the names that bring them in still work.  A tile copy's
build loads the primitives but still not numpy.  The arch is parsed without a regex, with
the same results."""
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


def test_import_and_a_plain_build_load_nothing_heavy(tmp_path):
    out = run_child(tmp_path)
    assert not os.listdir(tmp_path)     # a build writes nothing to the cache directory
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


def test_importing_a_submodule_leaves_the_packages_names_alone():
    """Importing a submodule sets an attribute of that name on the package, so no lazy or
    exported name of `ptxgen` may also be a submodule's name: `import ptxgen.torch_op` once
    turned pg.torch_op into a module ("'module' object is not callable")."""
    code = r"""
import importlib, pkgutil, sys
import ptxgen as pg
names = [n for n in dir(pg) if not n.startswith("_")]
before = {n: getattr(pg, n) for n in names}
for m in pkgutil.iter_modules(pg.__path__):
    if m.name != "__main__":
        try:
            importlib.import_module("ptxgen." + m.name)
        except ImportError:
            pass
print(sorted(n for n in names if getattr(pg, n) is not before[n]))
print(callable(pg.torch_op))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split("\n")[:2] == ["[]", "True"]
