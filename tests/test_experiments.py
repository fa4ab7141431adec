"""Experiments (issue 7): Sun et al.'s element-wise tables and chain figure, fused vs naive IEEE.

Acceptance is checked through the CLI's JSON, as a user would see it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction, instruction_names
from tcnumerics.cli import main
from tcnumerics.experiments import elementwise
from tcnumerics.experiments.cpu_reference import fp32_dot
from tcnumerics.experiments.sampling import NumpyNormals, PaperNormals

ELEMENTWISE_KEYS = {"format": str, "cd_format": str, "operation": str, "init": str, "reference": str,
                    "mean_rel_error": float}
CHAIN_KEYS = {"format": str, "init": str, "N": int, "overflow": bool}


def run_json(capsys, *argv: str) -> list[dict]:
    """Run the CLI; stdout must be exactly one JSON array."""
    rc = main(["reproduce", *argv, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rows = json.loads(out)  # nothing else on stdout
    assert isinstance(rows, list) and rows
    return rows


@pytest.fixture(scope="module")
def elementwise_rows():
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["reproduce", "elementwise", "--json"]) == 0
    assert "elementwise:" in err.getvalue()  # progress went to stderr ...
    return json.loads(out.getvalue())  # ... and stdout is one JSON array


def cell(rows, fmt, cd, op, init, ref="fp32"):
    found = [r for r in rows if (r["format"], r["cd_format"], r["operation"], r["init"], r["reference"])
             == (fmt, cd, op, init, ref)]
    assert len(found) == 1, (fmt, cd, op, init, ref)
    return found[0]


# --- elementwise -------------------------------------------------------------------------------

def test_elementwise_schema(elementwise_rows):
    assert len(elementwise_rows) == 30  # 6 cells in XII, XIII, XV; 12 in XIV (two references)
    for r in elementwise_rows:
        for key, typ in ELEMENTWISE_KEYS.items():
            assert isinstance(r[key], typ), (key, r)
        assert r["paper"] is None or isinstance(r["paper"], float)
        assert r["format"] in ("bf16", "fp16", "tf32") and r["cd_format"] in ("fp32", "fp16")
        assert r["operation"] in elementwise.OPERATIONS and r["init"] in ("low", "fp32")
        assert r["reference"] in ("fp32", "fp32-to-fp16")
        assert r["instruction"].startswith("ampere.mma.m16n8k8.")


def test_low_init_multiplication_is_exact(elementwise_rows):
    for fmt in ("bf16", "fp16", "tf32"):
        assert cell(elementwise_rows, fmt, "fp32", "multiplication", "low")["mean_rel_error"] == 0.0
    assert cell(elementwise_rows, "fp16", "fp16", "multiplication", "low", "fp32-to-fp16")["mean_rel_error"] == 0.0
    # but not against the unrounded FP32 reference: the FP16 output rounds
    assert cell(elementwise_rows, "fp16", "fp16", "multiplication", "low")["mean_rel_error"] > 0


def test_fp32_init_multiplication_near_paper(elementwise_rows):
    for fmt, paper in (("bf16", 1.29e-3), ("fp16", 1.59e-4), ("tf32", 1.59e-4)):
        rel = cell(elementwise_rows, fmt, "fp32", "multiplication", "fp32")["mean_rel_error"]
        assert paper / 3 <= rel <= 3 * paper, (fmt, rel)


def test_every_cell_matches_the_paper(elementwise_rows):
    # the paper's code prints mean |D_cpu - D_tc|; on its own input stream the model lands within 3%
    for r in elementwise_rows:
        if r["paper"] == 0:
            assert r["mean_abs_error"] == 0, r
        else:
            assert abs(r["mean_abs_error"] / r["paper"] - 1) < 0.03, r


def test_explanations_follow_the_unit_model(elementwise_rows):
    acc = cell(elementwise_rows, "bf16", "fp32", "accumulation", "low")
    assert acc["cause"] == "output-rounding" and "RZ" in acc["explanation"]
    assert cell(elementwise_rows, "bf16", "fp32", "multiplication", "fp32")["cause"] == "input-conversion"
    assert cell(elementwise_rows, "fp16", "fp16", "inner-product", "low")["cause"] == "output-precision"
    assert cell(elementwise_rows, "tf32", "fp32", "inner-product", "low")["cause"] == "none"


def test_paper_accumulation_value_singles_out_ampere_datapath():
    """On the paper's inputs only frac_bits=24 with RZ output gives its 1.89e-8 (BF16, init low)."""
    base = get_instruction("ampere.mma.m16n8k8.f32.bf16.bf16.f32")
    fits = []
    for frac_bits in (23, 24, 25):
        for rounding in ("rz", "rne"):
            spec = replace(base, model=base.model.with_(frac_bits=frac_bits, output_rounding=rounding))
            err = elementwise.profile(spec, "accumulation", "low", samples=1000)[0]["mean_abs_error"]
            if abs(err / 1.89e-8 - 1) < 0.03:
                fits.append((frac_bits, rounding))
    assert fits == [(24, "rz")]


