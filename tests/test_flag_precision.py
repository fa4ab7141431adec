"""Issue 33's tools: the training-grid survey list (train_calls.train_grid_calls), the batched transposed operands
survey_ops builds for it, and flag_precision.py, which re-classes a self-check capture against the tables now."""

import functools
import json
import os
import sys
from dataclasses import replace as dataclasses_replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the survey tools read their call lists through kernel_survey (torch)

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "lab", "device_library"))
sys.path.insert(0, os.path.join(HERE, "..", "lab", "device_models"))

import export_kernels  # noqa: E402
import flag_precision  # noqa: E402
import survey_ops  # noqa: E402
import train_calls  # noqa: E402

from tcnumerics.library import select  # noqa: E402
from tcnumerics.library.calls import Call  # noqa: E402
from tcnumerics.library.check import observation, write_capture  # noqa: E402

SELF_CHECK_KINDS = {"matmul|bf16||bf16|0|1|plain|1|||0", "matmul|bf16||bf16|0|0|plain|1|||0",
                    "matmul|bf16||bf16|1|0|plain|1|||0", "bmm|bf16||bf16|0|1|plain|1|||0",
                    "bmm|bf16||bf16|0|0|plain|1|||0", "bmm|bf16||bf16|1|0|plain|1|||0",
                    "bmm|fp32||fp32|0|0|plain|1|highest||0"}


@functools.cache
def _grid(name: str):
    """A grid set, built once for the module (each takes seconds)."""
    return train_calls.GRID_SETS[name]()


def _points(ds) -> set:
    """The rows of a grid set as a set of ints (``train_calls._row_keys``): membership without a tuple per row."""
    return set(train_calls._row_keys(ds.rows).tolist())


def _keys(*rows) -> set:
    return set(train_calls._row_keys(np.array(rows, np.int64)).tolist())


def test_the_training_grid_holds_the_self_checks_kinds_and_fits_a_launch_table():
    ds = _grid("train_grid")
    assert {export_kernels._kind_of(*k) for k in ds.kinds} == SELF_CHECK_KINDS
    kind, b, M, N, K = ds.rows.T
    assert (M < 1 << 15).all() and (N < 1 << 19).all() and (K < 1 << 19).all()
    assert (b * np.maximum(np.maximum(M * K, K * N), M * N) <= train_calls.GRID_MAX_OPERAND).all()
    assert len(np.unique(ds.rows, axis=0)) == len(ds)
    rows = _points(ds)
    fwd, dgrad, wgrad = (ds.kinds.index(k) for k in train_calls.GRID_KINDS[:3])
    # a down projection (hidden 4096 <- FFN 14336) at 256 tokens, its three GEMMs; an LM head's input gradient
    assert _keys((fwd, 1, 256, 4096, 14336), (dgrad, 1, 256, 14336, 4096), (wgrad, 1, 4096, 14336, 256)) <= rows
    assert _keys((dgrad, 1, 2048, 4096, 128000)) <= rows
    # the rotary embedding's FP32 bmm: K = 1
    rot = ds.rows[ds.rows[:, 0] == ds.kinds.index(train_calls.GRID_KINDS[6])]
    assert (rot[:, 4] == 1).all() and len(rot) == 64 * 512


