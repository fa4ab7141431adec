"""A small byte-level GPT trained from scratch on emulated units (``tcnumerics reproduce fp8-training``).

The corpus is the source text of the running interpreter's standard library (its top-level ``*.py`` files in name
order: no download; the version and a SHA-256 are recorded).  One GPT -- bytes as tokens, learned positions, pre-norm
blocks of causal self-attention and a GELU MLP -- is trained from the same initial weights on the same batches
(AdamW) under each setting, every GEMM of forward and backward emulated (``tcnumerics.torch.emulate``):

* ``float32 reference``: native PyTorch FP32 (its CPU kernels' bits);
* ``BF16 Hopper (cuBLAS)``: library mode under ``torch.autocast`` (BF16 GEMMs, FP32 master weights);
* ``FP8 fast accumulation``: Hopper ``wgmma ... e4m3.e4m3`` (13 aligned fraction bits, truncation), per-tensor
  scaled E4M3 operands in forward and backward;
* ``FP8 promote every 128``: the same, each 128 K-elements added into an FP32 accumulator (DeepSeek-V3's recipe);
* ``FP8 accumulator F=...``: the same unit shape (32 products per group, E4M3 operands) with F aligned fraction
  bits, a design question, not a product.

At chosen steps of the FP8 fast-accumulation run the step is attributed (``emulate(..., attribution=True)``):
per call site the error by stage, the first-order loss effect, and the counterfactual (site exact) for the top
sites.  The attributed step is probed on ``--attribution-batch`` sequences: the step's own batch and, beyond it,
sequences drawn by a generator of their own (``probe_batch``), so that a site's systematic effect, which adds up
over tokens, stands clear of the re-rounding noise of the later sites, which averages down; the training batches
and the loss curves do not depend on it.  The same seed gives the same JSON bit for bit on the same machine (the
float32 reference and the optimizer run on PyTorch's CPU kernels, whose bits may differ between CPU types and
PyTorch versions).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import os
import sys
import sysconfig
import time

import numpy as np

from .plotting import check_plot_target
from .progress import Progress

__all__ = ["corpus", "GPT", "settings", "add_arguments", "run", "render", "plot", "probe_step", "probe_batch",
           "PROBE_LR", "DEFAULTS", "apply_defaults"]

FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
WIDTHS = (10, 13, 16, 20, 25)
PROBE_LR = 0.05  # the SGD learning rate of the attribution's loss-after-update probe
# the fewest sequences an attributed step's probe holds by default: at 8 (the CPU batch) no top site's
# counterfactual stood clear of its noise, at 32 step 0's three did (measured: docs/attribution.md)
ATTRIBUTION_BATCH = 32


def _torch():
    try:
        import torch
    except ImportError:  # the CLI turns this into a one-line error
        raise ModuleNotFoundError("needs torch: pip install -e \".[torch]\"", name="torch") from None
    return torch


def corpus(limit: int) -> tuple[np.ndarray, str]:
    """(the first ``limit`` bytes of the standard library's top-level ``*.py`` files in name order, SHA-256)."""
    root = sysconfig.get_paths()["stdlib"]
    data = bytearray()
    for name in sorted(f for f in os.listdir(root) if f.endswith(".py")):
        with open(os.path.join(root, name), "rb") as fh:
            data += fh.read()
        if len(data) >= limit:
            break
    data = bytes(data[:limit])
    return np.frombuffer(data, np.uint8).astype(np.int64), hashlib.sha256(data).hexdigest()


def GPT(layers: int, width: int, heads: int, context: int):
    """A pre-norm decoder: byte embedding + learned positions, ``layers`` blocks, a linear head over 256 bytes."""
    torch = _torch()
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, heads, C // heads).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-2, -1)) / (C // heads) ** 0.5  # bmm: scores and mix below
            mask = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
            weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(width), Attention()
            self.ln2, self.fc, self.out = nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.pos = nn.Embedding(256, width), nn.Parameter(torch.zeros(context, width))
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, 256)

        def forward(self, x, y):
            h = self.embed(x) + self.pos[: x.shape[1]]
            for block in self.blocks:
                h = block(h)
            logits = self.head(self.ln(h))
            return nn.functional.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))

    return Model()


