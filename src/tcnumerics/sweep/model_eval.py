"""The ``model_eval`` workload: a small PyTorch model evaluated on an emulated unit (``tcnumerics.torch``).

The model is a randomly initialised network (seeded by the task), evaluated on a batch of
N(0, 1) inputs twice: in float64 (the reference; its arg-max gives the labels) and inside
``tcnumerics.torch.emulate(unit=...)``, where every GEMM runs on the swept unit under the
chosen scaling and promotion.  Metrics: cross-entropy loss of the emulated logits against
the labels, the reference's own loss, their difference, the fraction of arg-max decisions
that agree with the reference, and the largest / normwise relative logit error.  This
measures how far the unit moves a model's outputs -- not a trained model's task accuracy.

Models: ``mlp`` (3 linear layers, GELU) and ``transformer`` (one pre-norm encoder layer,
4 heads, then a linear head).  Torch runs single-threaded in the task so the non-GEMM
reductions are the same on every worker.

Example:
    >>> from tcnumerics.sweep.units import build_unit
    >>> row = evaluate(build_unit("hopper.wgmma.m64n8k16.f32.bf16.bf16", {}),
    ...                {"model": "mlp", "batch": 8, "width": 32, "scaling": "none", "promote_every": "none"}, 3)
    >>> 0 < row["norm_logit_rel_error"] < 0.05, row["accuracy"] > 0.5
    (True, True)
"""

from __future__ import annotations

import numpy as np

from .shared import shared_input

__all__ = ["MODELS", "evaluate"]

MODELS = ("mlp", "transformer")
_CLASSES = 10
_SEQ = 16  # transformer tokens per sample


def _model(name: str, width: int, seed: int):
    import torch
    from torch import nn

    torch.manual_seed(seed % 2**63)
    if name == "mlp":
        return nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                             nn.Linear(width, _CLASSES))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=2 * width, dropout=0.0,
                                                    batch_first=True, norm_first=True)
            self.head = nn.Linear(width, _CLASSES)

        def forward(self, x):
            return self.head(self.layer(x).mean(dim=1))

    return Encoder()


def _reference(p: dict, seed: int) -> tuple:
    """(float32 model, inputs, float64 logits, labels, float64 loss): the same for every unit of a sweep."""
    import torch
    import torch.nn.functional as F

    model = _model(p["model"], p["width"], seed).eval()
    rng = np.random.default_rng(seed)
    shape = (p["batch"], p["width"]) if p["model"] == "mlp" else (p["batch"], _SEQ, p["width"])
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    with torch.no_grad():
        ref = model.double()(x.double())
    labels = ref.argmax(dim=1)
    return model.float(), x, ref, labels, float(F.cross_entropy(ref, labels))


def evaluate(spec, p: dict, seed: int, engine: str = "auto") -> dict:
    """One row of metrics for unit ``spec`` and parameters ``p`` (model, batch, width, scaling, promote_every).

    ``engine``: where the emulated GEMMs run ("cuda": the GPU engine).  The model itself (activations,
    normalisation, the loss) always runs on the CPU in one thread, so that the row does not depend on the engine:
    CUDA's GELU or softmax may differ from the CPU's in the last bit (measured on an H200: the loss column moved).
    The model, its inputs and its float64 evaluation are shared by every unit of the sweep (``sweep.shared``)."""
    import torch
    import torch.nn.functional as F

    import tcnumerics.torch as tct

    if p["model"] not in MODELS:
        raise ValueError(f"model: expected one of {', '.join(MODELS)}, got {p['model']!r}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        key = ("model_eval", seed, p["model"], p["width"], p["batch"])
        model, x, ref, labels, ref_loss = shared_input(key, lambda: _reference(p, seed))
        with torch.no_grad():
            scaling = None if p["scaling"] == "none" else p["scaling"]
            promote = None if p["promote_every"] == "none" else p["promote_every"]
            with tct.emulate(unit=spec, scaling=scaling, promote_every=promote, engine=engine):
                got = model(x)
        got = got.double()
        diff = (got - ref).abs()
        loss = float(F.cross_entropy(got, labels))
        return {"loss": loss, "ref_loss": ref_loss, "loss_delta": loss - ref_loss,
                "accuracy": float((got.argmax(dim=1) == labels).double().mean()),
                "max_logit_rel_error": float(diff.max() / ref.abs().max()),
                "norm_logit_rel_error": float(diff.norm() / ref.norm()),
                "nan_count": int(torch.isnan(got).sum())}
    finally:
        torch.set_num_threads(threads)
