"""A small PyTorch model evaluated and trained on emulated matrix units (``tcnumerics reproduce model-numerics``).

A character-level language model -- 32 characters of context, a 32-wide embedding, one
hidden layer of 256 (GELU) -- is trained natively on the CPU (FP32) on the English text of
Python's own documentation topics (``pydoc_data.topics``, part of every CPython install:
no download).  The trained model is then evaluated on held-out text with every GEMM
(forward: K = 1024 and 256) computed by ``tcnumerics.torch.emulate`` on:

* exact arithmetic (float64 model and data, native GEMMs: the reference),
* Hopper BF16 as cuBLAS computes it (library mode, ``emulate("hopper")``, BF16 model),
* Hopper FP8 E4M3 wgmma with per-tensor scaling, fast accumulation vs ``promote_every=128``,
* Blackwell MXFP8 (E4M3, UE8M0 per 32) and NVFP4 (E2M1, UE4M3 per 16 under a tensor scale),
* AMD CDNA3 FP8 (E4M3 FNUZ, per-tensor scaling),
* a custom unit with a 16-bit accumulator (BF16 products, FP16 accumulator, L = 4, 12
  aligned fraction bits, round toward zero) -- a design question, not a product.

It then continues training for a few steps from the trained weights under FP8 fast
accumulation and under promotion (forward and backward GEMMs emulated), from identical
state and batches, and records where the two loss curves part.

Everything is seeded: the same seed gives the same table on the same machine (the native
FP32 training uses PyTorch's CPU kernels, whose bits may differ between CPU types).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from .plotting import check_plot_target, save_figure
from .progress import Progress

__all__ = ["SETTINGS", "corpus", "CharMLP", "train_native", "weights_digest", "evaluate", "emulation", "add_arguments",
           "run", "render", "plot"]

CONTEXT, EMBED, HIDDEN = 32, 32, 256
FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
SETTINGS = {
    "exact (float64)": None,
    "Hopper BF16 (cuBLAS)": dict(library="hopper"),
    "Hopper FP8 fast accumulation": dict(instruction=FP8, scaling="tensor"),
    "Hopper FP8 promote every 128": dict(instruction=FP8, scaling="tensor", promote_every=128),
    "Blackwell MXFP8": dict(instruction="blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0",
                            scaling="mx"),
    "Blackwell NVFP4": dict(instruction="blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
                            scaling="nvfp4"),
    "CDNA3 FP8": dict(instruction="cdna3.mfma.f32_16x16x32_fp8_fp8", scaling="tensor"),
    "custom 16-bit accumulator": "custom",
}


def _torch():
    from .._extras import require

    return require("torch", "torch", "model-numerics")  # the CLI turns the error into one line


def corpus() -> tuple[str, str]:
    """(text, alphabet): Python's documentation topics, printable ASCII, whitespace runs collapsed."""
    import pydoc_data.topics as topics

    raw = "\n".join(topics.topics[k] for k in sorted(topics.topics))
    text = " ".join("".join(c if 32 <= ord(c) < 127 else " " for c in raw).split())
    return text, "".join(sorted(set(text)))


def _windows(codes: np.ndarray, starts: np.ndarray):
    torch = _torch()
    idx = starts[:, None] + np.arange(CONTEXT + 1)[None, :]
    w = torch.from_numpy(codes[idx].astype(np.int64))
    return w[:, :CONTEXT], w[:, CONTEXT]


def CharMLP(vocab: int):
    """Embedding -> flatten (K = 1024) -> Linear 256 -> GELU -> Linear vocab."""
    nn = _torch().nn
    return nn.Sequential(nn.Embedding(vocab, EMBED), nn.Flatten(), nn.Linear(CONTEXT * EMBED, HIDDEN), nn.GELU(),
                         nn.Linear(HIDDEN, vocab))


