"""Malformed sweep specs: one line naming the field, exit 2, nothing written."""

import json

import pytest

from tcnumerics.cli import main
from tcnumerics.sweep import SpecError, build_unit, expand, load_spec, parse_spec

BASE = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


def _spec(**changes):
    spec = {"sweep": {"seeds": 1}, "units": {"base": BASE, "grid": {"frac_bits": [13, 25]}},
            "workloads": [{"kind": "gemm_error", "M": 4, "N": 4, "K": 64}]}
    for path, value in changes.items():
        node = spec
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        if value is ...:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return spec


@pytest.mark.parametrize("changes, message", [
    ({"sweep__seeds": 0}, "sweep.seeds: expected a positive integer"),
    ({"sweep__speed": 1}, "sweep.speed: unknown key"),
    ({"units__grid__frac_bits": 13}, "units.grid.frac_bits: expected a non-empty list"),
    ({"units__grid__frac_bits": [13, 13]}, "units.grid.frac_bits: a value is listed twice"),
    ({"units__grid__frac_bits": [13, 99]}, "units.grid.frac_bits: must be in 0..56"),
    ({"units__grid__group_sise": [8]}, "units.grid.group_sise: not a UnitModel or InstructionSpec field"),
    ({"units__grid__output_rounding": ["rz", "towards-pi"]}, "units.grid.output_rounding"),
    ({"units__base": "hopper.wgmma.m64n8k16.f32.bf16.bf17"}, "units.base: instruction: unknown name"),
    ({"units__entries": [BASE]}, "units: give exactly one of units.base"),
    ({"units": ...}, "units: missing"),
    ({"workloads": []}, "workloads: expected a non-empty list"),
    ({"workloads__0__kind": "gemm"}, "workloads[0].kind: expected one of"),
    ({"workloads__0__K": -4}, "workloads[0].K: expected a positive integer"),
    ({"workloads__0__distribution": "cauchy"}, "workloads[0].distribution: expected one of"),
    ({"workloads__0__grid": {"scaling": ["tensor", "tile"]}}, "workloads[0].grid.scaling: expected one of"),
    ({"workloads__0__block": 3}, "workloads[0].block: unknown parameter of gemm_error"),
    ({"workloads__0__grid": {"M": [4]}}, "workloads[0].grid.M: also given as a fixed parameter"),
])
def test_malformed_spec_names_the_field(changes, message):
    with pytest.raises(SpecError) as info:
        expand(parse_spec(_spec(**changes)))
    text = str(info.value)
    assert text.startswith(message.split(":")[0] + ":") or text.startswith(message.split(" ")[0])
    assert message in text and "\n" not in text


def test_model_eval_without_the_torch_package_says_what_it_needs(monkeypatch):
    from tcnumerics.sweep import workloads

    monkeypatch.setattr(workloads, "torch_available", lambda: False)
    with pytest.raises(SpecError, match=r"model_eval needs torch, which is not installed: pip install \"tcnumerics\[torch\]\""):
        parse_spec(_spec(workloads=[{"kind": "model_eval", "model": "mlp"}]))


def test_model_eval_rows_carry_loss_and_agreement():
    pytest.importorskip("torch")
    from tcnumerics.sweep import run_task

    spec = parse_spec(_spec(units__grid__frac_bits=[6, 25],
                            workloads=[{"kind": "model_eval", "model": "transformer", "batch": 4, "width": 16}]))
    coarse, fine = (run_task(t) for t in expand(spec))  # frac_bits 6, then 25
    assert coarse["norm_logit_rel_error"] > fine["norm_logit_rel_error"] > 0
    assert {"loss", "ref_loss", "loss_delta", "accuracy"} <= set(coarse)
    with pytest.raises(SpecError, match=r"workloads\[0\].width: expected a positive multiple of 4"):
        parse_spec(_spec(workloads=[{"kind": "model_eval", "width": 6}]))


@pytest.mark.parametrize("text, message", [
    ('[units]\nbase = "x"\n[units', "not valid TOML"),
    ('[sweep]\nseeds = 1\n[units]\nbase = "' + BASE + '"\n[units.grid]\nfrac_bits = [13, "many"]\n'
     '[[workloads]]\nkind = "gemm_error"\n', "units.grid.frac_bits: expected an integer"),
])
def test_cli_prints_one_line_and_writes_nothing(tmp_path, capsys, text, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    out = tmp_path / "r.parquet"
    assert main(["sweep", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not list(tmp_path.glob("r.parquet*"))


def test_json_specs_and_dry_run(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(_spec()))
    assert load_spec(spec).seeds == 1
    assert main(["sweep", str(spec), "-o", str(tmp_path / "r.csv"), "--dry-run"]) == 0
    assert "2 tasks" in capsys.readouterr().out


def test_group_size_changes_k_to_hold_whole_groups():
    assert build_unit(BASE, {"group_size": 32}).k == 32
    assert build_unit(BASE, {"group_size": 4}).k == 16
    assert build_unit(BASE, {"frac_bits": "none"}).model.frac_bits is None
    with pytest.raises(ValueError, match="k:"):
        build_unit("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", {"group_size": 64})


def test_seeds_depend_on_the_spec_not_on_task_order():
    a = expand(parse_spec(_spec()))
    b = expand(parse_spec(_spec(units__grid__frac_bits=[25, 13])))
    assert {t.task_id: t.seed for t in a} == {t.task_id: t.seed for t in b}
    assert len({t.seed for t in expand(parse_spec(_spec(sweep__seeds=3)))}) == 3
