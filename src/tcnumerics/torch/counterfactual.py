"""Counterfactual loss effects of attributed sites: re-run a step with one site exact, every other site as
emulated, from the same state -- and how far one such sample can be trusted (``tcnumerics.torch.attribution``;
docs/attribution.md, "Loss effect").

**Noise.**  A counterfactual is one sample: making a site exact also moves every later site's inputs, and with
per-tensor scales that re-draws their roundings.  ``counterfactual(..., noise=n)`` measures how far a sample
strays from its linear estimate at the same error size: ``n`` re-runs with the site's output moved by its own
error with random signs, ``y - r * e`` (``r = +-1`` per element, seeded; ``r = 1`` everywhere is the
counterfactual itself), each against its own first-order value at the emulated point (forward: ``-<dloss/dy,
r * e>``, dloss/dy kept by one more all-emulated re-run; weight-gradient: ``lr * <y, r * e>``).  The RMS of
(measured - first-order) over the ``n`` probes is the site's ``counterfactual_noise``: the curvature and the
re-drawn roundings one sample holds.  A counterfactual
smaller than about twice it does not resolve the site's sign.  Input-gradient sites are not probed (their
first-order value needs one more backward pass per call and probe), nor sites with their own rule (``set_site``).

>>> flip = SignFlip(seed=1, lr=None)
>>> flip.signs((2, 3), np).tolist()
[[-1.0, 1.0, 1.0], [1.0, -1.0, -1.0]]
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import torch

from .. import arrays
from ..plan.interpret import convert
from . import _tensors
from ._tensors import format_name
from .attribution_table import NOISE_METHOD

__all__ = ["counterfactual", "SignFlip", "GradientCapture", "NOISE_METHOD"]


class GradientCapture:
    """A site rule for ``Recorder.execute``: computed as emulated, with dloss/dy of each forward call kept in call
    order (float64 tensors where the call ran; None where no backward pass reached it) -- the gradient at the
    emulated point that the sign-flip probes' first-order values take.  ``complete`` is False where a call's
    output could not be hooked (a reshaped result)."""

    def __init__(self):
        self.gradients: list = []
        self.complete = True

    def slot(self):
        """The hook target of the next forward call: its gradient, summed over the backward passes."""
        i = len(self.gradients)
        self.gradients.append(None)

        def sink(grad):
            if grad is not None:
                g = grad.detach().to(torch.float64)
                self.gradients[i] = g if self.gradients[i] is None else self.gradients[i] + g
        return sink

    def skip(self) -> None:
        self.gradients.append(None)
        self.complete = False


class SignFlip:
    """A site rule for ``Recorder.execute``: the emulated result moved by its error with random signs (a
    counterfactual's noise probe, module docstring).  ``first_order`` collects the probe's linear effect at the
    emulated point (forward calls: the ``gradients`` a ``GradientCapture`` re-run kept); ``complete`` is False
    where it cannot be formed."""

    def __init__(self, seed: int, lr: float | None, gradients: list | None = None):
        self.seed, self.lr, self.gradients = seed, lr, gradients
        self.first_order = 0.0
        self.complete = True
        self._calls = 0
        self._forward = 0

    def signs(self, shape: tuple, xp):
        """The next call's r: +-1.0 per element (numpy's generator on the host, seeded by (seed, call))."""
        r = np.random.default_rng([self.seed, self._calls]).integers(0, 2, size=shape) * 2.0 - 1.0
        self._calls += 1
        return r if xp is np else xp.asarray(r)

    def move(self, call, result, exact, phase: str):
        """``result - r * e`` in the call's output dtype, ``e = result - exact``; its linear effect added."""
        y, x = arrays.float64(result), arrays.float64(exact)
        xp = arrays.namespace(y)
        e = y - x
        moved = self.signs(y.shape, xp) * xp.where(xp.isfinite(e), e, 0.0)  # a non-finite error moves nothing
        if phase == "forward":
            self._forward_effect(moved)
        elif phase == "weight-gradient" and self.lr is not None:
            self.first_order += self.lr * float((xp.where(xp.isfinite(y), y, 0.0) * moved).sum())
        else:
            self.complete = False
        return convert(y - moved, format_name(call.out_dtype))

    def _forward_effect(self, moved) -> None:
        """-<dloss/dy, r * e> of the next forward call, dloss/dy as the capture run kept it."""
        i, self._forward = self._forward, self._forward + 1
        if self.gradients is None or i >= len(self.gradients):
            self.complete = False
            return
        g = self.gradients[i]
        if g is not None:  # None: no backward pass reached this output (no effect on the loss to first order)
            self.first_order -= _tensors.inner(g, moved)