def test_the_grids_supplement_fills_its_gaps_without_repeating_a_point():
    grid, fine = _grid("train_grid"), _grid("train_grid_fine")
    assert fine.kinds == grid.kinds and len(fine) > len(grid)
    assert not train_calls._rows_in(fine.rows, grid.rows).any()
    kind, b, M, N, K = fine.rows.T
    assert (M < 1 << 15).all() and (N < 1 << 19).all() and (K < 1 << 19).all() and (b == 1).all()
    assert (np.maximum(np.maximum(M * K, K * N), M * N) <= train_calls.GRID_MAX_OPERAND).all()
    rows = _points(fine)
    fwd, dgrad, wgrad = range(3)
    # CHECK_SET_4's gaps: an LM head between the vocabulary steps, a hidden size between the 128 steps, a wide FFN
    assert _keys((fwd, 1, 256, 200064, 3072), (dgrad, 1, 2048, 3072, 200064)) <= rows
    assert _keys((fwd, 1, 256, 2880, 2880), (dgrad, 1, 256, 2880, 2880), (wgrad, 1, 2880, 2880, 256)) <= rows
    assert _keys((fwd, 1, 2048, 12288, 36864), (dgrad, 1, 256, 36864, 12288), (wgrad, 1, 12288, 36864, 2048)) <= rows
    assert not _keys((fwd, 1, 2048, 36864, 12288)) & rows  # the grid has it: an LM head of vocabulary 36,864
    assert not _keys((fwd, 1, 256, 4096, 14336), (3, 1, 256, 256, 128)) & rows  # the grid's own points, attention


def test_the_large_lm_heads_are_the_ones_the_grid_left_out():
    heads = _grid("train_grid_heads")
    kind, b, M, N, K = heads.rows.T
    weight = N * K  # the forward's vocabulary x hidden, the input gradient's hidden x vocabulary
    assert (weight > train_calls.GRID_MAX_OPERAND).all() and (weight <= train_calls.HEADS_MAX_OPERAND).all()
    assert set(kind.tolist()) == {0, 1} and (b == 1).all() and (N < 1 << 19).all() and (K < 1 << 19).all()
    rows = _points(heads)
    assert _keys((0, 1, 2048, 256000, 12288), (1, 1, 256, 12288, 256000), (0, 1, 256, 128256, 16384)) <= rows
    assert not _keys((0, 1, 256, 200064, 3072)) & rows  # within the grid's cap


def test_the_large_grid_reaches_beyond_the_others_and_the_tokenizers_vocabularies():
    large = _grid("train_grid_large")
    seen = np.concatenate([_grid(n).rows for n in ("train_grid", "train_grid_fine", "train_grid_heads")])
    assert large.kinds == train_calls.GRID_KINDS and not train_calls._rows_in(large.rows, seen).any()
    kind, b, M, N, K = large.rows.T
    assert (M < 1 << 15).all() and (N < 1 << 19).all() and (K < 1 << 19).all() and (b == 1).all()
    assert (np.maximum(np.maximum(M * K, K * N), M * N) <= train_calls.HEADS_MAX_OPERAND).all()
    rows = _points(large)
    fwd, dgrad, wgrad = range(3)
    # CHECK_SET_6's Nemotron-4-340B: hidden 18,432, FFN 73,728 (its 256,000 x 18,432 head is beyond the cap)
    assert _keys((fwd, 1, 256, 18432, 73728), (dgrad, 1, 2048, 73728, 18432), (wgrad, 1, 18432, 73728, 256)) <= rows
    assert not ((kind == wgrad) & (M > 1 << 15)).any()  # an M beyond a launch table's packing
    assert _keys((fwd, 1, 256, 200064, 18432)) <= rows and not _keys((fwd, 1, 256, 256000, 18432)) & rows
    # a hidden size between the 1,024 steps above 8,192; a tokenizer's vocabulary (the weight gradient fits below 2^15)
    assert _keys((fwd, 1, 4096, 14848, 14848), (fwd, 1, 256, 50257, 2048), (dgrad, 1, 256, 2048, 50257)) <= rows
    assert _keys((wgrad, 1, 32001, 4096, 128)) <= rows  # its M, 32,001, fits


def test_row_keys_are_one_to_one_on_the_grids_bounds():
    rows = np.array([[0, 1, 1, 1, 1], [7, 255, (1 << 15) - 1, (1 << 19) - 1, (1 << 19) - 1], [1, 1, 1, 1, 1],
                     [0, 2, 1, 1, 1], [0, 1, 2, 1, 1], [0, 1, 1, 2, 1], [0, 1, 1, 1, 2]])
    assert len(set(train_calls._row_keys(rows).tolist())) == len(rows)
    assert train_calls._rows_in(rows, rows[::2]).tolist() == [True, False] * 3 + [True]
    with pytest.raises(ValueError, match="kind or batch"):
        train_calls._row_keys(np.array([[8, 1, 1, 1, 1]]))


