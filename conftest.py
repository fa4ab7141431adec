"""Collection rules shared by the tests and the source doctests (``--doctest-modules`` over src/).

Test files that need an optional extra skip themselves (``pytest.importorskip``).  Source doctests cannot:

* a module that imports an extra at the top cannot even be collected without it: those modules are left
  out (``pytest_ignore_collect``), and the run's summary says how many and why;
* a doctest that uses an extra inside a module that imports without it is skipped, naming the extra.

The lists below are checked against what is collected, so that a renamed doctest cannot slip out of them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_HERE = Path(__file__).parent

# source files (globs from this folder) whose import needs a package that only an extra installs
MODULES_NEED = {
    "src/tcnumerics/torch/*.py": "torch",
    "src/tcnumerics/vectors/rtl/*.py": "cocotb",  # the RTL testbench runs inside the simulator (tests/test_rtl.py)
}
# doctests (file, doctest name) that use an extra while their module imports without it
DOCTESTS_NEED = {
    ("src/tcnumerics/sweep/model_eval.py", "tcnumerics.sweep.model_eval"): "torch",
    ("src/tcnumerics/sweep/plotting.py", "tcnumerics.sweep.plotting"): "pandas",
    ("src/tcnumerics/sweep/runner.py", "tcnumerics.sweep.runner"): "pandas",
    ("src/tcnumerics/sweep/store.py", "tcnumerics.sweep.store"): "pandas",
}


def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


MISSING = {pattern: package for pattern, package in MODULES_NEED.items() if not _installed(package)}
_MISSING_FILES = {path.resolve(): pattern for pattern in MISSING for path in _HERE.glob(pattern)}
LEFT_OUT: dict[str, set] = {}  # pattern -> the files this run left out


def pytest_ignore_collect(collection_path, config):
    pattern = _MISSING_FILES.get(Path(collection_path).resolve())
    if pattern is None:
        return None
    LEFT_OUT.setdefault(pattern, set()).add(collection_path)
    return True


def pytest_collection_modifyitems(config, items) -> None:
    collected = {(_relative(item), item.name) for item in items if _relative(item)}
    files = {path for path, _ in collected}
    for (path, name), package in DOCTESTS_NEED.items():
        if path in files and (path, name) not in collected:
            raise pytest.UsageError(f"conftest.py: DOCTESTS_NEED names {name} in {path}, which has no such doctest")
    for item in items:
        package = DOCTESTS_NEED.get((_relative(item), item.name))
        if package and not _installed(package):
            item.add_marker(pytest.mark.skip(reason=f"needs {package} (an extra: see README.md)"))


def _relative(item) -> str | None:
    try:
        return Path(str(item.fspath)).resolve().relative_to(_HERE.resolve()).as_posix()
    except ValueError:
        return None


def pytest_terminal_summary(terminalreporter) -> None:
    for pattern, files in LEFT_OUT.items():
        terminalreporter.write_line(f"doctests of {len(files)} modules left out ({pattern}): {MISSING[pattern]} is "
                                    "not installed (the extras step in README.md installs it)")
