"""Error attribution inside a model (tcnumerics.torch.attribution): stages, site rules, loss effects.

The tests taking ``device`` run three times: on CPU tensors; on CUDA tensors (skipped without a GPU), where no
CUDA tensor may be copied to the host while the GPU engine runs; and on the strict fake device (``fake_cupy``, CPU
tensors), where every array the measurement computes with is a "device" array that refuses to mix with host arrays
or to turn into one implicitly -- the CUDA code path, exercised on machines without a GPU.
"""

import copy
import json
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tcnumerics.torch as tct  # noqa: E402
from tcnumerics.experiments.fp8_training import accumulator_unit  # noqa: E402
from tcnumerics.torch.attribution import STAGES, counterfactual  # noqa: E402
from tcnumerics import arrays  # noqa: E402
from tcnumerics.formats import get_format  # noqa: E402
from tcnumerics.torch import _tensors, devices  # noqa: E402
from tcnumerics.torch import mode as mode_module  # noqa: E402
from tcnumerics.torch.backends import LibraryBackend, UnitBackend  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"


def _row(table, site, phase="forward"):
    return next(r for r in table if (r.site, r.phase) == (site, phase))


@pytest.fixture(params=["cpu", "cuda", "fake-device"])
def device(request, monkeypatch):
    """Where the attributed model runs (see the module docstring); tensors are made on the CPU and moved there."""
    if request.param == "cpu":
        return torch.device("cpu")
    if request.param == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device for torch here")
        if devices.gpu_engine_usable():  # the GPU engine runs: no CUDA tensor may reach the host (reductions only)
            def refuse(t):
                raise AssertionError(f"a CUDA tensor {tuple(t.shape)} was copied to the host")
            monkeypatch.setattr(_tensors, "_cpu_copy", refuse)
        return torch.device("cuda")
    _fake_device(monkeypatch)
    return torch.device("cpu")


def _fake_device(monkeypatch):
    """Every value the measurement reads -- operands, results, gradients -- as a strict fake device array."""
    fake = pytest.importorskip("fake_cupy").install(monkeypatch)
    values, to_tensor = _tensors.float64_values, _tensors.to_tensor

    def on_device(result):
        result = arrays.to_host(result)
        if result.dtype.kind == "f" and result.dtype.itemsize in (4, 8):
            return fake.asarray(result)
        fmt = get_format(result.dtype.name)
        return arrays.DeviceValues(fake.asarray(fmt.bits_of(result)), fmt)

    def host(result, device):
        return to_tensor(arrays.to_host(result), device)

    monkeypatch.setattr(_tensors, "float64_values", lambda t, device: fake.asarray(values(t, False)))
    monkeypatch.setattr(_tensors, "to_tensor", host)
    monkeypatch.setattr(mode_module, "to_tensor", host)
    for backend in (UnitBackend, LibraryBackend):
        def execute(self, call, *, _execute=backend.execute, **options):
            result, info = _execute(self, call, **options)
            return on_device(result), info
        monkeypatch.setattr(backend, "execute", execute)


def test_stages_are_exactly_zero_where_exact(device):
    # BF16 operands on a BF16 unit: no quantisation; small integers: every sum exact, FP32 output exact
    a = torch.randint(-4, 5, (8, 64)).to(torch.bfloat16).float().to(device)
    b = torch.randint(-4, 5, (64, 8)).to(torch.bfloat16).float()
    lin = torch.nn.Linear(64, 8, bias=False)
    with torch.no_grad():
        lin.weight.copy_(b.T)
    lin.to(device)
    with tct.emulate(instruction=BF16, attribution=True) as run:
        lin(a)
    row = _row(run.attribution(), "Linear")
    assert row.split == "stages" and row.calls == 1
    assert STAGES == ("quantisation", "accumulation", "ordering", "epilogue", "conversion")
    for stage in STAGES:
        assert row.stages[stage].max_rel == 0.0, stage
    assert row.total.max_rel == 0.0


@pytest.mark.parametrize("mode", ["unit", "library"])
def test_a_bf16_output_shows_its_conversion_apart_from_the_epilogue(device, mode):
    # BF16 operands (nothing to quantise), no bias, C or alpha: the FP32 epilogue computes nothing (exactly 0),
    # the conversion to BF16 rounds (not 0), and the five stages add up to the total
    torch.manual_seed(7)
    lin = torch.nn.Linear(64, 16, bias=False).bfloat16().to(device)
    x = torch.randn(8, 64).bfloat16().to(device)
    with _emulation(mode) as run:
        lin(x)
    row = _row(run.attribution(), "Linear")
    assert row.split == "stages"
    assert row.stages["quantisation"].max_rel == 0.0 and row.stages["epilogue"].max_rel == 0.0
    assert row.stages["conversion"].max_rel > 0 and row.stages["accumulation"].max_rel > 0
    assert row.total.max_rel <= sum(v.max_rel for v in row.stages.values()) * (1 + 1e-12)