@pytest.mark.parametrize("a_t, b_t", [(False, False), (False, True), (True, False)])
def test_batched_transposed_operands_are_transposed_per_matrix(a_t, b_t, monkeypatch):
    monkeypatch.setattr(survey_ops, "DEV", "cpu")
    seen = {}
    monkeypatch.setattr(torch, "bmm", lambda A, B: seen.update(A=A, B=B) or A @ B)
    c = dict(op="bmm", fmt="bf16", M=5, N=7, K=3, b=4, prec="highest", seed_a=1, seed_b=2, seed_c=0, a_t=a_t, b_t=b_t)
    out = survey_ops.build(c)()
    A, B = seen["A"], seen["B"]
    assert out.shape == (4, 5, 7) and A.shape == (4, 5, 3) and B.shape == (4, 3, 7)
    # each matrix of the batch contiguous in the transposed order (attention's backward views), batches apart
    assert A.stride() == ((15, 1, 5) if a_t else (15, 3, 1))
    assert B.stride() == ((21, 1, 3) if b_t else (21, 7, 1))


def _capture(tmp_path, calls_bits, name="cap"):
    path = str(tmp_path / f"{name}.json.gz")
    obs = [observation(c, kernels, [grid] + [None] * (len(kernels) - 1), bits_match=bits)
           for c, kernels, grid, bits in calls_bits]
    write_capture(path, obs, dict(device="NVIDIA H100 80GB HBM3"))
    return path


def test_flag_precision_classes_each_call_and_catches_a_silent_miss(tmp_path):
    modelled = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)  # a measured launch: modelled
    assert select(modelled).modelled
    flagged = Call("matmul", "bf16", "bf16", 1, 1, 64)  # a 1 x 1 output: a dot-product tree, flagged
    assert not select(flagged).modelled
    kernels = select(modelled).launch.kernels
    dot = ("dot_kernel",)
    path = _capture(tmp_path, [(modelled, kernels, (128, 1, 1), True), (modelled, kernels, (128, 1, 1), False),
                               (flagged, dot, (1, 1, 1), True), (flagged, dot, (1, 1, 1), False)])
    out = str(tmp_path / "counts.json")
    assert flag_precision.main([path, "--json", out]) == 1  # the silent miss fails the run
    got = json.load(open(out))[path]
    assert got["counts"] == {"exact": 1, "silent": 1, "flagged-exact": 1, "flagged-differ": 1,
                             "plan-differs-from-capture": 0}
    assert got["exact_fraction"] == 0.5 and got["flagged_exact_fraction"] == 0.25


def test_a_plan_that_changed_since_the_capture_is_counted_apart_until_rechecked(tmp_path):
    c = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    kernels = select(c).launch.kernels
    path = _capture(tmp_path, [(c, kernels, (128, 1, 1), False)])
    before = str(tmp_path / "before.json")
    assert flag_precision.main([path, "--save", before]) == 1
    plans = json.load(open(before))
    key = next(iter(plans[path]))
    plans[path][key]["numerics"] = "another structure"  # as if the capture-time plan had been another
    json.dump(plans, open(before, "w"))
    out, changed = str(tmp_path / "counts.json"), str(tmp_path / "changed.json")
    assert flag_precision.main([path, "--before", before, "--json", out, "--changed-out", changed]) == 0
    assert json.load(open(out))[path]["counts"] == {"changed-launch-agrees": 1}
    assert json.load(open(changed))["h100"][0]["K"] == 14336
    # a device re-check of the same call, launch and plan decides it
    again = _capture(tmp_path, [(c, kernels, (128, 1, 1), True)], name="recheck")
    assert flag_precision.main([path, "--before", before, "--json", out, "--recheck", again]) == 0
    assert json.load(open(out))[path]["counts"] == {"exact": 1}


