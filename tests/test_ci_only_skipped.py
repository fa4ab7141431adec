"""``pytest --only-skipped`` (conftest.py): the second CI step runs exactly what the first skipped or left out."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


def _project(pytester) -> None:
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(
        test_plain="def test_runs():\n    pass\n",
        test_some="import pytest\n\ndef test_ok():\n    pass\n\n"
                  "@pytest.mark.skip(reason='wants an extra')\ndef test_skipped():\n    pass\n\n"
                  "@pytest.mark.xfail(reason='known')\ndef test_expected_failure():\n    assert False\n",
        test_module_skip="import pytest\nnope = pytest.importorskip('no_such_package_here')\n\n"
                         "def test_a():\n    pass\n\ndef test_b():\n    pass\n",
    )


def test_the_second_run_takes_the_skipped_tests_and_modules_only(pytester):
    _project(pytester)
    first = pytester.runpytest("-p", "no:randomly")
    first.assert_outcomes(passed=2, skipped=2, xfailed=1)
    second = pytester.runpytest("-p", "no:randomly", "--only-skipped", "-rs")
    second.assert_outcomes(skipped=2)  # test_skipped and the module: nothing that passed, not the xfail
    assert "wants an extra" in second.stdout.str() and "no_such_package_here" in second.stdout.str()


def test_without_an_earlier_run_it_says_so(pytester):
    _project(pytester)
    result = pytester.runpytest("--only-skipped")
    assert result.ret != 0
    assert "no earlier run in this checkout recorded what it skipped" in result.stderr.str()
