"""Workloads: what a sweep measures on one unit for one parameter set and seed.

Each workload validates its parameters when the spec is read (``check``) and turns
(unit, parameters, seed) into one row of metrics (``run``); ``run_task`` is the function
every executor ships to its workers.

* ``gemm_error`` -- an M x K x N GEMM through the unit (``tcnumerics.gemm``: promotion,
  split-K, scales) on operands drawn from a distribution and quantised with a scaling
  recipe, against the exact product of the quantised operands (scales applied in float64)
  and against the float64 product of the unquantised values (``e2e_*``: quantisation plus
  accumulation);
* ``chain`` -- Sun et al.'s chain matmul (``tcnumerics.experiments.chain``) at one length;
* ``elementwise`` -- one cell of Sun et al.'s element-wise tables
  (``tcnumerics.experiments.elementwise``);
* ``model_eval`` -- a small model's loss and arg-max agreement on the unit through
  ``tcnumerics.torch`` (``tcnumerics.sweep.model_eval``; needs torch).

Example:
    >>> from tcnumerics.sweep.units import build_unit
    >>> row = WORKLOADS["gemm_error"].run(build_unit("hopper.wgmma.m64n8k16.f32.bf16.bf16", {}),
    ...                                   {"M": 4, "N": 4, "K": 64}, seed=1)
    >>> 0 < row["max_rel_error"] < 1e-5, row["overflow_count"], row["nan_count"]
    (True, 0, 0)
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._extras import install_hint
from ..formats import FloatFormat, get_format
from ..model import InstructionSpec
from .exact import exact_matmul
from .shared import shared_input
from .threads import limit_threads
from .errors import SpecError

__all__ = ["Workload", "WORKLOADS", "DISTRIBUTIONS", "SCALINGS", "run_task", "draw_operand"]

DISTRIBUTIONS = ("normal", "uniform", "uniform_pm", "lognormal", "outliers")
SCALINGS = ("none", "tensor", "row", "block")
_BLOCK = 128  # DeepSeek-V3 style block scaling: 1 x 128 tiles of A, 128 x 128 tiles of B


@dataclass(frozen=True)
class Workload:
    """A named measurement: its parameter defaults and validators, and the function producing a row."""

    name: str
    defaults: dict
    validators: dict  # parameter -> (predicate, description)
    compute: Callable[[InstructionSpec, dict, int, str], dict]  # (unit, parameters, seed, engine) -> metrics
    on_gpu: bool = False  # whether engine "cuda" runs it on the GPU (the others run on the CPU engines only)

    def check(self, where: str, params: dict, grid: dict) -> None:
        """SpecError naming the first unknown or invalid parameter."""
        for key, values in [(k, [v]) for k, v in params.items()] + list(grid.items()):
            loc = f"{where}.{key}" if key in params else f"{where}.grid.{key}"
            if key not in self.defaults:
                raise SpecError(f"{loc}: unknown parameter of {self.name} (expected some of "
                                f"{', '.join(self.defaults)})")
            ok, what = self.validators[key]
            for v in values:
                if not ok(v):
                    raise SpecError(f"{loc}: expected {what}, got {v!r}")

    def run(self, spec: InstructionSpec, params: dict, seed: int, engine: str = "auto") -> dict:
        return self.compute(spec, {**self.defaults, **params}, seed, engine)


def _pos_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _int_or_none(v) -> bool:
    return v == "none" or _pos_int(v)


def _format_or_none(v) -> bool:
    if v == "none":
        return True
    try:
        get_format(v)
    except (ValueError, KeyError, TypeError):
        return False
    return True


# ------------------------------------------------------------------------------------------
# gemm_error

def draw_operand(rng: np.random.Generator, shape: tuple[int, int], distribution: str) -> np.ndarray:
    """Float64 values of one operand distribution.

    >>> draw_operand(np.random.default_rng(0), (2, 3), "uniform").shape
    (2, 3)
    """
    if distribution == "normal":
        return rng.standard_normal(shape)
    if distribution == "uniform":
        return rng.uniform(0.0, 1.0, shape)
    if distribution == "uniform_pm":
        return rng.uniform(-1.0, 1.0, shape)
    if distribution == "lognormal":  # wide dynamic range, random signs
        return rng.choice([-1.0, 1.0], shape) * rng.lognormal(0.0, 2.0, shape)
    if distribution == "outliers":  # N(0, 1) with 0.1% of the entries 100x larger (activation outliers)
        x = rng.standard_normal(shape)
        return np.where(rng.random(shape) < 1e-3, 100.0 * x, x)
    raise ValueError(f"distribution: expected one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")


def _scale_of(amax: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """FP32 scale mapping amax to the format's largest finite value (1 for an all-zero tile)."""
    s = np.where(amax > 0, amax / fmt.max_finite, 1.0)
    return s.astype(np.float32).astype(np.float64)


