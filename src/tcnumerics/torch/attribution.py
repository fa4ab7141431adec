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
import hashlib
import json
import math
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import arrays
from ..formats import get_format
from ..gemm import gemm
from ..plan import interpret
from . import _tensors
from ._tensors import format_name
from ._input_gradient import InputGradientEffect
from .backends import CallInfo, UnitBackend
from .calls import GemmCall

__all__ = ["STAGES", "FIRST_ORDER_METHODS", "COUNTERFACTUAL_METHOD", "Recorder", "SiteAttribution", "CallAttribution",
           "AttributionTable", "CallTable", "counterfactual"]

STAGES = ("quantisation", "accumulation", "ordering", "epilogue", "conversion")

# What each loss-effect column is (``SiteAttribution.first_order_method``, the JSON, docs/attribution.md).
COUNTERFACTUAL_METHOD = ("measured: the loss re-run with the site exact minus the loss as emulated (one sample: it "
                         "includes the re-rounding of every later site's operands, which the first-order estimate "
                         "does not see)")
FIRST_ORDER_METHODS = {
    "forward": "approximation: -<dloss/dy, error>, the linearisation at the emulated point (straight through "
               "every later quantisation)",
    "weight-gradient": "approximation: lr * <g, error> for one SGD step of lr, the GEMM's own result g standing "
                       "for the gradient after the step (no momentum, Adam or tied weights)",
    "input-gradient": "approximation: lr * <g, J^T error> for one SGD step of lr, J^T error the change of every "
                      "earlier parameter's gradient to first order (a native backward pass from the site's input, "
                      "J at the emulated point), the parameters' gradients g standing for the gradient after the "
                      "step (no momentum, Adam or tied weights)",
}


@dataclass
class _Stat:
    """Running max and sum of squares of one error measure."""

    max_rel: float = 0.0
    sq_rel: float = 0.0
    max_ulp: float = 0.0
    sq_ulp: float = 0.0
    n: int = 0

    def add(self, rel, ulp) -> None:
        """Fold in one call's errors (numpy or, on the GPU engine, CuPy arrays: only four scalars reach the host)."""
        if rel.size:
            xp = arrays.namespace(rel)
            sums = arrays.to_host(xp.stack([rel.max(), ulp.max(), (rel * rel).sum(), (ulp * ulp).sum()]))
            self.max_rel = max(self.max_rel, float(sums[0]))
            self.max_ulp = max(self.max_ulp, float(sums[1]))
            self.sq_rel += float(sums[2])
            self.sq_ulp += float(sums[3])
            self.n += int(rel.size)

    @classmethod
    def of(cls, rel, ulp) -> "_Stat":
        """One call's statistics."""
        stat = cls()
        stat.add(rel, ulp)
        return stat

    def merge(self, other: "_Stat") -> None:
        """Fold in another call's statistics (the same sums as ``add`` of its errors: a site's figures are its
        calls' exactly, summed in call order)."""
        self.max_rel = max(self.max_rel, other.max_rel)
        self.max_ulp = max(self.max_ulp, other.max_ulp)
        self.sq_rel += other.sq_rel
        self.sq_ulp += other.sq_ulp
        self.n += other.n

    def as_dict(self) -> dict:
        n = max(self.n, 1)
        return dict(max_rel=self.max_rel, rms_rel=math.sqrt(self.sq_rel / n), max_ulp=self.max_ulp,
                    rms_ulp=math.sqrt(self.sq_ulp / n))

    @classmethod
    def from_dict(cls, d: dict) -> "_Stat":
        """Back from ``as_dict`` (the RMS values as a one-sample statistic: ``as_dict`` gives them back exactly)."""
        return cls(max_rel=d["max_rel"], sq_rel=d["rms_rel"] ** 2, max_ulp=d["max_ulp"], sq_ulp=d["rms_ulp"] ** 2,
                   n=1)


def _stages_from_dict(d: dict) -> dict:
    """Stage statistics from JSON (JSON written before the ``conversion`` stage lacks it: left out, printed "-")."""
    return {k: _Stat.from_dict(v) for k, v in d.items()}


