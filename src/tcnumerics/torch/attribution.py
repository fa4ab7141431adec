"""Error attribution inside a model: per call site, which stage of the emulated GEMM makes the error, and what it
does to the loss (``emulate(..., attribution=True)``; docs/attribution.md).

Each intercepted GEMM is named by the module that made it (``torch.utils.module_tracker.ModuleTracker``: the
innermost module running, forward or backward) and by its phase: ``forward``, ``weight-gradient`` (a backward 2-D
GEMM with no parameter as an operand whose result has a parameter's shape: K = tokens) or ``input-gradient`` (the
other backward GEMMs: a parameter as an operand, or activations only, as attention's ``bmm``).

**Stages.**  Against the product of the *original* operands (float64 matmul, then alpha, beta * C and bias in
float64 -- the reference; float64 is not exact, its relative error is about K * 2**-53, far below every stage
measured here) the emulated result is reached through five values, each made exact one at a time:

1. ``quantisation``: the float64 product of the operands *as the unit receives them* (scaled, rounded, descaled);
2. ``accumulation``: those operands on the unit, one chain over K (``tcnumerics.gemm``, no promotion or split-K);
3. ``ordering``: the unit with the recipe's (or the library plan's) promotion and split-K;
4. ``epilogue``: the emulated epilogue's value before the output conversion (alpha, C, bias, each rounded in
   FP32), as the plan interpreter hands it to the plan's root ``Convert`` (``plan.interpret.before_conversion``);
5. ``conversion``: the result the model received (that value converted to the output dtype: exactly 0 for FP32).

A stage's error is the difference of its value and the previous one's (the first three after the same float64
epilogue), so the five add up to the total error, and a stage that computes nothing new has an error of exactly
zero.  Each is reported as the largest and the RMS of ``|error| / (|A| @ |B|)`` (relative to the magnitudes
summed, which stays finite where a result cancels to zero) and in units in the last place of the output format at
``|A| @ |B|``.  Block-scaled units (MX, NVFP4), library kernels whose reduction ``tcnumerics.gemm`` does not
express (SIMT trees, stream-K, interleaved split-K), results whose plan ends in no ``Convert`` (a serial split-K)
and exact sites report the total as ``accumulation`` and say so (``split="total"``).

**Per call.**  Beside each site's aggregate, every measured call has its own record (``SiteAttribution.per_call``,
``CallAttribution``: its stages, total and first-order estimate, a few floats each); ``table.by_call()`` prints
them one line per call, in call order, and ``to_json()`` nests them in each row under ``calls_detail``.

**Loss effect** -- both columns are the change of a loss when the site is made exact (error = emulated - exact).
``counterfactual``: re-run a step with one site computed exactly (``set_site(name, "exact")``: float64 product and
epilogue, one RNE conversion), every other site as emulated, from the same state and RNG; forward sites change the
step's loss, backward sites the loss after the step's update.  ``first_order``: its linear estimate -- forward
sites ``-<dloss/dy, error>`` (a hook on each recorded output, summed over the backward passes run);
weight-gradient sites ``lr * <g, error>`` (the loss after one SGD step of learning rate ``lr``, with the GEMM's
own result ``g`` standing for the gradient); input-gradient sites ``lr * <g, J^T error>``: the error of ``dloss/dx``
reaches the loss through the gradient of every parameter before ``x``, which it moves by ``J^T error``
(``J = dx/dparams``: one more backward pass per call, native, from ``x``'s autograd edge with
``torch.autograd.grad``; ``g``: the parameters' gradients as this backward pass accumulated them; exactly 0 where
no parameter lies before ``x``; ``tcnumerics.torch._input_gradient``).  The counterfactual is measured, the
first-order estimate an approximation: each row says so (``SiteAttribution.first_order_method``,
``COUNTERFACTUAL_METHOD``).

Example:
    >>> import torch, tcnumerics.torch as tct
    >>> net = torch.nn.Sequential(torch.nn.Linear(32, 8), torch.nn.Linear(8, 1))
    >>> x = torch.linspace(-1, 1, 64).reshape(2, 32)
    >>> with tct.emulate(instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", scaling="tensor",
    ...                  attribution=True) as run:
    ...     net(x).square().sum().backward()
    >>> table = run.attribution(lr=0.1)
    >>> sorted((r.site, r.phase) for r in table)
    [('Sequential.0', 'forward'), ('Sequential.0', 'weight-gradient'), ('Sequential.1', 'forward'), ('Sequential.1', 'input-gradient'), ('Sequential.1', 'weight-gradient')]
    >>> [(c.number, c.site, c.phase) for c in table.by_call()][:3]
    [(0, 'Sequential.0', 'forward'), (1, 'Sequential.1', 'forward'), (2, 'Sequential.1', 'input-gradient')]
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import torch

from .. import arrays
from ..formats import get_format
from ..plan import interpret
from . import _tensors
from ._input_gradient import InputGradientEffect
from ._tensors import format_name
from .attribution_stages import _converted, _digest, _Epilogue, _exact, _ratio, _stage_values, _ulp
from .attribution_table import (COUNTERFACTUAL_METHOD, FIRST_ORDER_METHODS, NOISE_METHOD, STAGES, AttributionTable,
                                CallAttribution, CallTable, SiteAttribution, _Stat)
from .backends import CallInfo
from .calls import GemmCall
from .counterfactual import GradientCapture, SignFlip, counterfactual

__all__ = ["STAGES", "FIRST_ORDER_METHODS", "COUNTERFACTUAL_METHOD", "NOISE_METHOD", "Recorder", "SiteAttribution",
           "CallAttribution", "AttributionTable", "CallTable", "counterfactual"]


class Recorder:
    """Held by ``EmulationMode.attribution``: names each call, computes it (emulated, exact, or on a site's own
    rule) and measures its stages.  ``measure=False`` only names and routes (the counterfactual re-runs)."""

    def __init__(self, measure: bool = True):
        from torch.utils.module_tracker import ModuleTracker

        self.tracker = ModuleTracker()
        self.measure = measure
        self.rows: dict[tuple, SiteAttribution] = {}
        self.overrides: dict[str, object] = {}  # module name -> "exact" or a backend
        self._unhooked: list = []  # forward outputs waiting for their grad_fn: (output, sink)
        self.first_order: dict[tuple, float] = {}  # forward sites: sum of <dloss/dout, error> over backward passes
        self.counterfactuals: dict[tuple, float] = {}
        self.noise: dict[tuple, dict | None] = {}  # counterfactual(..., noise=n): per site, its probes
        self._params: set[int] = set()  # storages of the parameters of modules run (input-gradient operands)
        self._shapes: set[tuple] = set()  # their shapes (a weight-gradient GEMM's result has one, transposed or not)
        self._hooks = []
        self._lock = threading.Lock()
        self.digests: list[bytes] = []  # SHA-256 of each call's result, in call order (the re-runs check against it)
        self.inputs = InputGradientEffect()  # input-gradient sites' first-order estimates
        self._measured = 0  # calls measured so far (a call's record's number)

    # --- entering: the tracker and the parameter registry ----------------------------------------

    def __enter__(self):
        self.tracker.__enter__()
        module = torch.nn.modules.module
        self._hooks = [module.register_module_forward_pre_hook(self._note_params),
                       module.register_module_forward_hook(self._hook_outputs)]
        return self

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        self._hook_outputs(None, (), None)
        self.inputs.close()
        self.tracker.__exit__(*exc)

    def _note_params(self, module, args):
        for p in module.parameters(recurse=False):
            self._params.add(p.untyped_storage().data_ptr())
            self._shapes.add(tuple(p.shape[-2:]))
            self.inputs.note_param(p)

    def site(self, call: GemmCall, backward: bool) -> tuple[str, str]:
        """(module name, phase) of a call."""
        parents = self.tracker.parents
        name = max(parents, key=lambda n: (n.count(".") + (n != "Global"), n))
        if not backward:
            return name, "forward"
        uses_param = any(t.untyped_storage().data_ptr() in self._params for t in (call.a, call.b))
        M, N = call.shape[-3:-1]
        weight_shaped = not call.batched and ((M, N) in self._shapes or (N, M) in self._shapes)
        return name, "weight-gradient" if weight_shaped and not uses_param else "input-gradient"

    # --- one call ----------------------------------------------------------------------------------

    def execute(self, backend, call: GemmCall, *, backward: bool, index: int, **options):
        """The backend's ``execute``, routed by the site's override, with the stages measured."""
        key = self.site(call, backward)
        rule = self.overrides.get(f"{key[0]}:{key[1]}", self.overrides.get(key[0]))  # the phase's own rule first
        device = options.get("engine") == "cuda"  # a CUDA tensor on the GPU engine: measure there, no host copy
        seen = []  # the values the plans' output conversions received (measured runs only)
        if rule == "exact":
            result, info = _exact(call, device), CallInfo("exact (float64)")
        elif isinstance(rule, SignFlip):  # a counterfactual's noise probe: the emulated result moved by r * error
            result, info = backend.execute(call, backward=backward, index=index, **options)
            result = rule.move(call, result, _exact(call, device), key[1])
        elif isinstance(rule, GradientCapture):  # as emulated, dloss/dy of its forward outputs kept for the probes
            result, info = backend.execute(call, backward=backward, index=index, **options)
            if not backward:
                self._pending = rule.slot() if call.reshape is None else rule.skip()
        else:
            backend = backend if rule is None else rule
            with interpret.before_conversion() if self.measure else contextlib.nullcontext(seen) as seen:
                result, info = backend.execute(call, backward=backward, index=index, **options)
        values = arrays.float64(result)
        digest = _digest(values)
        with self._lock:
            self.digests.append(digest)
        if self.measure:
            pre = _converted(seen, values)
            error, record = self._measure(key, backend if rule is None else rule, call, backward, values, info,
                                          device, pre)
            if not backward:
                self.inputs.forward(call)
            elif key[1] == "input-gradient":  # one more (native) backward pass, from the call's forward operand
                self.inputs.backward(key, call, error, self.tracker, number=record.number)
        return result, info

    def bind(self, out: torch.Tensor) -> None:
        """Keep the last forward call's output tensor: once its module returns, autograd has given it a grad_fn and
        a hook on it accumulates ``<dloss/dout, error>`` during backward (the first-order estimate)."""
        if self._pending is not None:
            self._unhooked.append((out, self._pending))
            self._pending = None

    _pending = None  # the last forward call's sink: sink(None) once hooked, then sink(dloss/dout) per backward pass

    def _hook_outputs(self, module, args, output) -> None:
        waiting, self._unhooked = self._unhooked, []
        for out, sink in waiting:
            if out.grad_fn is None:
                continue
            sink(None)
            out.register_hook(self._accumulator(sink))

    def _accumulator(self, sink):
        def hook(grad):
            if self.inputs.in_extra_pass:  # an input-gradient site's J^T e pass, not the loss's gradient
                return
            with self._lock:
                sink(grad)
        return hook

    def _sink(self, key, record: CallAttribution, err):
        """A forward call's hook target: -<dloss/dout, error> added to its site's estimate and its own (None:
        hooked, both start)."""
        def sink(grad):
            if grad is None:
                self.first_order.setdefault(key, 0.0)
                record.first_order = 0.0
                return
            value = _tensors.inner(grad, err)
            self.first_order[key] -= value
            record.first_order -= value
        return sink

    def _measure(self, key, backend, call: GemmCall, backward: bool, values, info: CallInfo, device: bool, pre):
        """Add the call's stage errors to its row and its own record; (its total error (emulated - exact, [batch
        or 1, M, N]), an array where the call ran (numpy, or CuPy on the GPU engine: only reductions come to the
        host), the record).  ``pre``: the value its output conversion received (flat), or None."""
        a, b = _tensors.float64_values(call.a, device), _tensors.float64_values(call.b, device)
        a3, b3 = (a, b) if a.ndim == 3 else (a[None], b[None])
        out = values
        out3 = out if out.ndim == 3 else out[None]
        epi = _Epilogue(call, device)
        ref = epi(a3 @ b3)
        mag = epi.scale(abs(a3) @ abs(b3))
        staged, split = ([], "total") if pre is None else _stage_values(backend, call, backward, a3, b3, info)
        if split == "total":
            chain = [ref, ref, out3, out3, out3, out3]
        else:
            chain = [ref] + [epi(v) for v in staged] + [pre.reshape(out3.shape), out3]
        ulp = _ulp(mag, get_format(format_name(call.out_dtype)))
        stages = {}
        for stage, before, after in zip(STAGES, chain, chain[1:]):
            e = abs(after - before)
            stages[stage] = _Stat.of(_ratio(e, mag), _ratio(e, ulp))
        total = out3 - ref
        total_stat = _Stat.of(_ratio(abs(total), mag), _ratio(abs(total), ulp))
        with self._lock:
            row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = SiteAttribution(key[0], key[1], call.op, call.shape, info.kernel, split=split)
            row.split = "total" if split == "total" else row.split  # a site's stages are separated if all its calls'
            record = CallAttribution(self._measured, key[0], key[1], call.op, call.shape, info.kernel, split, stages,
                                     total_stat)
            self._measured += 1
            row.per_call.append(record)
            row.calls += 1
            for stage in STAGES:
                row.stages[stage].merge(stages[stage])
            row.total.merge(total_stat)
            if backward:
                if key[1] == "weight-gradient":
                    record.first_order = float((out3 * total).sum())  # times lr in the table
                    row.first_order = (row.first_order or 0.0) + record.first_order
            elif call.reshape is None:
                self._pending = self._sink(key, record, total if out.ndim == 3 else total[0])
        return total, record

    # --- the table ---------------------------------------------------------------------------------

    def table(self, lr: float | None = None) -> AttributionTable:
        """The rows, ranked by |first-order| then by RMS error (first-order: forward sites from the backward passes
        run so far; weight-gradient and input-gradient sites with ``lr``); each with its calls' records."""
        rows = []
        for key, r in self.rows.items():
            row = SiteAttribution(**vars(r))
            if r.phase == "weight-gradient":
                row.first_order = None if lr is None else lr * r.first_order
            elif r.phase == "input-gradient":
                row.first_order, row.first_order_note = self.inputs.value(key, lr)
            else:
                row.first_order = self.first_order.get(key)
            row.counterfactual = self.counterfactuals.get(key)
            row.noise = self.noise.get(key)
            row.per_call = [self._call_record(c, lr) for c in r.per_call]
            rows.append(row)
        rows.sort(key=lambda r: (-abs(r.first_order or 0.0), -r.total.as_dict()["rms_rel"], r.site, r.phase))
        return AttributionTable(rows)

    def _call_record(self, c: CallAttribution, lr: float | None) -> CallAttribution:
        """A copy of a call's record with its first-order estimate as the table gives it (times ``lr``)."""
        if c.phase == "weight-gradient":
            return dataclasses.replace(c, first_order=None if lr is None else lr * c.first_order)
        if c.phase == "input-gradient":
            value, note = self.inputs.call_value(c.number, lr)
            return dataclasses.replace(c, first_order=value, first_order_note=note)
        return dataclasses.replace(c)
