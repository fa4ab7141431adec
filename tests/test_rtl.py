"""Golden vectors against the SystemVerilog fused dot-product unit (cocotb + Icarus Verilog).

The cocotb tests skip cleanly without cocotb (the [rtl] extra) or iverilog, one compile per bug;
the ``$readmemh`` harness test needs only iverilog.
"""

import pathlib
import re
import shlex

import pytest

from tcnumerics.vectors.rtlbench import BUGS, PARAMETER_SETS, UNREACHABLE, available, mutated_source, run_rtl, source
from tcnumerics.vectors.rtlsweep import iverilog_available

needs_cocotb = pytest.mark.skipif(bool(available()), reason=available() or "rtl available")
needs_iverilog = pytest.mark.skipif(bool(iverilog_available()), reason=iverilog_available() or "iverilog available")
DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "hardware.md"


@pytest.fixture(scope="module")
def adequate_hex(tmp_path_factory):
    from tcnumerics.vectors.adequate import adequate_set
    from tcnumerics.vectors.io import write_hex

    out = {}
    for ps in ("volta", "hopper_bf16"):
        name, _ = PARAMETER_SETS[ps]
        path = tmp_path_factory.mktemp("vec") / f"{ps}.hex"
        write_hex(path, adequate_set(name, seed=0).to_vector_set())  # as benchmarks/rtl_bugs.py
        out[ps] = path
    return out


@needs_cocotb
@pytest.mark.parametrize("ps", ["volta", "hopper_bf16"])
def test_correct_rtl_passes_the_adequate_set(ps, adequate_hex, tmp_path):
    (res,) = run_rtl(source(), PARAMETER_SETS[ps][1], [adequate_hex[ps]], tmp_path)
    assert res["first_failure"] is None and res["vectors"] > 0


def _assert_fails_naming_vector(bug, ps, adequate_hex, tmp_path):
    text = mutated_source(bug)
    assert sum(a != b for a, b in zip(source().splitlines(), text.splitlines())) == 1  # a one-line change
    (res,) = run_rtl(text, PARAMETER_SETS[ps][1], [adequate_hex[ps]], tmp_path)
    first = res["first_failure"]
    assert first is not None, f"{bug} escaped the adequate set on {ps}"
    log = (tmp_path / "sim0.log").read_text()
    assert f"vector {first['index']} (family {first['family']}) fails" in log


@needs_cocotb
@pytest.mark.parametrize("bug, ps", [("emax_ignores_c", "volta"), ("c_aligned_one_bit_high", "hopper_bf16")])
def test_injected_bug_fails_under_cocotb_naming_vector_and_family(bug, ps, adequate_hex, tmp_path):
    _assert_fails_naming_vector(bug, ps, adequate_hex, tmp_path)


@needs_cocotb
@pytest.mark.slow
@pytest.mark.parametrize("ps", ["volta", "hopper_bf16"])
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_reachable_bug_fails_under_cocotb(bug, ps, adequate_hex, tmp_path):
    """The cocotb route per bug (a compile each); test_every_reachable_bug_is_caught covers it fast."""
    if bug in UNREACHABLE[ps]:
        pytest.skip(f"{bug} cannot show on {ps}: {UNREACHABLE[ps][bug]}")
    _assert_fails_naming_vector(bug, ps, adequate_hex, tmp_path)


def _harness_transcript() -> list:
    """[(command, [lines shown])] of the fenced block in docs/hardware.md that runs ``vectors harness``."""
    block = next(b for b in re.findall(r"```\n(.*?)```", DOCS.read_text(), flags=re.S) if "vectors harness" in b)
    steps = re.split(r"^\$ ", block.replace("\\\n", " "), flags=re.M)[1:]
    return [(s.split("\n")[0], [ln for ln in s.split("\n")[1:] if ln.strip()]) for s in steps]


def _generate_command() -> tuple:
    """The docs' ``vectors generate --adequate`` command writing the file the harness reads, and the line shown."""
    lines = DOCS.read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("$ tcnumerics vectors generate --adequate"))
    return shlex.split(lines[i][2:])[1:], lines[i + 1]


@needs_iverilog
def test_readmemh_harness_prints_what_the_docs_show(tmp_path, monkeypatch, capsys):
    """docs/hardware.md's harness walk-through, run: the adequate set it reads, its files, the good unit
    passing and the bug c_aligned_one_bit_high failing with the vector and family the docs show."""
    import shutil
    import subprocess

    from tcnumerics.cli import main
    from tcnumerics.vectors.rtlbench import RTL_DIR

    monkeypatch.chdir(tmp_path)
    generate, generated = _generate_command()
    assert main(generate) == 0
    assert capsys.readouterr().out.splitlines() == [generated]
    (harness, shown), (compile_line, passed), (_, failed) = _harness_transcript()
    assert main(shlex.split(harness)[1:]) == 0
    assert capsys.readouterr().out.splitlines() == shown
    assert main(shlex.split(harness)[1:]) == 2  # nothing overwritten
    out = tmp_path / shlex.split(harness)[-1]
    iverilog = shlex.split(compile_line.split("&&")[1])  # cd harness && iverilog ... && vvp tb
    shutil.copyfile(RTL_DIR / "fedp.sv", out / "good.sv")
    (out / "bad.sv").write_text(mutated_source("c_aligned_one_bit_high"))
    for sv, expected in (("good.sv", passed), ("bad.sv", failed)):
        subprocess.run(iverilog[:-1] + [sv], cwd=out, check=True, capture_output=True)
        run = subprocess.run(["vvp", "tb"], cwd=out, capture_output=True, text=True)
        assert [ln for ln in run.stdout.splitlines() if ln.startswith(("PASS", "FAIL"))] == expected
        assert (run.returncode == 0) == (sv == "good.sv")
