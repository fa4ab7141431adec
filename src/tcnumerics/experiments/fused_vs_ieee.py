"""How far a naive per-operation IEEE simulator is from the fused tensor-core units.

A naive simulator computes ``d = c + sum_k a_k * b_k`` with ordinary IEEE arithmetic:
each product rounded, each addition rounded, in K order (catalog entries
``contrast.ieee.<working format>...``).  The units of Volta, Ampere and Hopper instead
fuse a group of products with C, truncate every term to a fixed number of bits below the
largest one and round once.  This experiment runs both on the same dot products (K = 16:
four Volta m8n8k4 steps, two Ampere groups, one Hopper group) from random and adversarial
families, and reports how often the bits differ, by how many units in the last place,
how often one side overflows where the other does not, and which side is closer to the
exact result.  Two pipelines: FP16 accumulation (naive FP16 arithmetic vs the units'
FP16 C/D) and FP32 accumulation (naive FP32 arithmetic on FP16 inputs vs FP32 C/D).

Families (FP16 operands; C in the accumulator format):
- ``normal``: N(0, 1) operands and C;
- ``cancellation``: the second half of the products negates the first, plus a small C;
- ``wide-span``: one product near 2**10, fifteen near 2**-10;
- ``accumulator-ties``: C near 1, products of exactly half an ulp of C (ties for RNE);
- ``product-overflow``: products beyond 65504 that cancel (FP16 per-operation overflows);
- ``underflow``: products near 2**-20, below FP16's subnormal grid.

Example:
    >>> row = compare("hopper.mma.m16n8k16.f16.f16.f16.f16", "product-overflow", vectors=20)
    >>> row["nonfinite_mismatch_fraction"]     # the naive model overflows, Hopper's fused group never
    1.0
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from ..api import Instruction
from ..catalog import get_instruction, instruction_names
from ..formats import FloatFormat, get_format
from ..model import InstructionSpec
from .progress import Progress

__all__ = ["FAMILIES", "UNITS", "NAIVE", "K", "make_family", "compare", "add_arguments", "run", "render"]

K = 16
FAMILIES = ("normal", "cancellation", "wide-span", "accumulator-ties", "product-overflow", "underflow")
# accumulator format -> the fused units compared (Volta, Ampere, Hopper) and the naive model
UNITS = {
    "fp16": ("volta.mma.m8n8k4.f16.f16.f16.f16", "ampere.mma.m16n8k16.f16.f16.f16.f16",
             "hopper.mma.m16n8k16.f16.f16.f16.f16"),
    "fp32": ("volta.mma.m8n8k4.f32.f16.f16.f32", "ampere.mma.m16n8k16.f32.f16.f16.f32",
             "hopper.mma.m16n8k16.f32.f16.f16.f32"),
}
NAIVE = {"fp16": "contrast.ieee.fp16.f16.f16.f16", "fp32": "contrast.ieee.fp32.f32.f16.f16"}


def make_family(family: str, vectors: int, c_format: "str | FloatFormat", seed: int = 123456):
    """Operand bits ``a``, ``b`` ([vectors, K] FP16) and ``c`` ([vectors], ``c_format``) of a family."""
    fp16 = get_format("fp16")
    c_fmt = get_format(c_format)
    rng = np.random.default_rng([seed, FAMILIES.index(family) if family in FAMILIES else 0])
    shape = (vectors, K)
    sign = rng.choice([-1.0, 1.0], size=shape)
    if family == "normal":
        a, b, c = rng.standard_normal(shape), rng.standard_normal(shape), rng.standard_normal(vectors)
    elif family == "cancellation":
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        a = fp16.round(a)
        a[:, K // 2:] = -a[:, :K // 2]
        b[:, K // 2:] = b[:, :K // 2]
        c = rng.standard_normal(vectors) * 2.0**-8
    elif family == "wide-span":
        a = sign * rng.uniform(1, 2, shape) * 2.0**-5
        b = rng.uniform(1, 2, shape) * 2.0**-5
        a[:, 0], b[:, 0] = rng.uniform(1, 2, vectors) * 2.0**5, rng.uniform(1, 2, vectors) * 2.0**5
        c = np.zeros(vectors)
    elif family == "accumulator-ties":
        ulp = 2.0**-(10 if c_fmt.man_bits == 10 else 23)
        c = 1 + rng.integers(0, 64, vectors) * ulp
        a = np.where(rng.random(shape) < 0.5, ulp / 2, 0.0) * sign
        b = np.ones(shape)
    elif family == "product-overflow":
        a = sign * rng.uniform(256, 400, shape)
        a = fp16.round(a)
        a[:, K // 2:] = -a[:, :K // 2]
        b = np.full(shape, 256.0)
        c = rng.standard_normal(vectors)
    elif family == "underflow":
        a = rng.standard_normal(shape) * 2.0**-10
        b = rng.standard_normal(shape) * 2.0**-10
        c = np.zeros(vectors)
    else:
        raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")
    return fp16.from_float(a), fp16.from_float(b), c_fmt.from_float(c)


def _exact(a_bits: np.ndarray, b_bits: np.ndarray, c_bits: np.ndarray, c_fmt: FloatFormat) -> np.ndarray:
    """The exact dot products, rounded once to float64 (FP16 products are exact in float64; fsum is exact)."""
    fp16 = get_format("fp16")
    prods = fp16.to_float(a_bits) * fp16.to_float(b_bits)
    c = c_fmt.to_float(c_bits)
    return np.array([math.fsum([*row, cv]) for row, cv in zip(prods.tolist(), c.tolist())])


def _ulp(values: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """The output format's unit in the last place at each value (its subnormal spacing near zero)."""
    mag = np.abs(values)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    e = np.maximum(np.where(mag > 0, e, fmt.emin), fmt.emin)
    return np.ldexp(1.0, (e - fmt.man_bits).astype(int))