def settings() -> dict:
    """name -> emulate() keywords (None: native float32; "bf16": library mode under autocast)."""
    out = {"float32 reference": None, "BF16 Hopper (cuBLAS)": "bf16",
           "FP8 fast accumulation": dict(instruction=FP8, scaling="tensor"),
           "FP8 promote every 128": dict(instruction=FP8, scaling="tensor", promote_every=128)}
    for f in WIDTHS:
        out[f"FP8 accumulator F={f}"] = dict(unit=accumulator_unit(f), scaling="tensor")
    return out


def accumulator_unit(frac_bits: int):
    """Hopper's FP8 wgmma unit shape (32 E4M3 products per group) with ``frac_bits`` aligned fraction bits."""
    from ..catalog import get_instruction

    spec = get_instruction(FP8)
    model = dataclasses.replace(spec.model, frac_bits=frac_bits, output_mantissa_bits=min(frac_bits, 23))
    return dataclasses.replace(spec, name=f"custom.fp8.f{frac_bits}", model=model,
                               provenance=f"{FP8} with {frac_bits} aligned fraction bits (a design question)")


def _emulation(setting, attribution: bool = False, device: str = "cpu"):
    import contextlib

    import tcnumerics.torch as tct

    if setting is None:
        return contextlib.nullcontext()
    if setting == "bf16":
        return _Autocast(tct.emulate("hopper", attribution=attribution), _torch().device(device).type)
    return tct.emulate(**setting, attribution=attribution)


class _Autocast:
    """An emulation entered under ``torch.autocast`` (BF16 GEMMs of an FP32 model); the emulation's methods pass
    through (``attribution``, ``mode``: the counterfactual re-enters it whole).  ``device_type``: the model's
    (autocast is per device type: a CPU autocast leaves CUDA GEMMs in FP32)."""

    def __init__(self, emulation, device_type: str = "cpu"):
        self.emulation = emulation
        self.device_type = device_type
        self._stack = None

    def __getattr__(self, name):
        return getattr(self.emulation, name)

    def __enter__(self):
        import contextlib

        torch = _torch()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(torch.autocast(self.device_type, dtype=torch.bfloat16))
        self._stack.enter_context(self.emulation)
        return self

    def __exit__(self, *exc):
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc)