def test_elementwise_deterministic_and_seeded(capsys):
    a = run_json(capsys, "elementwise", "--format", "bf16", "--samples", "200", "--quiet")
    b = run_json(capsys, "elementwise", "--format", "bf16", "--samples", "200", "--quiet")
    c = run_json(capsys, "elementwise", "--format", "bf16", "--samples", "200", "--quiet", "--seed", "7")
    assert a == b
    assert [r["mean_abs_error"] for r in a] != [r["mean_abs_error"] for r in c]
    d = run_json(capsys, "elementwise", "--format", "bf16", "--samples", "200", "--quiet", "--rng", "numpy")
    assert [r["mean_abs_error"] for r in a] != [r["mean_abs_error"] for r in d]


def test_elementwise_other_architectures(capsys):
    rows = run_json(capsys, "elementwise", "--arch", "hopper", "--format", "bf16", "--quiet")
    assert {r["instruction"] for r in rows} == {"hopper.mma.m16n8k8.f32.bf16.bf16.f32"}
    acc = cell(rows, "bf16", "fp32", "accumulation", "low")
    assert acc["mean_abs_error"] > 2.0e-8  # Hopper keeps 25 bits: more truncations differ from RNE
    rows = run_json(capsys, "elementwise", "--instruction", "hopper.mma.m16n8k16.f32.f16.f16.f32",
                    "--format", "fp16", "--samples", "100", "--quiet")
    assert {r["instruction"] for r in rows if r["cd_format"] == "fp32"} == {"hopper.mma.m16n8k16.f32.f16.f16.f32"}