def _data(seed: int, eval_positions: int):
    text, alphabet = corpus()
    codes = np.frombuffer(text.encode(), np.uint8)
    lut = np.zeros(256, np.int64)
    lut[np.frombuffer(alphabet.encode(), np.uint8)] = np.arange(len(alphabet))
    codes = lut[codes]
    split = int(len(codes) * 0.9)
    rng = np.random.default_rng(seed)
    eval_starts = split + rng.choice(len(codes) - split - CONTEXT - 1, eval_positions, replace=False)
    # vocabulary padded to a multiple of 8 (unused classes): cuBLAS runs its modelled nvjet kernels for the
    # output layer then, instead of CUTLASS fallbacks for N not a multiple of 8
    vocab = -(-len(alphabet) // 8) * 8
    return codes, split, vocab, _windows(codes, np.sort(eval_starts))


def train_native(codes: np.ndarray, split: int, vocab: int, *, steps: int, seed: int, batch: int = 256,
                 progress: Progress | None = None):
    """Native FP32 training with Adam: the model every setting then evaluates."""
    torch = _torch()
    torch.manual_seed(seed)
    model = CharMLP(vocab)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(seed + 1)
    for _ in range(steps):
        x, y = _windows(codes, rng.integers(0, split - CONTEXT - 1, batch))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if progress is not None:
            progress.advance()
    return model


def weights_digest(model) -> str:
    """SHA-256 of a model's parameters' bytes: two trainings that claim to be the same can be compared."""
    import hashlib

    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def emulation(setting):
    """The ``tcnumerics.torch.Emulation`` of a setting (None: native)."""
    import tcnumerics.torch as tct
    from ..model import UnitModel

    if setting is None:
        return None
    if setting == "custom":
        unit = UnitModel("bf16", "bf16", "fp16", "fp16", group_size=4, frac_bits=12, zero_exponent=-21,
                         output_rounding="rz")
        return tct.emulate(unit=unit)
    if "library" in setting:
        return tct.emulate(setting["library"])
    return tct.emulate(**setting)


def evaluate(model, data, setting) -> dict:
    """Cross-entropy (nats per character) and next-character accuracy under one setting."""
    import copy
    import contextlib

    torch = _torch()
    x, y = data
    m = copy.deepcopy(model)
    if setting is None:
        m = m.double()
    elif isinstance(setting, dict) and "library" in setting:
        m = m.bfloat16()
    em = emulation(setting)
    with torch.no_grad(), (em if em is not None else contextlib.nullcontext()):
        logits = m(x).double()
    loss = torch.nn.functional.cross_entropy(logits, y).item()
    acc = (logits.argmax(-1) == y).double().mean().item()
    flagged = em.report().not_modelled if em is not None else 0
    return {"loss": loss, "accuracy": acc, "not_modelled_calls": flagged}


def train_emulated(model, codes, split, setting, *, steps: int, seed: int, batch: int = 64,
                   progress: Progress | None = None) -> list[float]:
    """Continue training (SGD) with every forward and backward GEMM emulated; the loss per step."""
    import copy

    torch = _torch()
    m = copy.deepcopy(model)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    rng = np.random.default_rng(seed + 2)
    losses = []
    em = emulation(setting)
    for _ in range(steps):
        x, y = _windows(codes, rng.integers(0, split - CONTEXT - 1, batch))
        with em:
            loss = torch.nn.functional.cross_entropy(m(x), y)
            opt.zero_grad()
            loss.backward()
        opt.step()
        losses.append(loss.item())
        if progress is not None:
            progress.advance()
    return losses


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train-steps", type=int, default=1500, help="native FP32 training steps (default 1500)")
    parser.add_argument("--eval-positions", type=int, default=512, help="held-out characters evaluated (512)")
    parser.add_argument("--fp8-steps", type=int, default=40,
                        help="steps of emulated FP8 training, fast accumulation vs promotion (40)")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the table and the loss curves (needs matplotlib)")
    parser.add_argument("--force", action="store_true", help="let --plot replace an existing file")


def run(args: argparse.Namespace) -> list[dict]:
    """One row per evaluation setting, then one per emulated training step of the two FP8 runs."""
    for name in ("train_steps", "eval_positions", "fp8_steps"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}: must be at least 1")
    if args.plot:
        check_plot_target(args.plot, args.force)
    torch = _torch()
    codes, split, vocab, data = _data(args.seed, args.eval_positions)
    t0 = time.perf_counter()
    with Progress(args.train_steps, "model-numerics: native FP32 training", enabled=not args.quiet) as bar:
        model = train_native(codes, split, vocab, steps=args.train_steps, seed=args.seed, progress=bar)
    rows = [{"kind": "train", "setting": "native FP32", "seconds": time.perf_counter() - t0,
             "weights_sha256": weights_digest(model), "torch_threads": torch.get_num_threads()}]
    with Progress(len(SETTINGS), "model-numerics: evaluations on emulated units", enabled=not args.quiet) as bar:
        for name, setting in SETTINGS.items():
            t0 = time.perf_counter()
            rows.append({"kind": "eval", "setting": name, **evaluate(model, data, setting),
                         "seconds": time.perf_counter() - t0})
            bar.advance()
    exact = rows[1]["loss"]
    for r in rows[1:]:
        r["loss_change"] = r["loss"] - exact
    curves = {}
    with Progress(2 * args.fp8_steps, "model-numerics: FP8 training, fast accumulation then promotion",
                  enabled=not args.quiet) as bar:
        for name in ("Hopper FP8 fast accumulation", "Hopper FP8 promote every 128"):
            curves[name] = train_emulated(model, codes, split, SETTINGS[name], steps=args.fp8_steps, seed=args.seed,
                                          progress=bar)
            rows += [{"kind": "fp8-train", "setting": name, "step": i, "loss": v}
                     for i, v in enumerate(curves[name])]
    torch.set_grad_enabled(True)
    if args.plot:
        plot(rows, args.plot)
    return rows


def _parting(rows: list[dict]) -> tuple[int | None, float]:
    """First step where the two FP8 training losses differ, and the largest difference."""
    a = [r["loss"] for r in rows if r["kind"] == "fp8-train" and "fast" in r["setting"]]
    b = [r["loss"] for r in rows if r["kind"] == "fp8-train" and "promote" in r["setting"]]
    diff = [abs(x - y) for x, y in zip(a, b)]
    first = next((i for i, d in enumerate(diff) if d > 0), None)
    return first, max(diff) if diff else 0.0


def render(rows: list[dict], args: argparse.Namespace | None = None) -> str:
    lines = [f"{'setting':<32} {'loss (nats/char)':>16} {'vs exact':>10} {'accuracy':>9} {'flagged':>8} {'s':>6}"]
    for r in rows:
        if r["kind"] == "eval":
            lines.append(f"{r['setting']:<32} {r['loss']:>16.5f} {r['loss_change']:>+10.5f} {r['accuracy']:>9.4f} "
                         f"{r['not_modelled_calls']:>8} {r['seconds']:>6.1f}")
    first, biggest = _parting(rows)
    n = sum(1 for r in rows if r["kind"] == "fp8-train") // 2
    lines.append(f"FP8 training, {n} steps from the trained model: fast accumulation vs promotion "
                 + (f"part at step {first}, largest loss difference {biggest:.2e}" if first is not None
                    else "never part"))
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ev = [r for r in rows if r["kind"] == "eval"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1.3, 1]})
    names = [r["setting"] for r in ev]
    ax1.barh(names[::-1], [r["loss_change"] for r in ev][::-1], color="tab:blue")
    ax1.set_xscale("symlog", linthresh=1e-4)
    ax1.set_xlabel("held-out loss minus exact (nats/char, symlog)")
    ax1.set_title("char-level MLP evaluated on emulated units")
    fast = [r["loss"] for r in rows if r["kind"] == "fp8-train" and "fast" in r["setting"]]
    promo = [r["loss"] for r in rows if r["kind"] == "fp8-train" and "promote" in r["setting"]]
    diff = [abs(a - b) for a, b in zip(fast, promo)]
    ax2.semilogy(range(len(diff)), [max(d, 1e-9) for d in diff], marker=".", color="tab:red")
    first, _ = _parting(rows)
    if first is not None:
        ax2.axvline(first, color="gray", ls=":", label=f"curves part (step {first})")
        ax2.legend(fontsize=8)
    ax2.set_xlabel("emulated training step (same state and batches)")
    ax2.set_ylabel("|loss fast accumulation - loss promotion|")
    ax2.set_title("FP8 training: where fast accumulation and promotion part")
    fig.tight_layout()
    save_figure(fig, path, 110)
    plt.close(fig)
