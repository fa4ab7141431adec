"""The house's shape, kept: no import circle anywhere in the code (package, lab, benchmarks), and no module of the
package above 600 lines.

Imports are read from the source (ast) at any depth -- a deferred import inside a function still ties two modules --
with relative imports resolved, and a script's bare ``import sibling`` resolved to the file beside it (the lab's
tools run with their folder on the import path).  ``tests/test_library_imports.py`` adds the library's layers.
"""

import ast
import os

from test_library_imports import find_cycle  # the library test's cycle finder, over the whole code here

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = ("src", "lab", "benchmarks")
MAX_LINES = 600


def _modules() -> dict[str, str]:
    """Dotted name -> path for every .py under the trees (``src`` is a source root; the others count from ROOT)."""
    mods = {}
    for tree in TREES:
        base = os.path.join(ROOT, "src") if tree == "src" else ROOT
        for dirpath, _, files in os.walk(os.path.join(ROOT, tree)):
            for f in files:
                if f.endswith(".py"):
                    name = os.path.relpath(os.path.join(dirpath, f), base)[:-3].replace(os.sep, ".")
                    mods[name.removesuffix(".__init__")] = os.path.join(dirpath, f)
    return mods


def _targets(node, name: str, path: str, mods: dict) -> list[str]:
    """The modules of ``mods`` one import statement names (the deepest existing module of each dotted name)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    if isinstance(node, ast.Import):
        wanted = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(p for p in parts + [base] if p)
        wanted = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    is_script = not os.path.exists(os.path.join(os.path.dirname(path), "__init__.py"))
    out = []
    for target in wanted:
        if is_script and target not in mods and f"{package}.{target}" in mods:
            target = f"{package}.{target}"
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.append(target)
    return out


def _graph(mods: dict[str, str]) -> dict[str, set[str]]:
    graph = {}
    for name, path in mods.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        graph[name] = {t for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                       for t in _targets(node, name, path, mods)}
    return graph


def test_no_import_circle_in_the_package_the_lab_or_the_benchmarks():
    mods = _modules()
    assert len(mods) > 150 and "tcnumerics.plan.interpret" in mods and "lab.device_library.fold_gpu" in mods
    graph = _graph(mods)
    assert "tcnumerics.formats" in graph["tcnumerics.plan.ffma"]  # a relative import, resolved
    assert "lab.device_library.model_lists" in graph["lab.device_library.survey_calls"]  # a script's sibling
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_circle_finder_sees_a_deferred_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_of_the_package_above_600_lines():
    long = {}
    for dirpath, _, files in os.walk(os.path.join(ROOT, "src", "tcnumerics")):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    n = sum(1 for _ in fh)
                if n > MAX_LINES:
                    long[os.path.relpath(os.path.join(dirpath, f), ROOT)] = n
    assert long == {}, "break these along their concepts"