def _emulation(mode: str, attribution: bool = True):
    if mode == "unit":
        return tct.emulate(instruction=BF16, attribution=attribution)
    return tct.emulate("hopper", attribution=attribution)


@pytest.mark.parametrize("mode", ["unit", "library"])
def test_an_fp32_bias_is_the_epilogue_and_the_conversion_its_rounding(device, mode):
    # the value before the conversion, recorded apart (the plan interpreter's own facility, no attribution): the
    # result is its RNE conversion to BF16, the conversion stage is exactly that rounding, the epilogue the bias's
    from tcnumerics.plan import interpret

    torch.manual_seed(8)
    lin = torch.nn.Linear(64, 16).bfloat16()
    x = torch.randn(8, 64).bfloat16()
    with interpret.before_conversion() as seen, _emulation(mode, attribution=False):
        lin(x)
    pre = arrays.to_host(seen[-1]).reshape(8, 16)
    lin, x = lin.to(device), x.to(device)
    with _emulation(mode) as run:
        out = lin(x)
    out = out.detach().cpu().double().numpy()
    assert np.array_equal(out, get_format("bf16").round(pre))                 # the output is RNE(pre)
    row = _row(run.attribution(), "Linear")
    mag = abs(x.cpu().double().numpy()) @ abs(lin.weight.detach().cpu().double().numpy().T)
    assert row.stages["conversion"].max_rel == np.max(abs(out - pre) / mag)
    assert row.stages["epilogue"].max_rel > 0                                  # the bias added in FP32
    assert row.total.max_rel <= sum(v.max_rel for v in row.stages.values()) * (1 + 1e-12)
    if mode == "unit":  # the unit's accumulator, then + bias in FP32: the epilogue stage is that rounding exactly
        from tcnumerics.gemm import gemm
        acc = gemm(x.cpu().float().numpy(), lin.weight.detach().cpu().float().numpy().T, instruction=BF16)
        exact = np.float64(acc) + lin.bias.detach().cpu().double().numpy()
        assert np.array_equal(pre, get_format("fp32").round(exact))
        assert row.stages["epilogue"].max_rel == np.max(abs(pre - exact) / mag)


def test_each_stage_appears_where_it_acts(device):
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 16).to(device)
    x = torch.randn(8, 256).to(device)
    with tct.emulate(instruction=FP8, scaling="tensor", promote_every=64, attribution=True) as run:
        lin(x).bfloat16()
    row = _row(run.attribution(), "Linear")
    s = {k: v.as_dict()["rms_rel"] for k, v in row.stages.items()}
    assert s["quantisation"] > 1e-3          # E4M3: 3 mantissa bits
    assert 0 < s["accumulation"] < s["quantisation"]
    assert s["ordering"] > 0                 # promotion every 64 changes the chain
    assert s["epilogue"] > 0                 # the bias addition in FP32
    assert s["conversion"] == 0              # an FP32 output of an FP32 epilogue: no conversion
    # the five stages add up to the total (differences of a telescoping sequence)
    assert row.total.max_rel <= sum(v.max_rel for v in row.stages.values()) * (1 + 1e-12)


def _three_layers(device="cpu"):
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 4)).to(device)


def _outputs(net, run, x):
    seen = {}
    hooks = [net[i].register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(i, o.detach().clone()))
             for i in (0, 2, 4)]
    with run:
        net(x).sum().backward()
    for h in hooks:
        h.remove()
    return seen


def test_one_site_exact_keeps_earlier_sites_and_other_rules(device):
    net, x = _three_layers(device), torch.randn(16, 64).to(device)
    base_run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)
    base = _outputs(net, base_run, x)
    net.zero_grad()
    exact_run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)
    exact_run.set_site("Sequential.2:forward", "exact")
    changed = _outputs(net, exact_run, x)
    assert torch.equal(base[0], changed[0])                      # before the exact site: bit-identical
    assert not torch.equal(base[2], changed[2])                  # the site itself
    rules = {(r.site, r.phase): r.rule for r in exact_run.attribution()}
    before = {(r.site, r.phase): r.rule for r in base_run.attribution()}
    assert rules.pop(("Sequential.2", "forward")) == "exact (float64)"
    before.pop(("Sequential.2", "forward"))
    assert rules == before                                       # every other site keeps its rule