@dataclass
class CallAttribution:
    """One measured call of a site (``SiteAttribution.per_call``): its own stage errors and first-order estimate
    (forward: -<dloss/dy, error> of this call's output; weight-gradient: lr * <out, error>; input-gradient: lr * <g,
    J^T error> of this call; None where there is none).  A few floats: no arrays are kept."""

    number: int  # the call's place among the recorder's measured calls (0: the first)
    site: str
    phase: str
    op: str
    shape: tuple
    rule: str
    split: str = "stages"
    stages: dict = field(default_factory=lambda: {s: _Stat() for s in STAGES})
    total: _Stat = field(default_factory=_Stat)
    first_order: float | None = None
    first_order_note: str = ""  # input-gradient calls: why the estimate is exactly 0 or was not computed

    def as_dict(self) -> dict:
        return dict(number=self.number, site=self.site, phase=self.phase, op=self.op, shape=list(self.shape),
                    rule=self.rule, split=self.split, stages={k: v.as_dict() for k, v in self.stages.items()},
                    total=self.total.as_dict(), first_order=self.first_order, first_order_note=self.first_order_note)

    @classmethod
    def from_dict(cls, d: dict) -> "CallAttribution":
        return cls(d["number"], d["site"], d["phase"], d["op"], tuple(d["shape"]), d["rule"], d["split"],
                   _stages_from_dict(d["stages"]), _Stat.from_dict(d["total"]), d["first_order"],
                   d.get("first_order_note", ""))


@dataclass
class SiteAttribution:
    """One row of ``run.attribution()``: the calls of one module in one phase."""

    site: str
    phase: str
    ops: str
    shape: tuple
    rule: str
    calls: int = 0
    stages: dict = field(default_factory=lambda: {s: _Stat() for s in STAGES})
    total: _Stat = field(default_factory=_Stat)
    split: str = "stages"  # or "total": the stages are not separated for this site (see the module docstring)
    first_order: float | None = None
    counterfactual: float | None = None
    first_order_note: str = ""  # input-gradient sites: calls whose estimate is exactly 0 or was not computed, why
    per_call: list = field(default_factory=list)  # CallAttribution of each call, in call order

    @property
    def first_order_method(self) -> str:
        """What ``first_order`` is -- always an approximation (a linearisation), never a measurement -- and, where
        some of the site's calls gave none or exactly 0, why."""
        method = FIRST_ORDER_METHODS[self.phase]
        return f"{method} [{self.first_order_note}]" if self.first_order_note else method

    def as_dict(self) -> dict:
        return dict(site=self.site, phase=self.phase, ops=self.ops, shape=list(self.shape), rule=self.rule,
                    calls=self.calls, split=self.split, stages={k: v.as_dict() for k, v in self.stages.items()},
                    total=self.total.as_dict(), first_order=self.first_order,
                    first_order_method=self.first_order_method, counterfactual=self.counterfactual,
                    counterfactual_method=COUNTERFACTUAL_METHOD, calls_detail=[c.as_dict() for c in self.per_call])

    @classmethod
    def from_dict(cls, d: dict) -> "SiteAttribution":
        """A row back from its JSON form (``as_dict``; also JSON written before the conversion stage and the
        per-call records: those columns are left out)."""
        method = d.get("first_order_method", "")
        base = FIRST_ORDER_METHODS.get(d["phase"], "")
        note = method[len(base) + 2:-1] if method.startswith(base + " [") else ""
        return cls(d["site"], d["phase"], d["ops"], tuple(d["shape"]), d["rule"], d["calls"],
                   _stages_from_dict(d["stages"]), _Stat.from_dict(d["total"]), d["split"], d["first_order"],
                   d["counterfactual"], note, [CallAttribution.from_dict(c) for c in d.get("calls_detail", ())])


_LEGEND = ("(stage columns: RMS of |error| / (|A| @ |B|); ulp: RMS in ulps of the output format; first-order: a "
           "linear approximation; counterf.: measured)")