def _quantise(x: np.ndarray, fmt: FloatFormat, scale: np.ndarray) -> np.ndarray:
    """Values of ``x / scale`` rounded to ``fmt`` (RNE, saturating as casting recipes do)."""
    with np.errstate(over="ignore"):
        bits = fmt.from_float(x / scale, "rne", overflow="saturate")
    return fmt.to_float(bits)


def _scaled_operands(A: np.ndarray, B: np.ndarray, fa: FloatFormat, fb: FloatFormat, scaling: str):
    """(quantised A values, quantised B values, scale_a, scale_b) -- the scales as gemm takes them, or None."""
    M, K = A.shape
    N = B.shape[1]
    if scaling == "none":
        sa = sb = None
        ea, eb = np.ones((M, 1)), np.ones((1, N))
    elif scaling == "tensor":
        sa, sb = _scale_of(np.abs(A).max(), fa), _scale_of(np.abs(B).max(), fb)
        ea, eb = np.full((M, 1), sa), np.full((1, N), sb)
    elif scaling == "row":
        sa, sb = _scale_of(np.abs(A).max(axis=1), fa), _scale_of(np.abs(B).max(axis=0), fb)
        ea, eb = sa[:, None], sb[None, :]
    else:  # block: 1 x 128 tiles of A, 128 x 128 tiles of B
        kb, nb = -(-K // _BLOCK), -(-N // _BLOCK)
        pad_a = np.pad(np.abs(A), ((0, 0), (0, kb * _BLOCK - K)))
        pad_b = np.pad(np.abs(B), ((0, kb * _BLOCK - K), (0, nb * _BLOCK - N)))
        sa = _scale_of(pad_a.reshape(M, kb, _BLOCK).max(axis=2), fa)
        sb = _scale_of(pad_b.reshape(kb, _BLOCK, nb, _BLOCK).max(axis=(1, 3)), fb)
        ea = np.repeat(sa, _BLOCK, axis=1)[:, :K]
        eb = np.repeat(np.repeat(sb, _BLOCK, axis=0), _BLOCK, axis=1)[:K, :N]
    qa = _quantise(A, fa, ea)
    qb = _quantise(B, fb, eb)
    return qa, qb, sa, sb


def _exact_scaled(qa: np.ndarray, qb: np.ndarray, sa, sb, scaling: str) -> np.ndarray:
    """The exact product of the quantised operands, scales applied in float64."""
    if scaling == "none":
        return exact_matmul(qa, qb)
    if scaling == "tensor":
        return exact_matmul(qa, qb) * (float(sa) * float(sb))
    if scaling == "row":
        return exact_matmul(qa, qb) * sa[:, None] * sb[None, :]
    K = qa.shape[1]
    N = qb.shape[1]
    out = np.zeros((qa.shape[0], N))
    for j, k0 in enumerate(range(0, K, _BLOCK)):
        part = exact_matmul(qa[:, k0:k0 + _BLOCK], qb[k0:k0 + _BLOCK])
        out += part * sa[:, j:j + 1] * np.repeat(sb[j], _BLOCK)[None, :N]
    return out


def _ulp(values: np.ndarray, fmt) -> np.ndarray:
    """The spacing of ``fmt`` at each value's magnitude (its subnormal spacing near zero)."""
    if not isinstance(fmt, FloatFormat):
        return np.ones_like(values)
    exp = np.frexp(np.abs(values))[1] - 1
    return np.ldexp(1.0, np.maximum(exp, fmt.emin) - fmt.man_bits)


def error_metrics(got: np.ndarray, exact: np.ndarray, fmt) -> dict:
    """Relative and ulp errors of ``got`` against ``exact`` (finite, nonzero exact entries), overflow/NaN counts.

    >>> error_metrics(np.array([1.0, np.inf, np.nan]), np.array([1.0, 1e39, 2.0]), get_format("fp32"))["overflow_count"]
    1
    """
    got = np.asarray(got, np.float64)
    nan = np.isnan(got)
    overflow = np.isinf(got) & np.isfinite(exact)
    usable = np.isfinite(got) & np.isfinite(exact)
    diff = np.abs(got - exact)
    nonzero = usable & (exact != 0)
    rel = diff[nonzero] / np.abs(exact[nonzero])
    ulps = diff[usable] / _ulp(exact[usable], fmt)
    norm = np.linalg.norm(exact[usable])
    return {
        "max_rel_error": float(rel.max()) if rel.size else 0.0,
        "mean_rel_error": float(rel.mean()) if rel.size else 0.0,
        "norm_rel_error": float(np.linalg.norm(diff[usable]) / norm) if norm else 0.0,
        "max_ulp_error": float(ulps.max()) if ulps.size else 0.0,
        "mean_ulp_error": float(ulps.mean()) if ulps.size else 0.0,
        "exact_fraction": float((diff[usable] == 0).mean()) if ulps.size else 1.0,
        "overflow_count": int(overflow.sum()),
        "nan_count": int(nan.sum()),
    }


def _gemm_inputs(p: dict, seed: int, fa: FloatFormat, fb: FloatFormat) -> tuple:
    """(A, B, quantised A, quantised B, scale_a, scale_b, exact product): what every unit of a sweep shares for
    one parameter set and seed (the operands derive from the workload, not the unit) -- computed once a worker."""
    def make():
        rng = np.random.default_rng(seed)
        A = draw_operand(rng, (p["M"], p["K"]), p["distribution"])
        B = draw_operand(rng, (p["K"], p["N"]), p["distribution"])
        qa, qb, sa, sb = _scaled_operands(A, B, fa, fb, p["scaling"])
        return A, B, qa, qb, sa, sb, _exact_scaled(qa, qb, sa, sb, p["scaling"])

    key = ("gemm_error", seed, fa, fb, p["M"], p["N"], p["K"], p["distribution"], p["scaling"])
    return shared_input(key, make)


def _gemm_error(spec: InstructionSpec, p: dict, seed: int, engine: str) -> dict:
    from ..arrays import to_host
    from ..gemm import gemm

    fa, fb = spec.a_format, spec.b_format
    if not (isinstance(fa, FloatFormat) and isinstance(fb, FloatFormat)):
        raise ValueError(f"gemm_error: {spec.name} has integer operands; this workload draws floats")
    A, B, qa, qb, sa, sb, exact = _gemm_inputs(p, seed, fa, fb)
    promote = None if p["promote_every"] == "none" else p["promote_every"]
    out_format = None if p["out_format"] == "none" else p["out_format"]
    kwargs = {}
    if sa is not None:
        kwargs = {"scale_a": _placed(sa, None, engine), "scale_b": _placed(sb, None, engine), "scale_block": _BLOCK}
    with np.errstate(all="ignore"):
        got = gemm(_placed(fa.from_float(qa), fa, engine), _placed(fb.from_float(qb), fb, engine), instruction=spec,
                   promote_every=promote, split_k=p["split_k"] if p["split_k"] > 1 else None,
                   out_format=out_format, engine=engine, **kwargs)
    got = np.asarray(to_host(got), np.float64)
    fmt = get_format(out_format) if out_format else spec.model.output_format
    row = error_metrics(got, exact, fmt)
    e2e = error_metrics(got, A @ B, fmt)
    row.update({"e2e_max_rel_error": e2e["max_rel_error"], "e2e_norm_rel_error": e2e["norm_rel_error"]})
    return row


def _placed(values: np.ndarray, fmt: "FloatFormat | None", engine: str):
    """An operand where ``engine`` computes: on the GPU for "cuda" (bit patterns of ``fmt`` as ``DeviceValues``,
    or scale factors as a CuPy array), else on the host (typed values of ``fmt``)."""
    if engine != "cuda":
        return values if fmt is None else fmt.to_array(values)
    import cupy

    from ..arrays import DeviceValues

    return cupy.asarray(values) if fmt is None else DeviceValues(cupy.asarray(values), fmt)


# ------------------------------------------------------------------------------------------
# chain, elementwise, model_eval

def _chain(spec: InstructionSpec, p: dict, seed: int, engine: str) -> dict:
    from ..experiments.chain import chain_rows

    last = chain_rows(spec, p["init"], trials=p["trials"], length=p["length"], rng="numpy", seed=seed % 2**32)[-1]
    return {"rel_error": last["rel_error"], "rel_error_surviving": last["rel_error_surviving"],
            "overflowed_trials": last["overflowed_trials"]}


def _elementwise(spec: InstructionSpec, p: dict, seed: int, engine: str) -> dict:
    from ..experiments.elementwise import profile

    rows = profile(spec, p["operation"], p["init"], samples=p["samples"], rng="numpy", seed=seed % 2**32)
    row = next((r for r in rows if r["reference"] == p["reference"]), None)
    if row is None:
        raise ValueError(f"reference: {p['reference']!r} does not apply to {spec.name} "
                         f"(its references: {', '.join(r['reference'] for r in rows)})")
    return {k: row[k] for k in ("mean_rel_error", "mean_abs_error", "max_abs_error", "differs_fraction")}


def torch_available() -> bool:
    """Whether ``tcnumerics.torch`` (the PyTorch integration) and torch itself are installed."""
    try:
        return (importlib.util.find_spec("tcnumerics.torch") is not None
                and importlib.util.find_spec("torch") is not None)
    except (ImportError, ValueError):
        return False


def _model_eval(spec: InstructionSpec, p: dict, seed: int, engine: str) -> dict:
    if not torch_available():
        raise RuntimeError(f"model_eval needs torch, which is not installed: {install_hint('torch')}")
    from .model_eval import evaluate

    return evaluate(spec, p, seed, engine=engine)


def _needs_torch(v) -> bool:
    if not torch_available():
        raise SpecError(f"workloads: model_eval needs torch, which is not installed: {install_hint('torch')}")
    return v in ("mlp", "transformer")


def _width(v) -> bool:
    return _pos_int(v) and v % 4 == 0  # the transformer's 4 heads


WORKLOADS = {
    "gemm_error": Workload("gemm_error", {
        "M": 64, "N": 64, "K": 1024, "distribution": "normal", "scaling": "none", "promote_every": "none",
        "split_k": 1, "out_format": "none"}, {
        "M": (_pos_int, "a positive integer"), "N": (_pos_int, "a positive integer"),
        "K": (_pos_int, "a positive integer"),
        "distribution": (lambda v: v in DISTRIBUTIONS, f"one of {', '.join(DISTRIBUTIONS)}"),
        "scaling": (lambda v: v in SCALINGS, f"one of {', '.join(SCALINGS)}"),
        "promote_every": (_int_or_none, "a positive integer or 'none'"),
        "split_k": (_pos_int, "a positive integer"),
        "out_format": (_format_or_none, "a format name (fp32, bf16, ...) or 'none'")}, _gemm_error, on_gpu=True),
    "chain": Workload("chain", {"init": "fp32", "trials": 20, "length": 10}, {
        "init": (lambda v: v in ("low", "fp32"), "'low' or 'fp32'"),
        "trials": (_pos_int, "a positive integer"), "length": (_pos_int, "a positive integer")}, _chain),
    "elementwise": Workload("elementwise", {
        "operation": "accumulation", "init": "fp32", "samples": 1000, "reference": "fp32"}, {
        "operation": (lambda v: v in ("multiplication", "inner-product", "accumulation"),
                      "'multiplication', 'inner-product' or 'accumulation'"),
        "init": (lambda v: v in ("low", "fp32"), "'low' or 'fp32'"),
        "samples": (_pos_int, "a positive integer"),
        "reference": (lambda v: v in ("fp32", "fp32-to-fp16"), "'fp32' or 'fp32-to-fp16'")}, _elementwise),
    "model_eval": Workload("model_eval", {
        "model": "mlp", "batch": 256, "width": 128, "scaling": "none", "promote_every": "none"}, {
        "model": (_needs_torch, "'mlp' or 'transformer'"),
        "batch": (_pos_int, "a positive integer"), "width": (_width, "a positive multiple of 4"),
        "scaling": (lambda v: v in ("none", "tensor", "row", "mx", "nvfp4"),
                    "one of none, tensor, row, mx, nvfp4 (tcnumerics.torch's scalings)"),
        "promote_every": (_int_or_none, "a positive integer or 'none'")}, _model_eval, on_gpu=True),
}


def run_task(task, threads: int | None = None, engine: str = "auto") -> dict:
    """One task's row: the unit's parameters, the workload's parameters, the seed and the metrics.

    ``threads`` caps this worker's native threads -- numba, OpenBLAS, torch (``sweep.threads``) -- so that
    workers x threads = cores; ``engine`` is where
    the arithmetic runs (every engine gives the same row).
    """
    from .units import build_unit

    if threads:
        limit_threads(threads)
    spec = build_unit(task.entry, task.unit_params)
    workload = WORKLOADS[task.workload]
    params = {**workload.defaults, **task.params}
    metrics = workload.run(spec, task.params, task.seed, engine)
    row = {"task": task.index, "task_id": task.task_id, "unit": task.unit, "entry": task.entry}
    row.update({f"unit.{k}": _cell(v) for k, v in task.unit_params.items()})
    row.update({"workload": task.workload})
    row.update({f"param.{k}": _cell(v) for k, v in params.items()})
    row.update({"seed_index": task.seed_index, "seed": task.seed})
    row.update(metrics)
    return row


def _cell(value):
    """A parameter as a table cell: the spec's "none" becomes a missing value (typed columns)."""
    return None if value == "none" else value