def test_emulated_bits_are_the_cpus(device):
    # the emulated GEMMs are the same bits on every device; torch's own ops (tanh on CUDA) need not be, so only the
    # first site -- the same inputs everywhere -- is compared (its output, attribution on, backward run too)
    def first_output(where):
        net, x = _three_layers(where), torch.randn(16, 64, generator=torch.Generator().manual_seed(6)).to(where)
        return _outputs(net, tct.emulate(instruction=FP8, scaling="tensor", attribution=True), x)[0].cpu()

    assert torch.equal(first_output(device), first_output("cpu"))


def _bad_layer_run(device="cpu"):
    net, x = _three_layers(device), torch.randn(32, 64).to(device)
    run = tct.emulate(instruction=FP8, scaling="tensor", promote_every=64, attribution=True)
    run.set_site("Sequential.2", tct.emulate(unit=accumulator_unit(4), scaling="tensor"))

    def step():
        net.zero_grad()
        return net(x).square().mean()

    with run:
        step().backward()
    return run, net, step


def test_bad_unit_ranks_first_by_both_estimates_and_they_agree(device):
    run, net, step = _bad_layer_run(device)
    table = run.attribution()
    assert (table[0].site, table[0].phase) == ("Sequential.2", "forward")     # first-order ranking
    forward = [(r.site, r.phase) for r in table if r.phase == "forward"]
    effects = counterfactual(run, lambda: float(step().detach()), forward, state=[net])
    worst = max(effects, key=lambda k: abs(effects[k]))
    assert worst == ("Sequential.2", "forward")                                # counterfactual ranking
    top = _row(run.attribution(), "Sequential.2")
    assert top.counterfactual == effects[worst]
    assert np.sign(top.first_order) == np.sign(top.counterfactual)
    assert 0.1 < top.first_order / top.counterfactual < 10


def test_library_mode_and_the_table_print(device):
    torch.manual_seed(2)
    net = torch.nn.Linear(64, 16).bfloat16().to(device)
    x = torch.randn(8, 64).bfloat16().to(device)
    with tct.emulate("hopper", attribution=True) as run:
        net(x).float().sum().backward()
    table = run.attribution(lr=0.1)
    assert {r.phase for r in table} == {"forward", "weight-gradient"}
    row = _row(table, "Linear")
    assert row.stages["quantisation"].max_rel == 0.0                          # BF16 tensors: nothing to round
    assert row.total.max_rel > 0
    text = str(table)
    assert "Linear" in text and "weight-gradient" in text
    assert '"site": "Linear"' in table.to_json()
    assert row.split == "stages"                                               # the plan's stages, not the total
    assert row.total.max_rel <= sum(v.max_rel for v in row.stages.values()) * (1 + 1e-12)


def test_attribution_needs_the_option():
    with pytest.raises(ValueError, match="attribution=True"):
        tct.emulate(instruction=BF16).attribution()


def test_study_rejects_bad_options_before_training(tmp_path):
    from tcnumerics.experiments.cli import build_parser, load_experiment

    module = load_experiment("fp8-training")
    bad = [(["--heads", "3"], "--heads"), (["--only", "nope"], "--only"), (["--steps", "0"], "--steps"),
           (["--device", "nope"], "--device"), (["--noise", "-1"], "--noise"),
           (["--attribution-batch", "0"], "--attribution-batch: must be >= 1")]
    if not torch.cuda.is_available():
        bad.append((["--device", "cuda"], "--device: 'cuda' asked for"))
    for argv, text in bad:
        args = build_parser("fp8-training", module).parse_args(argv + ["--quiet"])
        with pytest.raises(ValueError, match=text):
            module.run(args)


def test_study_defaults_follow_the_device_and_flags_win():
    """``--device cuda`` runs the larger configuration; a flag given keeps its value on either device."""
    from tcnumerics.experiments import fp8_training
    from tcnumerics.experiments.cli import build_parser, load_experiment

    parser = build_parser("fp8-training", load_experiment("fp8-training"))
    cpu = fp8_training.apply_defaults(parser.parse_args(["--width", "48"]), "cpu")
    cuda = fp8_training.apply_defaults(parser.parse_args(["--width", "48", "--device", "cuda"]), "cuda")
    assert (cpu.steps, cpu.batch, cpu.context, cpu.heads, cpu.width) == (30, 8, 32, 2, 48)
    assert (cuda.steps, cuda.batch, cuda.context, cuda.heads, cuda.width) == (80, 32, 128, 4, 48)
    assert (cpu.attribution_batch, cuda.attribution_batch) == (32, 32)           # the CPU's 4 x its batch; cuda's
    wide = fp8_training.apply_defaults(parser.parse_args(["--batch", "48"]), "cpu")
    given = fp8_training.apply_defaults(parser.parse_args(["--attribution-batch", "8"]), "cuda")
    assert (wide.attribution_batch, given.attribution_batch) == (48, 8)          # at least the batch; a flag wins