# the default configuration per device: on 2 CPU cores about 2 minutes; on a GPU (an H200: 5 min 39 s, all nine
# settings) weight-gradient GEMMs of K = 4,096 tokens (docs/attribution.md, "A larger configuration on a GPU")
DEFAULTS = {"cpu": dict(steps=30, batch=8, context=32, width=64, layers=2, heads=2),
            "cuda": dict(steps=80, batch=32, context=128, width=128, layers=2, heads=4)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    helps = dict(steps="training steps per setting", batch="sequences per batch", context="bytes per sequence",
                 width="model width", layers="transformer blocks", heads="attention heads")
    for name, text in helps.items():
        cpu, cuda = DEFAULTS["cpu"][name], DEFAULTS["cuda"][name]
        parser.add_argument(f"--{name}", type=int, default=None,
                            help=f"{text} (default {cpu}; {cuda} with --device cuda)")
    parser.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate (default 3e-3)")
    parser.add_argument("--attribute-at", type=int, nargs="*", default=None,
                        help="steps of the FP8 fast-accumulation run to attribute (default: first and last)")
    parser.add_argument("--attribution-batch", type=int, default=None, metavar="N",
                        help="sequences in an attributed step's probe (the loss and the loss after one SGD step that "
                             "the first-order estimates and counterfactuals compare): the step's own batch (its "
                             "first N if N is smaller), then sequences drawn by a separate seeded generator; the "
                             f"training batches are unchanged (default: --batch, at least {ATTRIBUTION_BATCH})")
    parser.add_argument("--top", type=int, default=3, help="sites per attribution given a counterfactual (default 3)")
    parser.add_argument("--noise", type=int, default=4,
                        help="sign-flip probes per counterfactual site measuring its noise (default 4; 0: none)")
    parser.add_argument("--only", nargs="*", default=None, help="run only these settings (names as printed)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the loss curves and the last attributed step's top sites")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --plot file")


def apply_defaults(args: argparse.Namespace, device_type: str) -> argparse.Namespace:
    """The model and batch flags not given (None) set to ``device_type``'s default configuration (``DEFAULTS``);
    the attribution batch to the batch, at least ``ATTRIBUTION_BATCH``.

    >>> apply_defaults(argparse.Namespace(steps=5, batch=None), "cuda").batch
    32
    >>> [apply_defaults(argparse.Namespace(batch=b), "cpu").attribution_batch for b in (None, 64)]
    [32, 64]
    """
    for name, value in DEFAULTS[device_type].items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    if getattr(args, "attribution_batch", None) is None:
        args.attribution_batch = max(args.batch, ATTRIBUTION_BATCH)
    return args


def run(args: argparse.Namespace) -> list[dict]:
    torch = _torch()
    if args.plot:
        check_plot_target(args.plot, args.force)
    _check_device(torch, args.device)
    apply_defaults(args, torch.device(args.device).type)
    if getattr(args, "noise", 0) < 0:
        raise ValueError(f"--noise: must be >= 0, got {args.noise}")
    for name in ("steps", "batch", "context", "width", "layers", "heads", "attribution_batch"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(args, name)}")
    if args.width % args.heads:
        raise ValueError(f"--heads: must divide --width ({args.width}), got {args.heads}")
    chosen = settings()
    if args.only:
        unknown = [n for n in args.only if n not in chosen]
        if unknown:
            raise ValueError(f"--only: unknown setting {unknown[0]!r} (known: {', '.join(chosen)})")
        chosen = {k: v for k, v in chosen.items() if k in args.only}
    attribute_at = sorted(set(args.attribute_at if args.attribute_at is not None else [0, args.steps - 1]))
    codes, digest = corpus(1 << 20)
    rng = np.random.default_rng(args.seed)
    starts = rng.integers(0, len(codes) - args.context - 1, size=(args.steps, args.batch))
    probe_starts = probe_batch(np.random.SeedSequence(args.seed), starts, args.attribution_batch,
                               len(codes) - args.context - 1)
    torch.manual_seed(args.seed)
    init = GPT(args.layers, args.width, args.heads, args.context).to(args.device).state_dict()
    versions = dict(python=sys.version.split()[0], torch=torch.__version__, numpy=np.__version__,
                    corpus_sha256=digest, cpu_capability=torch.backends.cpu.get_cpu_capability())
    rows = [dict(kind="config", **{k: getattr(args, k) for k in ("steps", "batch", "attribution_batch", "context",
                                                                 "width", "layers", "heads", "lr", "seed", "device")},
                 **versions)]
    with _deterministic(torch, args.device), \
            Progress(len(chosen) * args.steps, "fp8-training", enabled=not args.quiet) as bar:
        for name, setting in chosen.items():
            t0 = time.perf_counter()
            losses, attributions = _train(args, setting, init, codes, starts, probe_starts, attribute_at
                                          if name == "FP8 fast accumulation" else (), bar)
            rows.append(dict(kind="curve", setting=name, losses=losses))
            if not args.quiet:  # wall time on standard error only: the JSON is the same bits on every run
                print(f"fp8-training: {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            rows += attributions
    _summarise(rows)
    if args.plot:
        plot(rows, args.plot)
    return rows


def _check_device(torch, device: str) -> None:
    """``--device``: a torch device this torch can use (a clear error before any training, not a traceback)."""
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise ValueError(f"--device: not a torch device: {device!r} (e.g. cpu, cuda, cuda:1)") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device: {device!r} asked for, but torch {torch.__version__} sees no CUDA device")
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"--device: {device!r}: the study runs on cpu or cuda")


@contextlib.contextmanager
def _deterministic(torch, device: str):
    """Torch's own (non-GEMM) ops made repeatable, so the JSON reproduces bit for bit and a counterfactual's re-run
    reproduces the attributed step.  On the CPU, one intra-op thread: torch splits a reduction (a LayerNorm's or a
    bias's gradient, a softmax) by its thread count, so the bits of the model's native ops -- not of the emulated
    GEMMs -- followed the machine's core count; they still follow its vector ISA (``cpu_capability`` in the
    JSON).  On CUDA, torch's deterministic kernels: the embedding's backward otherwise adds with atomics in a
    varying order.  ``warn_only``: an op without one warns, not fails."""
    if torch.device(device).type != "cuda":
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)
        return
    before = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=warn_only)


