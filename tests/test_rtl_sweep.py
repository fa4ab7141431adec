"""Every injected RTL bug against the adequate sets, all units in one Icarus simulation (rtlsweep).

Needs only iverilog (no cocotb); skips cleanly without it.  A few seconds per parameter set.  Every
reachable bug fails with the simulator's message naming the first failing vector and its family
(the cocotb route, one compile per bug, gives the same message: tests/test_rtl.py).
"""

import os
import shutil
import subprocess
import sys

import pytest

from tcnumerics.vectors.adequate import adequate_set
from tcnumerics.vectors.rtlbench import BUG_MUTANTS, BUGS, PARAMETER_SETS, UNREACHABLE
from tcnumerics.vectors.rtlsweep import iverilog_available, sweep

pytestmark = pytest.mark.skipif(bool(iverilog_available()), reason=iverilog_available() or "iverilog available")
BENCH = os.path.join(os.path.dirname(__file__), "..", "benchmarks")


@pytest.mark.parametrize("ps", sorted(PARAMETER_SETS))
def test_every_reachable_bug_is_caught_and_no_unreachable_one_shows(ps, tmp_path):
    name, params = PARAMETER_SETS[ps]
    s = adequate_set(name, seed=0)
    res = sweep(params, s.to_vector_set(), list(BUGS), tmp_path)
    assert res["correct"] is None and res["vectors"] == s.n
    missed = [bug for bug, first in res["bugs"].items() if first is None and bug not in UNREACHABLE[ps]]
    assert not missed, f"{ps}: the adequate set misses {missed}"
    shown = [bug for bug in UNREACHABLE[ps] if res["bugs"][bug] is not None]
    assert not shown, f"{ps}: {shown} argued unreachable, yet a vector shows it"
    for bug, first in res["bugs"].items():
        if first is not None:  # the simulator's message names the first failing vector and its family
            i = first["index"]
            assert 0 <= i < s.n and first["family"] == s.family[i], bug
            assert first["message"].startswith(f"vector {i} (family {s.family[i]}) fails: expected d="), bug
            assert first["expected"] == s.d[i] and first["got"] != s.d[i], bug


def test_volta_catches_c_left_out_of_emax_through_its_mutant(tmp_path):
    """The vectors killing c_not_in_emax are what catch the RTL bug emax_ignores_c on Volta:
    without them (and nothing else changed) the bug escapes."""
    name, params = PARAMETER_SETS["volta"]
    s = adequate_set(name, seed=0)
    assert BUG_MUTANTS["emax_ignores_c"] == "c_not_in_emax"
    keep = [i for i, kills in enumerate(s.kills) if "c_not_in_emax" not in kills]
    assert len(keep) < s.n
    vs = s.to_vector_set()
    full = sweep(params, vs, ["emax_ignores_c"], tmp_path / "full")
    assert full["bugs"]["emax_ignores_c"] is not None
    from tcnumerics.vectors.io import VectorSet

    less = VectorSet(vs.a[keep], vs.b[keep], vs.c[keep], vs.d[keep], vs.meta, {"family": vs.extra["family"][keep]})
    assert sweep(params, less, ["emax_ignores_c"], tmp_path / "less")["bugs"]["emax_ignores_c"] is None


def _unreachable(*args):
    return subprocess.run([sys.executable, os.path.join(BENCH, "rtl_unreachable.py"), *args],
                          capture_output=True, text=True)


def test_unreachable_search_quick_on_volta():
    run = _unreachable("--sets", "volta", "--quick")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("volta")]
    assert len(lines) == len(UNREACHABLE["volta"])
    assert all("never shows" in ln and "control hopper_bf16: caught" in ln for ln in lines), run.stdout


@pytest.mark.slow
def test_unreachable_search_full():
    run = _unreachable()
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("never shows") == sum(map(len, UNREACHABLE.values()))
    assert run.stdout.count("control hopper_bf16: caught") == sum(map(len, UNREACHABLE.values()))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
def test_verilator_agrees_with_icarus_on_every_bug(tmp_path):
    """A second simulator (a native Verilator binary, ~30 s to build) gives the same first failures."""
    name, params = PARAMETER_SETS["volta"]
    vs = adequate_set(name, seed=0).to_vector_set()
    icarus = sweep(params, vs, list(BUGS), tmp_path / "icarus")
    assert sweep(params, vs, list(BUGS), tmp_path / "verilator", simulator="verilator") == icarus
