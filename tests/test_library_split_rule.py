"""The nvjet split-K rule (tcnumerics.library.split_rule): formula, neighbour vote, and its use in selection."""

import pytest

from tcnumerics.library import split_rule as sr
from tcnumerics.library.selection import Call, _predicted_split, measured_table, select


@pytest.mark.parametrize("M, N, K, S", [
    (8, 1024, 14336, 8),    # survey: 64x8 tiles, 16 of them, splitK x8 (128 CTAs)
    (1, 4096, 14336, 2),    # survey: 64 tiles, splitK x2
    (3, 2048, 14336, 4),    # survey: 32 tiles, splitK x4
    (3, 8192, 28672, 2),    # survey: 128x8 tiles, 64 of them, splitK x2
    (4096, 4096, 4096, 1),  # a full grid
    (5, 4096, 2048, 1),     # K too short to split
    (512, 512, 4096, 1),    # survey: unsplit (64 tiles, 64 K-tiles)
])
def test_formula_on_measured_shapes(M, N, K, S):
    assert sr.formula_split(M, N, K) == S


def test_batched_calls_never_split():
    assert sr.formula_split(64, 64, 65536, b=8) == 1


def test_effective_slices_drops_empty_slices():
    # 48 slices of ceil(1024 / 48) = 22 K-tiles cover K = 65536 with 47: the 48th would be empty
    assert sr.effective_slices(48, 65536) == 47
    assert sr.effective_slices(6, 8192) == 6
    assert sr.effective_slices(1, 8192) == 1


def _entry(kernel, S=None):
    return {"kernel": kernel, "split": [64 * 22] * S if S else None}


def _key(M, N, K, out="bf16", op="matmul", b=1):
    return "|".join(str(x) for x in (op, "bf16", "", out, b, M, N, K, 0, 0, "plain", 1, "", "", 0))


def test_cell_vote_majority_ties_and_classes():
    split, plain = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_NNT", "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT"
    calls = {_key(3, 1024, 8192): _entry(split, 5), _key(5, 1024, 8192, op="linear"): _entry(split, 5),
             _key(8, 1024, 8192, op="addmm"): _entry(plain), _key(12, 1024, 8192): _entry(plain)}
    assert sr.cell_vote(1, 1024, 8192, 1, "bf16", calls) == 5    # M 1..8 share the 64x8 tile: 2 split of 3
    assert sr.cell_vote(16, 1024, 8192, 1, "bf16", calls) == 1   # M 9..16: the one neighbour ran unsplit
    assert sr.cell_vote(24, 1024, 8192, 1, "bf16", calls) is None  # no neighbour
    assert sr.cell_vote(3, 1024, 8192, 1, "fp32", calls) is None   # FP32 output: other kernels
    calls[_key(7, 1024, 8192)] = _entry(plain)
    assert sr.cell_vote(1, 1024, 8192, 1, "bf16", calls) == 5    # a tie goes to split
    unknown = {_key(3, 1024, 8192): _entry(split)}                # split, S not identified: the formula's S
    assert sr.cell_vote(1, 1024, 8192, 1, "bf16", unknown) == max(2, sr.formula_split(1, 1024, 8192))


def test_frontier_overrides_the_prediction():
    c = Call("matmul", "bf16", "bf16", 8, 1024, 14336)
    assert sr.predicted_split(c) == 8
    assert sr.predicted_split(c, no_split_verified=True) == 1


def test_neighbour_vote_leave_one_out_on_the_measured_table():
    """Each measured nvjet call left out, its neighbours (else the formula) decide split or not: right for
    825 of 849 on the H100 table; a regression below 95% fails."""
    calls = measured_table()["calls"]
    right = total = 0
    for key, entry in calls.items():
        f = key.split("|")
        if f[0] == "scaled_mm" or f[1] not in ("bf16", "fp16") or not str(entry.get("kernel", "")).startswith("nvjet"):
            continue
        b, M, N, K = (int(x) for x in f[4:8])
        rest = {k: v for k, v in calls.items() if k.split("|")[4:8] != f[4:8]}
        voted = sr.cell_vote(M, N, K, b, f[3], rest)
        S = voted if voted is not None else sr.formula_split(M, N, K, b)
        right += (S > 1) == ("splitK" in entry["kernel"])
        total += 1
    assert total > 800 and right >= 0.95 * total


def test_selection_flags_a_predicted_split(monkeypatch):
    from tcnumerics.library import launches

    c = Call("linear", "bf16", "bf16", 2, 8192, 28672, b_t=True)  # bits not measured; its neighbours split x2
    assert c.key() not in measured_table()["calls"]
    measured = select(c)  # the kernel survey measured its launch: S read off the grid, modelled
    assert measured.modelled and len(measured.split_k) == 2 and "launch measured" in measured.reason
    monkeypatch.setattr(launches, "find_launch", lambda call: None)  # as if the launch were not measured
    monkeypatch.setattr(launches, "predicted_nvjet_split", lambda call: (None, ""))
    assert _predicted_split(c) == 2
    plan = select(c)  # now from the k-NN over the dense surveys' neighbours (x2 or x3 around it)
    assert not plan.modelled and len(plan.split_k) >= 2 and "predicted" in plan.family