def _batch(codes, starts, context, device):
    torch = _torch()
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    w = torch.from_numpy(codes[idx]).to(device)
    return w[:, :-1], w[:, 1:]


def probe_batch(seed: np.random.SeedSequence, starts: np.ndarray, size: int, high: int) -> np.ndarray:
    """The start offsets of each step's attribution probe: ``size`` sequences -- the step's own batch (``starts``,
    one row per step; its first ``size`` sequences where ``size`` is smaller), then ``size - batch`` more drawn in
    [0, ``high``) by a generator of their own, a child of ``seed`` (numpy's independent-stream spawning), so the
    training batches, drawn from ``seed`` itself, are the same whatever ``size`` is.

    >>> starts = np.arange(6).reshape(3, 2)
    >>> probe = probe_batch(np.random.SeedSequence(1), starts, 4, 100)
    >>> probe.shape, bool((probe[:, :2] == starts).all())
    ((3, 4), True)
    >>> probe_batch(np.random.SeedSequence(1), starts, 1, 100).ravel().tolist()
    [0, 2, 4]
    """
    extra = max(0, size - starts.shape[1])
    more = np.random.default_rng(seed.spawn(1)[0]).integers(0, high, size=(starts.shape[0], extra))
    return np.concatenate([starts[:, :size], more], axis=1)


def _train(args, setting, init, codes, starts, probe_starts, attribute_at, bar):
    torch = _torch()
    model = GPT(args.layers, args.width, args.heads, args.context).to(args.device)
    model.load_state_dict(init)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    losses, attributions = [], []
    for step in range(args.steps):
        x, y = _batch(codes, starts[step], args.context, args.device)
        if step in attribute_at:
            px, py = _batch(codes, probe_starts[step], args.context, args.device)
            attributions.append(_attribute(args, setting, model, px, py, step))
        with _emulation(setting, device=args.device):
            loss = model(x, y)
            opt.zero_grad()
            loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        bar.advance()
    return losses, attributions