def compare(unit: "str | InstructionSpec", family: str, *, vectors: int = 1000, seed: int = 123456,
            naive: "str | InstructionSpec | None" = None) -> dict:
    """Run one family through a fused unit and the naive IEEE model of its accumulator format."""
    spec = get_instruction(unit)
    acc = spec.d_format.name
    if spec.a_format.name != "fp16" or acc not in NAIVE or spec.c_format != spec.d_format:
        raise ValueError(f"unit: {spec.name} is not an FP16-input unit with FP16 or FP32 C = D")
    if K % spec.k:
        raise ValueError(f"unit: {spec.name} has K={spec.k}, which does not divide {K}")
    if vectors < 1:
        raise ValueError(f"vectors: must be >= 1, got {vectors}")
    naive_spec = get_instruction(naive or NAIVE[acc])
    a, b, c = make_family(family, vectors, spec.c_format, seed)
    with np.errstate(all="ignore"):
        d_unit = spec.d_format.to_float(Instruction(spec).dot_bits(a, b, c))
        d_naive = naive_spec.d_format.to_float(Instruction(naive_spec).dot_bits(a, b, c))
        exact = _exact(a, b, c, spec.c_format)
        same = (d_unit == d_naive) | (np.isnan(d_unit) & np.isnan(d_naive))
        finite = np.isfinite(d_unit) & np.isfinite(d_naive)
        ulp = _ulp(exact, spec.d_format)
        diff_ulps = np.abs(d_unit - d_naive)[finite] / ulp[finite]
        err_unit = np.abs(d_unit - exact) / ulp
        err_naive = np.abs(d_naive - exact) / ulp
    err_unit = np.where(np.isfinite(err_unit), err_unit, np.inf)
    err_naive = np.where(np.isfinite(err_naive), err_naive, np.inf)
    differ = ~same
    return {
        "family": family, "accumulator": acc, "unit": spec.name, "arch": spec.arch, "naive": naive_spec.name,
        "vectors": vectors,
        "differs_fraction": float(differ.mean()),
        "nonfinite_mismatch_fraction": float((np.isfinite(d_unit) != np.isfinite(d_naive)).mean()),
        "mean_ulp_difference": float(diff_ulps.mean()) if diff_ulps.size else None,
        "max_ulp_difference": float(diff_ulps.max()) if diff_ulps.size else None,
        "unit_mean_ulp_error": _finite_mean(err_unit),
        "naive_mean_ulp_error": _finite_mean(err_naive),
        "unit_closer_fraction": float((differ & (err_unit < err_naive)).mean()),
        "naive_closer_fraction": float((differ & (err_naive < err_unit)).mean()),
    }