def test_elementwise_text_output(capsys):
    assert main(["reproduce", "elementwise", "--format", "tf32", "--samples", "50", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "Table XV" in out and "paper" in out and err == ""


# --- chain -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def chain_rows():
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main(["reproduce", "chain", "--json", "--trials", "30", "--length", "14"]) == 0
    return json.loads(out.getvalue())


def series(rows, fmt, init):
    return {r["N"]: r for r in rows if r["format"] == fmt and r["init"] == init}


def test_chain_schema(chain_rows):
    assert len(chain_rows) == 3 * 2 * 14
    for r in chain_rows:
        for key, typ in CHAIN_KEYS.items():
            assert isinstance(r[key], typ), (key, r)
        assert (r["rel_error"] is None) == r["overflow"]
        assert r["rel_error"] is None or isinstance(r["rel_error"], float)


def test_chain_fp16_overflows_between_8_and_14(chain_rows):
    for init in ("low", "fp32"):
        s = series(chain_rows, "fp16", init)
        first = min(n for n, r in s.items() if r["overflow"])
        assert 8 <= first <= 14
        assert all(s[n]["overflow"] for n in s if n >= first)  # an overflowed chain stays overflowed
    assert not any(r["overflow"] for r in chain_rows if r["format"] != "fp16")


def test_chain_bf16_error_exceeds_tf32(chain_rows):
    for init in ("low", "fp32"):
        bf16, tf32 = series(chain_rows, "bf16", init), series(chain_rows, "tf32", init)
        # at N=1 with exact low-precision inputs both are rounding noise of the sum (~1e-8)
        for n in range(1 if init == "fp32" else 2, 15):
            assert bf16[n]["rel_error"] > 3 * tf32[n]["rel_error"], (init, n)


def test_chain_fp32_init_worse_at_n1(chain_rows):
    for fmt in ("tf32", "bf16", "fp16"):
        low, fp32 = series(chain_rows, fmt, "low")[1], series(chain_rows, fmt, "fp32")[1]
        assert low["rel_error"] < 1e-6 < fp32["rel_error"]


def test_chain_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "chain.png"
    run_json(capsys, "chain", "--trials", "3", "--length", "3", "--plot", str(target), "--quiet")
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # never overwrites without --force
    assert main(["reproduce", "chain", "--trials", "3", "--length", "3", "--plot", str(target)]) == 2
    out, err = capsys.readouterr()
    assert "exists" in err and out == ""


def test_chain_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    rc = main(["reproduce", "chain", "--trials", "2", "--length", "2", "--plot", str(tmp_path / "x.png")])
    out, err = capsys.readouterr()
    assert rc == 2 and "matplotlib" in err and len(err.strip().splitlines()) == 1 and out == ""


# --- fused vs ieee -----------------------------------------------------------------------------

needs_contrast = pytest.mark.skipif("contrast.ieee.fp16.f16.f16.f16" not in instruction_names(),
                                    reason="contrast models not catalogued")


@needs_contrast
def test_fused_vs_ieee_adversarial_families(capsys):
    rows = run_json(capsys, "fused-vs-ieee", "--vectors", "40", "--accumulator", "fp16", "--quiet",
                    "--family", "product-overflow", "--family", "accumulator-ties",
                    "--instruction", "hopper.mma.m16n8k16.f16.f16.f16.f16",
                    "--instruction", "ampere.mma.m16n8k16.f16.f16.f16.f16")
    by = {(r["family"], r["arch"]): r for r in rows}
    # cancelling products beyond 65504: per-operation FP16 overflows, Hopper's single fused group does not
    assert by[("product-overflow", "hopper")]["nonfinite_mismatch_fraction"] == 1.0
    # half-ulp products: IEEE ties round each one away; the fused sum keeps them
    ties = by[("accumulator-ties", "hopper")]
    assert ties["differs_fraction"] > 0.3 and ties["unit_mean_ulp_error"] < ties["naive_mean_ulp_error"]
    assert ties["naive_closer_fraction"] == 0.0


# --- CLI errors and helpers ---------------------------------------------------------------------

@pytest.mark.parametrize("argv, needle", [
    (["reproduce", "nope"], "invalid choice"),
    (["reproduce"], "name an experiment"),
    (["reproduce", "elementwise", "--samples", "0"], "--samples"),
    (["reproduce", "elementwise", "--instruction", "ampere.mma.m16n8k8.f32.bf16.bf16.f33"], "instruction"),
    (["reproduce", "elementwise", "--instruction", "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"], "matches none"),
    (["reproduce", "chain", "--trials", "0"], "--trials"),
    (["reproduce", "chain", "--plot", "out.svg"], ".png"),
    (["reproduce", "elementwise", "--bogus"], "unrecognized"),
])
def test_cli_errors_are_one_line(capsys, argv, needle):
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_unavailable_experiment_module_is_a_clean_error(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tcnumerics.experiments.fp8_accumulation", None)
    rc = main(["reproduce", "fp8-accumulation"])
    out, err = capsys.readouterr()
    assert rc == 2 and "fp8_accumulation" in err and len(err.strip().splitlines()) == 1


def test_paper_stream_matches_libstdcxx():
    # first values of std::mt19937(123456) + std::normal_distribution<float>, from g++ / libstdc++
    expected = [0x3D30E0E3, 0xBF8A428B, 0x3F623022, 0xBF839D15, 0x3E4B0F80, 0x3E90A551, 0x3F21B104, 0xBE38AF49]
    assert PaperNormals(123456).draw(8).view(np.uint32).tolist() == expected
    values = PaperNormals(1).draw(20000)
    assert abs(values.mean()) < 0.03 and abs(values.std() - 1) < 0.03
    with pytest.raises(ValueError, match="seed"):
        PaperNormals(-1)
    assert NumpyNormals(5).draw(4).tolist() == NumpyNormals(5).draw(4).tolist()


def test_cpu_reference_is_sequential_fp32():
    a = np.array([[2.0**24, 1.0, 1.0]], np.float32)
    b = np.ones((1, 3), np.float32)
    # (2**24 + 1) rounds to 2**24 twice in FP32; a wider or reordered sum would give 2**24 + 2
    assert float(fp32_dot(a, b, np.zeros(1, np.float32))[0]) == 2.0**24
    assert float(np.dot(a.astype(np.float64), b[0].astype(np.float64))[0]) == 2.0**24 + 2


def test_fp8_accumulation_is_listed():
    from tcnumerics.experiments.cli import EXPERIMENTS, module_name

    assert "fp8-accumulation" in EXPERIMENTS
    assert module_name("fp8-accumulation") == "tcnumerics.experiments.fp8_accumulation"