def counterfactual(emulation, step, sites, *, state=(), noise: int = 0, lr: float | None = None) -> dict:
    """{(name, phase): loss with that site exact - loss with every site emulated} for ``sites``.

    ``step()`` runs one step and returns its loss, or (the step's loss, the loss after its update): forward sites
    are judged by the first, backward sites by the second;
    it runs inside ``emulation`` once as emulated and once per site with that site exact, each time from the same
    ``state`` (objects with ``state_dict``/``load_state_dict``: models, optimizers) and torch's RNG state.  The
    re-runs are not measured (the table keeps the first run's errors); the results go into the table's
    ``counterfactual`` column.  ``state`` must be as it was *before* the attributed run (a step that updated the
    weights has moved them): the re-run with every site emulated is checked call by call against the attributed
    run's results, and a ``RuntimeWarning`` says where it departs (its counterfactuals are then of another point
    than the table's errors and first-order estimates).

    ``noise``: that many sign-flipped probes per forward or weight-gradient site (module docstring; ``lr``: the
    step's SGD learning rate, for weight-gradient sites), their RMS miss into the table's ``counterfactual_noise``
    and each probe's (measured, first-order) pair into ``counterfactual_noise_samples``.
    """
    rec = emulation._recorder("counterfactual")
    saved = [copy.deepcopy(obj.state_dict()) for obj in state]
    rng = _rng_state()
    counter = emulation.mode.counter  # the call index seeds stochastic rounding: every re-run starts from it
    own = dict(rec.overrides)  # the sites' own rules (set_site) stay; one site at a time becomes exact

    def run(site, rule="exact", rules=None):
        for obj, st in zip(state, saved):
            obj.load_state_dict(copy.deepcopy(st))
        _set_rng_state(rng)
        emulation.mode.counter = counter
        rec.overrides = {**own, **(rules or {})}
        if site is not None:
            rec.overrides[f"{site[0]}:{site[1]}"] = rule
        rec.measure = False
        try:
            with emulation:
                value = step()
            return (float(value), float(value)) if np.ndim(value) == 0 else (float(value[0]), float(value[1]))
        finally:
            rec.measure, rec.overrides = True, dict(own)

    measured = list(rec.digests)
    rec.digests = []
    base = run(None)
    _check_reproduced(measured, rec.digests)
    captures = _capture(run, [tuple(s) for s in sites if s[1] == "forward"]) if noise else {}
    out = {}
    for site in map(tuple, sites):
        which = 0 if site[1] == "forward" else 1
        out[site] = run(site)[which] - base[which]
        if noise and not ({site[0], f"{site[0]}:{site[1]}"} & own.keys()):  # probes move the emulation's result
            rec.noise[site] = _noise(lambda rule: run(site, rule)[which] - base[which], site, noise, lr,
                                     captures.get(site))
    rec.digests = measured  # the attributed run's (the re-runs' are not kept)
    emulation.mode.counter = counter
    for obj, st in zip(state, saved):
        obj.load_state_dict(st)
    _set_rng_state(rng)
    rec.counterfactuals.update(out)
    return out


def _rng_state() -> tuple:
    """torch's CPU generator state and, where CUDA is in use, every GPU's (dropout on CUDA tensors draws there)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _check_reproduced(measured: list, rerun: list) -> None:
    """Warn where the counterfactual's all-emulated re-run departs from the attributed run (same calls, same bits)."""
    for i, (m, r) in enumerate(zip(measured, rerun)):
        if m != r:
            warnings.warn(f"counterfactual: the re-run of step() from state differs from the attributed run at GEMM "
                          f"call {i} (was the state saved after the step updated it?): its counterfactuals are not "
                          f"of the errors and first-order estimates in the table", RuntimeWarning, stacklevel=3)
            return


def _capture(run, sites: list) -> dict:
    """{site: GradientCapture} from one more all-emulated re-run that keeps the forward sites' output gradients."""
    captures = {site: GradientCapture() for site in sites}
    if captures:
        run(None, rules={f"{k[0]}:{k[1]}": c for k, c in captures.items()})
    return captures


def _noise(effect, site: tuple, probes: int, lr: float | None, capture: GradientCapture | None) -> dict | None:
    """{"rms": RMS of (measured - first-order), "samples": [[measured, first-order], ...]} of ``probes`` sign-flip
    re-runs of a site (``effect(rule)``: the loss change with the site on ``rule``), or None where it is not
    measured (an input-gradient site, an output not hooked, no ``lr`` for a weight-gradient site)."""
    if site[1] not in ("forward", "weight-gradient") or (capture is not None and not capture.complete):
        return None
    samples = []
    for seed in range(1, probes + 1):
        flip = SignFlip(seed, lr, None if capture is None else capture.gradients)
        measured = effect(flip)
        if not flip.complete:
            return None
        samples.append([measured, flip.first_order])
    rms = math.sqrt(sum((m - f) ** 2 for m, f in samples) / len(samples))
    return dict(rms=rms, samples=samples)