def _finite_mean(values: np.ndarray) -> float | None:
    ok = values[np.isfinite(values)]
    return float(ok.mean()) if ok.size else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vectors", type=int, default=1000, help="dot products per family and unit (default 1000)")
    parser.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    parser.add_argument("--accumulator", action="append", choices=tuple(UNITS),
                        help="only this accumulator pipeline (repeatable; default both)")
    parser.add_argument("--instruction", action="append", metavar="NAME",
                        help="compare these units instead of the Volta/Ampere/Hopper defaults (repeatable)")


def run(args: argparse.Namespace) -> list[dict]:
    """Every family x unit row."""
    if args.vectors < 1:
        raise ValueError(f"--vectors: must be >= 1, got {args.vectors}")
    known = set(instruction_names())
    accumulators = args.accumulator or list(UNITS)
    if args.instruction:
        units = [get_instruction(n) for n in args.instruction]
        units = [u for u in units if u.d_format.name in accumulators]
    else:
        units = [get_instruction(n) for acc in accumulators for n in UNITS[acc] if n in known]
    for acc in {u.d_format.name for u in units}:
        if NAIVE.get(acc) not in known:
            raise ValueError(f"catalog: the naive model {NAIVE.get(acc)} is not catalogued in this installation")
    if not units:
        raise ValueError("--instruction/--accumulator: no unit left to compare")
    families = args.family or list(FAMILIES)
    rows = []
    with Progress(len(units) * len(families), "fused-vs-ieee", enabled=not args.quiet) as bar:
        for unit in units:
            for family in families:
                rows.append(compare(unit, family, vectors=args.vectors, seed=args.seed))
                bar.advance()
    return rows


def _pct(v: float) -> str:
    return "0" if v == 0 else f"{100 * v:.1f}%"


def _n(v: float | None) -> str:
    return "-" if v is None else "0" if v == 0 else f"{v:.3g}"


def render(rows: list[dict], args: argparse.Namespace | None = None) -> str:
    lines = []
    for acc in dict.fromkeys(r["accumulator"] for r in rows):
        block = [r for r in rows if r["accumulator"] == acc]
        lines.append(f"{acc.upper()} accumulation: fused units vs {block[0]['naive']} "
                     f"({block[0]['vectors']} dot products of K={K} per cell)")
        lines.append(f"{'family':<18}{'unit':<8}{'differ':>8}{'inf/NaN':>9}{'mean ulp':>10}{'max ulp':>10}"
                     f"{'unit err':>10}{'naive err':>10}{'unit closer':>13}{'naive closer':>14}")
        for r in sorted(block, key=lambda r: (FAMILIES.index(r["family"]) if r["family"] in FAMILIES else 99,
                                              r["unit"])):
            lines.append(f"{r['family']:<18}{r['arch']:<8}{_pct(r['differs_fraction']):>8}"
                         f"{_pct(r['nonfinite_mismatch_fraction']):>9}{_n(r['mean_ulp_difference']):>10}"
                         f"{_n(r['max_ulp_difference']):>10}{_n(r['unit_mean_ulp_error']):>10}"
                         f"{_n(r['naive_mean_ulp_error']):>10}{_pct(r['unit_closer_fraction']):>13}"
                         f"{_pct(r['naive_closer_fraction']):>14}")
        lines.append("")
    lines.append("differ: results with other bits; inf/NaN: one side finite, the other not; ulp columns: |difference| "
                 "and mean |error vs exact| in ulps of the output format (finite results).")
    return "\n".join(lines)
