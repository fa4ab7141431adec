"""What a newcomer meets first: the catalog listing's order, the first-use compile notice, the --plot refusal."""

import io
import re
import types

import pytest

from tcnumerics.catalog import instruction_names, natural_key
from tcnumerics.cli import main
from tcnumerics.engines import _numba_launch


def test_instructions_list_shapes_in_numeric_order(capsys):
    assert main(["instructions", "--arch", "hopper"]) == 0
    names = capsys.readouterr().out.split()
    assert names == instruction_names("hopper") == sorted(names, key=natural_key)
    ks = [n for n in names if re.fullmatch(r"hopper\.mma\.m16n8k\d+\.f32\.bf16\.bf16\.f32", n)]
    assert ks == ["hopper.mma.m16n8k8.f32.bf16.bf16.f32", "hopper.mma.m16n8k16.f32.bf16.bf16.f32"]
    assert names.index("hopper.mma.m8n8k16.s32.s8.s8.s32") < names.index("hopper.mma.m8n8k128.s32.b1.b1.s32.and.popc")


def test_natural_key_compares_numbers_as_numbers():
    assert sorted(["a.k128", "a.k16", "a.k8", "b.k4"], key=natural_key) == ["a.k8", "a.k16", "a.k128", "b.k4"]


def _kernel(tmp_path, cached: bool, compiled: bool = False):
    index = tmp_path / "kernel.nbi"
    if cached:
        index.write_bytes(b"")
    cache = types.SimpleNamespace(_cache_file=types.SimpleNamespace(_index_path=str(index)))
    return types.SimpleNamespace(signatures=["sig"] if compiled else [], _cache=cache)


@pytest.mark.parametrize("cached, compiled, says", [(False, False, True), (True, False, False), (False, True, False)])
def test_a_cold_compile_is_announced_once_on_stderr(tmp_path, monkeypatch, cached, compiled, says):
    err = io.StringIO()
    monkeypatch.setattr(_numba_launch.sys, "stderr", err)
    monkeypatch.setattr(_numba_launch, "_compile_notice_given", False)
    _numba_launch._compile_notice(_kernel(tmp_path, cached, compiled))
    assert ("compiling the fast engine's numba kernels" in err.getvalue()) is says
    assert err.getvalue().count("\n") == (1 if says else 0)
    assert _numba_launch._compile_notice_given  # asked once per process, whatever the answer


def test_plot_refusal_says_how_to_proceed(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "fig.png"
    target.write_bytes(b"keep me")
    code = main(["reproduce", "fp8-accumulation", "--k", "32", "--size", "2", "--quiet", "--plot", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "exists" in err and "--force" in err and "another file" in err
    assert target.read_bytes() == b"keep me"
