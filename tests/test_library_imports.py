"""tcnumerics.library is a one-way flow: no module imports another that imports it back, however lazily.

The imports are read from the source (ast): every ``import`` / ``from ... import`` anywhere in a module -- at the
top, inside a function, under ``if TYPE_CHECKING`` -- so a cycle dodged by a lazy import is still a cycle.  The
layers are the package's own declaration (``tcnumerics.library.LAYERS``): every module must have one, and may
import only modules of its own or a lower layer.
"""

import ast
import os

import pytest

import tcnumerics.library as lib

LIB = os.path.dirname(lib.__file__)


def library_imports(folder: str, package: str = "tcnumerics.library") -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in its source), for every ``.py`` in ``folder``."""
    mods = {f[:-3] for f in os.listdir(folder) if f.endswith(".py")}
    graph: dict[str, set[str]] = {}
    for m in sorted(mods):
        with open(os.path.join(folder, m + ".py")) as fh:
            tree = ast.parse(fh.read(), filename=m)
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:  # from . import x / from .x import y
                    deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
                elif node.level == 0 and node.module and node.module.startswith(package):
                    rest = node.module[len(package):].lstrip(".")
                    deps |= {rest.split(".")[0]} if rest else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith(package + "."):
                        deps.add(a.name[len(package) + 1:].split(".")[0])
        graph[m] = {d for d in deps if d in mods and d != m}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the import graph as a path (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def upward_imports(graph: dict[str, set[str]], layers: dict[str, int]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module sits in a higher layer."""
    return sorted((m, d) for m, deps in graph.items() for d in deps if layers[d] > layers[m])


def test_the_library_has_no_import_cycle():
    graph = library_imports(LIB)
    assert len(graph) >= 15, sorted(graph)
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_every_library_module_has_a_layer_and_imports_only_downward():
    graph = library_imports(LIB)
    missing = sorted(set(graph) - set(lib.LAYERS))
    assert not missing, f"modules without a layer in tcnumerics.library.LAYERS: {missing}"
    assert not upward_imports(graph, lib.LAYERS)
    # the declared flow: tables under choice under plans under ops
    assert lib.LAYERS["launches"] < lib.LAYERS["choice"] < lib.LAYERS["selection"] < lib.LAYERS["ops"]


def _write(folder, files: dict[str, str]) -> str:
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text)
    return str(folder)


@pytest.mark.parametrize("how", ["top", "lazy", "type_checking", "absolute"])
def test_the_cycle_check_sees_every_kind_of_import(tmp_path, how):
    """The checker itself: a cycle closed by a top-level, a function-level, a TYPE_CHECKING or an absolute import."""
    back = {"top": "from . import a\n",
            "lazy": "def f():\n    from .a import x\n    return x\n",
            "type_checking": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n",
            "absolute": "import tcnumerics.library.a\n"}[how]
    folder = _write(tmp_path, {"a": "from .b import y\nx = 1\n", "b": back + "y = 2\n", "c": "from . import a\n"})
    graph = library_imports(folder)
    assert graph["b"] == {"a"}, graph
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b"}, cycle


def test_the_layer_check_sees_an_upward_import(tmp_path):
    folder = _write(tmp_path, {"low": "from .high import z\n", "high": "z = 1\n"})
    assert upward_imports(library_imports(folder), {"low": 0, "high": 1}) == [("low", "high")]
    assert find_cycle(library_imports(folder)) is None


def test_the_public_names_import_as_before():
    from tcnumerics.library import (Call, Plan, Structure, addmm, baddbmm, bmm, library_gemm, linear,  # noqa: F401
                                    matmul, measured_launch, scaled_mm, select)
    from tcnumerics.library.selection import (WGMMA, Call as C2, TableKey, epilogue_of,  # noqa: F401
                                              measured_table)

    assert C2 is Call and callable(measured_launch) and callable(measured_table)