def test_study_attribution_batch_leaves_the_training_curves_alone():
    """``--attribution-batch``: the attributed step's probe holds more sequences (drawn by a generator of their
    own), the training batches -- so every loss curve -- stay what they were; the JSON's config row says which."""
    from tcnumerics.experiments import fp8_training
    from tcnumerics.experiments.cli import build_parser, load_experiment

    parser = build_parser("fp8-training", load_experiment("fp8-training"))
    argv = ["--steps", "2", "--width", "16", "--batch", "2", "--context", "8", "--attribute-at", "1", "--top", "1",
            "--noise", "0", "--quiet", "--only", "float32 reference", "FP8 fast accumulation", "--attribution-batch"]
    runs = {n: fp8_training.run(parser.parse_args(argv + [str(n)])) for n in (2, 5)}
    for n, rows in runs.items():
        assert rows[0]["attribution_batch"] == n and rows[0]["batch"] == 2
    curves = {n: [r["losses"] for r in rows if r["kind"] == "curve"] for n, rows in runs.items()}
    assert curves[2] == curves[5] and len(curves[2]) == 2
    sites = {n: {(s["site"], s["phase"]): s for s in rows[-1]["sites"]} for n, rows in runs.items()}
    key = ("Model.blocks.0.fc", "weight-gradient")  # K = tokens: the probe's sequences x context
    assert [sites[n][key]["calls_detail"][0]["shape"][2] for n in (2, 5)] == [2 * 8, 5 * 8]
    assert "batch 2 (attributed steps: 5)," in fp8_training.render(runs[5], None).splitlines()[0]
    assert "attributed steps" not in fp8_training.render(runs[2], None).splitlines()[0]


def test_probe_batch_starts_with_the_steps_own_sequences():
    from tcnumerics.experiments.fp8_training import probe_batch

    starts = np.random.default_rng(7).integers(0, 1000, size=(4, 3))
    seed = np.random.SeedSequence(7)
    big, small = probe_batch(seed, starts, 8, 1000), probe_batch(seed, starts, 2, 1000)
    assert big.shape == (4, 8) and (big[:, :3] == starts).all() and (small == starts[:, :2]).all()
    assert (probe_batch(np.random.SeedSequence(7), starts, 8, 1000) == big).all()     # seeded: the same draw


def test_study_units_differ_only_in_fraction_bits():
    from tcnumerics.experiments.fp8_training import FP8
    from tcnumerics.catalog import get_instruction

    base, unit = get_instruction(FP8), accumulator_unit(20)
    assert (unit.k, unit.model.group_size, unit.model.a_format) == (base.k, base.model.group_size, base.model.a_format)
    assert (unit.model.frac_bits, unit.model.output_mantissa_bits) == (20, 20)
    assert accumulator_unit(13).model == base.model        # F = 13 is Hopper's fast accumulation itself


def test_first_order_is_the_counterfactuals_linear_part(device):
    # One FP8 site in an otherwise exact model, a loss linear in the last output: the loss is a smooth function of
    # that site's output, so the first-order estimate and the counterfactual differ only by the curvature term (here
    # tanh's, small).  In an all-FP8 model the counterfactual also holds the re-rounding of every later site's
    # operands (docs/attribution.md), which this test removes on purpose; a flipped sign or a scale error fails it.
    net, x = _three_layers(device), torch.randn(32, 64).to(device)
    run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)
    for other in ("Sequential.0", "Sequential.4"):
        run.set_site(other, "exact")

    def step():
        net.zero_grad()
        return net(x).sum()

    with run:
        step().backward()
    row = _row(run.attribution(), "Sequential.2")
    assert row.first_order_method.startswith("approximation") and row.first_order != 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the re-run reproduces the attributed run: no warning
        effect = counterfactual(run, lambda: float(step().detach()), [("Sequential.2", "forward")], state=[net])
    assert abs(row.first_order / effect[("Sequential.2", "forward")] - 1) < 0.05
    inputs = _row(run.attribution(), "Sequential.2", "input-gradient")
    assert inputs.first_order is None and inputs.first_order_method.startswith("approximation")  # needs lr
    assert _row(run.attribution(lr=0.1), "Sequential.2", "input-gradient").first_order is not None
    assert '"counterfactual_method": "measured' in run.attribution().to_json()


