"""Every code block of README.md runs as written, so the front door cannot rot.

Each Python block runs in a fresh interpreter after the earlier blocks (later examples use the earlier ones'
arrays), with the placeholder a reader supplies defined here (``my_kernel``); hypothesis tests a block defines
are then run, under hypothesis's own default settings (the suite's profile does not reach the child).
Bash blocks: the quick start must be what ``.ci/run`` runs verbatim; every ``tcnumerics`` command runs in a
scratch folder (``vectors/`` and ``examples/`` linked in), except the few that take minutes, whose
subcommand and options are checked against ``--help`` instead.  Blocks that need an extra skip without it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
BLOCKS = [(lang, body) for lang, body in FENCE.findall(README)]
PYTHON = [body for lang, body in BLOCKS if lang == "python"]
BASH = [body for lang, body in BLOCKS if lang == "bash"]
QUICK_START = ['pip install -e ".[test]" && tcnumerics reproduce elementwise', "python -m pytest -q"]
# commands that take minutes: only their subcommand and options are checked (against --help)
SLOW = ("tcnumerics reproduce model-numerics",)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _needs_torch(code: str) -> bool:
    return "import torch" in code or "tcnumerics.torch" in code


# what a reader supplies: their own kernel.  Here it is the unit itself, so the README's property must hold.
PLACEHOLDERS = """
def my_kernel(A, B, C):
    import tcnumerics as tc
    return tc.gemm(A, B, C, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16")
"""
# after the blocks: run the property tests they define (hypothesis draws its examples here)
RUN_TESTS = """
for _name, _test in list(globals().items()):
    if _name.startswith("test_") and callable(_test):
        _test()
        print("ran", _name)
"""


def test_the_readme_has_the_examples_this_file_runs():
    # the parser must see the blocks: a README rewrite that breaks the fences would otherwise test nothing
    assert len(PYTHON) >= 5 and len(BASH) >= 3
    assert [_command(line) for line in BASH[0].splitlines()] == QUICK_START


def _script(index: int, placeholders: str = PLACEHOLDERS) -> str:
    """Block ``index`` after the earlier blocks that give it its names (torch blocks only where needed).

    The property-test block runs alone, as a reader would paste it: then its first ``tc.gemm`` pays the
    process's start-up (loading the compiled kernels) inside a hypothesis example."""
    parts = [placeholders]
    if "@given" not in PYTHON[index]:
        parts += [PYTHON[i] for i in range(index) if not _needs_torch(PYTHON[i])]
    return "\n".join(parts + [PYTHON[index], RUN_TESTS])


def _python(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """A fresh interpreter, as a reader's: the first call's start-up costs count (hypothesis deadlines)."""
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_block_runs_as_written(index, tmp_path):
    if _needs_torch(PYTHON[index]):
        pytest.importorskip("torch")
    result = _python(_script(index), tmp_path)
    assert result.returncode == 0, f"README python block {index}:\n{result.stderr[-3000:]}"
    if "@given" in PYTHON[index]:
        assert "ran test_" in result.stdout  # the property test really ran


def test_the_property_example_fails_on_a_wrong_kernel(tmp_path):
    # the hypothesis block must be able to fail: a kernel off by 8 FP32 ulps is caught
    index = next(i for i, code in enumerate(PYTHON) if "@given" in code)
    wrong = PLACEHOLDERS.replace("return tc.gemm(A, B, C,", "return np.float32(1 + 2**-20) * tc.gemm(A, B, C,")
    # no shrinking: the failure is what matters here, not its smallest example
    wrong = ("import numpy as np\nfrom hypothesis import Phase, settings\n"
             "settings.register_profile('no_shrink', phases=[Phase.generate])\nsettings.load_profile('no_shrink')\n"
             + wrong)
    result = _python(_script(index, wrong), tmp_path)
    assert result.returncode != 0 and "AssertionError" in result.stderr


def test_the_quick_start_is_what_ci_runs_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in QUICK_START:
        assert any(line.strip() == command for line in ci), f".ci/run does not run {command!r} verbatim"
    assert ci.index(next(l for l in ci if l.strip() == QUICK_START[0])) < ci.index(
        next(l for l in ci if "torch==2.13.0" in l)), ".ci/run must run the quick start before installing extras"


def _command(line: str) -> str:
    """A bash line without its trailing comment."""
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()


def _tcnumerics_commands() -> list[str]:
    commands = []
    for body in BASH:
        for line in body.replace("\\\n", " ").splitlines():
            command = _command(line)
            for part in command.split("&&"):
                if part.strip().startswith("tcnumerics "):
                    commands.append(part.strip())
    return commands


COMMANDS = _tcnumerics_commands()


def _executable() -> list[str]:
    found = shutil.which("tcnumerics")
    return [found] if found else [sys.executable, "-m", "tcnumerics"]


def _env() -> dict:
    """This checkout's sources first, whatever is installed."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _subcommand(words: list[str]) -> tuple[list[str], list[str]]:
    """(subcommand words, option names) of ``tcnumerics ...`` words."""
    sub = []
    for w in words[1:]:
        if w.startswith("-") or "/" in w or "." in w:
            break
        sub.append(w)
    return sub, [w.split("=")[0] for w in words if w.startswith("--")]


def test_the_readme_names_tcnumerics_commands():
    assert len(COMMANDS) >= 8 and any(c.startswith("tcnumerics reproduce elementwise") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_bash_command_runs_as_written(command, tmp_path):
    words = shlex.split(command)
    sub, options = _subcommand(words)
    needs = {"model-numerics": "torch", "--plot": "matplotlib"}
    missing = [m for key, m in needs.items() if (key in sub or key in options) and not _installed(m)]
    if command.startswith(SLOW) or missing:
        help_ = _run(_executable() + sub + ["--help"], tmp_path)
        assert help_.returncode == 0, help_.stderr
        for option in options:
            assert option in help_.stdout, f"{command}: {option} is not an option of tcnumerics {' '.join(sub)}"
        if missing:
            pytest.skip(f"{command}: needs {', '.join(missing)} (checked against --help only)")
        return
    for folder in ("vectors", "examples"):  # the README's relative paths, from a scratch folder
        (tmp_path / folder).symlink_to(ROOT / folder)
    line = " ".join(shlex.quote(w) for w in _executable()) + command[len("tcnumerics"):]
    result = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            env=_env())
    assert result.returncode == 0, f"{command}: exit {result.returncode}\n{result.stderr[-2000:]}"
    assert result.stdout.strip(), f"{command}: printed nothing"