def _stage_cells(r) -> str:
    """A row's stage columns: RMS relative error; "-" where the stages are not separated or not recorded."""
    return "  ".join(f"{r.stages[s].as_dict()['rms_rel']:8.1e}" if s in r.stages and (
        r.split == "stages" or s == "accumulation") else f"{'-':>8}" for s in STAGES)


def _stage_head() -> str:
    return "  ".join(f"{s[:5]:>8}" for s in STAGES)


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2e}"


class AttributionTable(list):
    """``run.attribution()``: SiteAttribution rows, ranked by the size of their loss effect; prints as a table."""

    def __str__(self) -> str:
        if not self:
            return "(no GEMM calls attributed)"
        head = (f"{'site':<28} {'phase':<15} {'calls':>5}  {_stage_head()}"
                f"  {'total':>8} {'ulp':>7}  {'first-order':>11}  {'counterf.':>10}")
        lines = [head, _LEGEND]
        for r in self:
            t = r.total.as_dict()
            lines.append(f"{r.site[-28:]:<28} {r.phase:<15} {r.calls:>5}  {_stage_cells(r)}  {t['rms_rel']:8.1e} "
                         f"{t['rms_ulp']:7.2f}  {_signed(r.first_order):>11}  {_signed(r.counterfactual):>10}")
        return "\n".join(lines)

    def by_call(self) -> "CallTable":
        """Every call of every row, in call order (one line each when printed)."""
        return CallTable(sorted((c for r in self for c in r.per_call), key=lambda c: c.number))

    def to_json(self) -> str:
        return json.dumps([r.as_dict() for r in self], allow_nan=False)

    def plot(self, path: str, *, overwrite: bool = False) -> str:
        """A bar chart of each site's RMS error by stage ([plot] extra: matplotlib)."""
        import os

        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"plot: {path} exists (pass overwrite=True)")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 0.3 * len(self) + 1.5))
        labels = [f"{r.site} ({r.phase})" for r in self]
        left = np.zeros(len(self))
        for s in STAGES:
            v = np.array([r.stages[s].as_dict()["rms_rel"] if s in r.stages else 0.0 for r in self])
            ax.barh(labels, v, left=left, label=s)
            left += v
        ax.set_xlabel("RMS |error| / (|A| @ |B|), stacked by stage")
        ax.invert_yaxis()
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return path


class CallTable(list):
    """``table.by_call()``: CallAttribution records in call order; prints one line per call."""

    def __str__(self) -> str:
        if not self:
            return "(no GEMM calls attributed)"
        lines = [f"{'call':>4}  {'site':<28} {'phase':<15} {'shape':<14} {_stage_head()}  {'total':>8} {'ulp':>7}  "
                 f"{'first-order':>11}", _LEGEND.replace("; counterf.: measured", "")]
        for c in self:
            t = c.total.as_dict()
            shape = "x".join(str(n) for n in c.shape)
            lines.append(f"{c.number:>4}  {c.site[-28:]:<28} {c.phase:<15} {shape:<14} {_stage_cells(c)}  "
                         f"{t['rms_rel']:8.1e} {t['rms_ulp']:7.2f}  {_signed(c.first_order):>11}")
        return "\n".join(lines)


class Recorder:
    """Held by ``EmulationMode.attribution``: names each call, computes it (emulated, exact, or on a site's own
    rule) and measures its stages.  ``measure=False`` only names and routes (the counterfactual re-runs)."""

    def __init__(self, measure: bool = True):
        from torch.utils.module_tracker import ModuleTracker

        self.tracker = ModuleTracker()
        self.measure = measure
        self.rows: dict[tuple, SiteAttribution] = {}
        self.overrides: dict[str, object] = {}  # module name -> "exact" or a backend
        self._unhooked: list = []  # forward outputs waiting for their grad_fn: (key, output, error)
        self.first_order: dict[tuple, float] = {}  # forward sites: sum of <dloss/dout, error> over backward passes
        self.counterfactuals: dict[tuple, float] = {}
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
            self._unhooked.append((out, *self._pending))
            self._pending = None

    _pending = None

    def _hook_outputs(self, module, args, output) -> None:
        waiting, self._unhooked = self._unhooked, []
        for out, key, err, record in waiting:
            if out.grad_fn is None:
                continue
            self.first_order.setdefault(key, 0.0)
            record.first_order = 0.0
            out.register_hook(self._accumulator(key, err, record))

    def _accumulator(self, key, err, record: CallAttribution):
        def hook(grad):
            if self.inputs.in_extra_pass:  # an input-gradient site's J^T e pass, not the loss's gradient
                return
            with _tensors.gpu_work(grad):  # one scalar reaches the host
                value = float((_tensors.float64_values(grad, arrays.on_device(err)) * err).sum())
            with self._lock:
                self.first_order[key] -= value
                record.first_order -= value
        return hook

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
                self._pending = (key, total if out.ndim == 3 else total[0], record)
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
    import copy

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


