"""First-order estimate against counterfactual on every input-gradient site of the fp8-training study's GPT.

docs/attribution.md quotes what this prints.  The study's model, batches and FP8 fast-accumulation setting
(``tcnumerics reproduce fp8-training``'s defaults: 2 blocks, width 64, context 32, batch 8, seed 123456), trained
natively in FP8 for ``--step`` steps, then one step attributed as the study does (a copy, SGD probe of lr 0.05) and
the counterfactual of *every* input-gradient site, in two models: (1) all-FP8, as the study; (2) that site the only
FP8 one, every other site exact (the two then differ by the loss's curvature only, not by re-drawn roundings);
and the all-FP8 counterfactual's noise floor (the post-step loss under a change of the weights too small to matter).

    PYTHONPATH=src python lab/attribution_input_gradients.py [--step 0] [--floor]
"""

from __future__ import annotations

import argparse
import copy

import numpy as np


def main() -> None:
    import torch

    import tcnumerics.torch as tct
    from tcnumerics.experiments import fp8_training as study

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=0, help="the step attributed (default 0)")
    parser.add_argument("--floor", action="store_true", help="print only the all-FP8 counterfactual's noise floor")
    args = parser.parse_args()
    seed, layers, width, heads, context, batch = 123456, 2, 64, 2, 32, 8
    codes, _ = study.corpus(1 << 20)
    starts = np.random.default_rng(seed).integers(0, len(codes) - context - 1, size=(args.step + 1, batch))
    torch.manual_seed(seed)
    model = study.GPT(layers, width, heads, context)
    setting = dict(instruction=study.FP8, scaling="tensor")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(args.step):
        x, y = study._batch(codes, starts[step], context, "cpu")
        with tct.emulate(**setting):
            loss = model(x, y)
            opt.zero_grad()
            loss.backward()
        opt.step()
    x, y = study._batch(codes, starts[args.step], context, "cpu")
    if args.floor:
        return _print_floor(model, x, y, setting)
    print(f"torch {torch.__version__}; the study's GPT at step {args.step}, FP8 fast accumulation, SGD probe lr "
          f"{study.PROBE_LR}; first-order / counterfactual of each input-gradient site")
    sites, first = _attributed(model, x, y, setting, None)
    print(f"{'site':<28} {'all-FP8 first-order':>20} {'counterf.':>10} {'ratio':>6}   "
          f"{'alone first-order':>18} {'counterf.':>10} {'ratio':>6}")
    agree = [0, 0]
    for site in sites:
        alone_sites, alone = _attributed(model, x, y, setting, site)
        a, b = first[site], alone[site]
        agree[0] += np.sign(a[0]) == np.sign(a[1])
        agree[1] += np.sign(b[0]) == np.sign(b[1])
        print(f"{site[0][-28:]:<28} {a[0]:+20.3e} {a[1]:+10.3e} {a[0] / a[1]:6.2f}   "
              f"{b[0]:+18.3e} {b[1]:+10.3e} {b[0] / b[1]:6.2f}   {a[2]}")
    print(f"sign agreement: all-FP8 {agree[0]} of {len(sites)}, alone {agree[1]} of {len(sites)}")
    _print_floor(model, x, y, setting)


def _print_floor(model, x, y, setting) -> None:
    change, gain = _floor(model, x, y, setting)
    print(f"noise floor: the all-FP8 loss after the step with the probe's lr times 1 + 1e-3 (no site changed) "
          f"minus with lr: {change:+.3e}; its first-order part, 1e-3 times the step's change of the loss: "
          f"{1e-3 * gain:+.3e}")


def _floor(model, x, y, setting) -> tuple[float, float]:
    """(the all-FP8 post-step loss under lr * (1 + 1e-3) minus under lr, the step's change of the loss): how much a
    small change of the weights moves it once every later per-tensor scale and rounding is re-drawn (the
    one-sample noise of a counterfactual), against what the change does to first order."""
    import torch

    import tcnumerics.torch as tct
    from tcnumerics.experiments.fp8_training import PROBE_LR

    after = []
    for lr in (PROBE_LR, PROBE_LR * (1 + 1e-3)):
        probe = copy.deepcopy(model)
        with tct.emulate(**setting):
            before = probe(x, y)
            before.backward()
            with torch.no_grad():
                for p in probe.parameters():
                    p -= lr * p.grad
            after.append(float(probe(x, y).detach()))
    return after[1] - after[0], after[0] - float(before.detach())


def _attributed(model, x, y, setting, alone):
    """({input-gradient site: (first-order, counterfactual, note)}) of one attributed step of a copy of model;
    ``alone``: that site the only emulated one."""
    import torch

    import tcnumerics.torch as tct
    from tcnumerics.experiments.fp8_training import PROBE_LR, probe_step
    from tcnumerics.torch.attribution import counterfactual

    probe = copy.deepcopy(model)
    run = tct.emulate(**setting, attribution=True)
    if alone is not None:
        run.set_site("Global", "exact")
        for name, _ in probe.named_modules():
            run.set_site(f"Model.{name}" if name else "Model", "exact")
        run.set_site(f"{alone[0]}:{alone[1]}", tct.emulate(**setting))

    def one_step():
        return probe_step(probe, x, y)

    start, rng, counter = copy.deepcopy(probe.state_dict()), torch.get_rng_state(), run.mode.counter
    with run:
        one_step()
    probe.load_state_dict(start)
    torch.set_rng_state(rng)
    run.mode.counter = counter
    table = run.attribution(lr=PROBE_LR)
    sites = [(r.site, r.phase) for r in table if r.phase == "input-gradient"]
    if alone is not None:
        sites = [alone]
    effects = counterfactual(run, one_step, sites, state=[probe])
    rows = {(r.site, r.phase): r for r in run.attribution(lr=PROBE_LR)}
    out = {s: (rows[s].first_order, effects[s], rows[s].first_order_note) for s in sites}
    return sorted(sites, key=lambda s: -abs(out[s][0] or 0.0)), out


if __name__ == "__main__":
    main()
