"""Golden vectors against the SystemVerilog fused dot-product unit (cocotb + Icarus Verilog).

Skips cleanly without cocotb (the [rtl] extra) or iverilog.  One compile per bug.
"""

import os

import pytest

from tcnumerics.vectors.rtlbench import BUGS, PARAMETER_SETS, UNREACHABLE, available, mutated_source, run_rtl, source

pytestmark = pytest.mark.skipif(bool(available()), reason=available() or "rtl available")



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


@pytest.mark.parametrize("bug, ps", [("emax_ignores_c", "volta"), ("c_aligned_one_bit_high", "hopper_bf16")])
def test_injected_bug_fails_under_cocotb_naming_vector_and_family(bug, ps, adequate_hex, tmp_path):
    _assert_fails_naming_vector(bug, ps, adequate_hex, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("ps", ["volta", "hopper_bf16"])
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_reachable_bug_fails_under_cocotb(bug, ps, adequate_hex, tmp_path):
    """The cocotb route per bug (a compile each); test_every_reachable_bug_is_caught covers it fast."""
    if bug in UNREACHABLE[ps]:
        pytest.skip(f"{bug} cannot show on {ps}: {UNREACHABLE[ps][bug]}")
    _assert_fails_naming_vector(bug, ps, adequate_hex, tmp_path)


def test_readmemh_harness_passes_correct_rtl_and_names_the_failing_vector(tmp_path):
    import shutil
    import subprocess

    from tcnumerics.cli import main
    from tcnumerics.vectors.rtlbench import RTL_DIR

    name, params = PARAMETER_SETS["hopper_bf16"]
    npz = str(tmp_path / "ad.npz")
    assert main(["vectors", "generate", "--adequate", "--instruction", name, "--count", "32", "-o", npz]) == 0
    out = tmp_path / "h"
    assert main(["vectors", "harness", npz, "-o", str(out)]) == 0
    assert main(["vectors", "harness", npz, "-o", str(out)]) == 2  # nothing overwritten
    plist = "#(" + ",".join(f".{k}({v})" for k, v in params.items()) + ")"
    shutil.copyfile(RTL_DIR / "fedp.sv", out / "good.sv")
    (out / "bad.sv").write_text(mutated_source("c_aligned_one_bit_high"))
    for sv, verdict in (("good.sv", "PASS"), ("bad.sv", "(family ")):
        subprocess.run(["iverilog", "-g2012", f"-DDUT_PARAMS={plist}", "-o", "tb", "tb_golden.sv", sv],
                       cwd=out, check=True, capture_output=True)
        run = subprocess.run(["vvp", "tb"], cwd=out, capture_output=True, text=True)
        assert verdict in run.stdout and (verdict == "PASS") == (run.returncode == 0)