class _Epilogue:
    """alpha * acc + beta * C + bias in float64 (the reference epilogue) and its scale for |A| @ |B|."""

    def __init__(self, call: GemmCall, device: bool):
        def values(t):
            return _tensors.float64_values(t, device)

        self.alpha = float(call.alpha)
        self.c = None if call.c is None or call.beta == 0 else float(call.beta) * values(call.c)
        self.bias = None if call.bias is None else values(call.bias)
        self.scales = None
        if call.op == "_scaled_mm":
            self.scales = (values(call.scale_a), values(call.scale_b))

    def _descale(self, acc):
        if self.scales is None:
            return acc
        sa, sb = self.scales
        return acc * (sa.reshape(()) * sb.reshape(()) if sa.size == 1 and sb.size == 1
                      else sa.reshape(-1, 1) * sb.reshape(1, -1))

    def scale(self, acc):
        return abs(self.alpha) * abs(self._descale(acc))

    def __call__(self, acc):
        r = self.alpha * self._descale(acc)
        if self.c is not None:
            r = r + self.c
        if self.bias is not None:
            r = r + self.bias
        return r


def _converted(seen: list, values):
    """The value the call's output conversion received, flat in the result's namespace, or None (no plan ended in
    a ``Convert``).  The last values recorded whose sizes add up to the result's: unit mode runs gemm's own plan,
    then the epilogue's over the whole batch (the last one); library mode may run the epilogue per item or per
    block of rows (its runs, in order, are the result's items and rows in order)."""
    parts, size = [], 0
    for v in reversed(seen):
        if size >= values.size:
            break
        parts.append(v.reshape(-1))
        size += v.size
    if size != values.size or not parts:
        return None
    flat = parts[0] if len(parts) == 1 else arrays.concatenate(parts[::-1])
    if arrays.on_device(values) and not arrays.on_device(flat):  # a host epilogue, a device result: move it up
        flat = arrays.namespace(values).asarray(flat)
    return flat


def _stage_values(backend, call: GemmCall, backward: bool, a3, b3, info: CallInfo):
    """[quantised product, one chain, with ordering] before the epilogue, and "stages" or "total"."""
    if isinstance(backend, UnitBackend):
        recipe = backend.backward if backward else backend.recipe
        if recipe.scaling in ("mx", "nvfp4") or recipe.rounding == "stochastic" or call.op == "_scaled_mm":
            return [], "total"
        spec, order = recipe.spec, dict(promote_every=recipe.promote_every, split_k=recipe.split_k)
        quantised = recipe.quantize(a3, b3)  # the batch at once: descales per item
        engine = recipe.engine if recipe.engine != "auto" else "auto"
    else:
        structure = (getattr(getattr(info.call, "plan", None), "structure", None)
                     or _library_structure(backend, call, arrays.on_device(a3)))
        if structure is None or call.op == "_scaled_mm" or any(getattr(structure, k, None) for k in (
                "simt_kernel", "stream_k", "split_interleave", "input_rounding", "split_partial_format")):
            return [], "total"
        spec = structure.instruction
        order = dict(promote_every=structure.promote_every, split_k=structure.split_k, k_tile=structure.k_tile,
                     k_residue=structure.k_residue, split_granule=structure.split_granule)
        quantised = (a3, None, b3, None)
        engine = "auto"
    if arrays.on_device(a3):  # the unit's stages on the GPU engine too ("auto" picks it for device operands)
        engine = "cuda" if engine in ("auto", "fast", "cuda") else engine
    qa, da, qb, db = quantised
    dequantised = arrays.stack([_dequantise(qa[i], None if da is None else da[i], 1)
                                @ _dequantise(qb[i], None if db is None else db[i], 0) for i in range(qa.shape[0])])
    # one batched GEMM per stage (item i as gemm(qa[i], qb[i]) bit for bit)
    chained = arrays.float64(gemm(qa, qb, instruction=spec, scale_a=da, scale_b=db, engine=engine))
    ordered = chained
    if any(v is not None for v in order.values()):
        ordered = arrays.float64(gemm(qa, qb, instruction=spec, scale_a=da, scale_b=db, engine=engine, **order))
    return [dequantised, chained, ordered], "stages"


