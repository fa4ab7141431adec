"""Collection rules shared by the tests and the source doctests (``--doctest-modules`` over src/).

Test files that need an optional extra skip themselves (``pytest.importorskip``).  A source module's
doctests cannot: collecting them imports the module, so a module that imports an extra at the top would
be a collection error where that extra is missing.  Those modules are left out here, and the run's
summary says which and why.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_HERE = Path(__file__).parent

# source files (globs from this folder) whose import needs a package that only an extra installs
NEEDS_EXTRA = {
    "src/tcnumerics/torch/*.py": "torch",
}


def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


LEFT_OUT = {pattern: package for pattern, package in NEEDS_EXTRA.items() if not _installed(package)}
collect_ignore_glob = list(LEFT_OUT)


def pytest_terminal_summary(terminalreporter) -> None:
    for pattern, package in LEFT_OUT.items():
        count = len(list(_HERE.glob(pattern)))
        terminalreporter.write_line(f"doctests of {count} modules left out ({pattern}): {package} is not installed "
                                    f"(the extras step in README.md installs it)")