def test_counterfactual_warns_when_the_state_moved_after_the_step():
    net, x = _three_layers(), torch.randn(8, 64)
    run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)

    def step():  # updates the weights: a state saved after it is not the attributed step's
        net.zero_grad()
        loss = net(x).sum()
        loss.backward()
        with torch.no_grad():
            for p in net.parameters():
                p -= 0.1 * p.grad
        return float(loss.detach())

    with run:
        step()
    with pytest.warns(RuntimeWarning, match="differs from the attributed run at GEMM call 0"):
        counterfactual(run, step, [("Sequential.2", "forward")], state=[net])


# --- input-gradient sites: lr * <g, J^T error> ---------------------------------------------------------------------

def _sgd_step(net, x, lr):
    """The step's loss and the loss after one SGD step of ``lr`` (the input-gradient rows' convention)."""
    def step():
        net.zero_grad()
        loss = net(x).square().mean()
        loss.backward()
        with torch.no_grad():
            for p in net.parameters():
                p -= lr * p.grad
        return float(loss.detach()), float(net(x).square().mean().detach())
    return step


def test_bad_unit_at_an_input_gradient_site_first_order_agrees_with_counterfactual(device):
    # F = 4 aligned fraction bits on one input-gradient site (dloss/d input of Sequential.2), every other site exact:
    # its error reaches the loss after the step only through Sequential.0's parameters' gradients (J^T error)
    net, x, lr = _three_layers(device), torch.randn(32, 64).to(device), 0.1
    run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)
    for name in ("Sequential.0", "Sequential.2", "Sequential.4"):
        run.set_site(name, "exact")
    run.set_site("Sequential.2:input-gradient", tct.emulate(unit=accumulator_unit(4), scaling="tensor"))
    start = {k: v.clone() for k, v in net.state_dict().items()}
    step = _sgd_step(net, x, lr)
    with run:
        step()
    net.load_state_dict(start)
    table = run.attribution(lr=lr)
    assert (table[0].site, table[0].phase) == ("Sequential.2", "input-gradient")    # ranks first by first-order
    assert table[0].first_order_method.startswith("approximation: lr * <g, J^T error>")
    site = ("Sequential.2", "input-gradient")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        effect = counterfactual(run, step, [site, ("Sequential.4", "input-gradient")], state=[net])[site]
    fo = _row(run.attribution(lr=lr), *site).first_order
    assert np.sign(fo) == np.sign(effect) != 0
    # measured 0.87 (0.81 at lr = 0.01): the gap is lr * |J^T error|**2, the estimate taking the emulated gradient
    # for the exact one (quadratic in the error, large for F = 4; docs/attribution.md)
    assert 0.7 < fo / effect < 1.3
    assert abs(fo) > 1e3 * max(abs(r.first_order) for r in table[1:])


def test_input_gradient_site_with_no_parameter_before_it_is_exactly_zero():
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    leaf = torch.randn(8, 32, requires_grad=True)
    for x in (leaf, leaf * 2):         # a leaf input, and one computed from it (a graph, no parameter in it)
        run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)
        with run:
            net(x).square().sum().backward()
        first = _row(run.attribution(lr=0.1), "Sequential.0", "input-gradient")
        assert first.total.max_rel > 0                        # the site has an error ...
        assert first.first_order == 0.0                       # ... that reaches no parameter
        assert "no parameter before the site's input" in first.first_order_method
        later = _row(run.attribution(lr=0.1), "Sequential.2", "input-gradient")
        assert later.first_order != 0.0 and "[" not in later.first_order_method


def test_input_gradient_passes_change_no_bits_and_no_other_number(monkeypatch):
    from tcnumerics.torch._input_gradient import InputGradientEffect

    def train(attribution):
        # the first layer one module deeper: a module name left behind by an extra pass would outrank later ones
        torch.manual_seed(4)
        net = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh()),
                                  torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
        x = torch.randn(16, 64)
        run = tct.emulate(instruction=FP8, scaling="tensor", promote_every=32, attribution=attribution)
        with run:
            loss = net(x).square().mean()
            loss.backward()
        bits = [loss.detach().clone()] + [p.grad.clone() for p in net.parameters()]
        return bits, run

    off, run_off = train(False)
    on, run_on = train(True)
    assert all(torch.equal(a, b) for a, b in zip(off, on))              # the emulated step, bit for bit
    assert [(s.op, s.phase, s.count) for s in run_off.report()] == [(s.op, s.phase, s.count) for s in run_on.report()]
    # the extra backward passes touch no other site's numbers (names, stages, forward and weight-gradient columns)
    monkeypatch.setattr(InputGradientEffect, "backward", lambda *args, **kwargs: None)
    without, run_without = train(True)
    assert all(torch.equal(a, b) for a, b in zip(off, without))
    assert run_on.mode.attribution.digests == run_without.mode.attribution.digests

    def numbers(run):
        return {(r.site, r.phase): (r.calls, r.total.as_dict(), r.first_order) for r in run.attribution(lr=0.1)
                if r.phase != "input-gradient"}
    assert numbers(run_on) == numbers(run_without)
    assert all(r.first_order is not None for r in run_on.attribution(lr=0.1) if r.phase == "input-gradient")