def _library_structure(backend, call: GemmCall, device: bool):
    """The library plan's structure (its instruction, promotion, split-K) for a library-mode call (CUDA tensors'
    operands stay on the device: the plan reads their shapes and strides)."""
    engine = "cuda" if device else "fast"
    try:
        fn, args, kwargs, _ = backend._route(call, None, engine)
        plan, _ = fn.prepare(*args, **dict(kwargs, engine=engine))
    except Exception:  # a call the plan cannot describe: its stages are not separated
        return None
    return plan.structure


def _dequantise(q, descale, axis: int):
    values = arrays.float64(q)
    if descale is None:
        return values
    d = arrays.float64(descale)
    if arrays.namespace(d) is not arrays.namespace(values):  # a host descale of device operands (a scale vector up)
        d = arrays.namespace(values).asarray(arrays.to_host(d))
    return values * (d.reshape(-1, 1) if axis == 1 and d.size > 1 else d.reshape(1, -1) if d.size > 1 else d)


def _exact(call: GemmCall, device: bool):
    """The call in float64 (product and epilogue), one RNE conversion to the output dtype -- where the call runs
    (CuPy arrays on the GPU engine)."""
    from .unit import epilogue

    def values(t):
        return _tensors.float64_values(t, device)

    a, b = values(call.a), values(call.b)
    acc = a @ b
    if call.op == "_scaled_mm":
        acc = _Epilogue(call, device)._descale(acc)
    c = None if call.c is None else arrays.namespace(acc).broadcast_to(values(call.c), acc.shape)
    return epilogue(acc, format_name(call.out_dtype), alpha=call.alpha, C=c, beta=call.beta,
                    bias=None if call.bias is None else values(call.bias), acc_format="fp64")


def _digest(values) -> bytes:
    """A fingerprint of a call's result bits (the counterfactual's re-run is checked against it): SHA-256 of a host
    array; for a device array two sums of its 64-bit patterns with odd weights, mod 2**64 (computed on the device,
    16 bytes to the host: a change of any one value always changes them)."""
    if not arrays.on_device(values):
        return hashlib.sha256(np.ascontiguousarray(values).tobytes()).digest()
    xp = arrays.namespace(values)
    bits = xp.ascontiguousarray(values).reshape(-1).view(np.uint64)
    weights = xp.arange(bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    sums = xp.stack([bits.sum(dtype=np.uint64), (bits * weights).sum(dtype=np.uint64)])
    return hashlib.sha256(arrays.to_host(sums).tobytes()).digest()


def _ulp(ref, fmt):
    """The output format's ulp at each value of ``ref`` (its smallest ulp below the normal range), in its namespace."""
    xp = arrays.namespace(ref)
    with np.errstate(divide="ignore"):
        e = xp.floor(xp.log2(abs(ref)))
    e = xp.where(xp.isfinite(e), xp.maximum(e, float(fmt.emin)), float(fmt.emin))
    return xp.exp2(e - fmt.man_bits)


def _ratio(e, scale):
    xp = arrays.namespace(e, scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = xp.where(scale > 0, e / xp.where(scale > 0, scale, 1.0), xp.where(e > 0, np.inf, 0.0))
    return xp.nan_to_num(r, nan=np.inf)
