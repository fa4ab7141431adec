"""reproduce model-numerics: a tiny, seeded run of the study."""

import argparse

import pytest

torch = pytest.importorskip("torch")

from tcnumerics.experiments import model_numerics as mn  # noqa: E402
from tcnumerics.experiments.cli import run_experiment  # noqa: E402


def test_study_rows_cover_every_setting_and_are_seeded():
    rows, args, module = run_experiment("model-numerics", ["--train-steps", "30", "--eval-positions", "32",
                                                            "--fp8-steps", "2", "--quiet", "--seed", "3"])
    evals = {r["setting"]: r for r in rows if r["kind"] == "eval"}
    assert list(evals) == list(mn.SETTINGS)
    assert evals["exact (float64)"]["loss_change"] == 0
    assert all(r["loss"] > 0 and 0 <= r["accuracy"] <= 1 for r in evals.values())
    # emulated arithmetic changes the loss; NVFP4 (4-bit operands) changes it most among the FP8/FP4 recipes
    assert evals["Blackwell NVFP4"]["loss_change"] != 0
    assert abs(evals["Blackwell NVFP4"]["loss_change"]) > abs(evals["Hopper FP8 promote every 128"]["loss_change"])
    curves = [r for r in rows if r["kind"] == "fp8-train"]
    assert len(curves) == 4
    assert "FP8 training" in module.render(rows, args)
    # the same seed reproduces the trained weights (PyTorch's native FP32 training, on this machine and thread
    # count) and the evaluation (tcnumerics' emulation) exactly; each checked on its own, so that a failure
    # says which of the two differs
    train = next(r for r in rows if r["kind"] == "train")
    codes, split, vocab, data = mn._data(3, 32)
    model = mn.train_native(codes, split, vocab, steps=30, seed=3)
    assert torch.get_num_threads() == train["torch_threads"], "PyTorch's thread count changed during the run"
    assert mn.weights_digest(model) == train["weights_sha256"], "native training did not reproduce its weights"
    again = mn.evaluate(model, data, mn.SETTINGS["Hopper FP8 fast accumulation"])
    assert again["loss"] == evals["Hopper FP8 fast accumulation"]["loss"]


def test_study_reports_progress_on_stderr(capsys):
    rows, args, module = run_experiment("model-numerics", ["--train-steps", "2", "--eval-positions", "8",
                                                            "--fp8-steps", "1", "--seed", "4"])
    err = capsys.readouterr().err
    for stage in ("native FP32 training: 2/2", f"evaluations on emulated units: {len(mn.SETTINGS)}/",
                  "FP8 training, fast accumulation then promotion: 2/2"):
        assert stage in err, err


def test_study_refuses_bad_options():
    with pytest.raises(ValueError, match="--fp8-steps"):
        mn.run(argparse.Namespace(train_steps=1, eval_positions=1, fp8_steps=0, plot=None, force=False, seed=0))
