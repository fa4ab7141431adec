"""Folding several captures into the measured table (lab/device_library/fit_table.py CAPTURE [CAPTURE ...]).

Small captures are sliced from the committed survey (8 x 8 x 8 BF16 / FP16 calls: fitted in well under a
second); the installed table is checked for the holdout it was folded from.
"""

import json
import os
import sys

import numpy as np
import pytest

from tcnumerics.library import split_rule
from tcnumerics.library.selection import Call, _fp32_nearest_split_family, measured_table, select

HERE = os.path.dirname(__file__)
VECTORS = os.path.join(HERE, "..", "vectors", "library")
SURVEY = os.path.join(VECTORS, "hopper_op_survey_h100.npz")
HOLDOUT = os.path.join(VECTORS, "hopper_op_holdout_h100.npz")
sys.path.insert(0, os.path.join(HERE, "..", "lab", "device_library"))

pytestmark = pytest.mark.skipif(not os.path.exists(SURVEY), reason="survey capture not present")

BF16_8, FP16_8 = 175, 642  # survey calls: torch.matmul 8 x 8 x 8, BF16 and FP16, unsplit nvjet kernels


def _slice(tmp_path, name: str, ids, flip: int | None = None) -> str:
    """A capture of survey calls ``ids`` at ``tmp_path/name.npz``; ``flip``: that call's first output bit flipped."""
    from replay_survey import subset_capture

    path = str(tmp_path / f"{name}.npz")
    subset_capture(SURVEY, ids, path)
    if flip is not None:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        d = arrays[f"d{flip}"].copy()
        d.flat[0] ^= 1
        arrays[f"d{flip}"] = d
        np.savez_compressed(path, **arrays)
    return path


def _fit(tmp_path, captures, *extra, out: str = "table.json") -> dict:
    import fit_table

    argv = ["fit_table.py", *captures, "--cache", str(tmp_path / "cache.json"), "-o", str(tmp_path / out), *extra]
    saved, sys.argv = sys.argv, argv
    try:
        assert fit_table.main() == 0
    finally:
        sys.argv = saved
    with open(tmp_path / out) as fh:
        return json.load(fh)


def _key(call_id: int) -> str:
    from fit_table import call_of
    from replay_survey import load

    index, _ = load(SURVEY)
    return call_of(next(r for r in index["records"] if r["id"] == call_id)).key()


def test_two_captures_build_one_table_with_provenance(tmp_path):
    a = _slice(tmp_path, "cap_a", [BF16_8, FP16_8])
    b = _slice(tmp_path, "cap_b", [BF16_8])  # the same call kind measured again in another capture
    table = _fit(tmp_path, [a, b])
    bf16, fp16 = table["calls"][_key(BF16_8)], table["calls"][_key(FP16_8)]
    assert bf16["verified"] and bf16["sources"] == [f"cap_a#{BF16_8}", f"cap_b#{BF16_8}"]
    assert fp16["verified"] and fp16["sources"] == [f"cap_a#{FP16_8}"]
    assert {k: v["calls"] for k, v in table["captures"].items()} == {"cap_a": 2, "cap_b": 1}
    assert "cap_a (2 calls)" in table["provenance"] and "cap_b (1 calls)" in table["provenance"]
    assert table["frontier"]["half"]["plain"] == [[1, 8]]  # one point, though measured three times
    cache = json.load(open(tmp_path / "cache.json"))
    assert set(cache) == {f"cap_a#{BF16_8}", f"cap_a#{FP16_8}", f"cap_b#{BF16_8}"}


def test_captures_that_disagree_leave_the_call_kind_unverified(tmp_path):
    a = _slice(tmp_path, "cap_a", [BF16_8, FP16_8])
    x = _slice(tmp_path, "cap_x", [BF16_8], flip=BF16_8)  # one output bit no structure reproduces
    table = _fit(tmp_path, [a, x])
    bf16 = table["calls"][_key(BF16_8)]
    assert not bf16["verified"] and f"cap_x#{BF16_8}" in bf16["reason"], bf16
    assert table["calls"][_key(FP16_8)]["verified"]
    assert table["frontier"]["half"]["plain"] == [[1, 8]]  # the FP16 call still ran the plain kernel exactly
    alone = _fit(tmp_path, [a], out="alone.json")  # the disagreement, not cap_a, unverified it
    assert alone["calls"][_key(BF16_8)]["verified"]


def test_from_table_keeps_the_table_and_fits_only_the_new_capture(tmp_path):
    a = _slice(tmp_path, "cap_a", [BF16_8])
    b = _slice(tmp_path, "cap_b", [FP16_8])
    table = _fit(tmp_path, [a])
    table["calls"][_key(BF16_8)]["family"] = "kept from the table"  # a refit would replace it
    with open(tmp_path / "table.json", "w") as fh:
        json.dump(table, fh)
    os.remove(tmp_path / "cache.json")
    folded = _fit(tmp_path, [a, b], "--from-table")
    assert folded["calls"][_key(BF16_8)]["family"] == "kept from the table"
    assert folded["calls"][_key(FP16_8)]["verified"] and folded["calls"][_key(FP16_8)]["sources"] == [f"cap_b#{FP16_8}"]
    with pytest.raises(SystemExit, match="missing.*cap_a"):  # the table is rebuilt from the captures given
        _fit(tmp_path, [b], "--from-table")


def test_a_one_capture_cache_is_refused(tmp_path):
    a = _slice(tmp_path, "cap_a", [BF16_8])
    with open(tmp_path / "cache.json", "w") as fh:
        json.dump({str(BF16_8): {"verified": True}}, fh)
    with pytest.raises(SystemExit, match="keys calls by id only"):
        _fit(tmp_path, [a])


@pytest.mark.skipif(not os.path.exists(HOLDOUT), reason="holdout capture not present")
def test_installed_table_is_folded_from_survey_and_holdout():
    """Every holdout call is an entry naming its capture#id; the neighbour vote, the FP32 guess and the
    frontier read them."""
    from fit_table import call_of
    from replay_survey import load

    table = measured_table()
    calls_of = {k: v["calls"] for k, v in table["captures"].items()}  # holdout2 joins them once folded in
    assert calls_of["hopper_op_survey_h100"] == 1408 and calls_of["hopper_op_holdout_h100"] == 163
    assert all(e["sources"] for e in table["calls"].values())
    index, _ = load(HOLDOUT)
    for r in index["records"]:
        assert f"hopper_op_holdout_h100#{r['id']}" in table["calls"][call_of(r).key()]["sources"]
    survey_only = {k: v for k, v in table["calls"].items() if any("survey" in s for s in v["sources"])}
    # holdout 52: torch.matmul 64 x 1024 x 8192, nvjet split-K, in a cell no survey call shares
    assert split_rule.cell_vote(64, 1024, 8192, 1, "bf16", survey_only) is None
    assert split_rule.cell_vote(64, 1024, 8192, 1, "bf16", table["calls"]) is not None
    near = _fp32_nearest_split_family(Call("matmul", "fp32", "fp32", 32, 2560, 10240, prec="high"))
    assert near["sources"] == ["hopper_op_holdout_h100#125"]  # TF32 s1688 split x13, measured in the holdout
    plain = {tuple(p) for p in table["frontier"]["half"]["plain"]}
    assert (64 * 6, 768) in plain  # holdout 71: 8192 x 768 x 768 unsplit, a point no survey call gave
    assert select(Call("linear", "bf16", "bf16", 32, 5120, 5120, bias=True, b_t=True)).modelled  # holdout 0
