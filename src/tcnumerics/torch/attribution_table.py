"""The attribution's report: per call and per site, each stage's error statistics and the loss-effect columns;
printed as a table, written as JSON, read back, plotted (``tcnumerics.torch.attribution``; docs/attribution.md).

>>> s = _Stat.of(np.array([1e-3, 3e-3]), np.array([1.0, 3.0]))
>>> round(s.as_dict()["rms_rel"], 6), s.as_dict()["max_ulp"]
(0.002236, 3.0)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from .. import arrays

__all__ = ["STAGES", "FIRST_ORDER_METHODS", "COUNTERFACTUAL_METHOD", "NOISE_METHOD", "SiteAttribution",
           "CallAttribution", "AttributionTable", "CallTable"]

STAGES = ("quantisation", "accumulation", "ordering", "epilogue", "conversion")

# What each loss-effect column is (``SiteAttribution.first_order_method``, the JSON, docs/attribution.md).
COUNTERFACTUAL_METHOD = ("measured: the loss re-run with the site exact minus the loss as emulated (one sample: it "
                         "includes the re-rounding of every later site's operands, which the first-order estimate "
                         "does not see)")
NOISE_METHOD = ("measured: the RMS of (counterfactual - first-order) over re-runs with the site's output moved by its "
                "own error with random signs (y - r*e, r = +-1 per element): the curvature and re-drawn roundings "
                "that one counterfactual sample holds at this error size")
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
    noise: dict | None = None  # counterfactual(..., noise=n): {"rms": ..., "samples": [[measured, first-order]]}

    @property
    def counterfactual_noise(self) -> float | None:
        """The RMS miss of the counterfactual's sign-flip probes (``NOISE_METHOD``), or None (not probed)."""
        return None if self.noise is None else self.noise["rms"]

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
                    counterfactual_method=COUNTERFACTUAL_METHOD, counterfactual_noise=self.counterfactual_noise,
                    counterfactual_noise_samples=None if self.noise is None else self.noise["samples"],
                    counterfactual_noise_method=NOISE_METHOD, calls_detail=[c.as_dict() for c in self.per_call])

    @classmethod
    def from_dict(cls, d: dict) -> "SiteAttribution":
        """A row back from its JSON form (``as_dict``; also JSON written before the conversion stage and the
        per-call records or the counterfactual's noise: those columns are left out)."""
        method = d.get("first_order_method", "")
        base = FIRST_ORDER_METHODS.get(d["phase"], "")
        note = method[len(base) + 2:-1] if method.startswith(base + " [") else ""
        return cls(d["site"], d["phase"], d["ops"], tuple(d["shape"]), d["rule"], d["calls"],
                   _stages_from_dict(d["stages"]), _Stat.from_dict(d["total"]), d["split"], d["first_order"],
                   d["counterfactual"], note, [CallAttribution.from_dict(c) for c in d.get("calls_detail", ())],
                   None if d.get("counterfactual_noise") is None else dict(
                       rms=d["counterfactual_noise"], samples=d["counterfactual_noise_samples"]))


_LEGEND = ("(stage columns: RMS of |error| / (|A| @ |B|); ulp: RMS in ulps of the output format; first-order: a "
           "linear approximation; counterf.: measured; noise: RMS miss of its sign-flip probes, measured)")


def _stage_cells(r) -> str:
    """A row's stage columns: RMS relative error; "-" where the stages are not separated or not recorded."""
    return "  ".join(f"{r.stages[s].as_dict()['rms_rel']:8.1e}" if s in r.stages and (
        r.split == "stages" or s == "accumulation") else f"{'-':>8}" for s in STAGES)


def _stage_head() -> str:
    return "  ".join(f"{s[:5]:>8}" for s in STAGES)


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2e}"


def _unsigned(x: float | None) -> str:
    return "-" if x is None else f"{x:.1e}"


class AttributionTable(list):
    """``run.attribution()``: SiteAttribution rows, ranked by the size of their loss effect; prints as a table."""

    def __str__(self) -> str:
        if not self:
            return "(no GEMM calls attributed)"
        head = (f"{'site':<28} {'phase':<15} {'calls':>5}  {_stage_head()}"
                f"  {'total':>8} {'ulp':>7}  {'first-order':>11}  {'counterf.':>10}  {'noise':>7}")
        lines = [head, _LEGEND]
        for r in self:
            t = r.total.as_dict()
            lines.append(f"{r.site[-28:]:<28} {r.phase:<15} {r.calls:>5}  {_stage_cells(r)}  {t['rms_rel']:8.1e} "
                         f"{t['rms_ulp']:7.2f}  {_signed(r.first_order):>11}  {_signed(r.counterfactual):>10}  "
                         f"{_unsigned(r.counterfactual_noise):>7}")
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
                 f"{'first-order':>11}", _LEGEND.split("; counterf.")[0] + ")"]
        for c in self:
            t = c.total.as_dict()
            shape = "x".join(str(n) for n in c.shape)
            lines.append(f"{c.number:>4}  {c.site[-28:]:<28} {c.phase:<15} {shape:<14} {_stage_cells(c)}  "
                         f"{t['rms_rel']:8.1e} {t['rms_ulp']:7.2f}  {_signed(c.first_order):>11}")
        return "\n".join(lines)
