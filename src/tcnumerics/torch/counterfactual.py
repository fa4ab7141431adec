"""Counterfactual loss effects of attributed sites: re-run a step with one site exact, every other site as
emulated, from the same state (``tcnumerics.torch.attribution``; docs/attribution.md, "Loss effect")."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import torch

__all__ = ["counterfactual"]


def counterfactual(emulation, step, sites, *, state=()) -> dict:
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
    """
    rec = emulation._recorder("counterfactual")
    saved = [copy.deepcopy(obj.state_dict()) for obj in state]
    rng = _rng_state()
    counter = emulation.mode.counter  # the call index seeds stochastic rounding: every re-run starts from it
    rules = dict(rec.overrides)  # the sites' own rules (set_site) stay; one site at a time becomes exact

    def run(override):
        for obj, st in zip(state, saved):
            obj.load_state_dict(copy.deepcopy(st))
        _set_rng_state(rng)
        emulation.mode.counter = counter
        rec.overrides = dict(rules)
        if override is not None:
            rec.overrides[f"{override[0]}:{override[1]}"] = "exact"
        rec.measure = False
        try:
            with emulation:
                value = step()
            return (float(value), float(value)) if np.ndim(value) == 0 else (float(value[0]), float(value[1]))
        finally:
            rec.measure, rec.overrides = True, dict(rules)

    measured = list(rec.digests)
    rec.digests = []
    base = run(None)
    _check_reproduced(measured, rec.digests)
    rec.digests = measured
    out = {}
    for site in sites:
        which = 0 if site[1] == "forward" else 1
        out[tuple(site)] = run(tuple(site))[which] - base[which]
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
