"""Replay of GEMM calls captured from Hugging Face GPT-2 / Llama on an H100 (vectors/models/)."""

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcnumerics.torch as tct  # noqa: E402
from tcnumerics.torch.replay import load_calls, replay  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / "vectors" / "models"
FILES = sorted(MODELS.glob("*.npz"))
UNITS = {"bfloat16": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "float16": "hopper.wgmma.m64n8k16.f32.f16.f16"}


def _plain_nvjet(meta) -> bool:
    """One nvjet kernel, no split-K and no C added after the conversion (``*_badd_*``)."""
    kernels = [k for k in meta["kernels"] if "Memcpy" not in k]
    return len(kernels) == 1 and kernels[0].startswith("nvjet") and "splitK" not in kernels[0] \
        and "_badd_" not in kernels[0]


def test_capture_set_is_bounded_and_every_call_names_its_kernels():
    assert FILES, "vectors/models/*.npz missing"
    assert sum(f.stat().st_size for f in FILES) <= 6 * 2**20
    calls = [c for f in FILES for c in load_calls(f)]
    assert len(calls) >= 500
    assert all(c.meta["kernels"] for c in calls)
    ops = {c.meta["op"] for c in calls}
    assert {"mm", "addmm", "bmm"} <= ops
    phases = {c.meta["phase"] for c in calls}
    assert phases == {"forward", "backward"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_unit_mode_reproduces_every_plain_nvjet_call_of_the_h256_models(dtype):
    """Unit mode on the wgmma instruction = what silicon returned for nvjet kernels without split-K.

    This pins the unit-mode epilogue against the H100: the chain of k16 groups from +0, the
    bias (GPT-2's addmm, nvjet ``*_bias_*``) added in FP32 before one RNE conversion.
    """
    files = [f for f in FILES if "_h256" in f.name]
    summary = replay(files, tct.emulate(instruction=UNITS[dtype]),
                     select=lambda m: m["a"]["dtype"] == dtype and _plain_nvjet(m))
    assert len(summary.outcomes) >= 150
    assert summary.count("exact") == len(summary.outcomes), str(summary)


def _library_ready() -> bool:
    try:
        tct.emulate("hopper")
    except RuntimeError:
        return False
    return True


@pytest.mark.skipif(not _library_ready(), reason="tcnumerics.library's per-op functions (library fidelity) missing")
def test_library_mode_replays_every_captured_call_bit_exactly_or_flags_it():
    summary = replay(FILES, tct.emulate("hopper"))
    assert summary.count("silent") == 0, str(summary)
    # flagging everything would pass the line above: most calls must be claimed and exact
    assert summary.count("exact") >= 0.7 * len(summary.outcomes), str(summary)
    dot = [o for o in summary.outcomes if o.call.meta["op"] == "dot"]
    assert dot and all(o.outcome == "flagged" for o in dot)  # cuBLAS's dot kernel is not a GEMM


def test_replay_refuses_files_that_are_not_captures(tmp_path):
    bad = tmp_path / "x.npz"
    np.savez(bad, a=np.zeros(3))
    with pytest.raises(ValueError, match="not a model-call capture"):
        load_calls(bad)
    other = tmp_path / "y.npz"
    np.savez(other, meta=np.frombuffer(json.dumps({"format": "else"}).encode(), np.uint8))
    with pytest.raises(ValueError, match="format"):
        load_calls(other)