def probe_step(model, x, y) -> tuple[float, float]:
    """The attribution's probe: the step's loss, and the loss after one SGD step of ``PROBE_LR`` (both as the
    running emulation computes them) -- what the counterfactuals re-run with one site exact."""
    torch = _torch()
    model.zero_grad()
    loss = model(x, y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= PROBE_LR * p.grad
    return float(loss.detach()), float(model(x, y).detach())


def _attribute(args, setting, model, x, y, step: int) -> dict:
    """One step's attribution on a copy of the model, probed on ``x, y`` (the step's ``probe_batch``): stages,
    first-order, counterfactual for the top sites.  A probe batch larger than the training batch makes its
    weight-gradient GEMMs sum more tokens (K = sequences x context) than the training step's."""
    import copy

    from ..torch.attribution import counterfactual

    torch = _torch()
    probe = copy.deepcopy(model)
    run = _emulation(setting, attribution=True, device=args.device)

    def one_step():
        return probe_step(probe, x, y)

    start, rng, counter = copy.deepcopy(probe.state_dict()), torch.get_rng_state(), run.mode.counter
    with run:
        one_step()
    probe.load_state_dict(start)  # the counterfactuals start where the attributed step did, not after its update
    torch.set_rng_state(rng)
    run.mode.counter = counter
    table = run.attribution(lr=PROBE_LR)
    top = [(r.site, r.phase) for r in table if r.first_order is not None][: args.top]
    worst_input = sorted((r for r in table if r.phase == "input-gradient"), key=lambda r: -r.total.as_dict()["rms_rel"])
    top += [(r.site, r.phase) for r in worst_input[:1]]
    counterfactual(run, one_step, top, state=[probe], noise=getattr(args, "noise", 0), lr=PROBE_LR)
    return dict(kind="attribution", step=step, setting="FP8 fast accumulation", top=args.top, sites=[
        r.as_dict() for r in run.attribution(lr=PROBE_LR)])


def _summarise(rows: list[dict]) -> None:
    """Per curve: mean |loss - reference| over the last quarter of the steps; per phase: summed |first-order|."""
    curves = {r["setting"]: r["losses"] for r in rows if r["kind"] == "curve"}
    ref = curves.get("float32 reference")
    for r in rows:
        if r["kind"] == "curve" and ref is not None:
            tail = max(1, len(ref) // 4)
            r["final_loss"] = float(np.mean(r["losses"][-tail:]))
            r["gap_vs_reference"] = float(np.mean(np.abs(np.subtract(r["losses"], ref)[-tail:])))
        if r["kind"] == "attribution":
            by_phase = {}
            for s in r["sites"]:
                if s["first_order"] is not None:
                    by_phase[s["phase"]] = by_phase.get(s["phase"], 0.0) + abs(s["first_order"])
            r["first_order_by_phase"] = by_phase
            both = [s for s in r["sites"] if s["first_order"] is not None and s["counterfactual"] is not None]
            ranked = [s for s in r["sites"] if s["first_order"] is not None][:r["top"]]  # the table's order
            r["sign_agreement"] = _agreement(both)
            r["sign_agreement_top"] = _agreement([s for s in ranked if s["counterfactual"] is not None])
            r["sign_agreement_resolved"] = _agreement([s for s in both if _resolved(s)])


def _resolved(site: dict) -> bool:
    """The counterfactual stands clear of its noise: more than twice the RMS miss of its sign-flip probes."""
    noise = site.get("counterfactual_noise")
    return noise is not None and abs(site["counterfactual"]) > 2 * noise


def _agreement(sites: list[dict]) -> list[int]:
    """[sites whose first-order and counterfactual have the same sign, sites]."""
    return [int(sum(np.sign(s["first_order"]) == np.sign(s["counterfactual"]) for s in sites)), len(sites)]


def render(rows: list[dict], args) -> str:
    cfg = rows[0]
    probe = cfg.get("attribution_batch", cfg["batch"])  # JSON written before --attribution-batch: the batch
    probed = f" (attributed steps: {probe})" if probe != cfg["batch"] else ""
    lines = [f"byte-level GPT: {cfg['layers']} blocks, width {cfg['width']}, context {cfg['context']}, batch "
             f"{cfg['batch']}{probed}, {cfg['steps']} AdamW steps (lr {cfg['lr']}), seed {cfg['seed']}; corpus: Python "
             f"{cfg['python']} stdlib source, sha256 {cfg['corpus_sha256'][:12]}; torch {cfg['torch']}",
             f"{'setting':<26} {'final loss':>10} {'|gap| vs fp32':>13}"]
    for r in rows:
        if r["kind"] == "curve":
            lines.append(f"{r['setting']:<26} {r.get('final_loss', float('nan')):10.5f} "
                         f"{r.get('gap_vs_reference', float('nan')):13.5f}")
    from ..torch.attribution import AttributionTable

    for r in rows:
        if r["kind"] != "attribution":
            continue
        lines.append(f"\nattribution, {r['setting']}, step {r['step']} (first-order and counterfactual: loss change "
                     f"with the site exact; backward sites after one SGD step of lr {PROBE_LR})")
        table = AttributionTable(_row(s) for s in r["sites"])
        lines.append(str(table))
        lines.append("summed |first-order| by phase: " + ", ".join(f"{k} {v:.2e}" for k, v in
                                                                   r["first_order_by_phase"].items()))
        (agree, n), (top_agree, top_n) = r["sign_agreement"], r["sign_agreement_top"]
        extra = f", {agree} of {n} with the input-gradient site of largest error" if n > top_n else ""
        lines.append(f"first-order and counterfactual agree in sign on {top_agree} of the {top_n} top sites by "
                     f"first-order{extra} (a counterfactual is one sample: it also holds the re-rounding of every "
                     "later site, docs/attribution.md)")
        if "sign_agreement_resolved" in r:
            res_agree, res_n = r["sign_agreement_resolved"]
            lines.append(f"of the sites compared, {res_n} have a counterfactual above twice its noise (the RMS miss "
                         f"of its sign-flip probes); the two agree in sign on {res_agree} of them")
    return "\n".join(lines)


def _row(d: dict):
    """A table row back from its JSON form (RMS values restored as one-sample statistics; JSON written before the
    conversion stage shows "-" in its column)."""
    from ..torch.attribution import SiteAttribution

    return SiteAttribution.from_dict(d)


def plot(rows: list[dict], path: str) -> str:
    """The loss curves, their gap to the float32 reference and, when the run attributed a step, the last
    attributed step's sites: first-order estimate beside the counterfactual, the top 8 by |first-order|."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = [r for r in rows if r["kind"] == "curve"]
    attributions = [r for r in rows if r["kind"] == "attribution"]
    ref = next((r["losses"] for r in curves if r["setting"] == "float32 reference"), None)
    fig, axes = plt.subplots(1, 3 if attributions else 2, figsize=(18 if attributions else 12, 4.5))
    left, right = axes[0], axes[1]
    for r in curves:
        left.plot(r["losses"], label=r["setting"], lw=1)
        if ref is not None and r["setting"] != "float32 reference":
            right.plot(np.subtract(r["losses"], ref), label=r["setting"], lw=1)
    left.set(xlabel="step", ylabel="training loss (nats/byte)", title="loss curves")
    right.set(xlabel="step", ylabel="loss - float32 reference", title="against the reference")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    if attributions:
        _plot_sites(axes[2], attributions[-1])
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _plot_sites(ax, attribution: dict, top: int = 8) -> None:
    """Horizontal bars per site: the first-order estimate and, where measured, the counterfactual with twice its
    noise as an error bar (a bar whose error bar crosses zero does not resolve the site's sign)."""
    sites = sorted((s for s in attribution["sites"] if s["first_order"] is not None),
                   key=lambda s: -abs(s["first_order"]))[:top][::-1]
    y = np.arange(len(sites))
    ax.barh(y + 0.2, [s["first_order"] for s in sites], height=0.4, label="first-order (approximation)")
    measured = [s["counterfactual"] if s["counterfactual"] is not None else np.nan for s in sites]
    noise = [2 * s["counterfactual_noise"] if s.get("counterfactual_noise") is not None else np.nan for s in sites]
    ax.barh(y - 0.2, measured, height=0.4, xerr=noise, capsize=2,
            label="counterfactual (measured; bar: twice its noise)")
    ax.set_yticks(y, [f"{s['site'].removeprefix('Model.')} ({s['phase']})" for s in sites], fontsize=7)
    ax.axvline(0, color="k", lw=0.5)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    ax.set(xlabel="loss change with the site exact",
           title=f"{attribution['setting']}, step {attribution['step']}: top sites")
    ax.legend(fontsize=7)