class _ColumnMajorMM(torch.nn.Module):
    """``mm`` of a column-major activation: torch computes its gradient as ``w @ grad^T`` and returns the transpose."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(64, 64) / 8)

    def forward(self, h):
        return torch.mm(h.t().contiguous().t(), self.w)


def test_input_gradient_first_order_is_the_change_of_the_parameter_gradients():
    # lr * <g, J^T error> against the same inner product from two runs' parameter gradients (the site on F = 4,
    # then exact; every other site exact): J^T error is g_emulated - g_exact up to float32 rounding.  The site's
    # GEMM is the transposed form (w @ grad^T), so this also checks which operand and which orientation are found.
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), _ColumnMajorMM(), torch.nn.Tanh(),
                              torch.nn.Linear(64, 4))
    x, start = torch.randn(48, 64), {k: v.clone() for k, v in net.state_dict().items()}

    def grads(bad):
        net.load_state_dict(start)
        run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)
        for name in ("Sequential.0", "Sequential.2", "Sequential.4"):
            run.set_site(name, "exact")
        if bad:
            run.set_site("Sequential.2:input-gradient", tct.emulate(unit=accumulator_unit(4), scaling="tensor"))
        with run:
            net.zero_grad()
            net(x).square().mean().backward()
        return run, [p.grad.double().clone() for p in net.parameters()]

    run, emulated = grads(True)
    exact = grads(False)[1]
    direct = sum(float((g * (g - e)).sum()) for g, e in zip(emulated, exact))
    row = _row(run.attribution(lr=0.5), "Sequential.2", "input-gradient")
    assert row.shape == (64, 48, 64) and row.first_order_note == ""       # w @ grad^T: the transposed form
    assert abs(row.first_order / (0.5 * direct) - 1) < 1e-5                 # measured: 6e-8


def test_study_counts_sign_agreement_on_its_top_sites_apart():
    """The study compares the top sites by first-order and, besides, the input-gradient site of largest error: the
    summary counts the top ones on their own (the acceptance's figure) and all of them."""
    from tcnumerics.experiments import fp8_training

    site = lambda fo, cf: dict(first_order=fo, counterfactual=cf)  # noqa: E731
    sites = [site(-3e-3, -1e-3), site(2e-3, 1e-3), site(1e-3, None), site(-1e-4, 2e-3), site(None, None)]
    row = dict(kind="attribution", top=2, sites=[dict(s, phase="forward") for s in sites])
    fp8_training._summarise([row])
    assert row["sign_agreement_top"] == [2, 2] and row["sign_agreement"] == [2, 3]


def _captured_figures(monkeypatch) -> list:
    """Every figure saved from here on (matplotlib's Agg canvas), kept for reading its data back."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    saved, real = [], Figure.savefig

    def savefig(self, path, *args, **kwargs):
        saved.append(self)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return saved


def test_table_plot_stacks_each_sites_stages(tmp_path, monkeypatch):
    figures = _captured_figures(monkeypatch)
    net = torch.nn.Sequential(torch.nn.Linear(32, 8), torch.nn.Linear(8, 1))
    with tct.emulate(instruction=FP8, scaling="tensor", attribution=True) as run:
        net(torch.linspace(-1, 1, 64).reshape(2, 32)).square().sum().backward()
    table = run.attribution(lr=0.1)
    path = str(tmp_path / "sites.png")
    assert table.plot(path) == path and os.path.getsize(path) > 0
    with pytest.raises(FileExistsError, match="sites.png exists"):
        table.plot(path)
    bars = [p for p in figures[0].axes[0].patches]
    widths = np.array([b.get_width() for b in bars]).reshape(len(STAGES), len(table))
    for j, s in enumerate(STAGES):
        assert widths[j] == pytest.approx([r.stages[s].as_dict()["rms_rel"] for r in table], rel=1e-9)


def test_study_plot_draws_the_curves_and_the_attributed_sites(tmp_path, monkeypatch):
    from tcnumerics.experiments import fp8_training
    from tcnumerics.experiments.cli import build_parser, load_experiment

    figures = _captured_figures(monkeypatch)
    argv = ["--steps", "1", "--width", "16", "--batch", "2", "--context", "8", "--attribute-at", "0", "--top", "1",
            "--quiet",
            "--only", "float32 reference", "FP8 fast accumulation", "--plot", str(tmp_path / "study.png")]
    rows = fp8_training.run(build_parser("fp8-training", load_experiment("fp8-training")).parse_args(argv))
    curves, sites, bars = figures[0].axes
    losses = {r["setting"]: r["losses"] for r in rows if r["kind"] == "curve"}
    assert [line.get_ydata().tolist() for line in curves.lines] == list(losses.values())
    shown = sorted((s for s in rows[-1]["sites"] if s["first_order"] is not None),
                   key=lambda s: -abs(s["first_order"]))[:8][::-1]
    first_order = [b.get_width() for b in bars.containers[0]]
    assert first_order == [s["first_order"] for s in shown]
    assert "step 0" in bars.get_title()
    from matplotlib.container import ErrorbarContainer

    errorbar = next(c for c in bars.containers if isinstance(c, ErrorbarContainer))
    segments = errorbar.lines[2][0].get_segments()  # the counterfactual bars' error bars: twice the noise
    half = [(seg[1][0] - seg[0][0]) / 2 for seg in segments if len(seg) == 2]
    noisy = [2 * s["counterfactual_noise"] for s in shown if s.get("counterfactual_noise") is not None]
    assert noisy and sorted(half) == pytest.approx(sorted(noisy))


# --- per call: each measured call's own record beside the site's aggregate ---------------------------------------

def _two_inputs_run(device):
    """One step of the three-layer model on two inputs: every site called twice, each call its own values."""
    net = _three_layers(device)
    x1, x2 = torch.randn(16, 64).to(device), 3 * torch.randn(16, 64).to(device)
    with tct.emulate(instruction=FP8, scaling="tensor", promote_every=32, attribution=True) as run:
        (net(x1).square().mean() + net(x2).square().mean()).backward()
    return run


def test_per_call_records_aggregate_exactly_to_their_site(device):
    table = _two_inputs_run(device).attribution(lr=0.1)
    for row in table:
        calls = row.per_call
        assert len(calls) == row.calls == 2 and calls[0].number < calls[1].number
        assert {(c.site, c.phase, c.op, c.shape) for c in calls} == {(row.site, row.phase, row.ops, row.shape)}
        for name in STAGES + ("total",):
            site = row.total if name == "total" else row.stages[name]
            each = [c.total if name == "total" else c.stages[name] for c in calls]
            assert site.max_rel == max(s.max_rel for s in each) and site.max_ulp == max(s.max_ulp for s in each)
            assert site.n == sum(s.n for s in each)
            for key in ("rms_rel", "rms_ulp"):
                pooled = np.sqrt(sum(s.n * s.as_dict()[key] ** 2 for s in each) / site.n)
                assert site.as_dict()[key] == pytest.approx(pooled, rel=1e-12, abs=0)
        assert all(c.first_order is not None for c in calls) and row.first_order is not None
        assert sum(c.first_order for c in calls) == pytest.approx(row.first_order, rel=1e-12, abs=0)
        # two inputs, two calls with their own values (not the site's split in halves)
        assert calls[0].total.as_dict() != calls[1].total.as_dict() and calls[0].first_order != calls[1].first_order
    assert {r.phase for r in table} == {"forward", "weight-gradient", "input-gradient"}


def test_by_call_prints_every_call_in_order_and_the_json_round_trips():
    import json

    from tcnumerics.torch.attribution import AttributionTable, SiteAttribution

    table = _two_inputs_run("cpu").attribution(lr=0.1)
    calls = table.by_call()
    assert [c.number for c in calls] == list(range(sum(r.calls for r in table)))
    lines = str(calls).splitlines()
    assert len(lines) == 2 + len(calls) and lines[0].split()[:4] == ["call", "site", "phase", "shape"]
    assert lines[2].split()[:3] == ["0", "Sequential.0", "forward"]
    rows = json.loads(table.to_json())
    assert [len(r["calls_detail"]) for r in rows] == [r.calls for r in table]
    back = AttributionTable(SiteAttribution.from_dict(r) for r in rows)
    assert back.to_json() == table.to_json() and str(back.by_call()) == str(calls) and str(back) == str(table)


def test_input_gradient_call_values_need_lr_and_say_why_not():
    # without lr no call has an estimate; a call whose input has no parameter before it is exactly 0, with its note
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    with tct.emulate(instruction=FP8, scaling="tensor", attribution=True) as run:
        net(torch.randn(8, 32, requires_grad=True)).square().sum().backward()
    first = _row(run.attribution(lr=0.1), "Sequential.0", "input-gradient").per_call[0]
    assert first.first_order == 0.0 and "no parameter before the site's input" in first.first_order_note
    import json

    from tcnumerics.torch.attribution import SiteAttribution

    row = _row(run.attribution(lr=0.1), "Sequential.0", "input-gradient")
    back = SiteAttribution.from_dict(json.loads(json.dumps(row.as_dict())))       # the notes survive the JSON
    assert back.first_order_note == row.first_order_note != "" and back.as_dict() == row.as_dict()
    assert _row(run.attribution(), "Sequential.2", "input-gradient").per_call[0].first_order is None


def test_the_per_call_example_in_the_docs_prints_what_it_shows():
    import doctest
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "attribution.md").read_text()
    section = text[text.index("### Per call"):text.index("## Loss effect")]
    section = section.replace("```python\n", "\n").replace("```\n", "\n")  # the fences end the example's output
    test = doctest.DocTestParser().get_doctest(section, {}, "docs/attribution.md: Per call", None, 0)
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 6, runner.summarize()


# --- the counterfactual's noise: sign-flip probes ------------------------------------------------------------------

def _probed_run(device="cpu"):
    """An all-FP8 MLP attributed over one SGD step (loss, loss after the update), its sites, the step and state."""
    torch.manual_seed(3)
    net, x = _three_layers(device), torch.randn(32, 64).to(device)
    step = _sgd_step(net, x, 0.05)
    state = copy.deepcopy(net.state_dict())
    run = tct.emulate(instruction=FP8, scaling="tensor", attribution=True)
    with run:
        step()
    net.load_state_dict(state)
    sites = [(r.site, r.phase) for r in run.attribution(lr=0.05)]
    return run, net, step, sites


def test_a_probe_with_every_sign_kept_is_the_counterfactual_and_its_first_order(device, monkeypatch):
    # r = +1 everywhere moves each output by its whole error: the probe's loss change must be the counterfactual bit
    # for bit and its first-order value the table's (the same gradient, at the emulated point) -- a sign, scale,
    # gradient-point or call-order error in the probe fails it.
    from tcnumerics.torch.counterfactual import SignFlip

    run, net, step, sites = _probed_run(device)
    probed = [s for s in sites if s[1] != "input-gradient"]
    monkeypatch.setattr(SignFlip, "signs", lambda self, shape, xp: xp.ones(shape))
    effects = counterfactual(run, step, probed, state=[net], noise=1, lr=0.05)
    table = run.attribution(lr=0.05)
    assert {s[1] for s in probed} == {"forward", "weight-gradient"}
    for site in probed:
        row = _row(table, *site)
        (measured, first_order), = row.noise["samples"]
        assert measured == effects[site] == row.counterfactual
        assert first_order == pytest.approx(row.first_order, rel=1e-4)
        assert row.counterfactual_noise == abs(measured - first_order)


def test_noise_probes_are_seeded_and_reported(device):
    run, net, step, sites = _probed_run(device)
    chosen = [sites[0], next(s for s in sites if s[1] == "input-gradient")]
    counterfactual(run, step, chosen, state=[net], noise=3, lr=0.05)
    first = {s: _row(run.attribution(lr=0.05), *s).noise for s in chosen}
    counterfactual(run, step, chosen, state=[net], noise=3, lr=0.05)
    table = run.attribution(lr=0.05)
    probed, skipped = (_row(table, *s) for s in chosen)
    assert probed.noise == first[chosen[0]] and len(probed.noise["samples"]) == 3
    measured = [m for m, _ in probed.noise["samples"]]
    assert len(set(measured)) == 3 and probed.counterfactual not in measured  # three other directions
    assert skipped.noise is None  # input-gradient sites are not probed
    d = json.loads(table.to_json())
    row = next(r for r in d if (r["site"], r["phase"]) == chosen[0])
    assert row["counterfactual_noise"] == probed.counterfactual_noise and row["counterfactual_noise_method"].startswith(
        "measured")
    from tcnumerics.torch.attribution import SiteAttribution

    assert SiteAttribution.from_dict(row).noise == probed.noise
    assert f"{probed.counterfactual_noise:.1e}" in str(table).splitlines()[2 + table.index(probed)]


def test_study_counts_agreement_on_sites_its_counterfactual_resolves():
    from tcnumerics.experiments import fp8_training

    def site(fo, cf, noise):
        return dict(first_order=fo, counterfactual=cf, counterfactual_noise=noise, phase="forward")
    sites = [site(-3e-3, -1e-3, 4e-4), site(2e-3, -1e-3, 6e-4), site(1e-3, 5e-4, None), site(-1e-4, 2e-3, 1e-4)]
    row = dict(kind="attribution", top=2, sites=sites)
    fp8_training._summarise([row])
    assert row["sign_agreement_resolved"] == [1, 2]  # the second (|cf| < 2 noise) and third (no noise) left out
