"""Help texts and the messages a new user meets: complete help, install hints for missing extras,
validation before progress lines, a Python caller told about ``overwrite=True``, the report's layout."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tcnumerics._extras import EXTRAS, install_hint, require
from tcnumerics.cli import main


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's line wrapping undone


def test_top_level_help_lists_every_vectors_subcommand(capsys):
    from tcnumerics.vectors import cli as vcli
    import argparse

    parser = argparse.ArgumentParser()
    vcli.register(parser.add_subparsers())
    actions = next(a for a in parser._subparsers._group_actions[0].choices["vectors"]._actions
                   if isinstance(a, argparse._SubParsersAction))
    text = _help(capsys)
    line = text[text.index("golden-vector files:"):]
    for name in actions.choices:  # generate verify export import show families
        assert name in line.split(" infer")[0], name


def test_vectors_generate_and_verify_help_state_the_default_and_exit_codes(capsys):
    assert "default: all" in _help(capsys, "vectors", "generate")
    text = _help(capsys, "vectors", "verify")
    assert "exit status: 0" in text and "1 some replay found mismatches" in text and "2 bad input" in text


@pytest.mark.parametrize("experiment, paper", [("chain", True), ("elementwise", True),
                                               ("fp8-accumulation", False), ("fused-vs-ieee", False)])
def test_seed_help_names_the_paper_only_where_there_is_one(capsys, experiment, paper):
    assert ("the paper's" in _help(capsys, "reproduce", experiment)) is paper


def test_every_extra_names_its_install_command():
    for extra, modules in EXTRAS.items():
        assert install_hint(extra) == f'pip install "tcnumerics[{extra}]"'
        with pytest.raises(ImportError, match=rf'pip install "tcnumerics\[{extra}\]"'):
            require(f"{modules[0]}_not_installed_here", extra, "this test")


def test_import_tcnumerics_torch_without_torch_names_the_install_command():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import tcnumerics.torch\nexcept ImportError as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("ModuleNotFoundError") and 'pip install "tcnumerics[torch]"' in out, out


def test_sweep_model_eval_without_torch_gives_the_install_hint(monkeypatch):
    from tcnumerics.sweep import workloads

    monkeypatch.setattr(workloads, "torch_available", lambda: False)
    with pytest.raises(RuntimeError, match=r'pip install "tcnumerics\[torch\]"'):
        workloads._model_eval(None, {}, 0, "auto")
    with pytest.raises(workloads.SpecError, match=r'pip install "tcnumerics\[torch\]"'):
        workloads._needs_torch("mlp")


def test_fp8_accumulation_refuses_a_bad_k_before_any_progress_line(capsys):
    assert main(["reproduce", "fp8-accumulation", "--k", "-16"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: --k: must be a positive multiple of 32, got -16", err


def test_report_columns_fit_their_cells_and_count_one_call():
    torch = pytest.importorskip("torch")
    from tcnumerics.torch.mode import CallSite, Report

    long = "float8_e4m3fnxfloat8_e4m3fn->bfloat16"
    report = Report([CallSite("_scaled_mm", "forward", (16, 32, 64), long, "TN", "some kernel", True, "", 1)])
    head, row, total = str(report).split("\n")
    assert row.split()[3:5] == [long, "TN"]  # the layout its own column, not glued to the dtypes
    assert head.index("layout") == row.index(" TN ") + 1
    assert total == "1 call, 0 not modelled"
    report.append(CallSite("mm", "forward", (2, 2, 2), "bfloat16xbfloat16->bfloat16", "NN", "k", False, "", 2))
    assert str(report).split("\n")[-1] == "3 calls, 2 not modelled"
    del torch