# --- the launch frontier of a GPU model without bit captures (library/launch_frontier.py) ----------------------

def test_a_kind_frontier_needs_a_plain_launch_above_and_no_other_launch_below():
    from tcnumerics.library.launch_frontier import KindFrontier

    fr = KindFrontier(plain_k=np.array([256, 2048]), plain_min_tiles=np.array([4, 64]),
                      other_k=np.array([1024]), other_max_tiles=np.array([80]))
    assert fr.inside(100, 2048)  # plain at K = 2048 with 64 tiles; the split launch has fewer tiles
    assert not fr.inside(100, 4096)  # no plain launch with K this long
    assert not fr.inside(50, 2048)  # no plain launch with so few tiles at this K
    assert fr.dominated(70, 1024) and fr.near_other(70, 1024) and not fr.inside(70, 1024)  # a split launch beside
    assert fr.inside(90, 1024) and not fr.near_other(90, 512)


def test_the_h200_frontier_claims_a_weight_gradient_the_tables_cannot_store(monkeypatch):
    from tcnumerics.library import launch_frontier

    lm_head = Call("matmul", "bf16", "bf16", 131072, 3072, 256, a_t=True, gpu="h200")  # M beyond a table's packing
    if not launch_frontier.applies(lm_head):
        pytest.skip("the H200's table does not measure BF16 weight gradients")
    plan = select(lm_head)
    assert plan.modelled and plan.structure.split_k is None
    assert not launch_frontier.applies(dataclasses_replace(lm_head, gpu="h100"))  # the H100 has its bit captures
    assert not launch_frontier.applies(Call("matmul", "fp32", "fp32", 4096, 4096, 256, gpu="h200"))
    monkeypatch.setattr(launch_frontier, "applies", lambda c: False)
    from tcnumerics.library import gpus
    gpus.tables_changed()  # plans are cached by the tables' epoch
    assert not select(lm_head).modelled  # without it: the k-NN's guess, flagged


def test_the_classes_per_token_count_and_as_the_capture_recorded_them(tmp_path):
    c = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    kernels = select(c).launch.kernels
    path = _capture(tmp_path, [(c, kernels, (128, 1, 1), True)] * 3)
    steps = tmp_path / "check.jsonl"
    steps.write_text('{"tokens": 256, "calls": 2}\nnot a step\n{"tokens": 2048, "calls": 1}\n{"total": 3}\n')
    out = str(tmp_path / "counts.json")
    assert flag_precision.main([path, "--steps", str(steps), "--json", out]) == 0
    assert json.load(open(out))[path]["by_tokens"] == {"256": {"exact": 2}, "2048": {"exact": 1}}
    steps.write_text('{"tokens": 256, "calls": 2}\n')
    with pytest.raises(SystemExit, match="hold 2 calls, the capture 3"):
        flag_precision.main([path, "--steps", str(steps)])
    flagged = Call("matmul", "bf16", "bf16", 1, 1, 64)
    path = _capture(tmp_path, [(flagged, ("dot_kernel",), (1, 1, 1), False)], name="flagged")
    assert flag_precision.main([path, "--as-captured", "--json", out]) == 0
    assert json.load(open(out))[path]["counts"] == {"flagged-differ": 1}


def test_every_aligned_h200_launch_below_the_short_k_is_an_unsplit_nvjet_kernel():
    """The premise of the H200's launch frontier, on the installed table (docs/gemm.md: 979,460 launches, 17 kinds)."""
    from tcnumerics.library import choice, launch_frontier

    ev = launch_frontier.evidence("h200", choice.SHORT_K)
    if not ev["launches"]:
        pytest.skip("no H200 launch table installed")
    assert ev["not_plain"] == 0 and ev["launches"] >= 900_000 and ev["kinds"] == 17
    assert launch_frontier.evidence("h200", 1 << 19)["not_plain"] > 0  # longer K: split-K is there, and is counted
