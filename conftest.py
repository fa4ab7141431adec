"""Collection rules shared by the tests and the source doctests (``--doctest-modules`` over src/).

Test files that need an optional extra skip themselves (``pytest.importorskip``).  Source doctests cannot:

* a module that imports an extra at the top cannot even be collected without it: those modules are left
  out (``pytest_ignore_collect``), and the run's summary says how many and why;
* a doctest that uses an extra inside a module that imports without it is skipped, naming the extra.

The lists below are checked against what is collected, so that a renamed doctest cannot slip out of them.

``--only-skipped`` runs only what the previous run in this checkout skipped or left out -- after installing the
extras, the suites that need them (``.ci/run``'s second step): each run records its skipped tests and left-out
modules in pytest's cache (``tcnumerics/skipped``), and a run with ``--only-skipped`` reads them.
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


_CACHE_KEY = "tcnumerics/skipped"
SKIPPED: set = set()  # node ids this run skipped (not the expected failures)
SKIPPED_FILES: set = set()  # test modules this run skipped whole at collection


def pytest_addoption(parser) -> None:
    parser.addoption("--only-skipped", action="store_true",
                     help="run only the tests the previous run in this checkout skipped or left out (e.g. for want "
                          "of an extra, now installed)")


def _earlier(config) -> dict:
    """What the previous run recorded: {"tests": [node ids], "files": [paths relative to this folder]}."""
    record = config.cache.get(_CACHE_KEY, None) if getattr(config, "cache", None) is not None else None
    if record is None:
        raise pytest.UsageError("--only-skipped: no earlier run in this checkout recorded what it skipped "
                                "(run `python -m pytest -q` once first)")
    return record


def _wanted_files(config) -> set:
    if not hasattr(config, "_tcnumerics_wanted"):
        record = _earlier(config)
        config._tcnumerics_wanted = {n.split("::")[0] for n in record["tests"]} | set(record["files"])
    return config._tcnumerics_wanted


def pytest_ignore_collect(collection_path, config):
    path = Path(collection_path)
    if config.getoption("--only-skipped") and path.is_file() and path.suffix == ".py" and \
            path.name != "conftest.py" and _relative_path(path) not in _wanted_files(config):
        return True
    pattern = _MISSING_FILES.get(path.resolve())
    if pattern is None:
        return None
    LEFT_OUT.setdefault(pattern, set()).add(collection_path)
    return True


def pytest_runtest_logreport(report) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        SKIPPED.add(report.nodeid)


def pytest_collectreport(report) -> None:
    """A module skipped whole while collected (``pytest.importorskip`` at its top): every test in it counts."""
    if report.skipped and report.nodeid:
        SKIPPED_FILES.add(report.nodeid.split("::")[0])


def pytest_sessionfinish(session) -> None:
    config = session.config
    if getattr(config, "cache", None) is None or config.getoption("--only-skipped"):
        return
    files = {_relative_path(Path(f)) for paths in LEFT_OUT.values() for f in paths} | SKIPPED_FILES
    config.cache.set(_CACHE_KEY, {"tests": sorted(SKIPPED), "files": sorted(files)})


def _keep_only_skipped(config, items) -> None:
    record = _earlier(config)
    tests, files = set(record["tests"]), set(record["files"])
    kept = [item for item in items if item.nodeid in tests or _relative(item) in files]
    dropped = [item for item in items if item.nodeid not in tests and _relative(item) not in files]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_collection_modifyitems(config, items) -> None:
    if config.getoption("--only-skipped"):
        _keep_only_skipped(config, items)
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
    return _relative_path(Path(str(item.fspath)))


def _relative_path(path: Path) -> str | None:
    try:
        return path.resolve().relative_to(_HERE.resolve()).as_posix()
    except ValueError:
        return None


def pytest_terminal_summary(terminalreporter) -> None:
    for pattern, files in LEFT_OUT.items():
        terminalreporter.write_line(f"doctests of {len(files)} modules left out ({pattern}): {MISSING[pattern]} is "
                                    "not installed (the extras step in README.md installs it)")
