"""Rules of the source tree that no behaviour test would catch: a module's `_private` names
stay its own (a name another module needs is public, so renaming it is a visible change), and
git tracks no wheels, logs or large files."""
import ast
import os
import shutil
import subprocess

import pytest

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ptxgen")


def _modules():
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.join(PKG, ".."))[:-3].replace(os.sep, ".")
                yield path, rel.removesuffix(".__init__"), f == "__init__.py"


def _is_module(name: str) -> bool:
    path = os.path.join(PKG, "..", *name.split("."))
    return os.path.isdir(path) or os.path.isfile(path + ".py")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str, module: str, is_package: bool) -> list:
    """(line, what) of each private name `source` takes from another ptxgen module: `from m
    import _x`, `m._x` through an imported module, or a private module outside its package."""
    package = module if is_package else module.rsplit(".", 1)[0]
    tree = ast.parse(source)
    aliases, out = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rsplit(".", 1)[0]
                src = base + ("." + node.module if node.module else "")
            else:
                src = node.module or ""
            if src.split(".")[0] != "ptxgen":
                continue
            for a in node.names:
                full = f"{src}.{a.name}"
                if _is_module(full):
                    aliases[a.asname or a.name] = full
                    if _private(a.name) and not module.startswith(src):
                        out.append((node.lineno, full))
                elif _private(a.name):
                    out.append((node.lineno, full))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "ptxgen" and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and _private(node.attr):
            out.append((node.lineno, f"{aliases[node.value.id]}.{node.attr}"))
    return out


def test_no_module_takes_another_modules_private_names():
    found = []
    for path, module, is_package in _modules():
        with open(path) as f:
            found += [f"{module}:{line}: {what}" for line, what in
                      private_uses(f.read(), module, is_package)]
    assert found == []


def test_the_private_name_check_sees_each_form():
    """The check itself: each way of reaching a private name is reported, public ones are not."""
    src = ("from .protocol_threads import _scan, scan_trace\n"
           "from ..runtime import driver\n"
           "from . import _spec\n"
           "x = driver._name(1, 2) + driver.error_name(1, 2)\n")
    assert private_uses(src, "ptxgen.passes.protocol", False) == [
        (1, "ptxgen.passes.protocol_threads._scan"), (3, "ptxgen.passes._spec"),
        (4, "ptxgen.runtime.driver._name")]
    # a package's own private module is its business
    assert private_uses("from . import _spec\n", "ptxgen.layout", True) == []


MAX_TRACKED_BYTES = 200 * 1024     # #32: results and generated files stay small in git


def test_git_tracks_no_wheel_log_or_file_over_200_kb():
    root = os.path.join(PKG, "..")
    if shutil.which("git") is None or not os.path.exists(os.path.join(root, ".git")):
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True,
                           check=True).stdout.decode().split("\0")
    bad = [n for n in names if n and (n.endswith(".whl") or n.startswith("benchmarks/logs/")
                                     or os.path.getsize(os.path.join(root, n))
                                     > MAX_TRACKED_BYTES)]
    assert bad == []
