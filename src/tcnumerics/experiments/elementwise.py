"""Element-wise profiling of one MMA (Sun et al., TPDS 2023, section 8, tables XII-XV).

Each operation of the datapath is isolated by zeroing every input it does not need:

- ``multiplication``: ``d0 = a0 * b0``;
- ``inner-product`` (addition of the inner product): ``d0 = a0 * 1 + a1 * 1``;
- ``accumulation``: ``d0 = a0 * 1 + c0``.

The two random values of each sample are consecutive N(0, 1) draws of the paper's
generator (``std::mt19937`` seeded 123456, ``normal_distribution<float>``), restarted for
each operation, so the three operations see the same value pairs.  "init low" means the
values were made representable in the low-precision format on the host (BF16 and FP16:
rounded to nearest; TF32: the low 13 bits cleared; C also for FP16 and TF32, while the
BF16 code keeps C in FP32); "init fp32" means FP32 values converted on the device (BF16,
FP16: round to nearest even; TF32: ``cvt.rna``, round to nearest with ties away).  The
reference is the CPU's FP32 result (``tcnumerics.experiments.cpu_reference``) and, for
FP16 C/D, also that result rounded to FP16.

The paper's code prints the mean *absolute* error ``|D_cpu - D_tc|`` over its samples
(1000 for BF16 and TF32, 1024 for FP16); with N(0, 1) inputs it is close to a relative
error.  Rows carry both: ``mean_rel_error`` (``|d - ref| / |ref|``) and ``mean_abs_error``,
and ``paper`` is compared with the latter.

Example:
    >>> rows = profile("ampere.mma.m16n8k8.f32.bf16.bf16.f32", "multiplication", "low", samples=50)
    >>> [(r["reference"], r["mean_rel_error"]) for r in rows]
    [('fp32', 0.0)]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from ..catalog import all_instructions, get_instruction
from ..formats import FloatFormat, Rounding, get_format
from ..model import InstructionSpec
from .cpu_reference import fp32_dot
from .progress import Progress
from .sampling import RNG_NAMES, make_normals

__all__ = ["TABLES", "OPERATIONS", "INITS", "PAPER", "Table", "profile", "add_arguments", "run", "render"]

OPERATIONS = ("multiplication", "inner-product", "accumulation")
INITS = ("low", "fp32")


@dataclass(frozen=True)
class Table:
    """One of the paper's tables: an operand format and a C/D format, measured on an A100."""

    number: str
    format: str
    cd_format: str
    instruction: str  # the A100 instruction the paper's code issues
    samples: int  # rounds in the paper's code
    references: tuple[str, ...]


TABLES = (
    Table("XII", "bf16", "fp32", "ampere.mma.m16n8k8.f32.bf16.bf16.f32", 1000, ("fp32",)),
    Table("XIII", "fp16", "fp32", "ampere.mma.m16n8k8.f32.f16.f16.f32", 1024, ("fp32",)),
    Table("XIV", "fp16", "fp16", "ampere.mma.m16n8k8.f16.f16.f16.f16", 1024, ("fp32", "fp32-to-fp16")),
    Table("XV", "tf32", "fp32", "ampere.mma.m16n8k8.f32.tf32.tf32.f32", 1000, ("fp32",)),
)

# The paper's values (mean absolute error), keyed (format, cd_format, reference, init),
# in the order multiplication, inner-product addition, accumulation.
PAPER = {
    ("bf16", "fp32", "fp32", "low"): (0.0, 0.0, 1.89e-8),
    ("bf16", "fp32", "fp32", "fp32"): (1.29e-3, 1.72e-3, 1.13e-3),
    ("fp16", "fp32", "fp32", "low"): (0.0, 0.0, 0.0),
    ("fp16", "fp32", "fp32", "fp32"): (1.59e-4, 2.18e-4, 1.36e-4),
    ("fp16", "fp16", "fp32", "low"): (1.22e-4, 1.81e-4, 1.81e-4),
    ("fp16", "fp16", "fp32", "fp32"): (1.94e-4, 2.99e-4, 2.99e-4),
    ("fp16", "fp16", "fp32-to-fp16", "low"): (0.0, 0.0, 0.0),
    ("fp16", "fp16", "fp32-to-fp16", "fp32"): (1.67e-4, 2.21e-4, 2.21e-4),
    ("tf32", "fp32", "fp32", "low"): (0.0, 0.0, 0.0),
    ("tf32", "fp32", "fp32", "fp32"): (1.59e-4, 2.17e-4, 1.36e-4),
}

# host-side "init low": how a value is made representable, and whether C is made so too
_LOW_INIT = {"bf16": (Rounding.RNE, False), "fp16": (Rounding.RNE, True), "tf32": (Rounding.RZ, True)}
# device-side conversion of FP32 operands (__float2bfloat16 / __float2half: RNE; cvt.rna.tf32.f32)
_DEVICE_CONVERSION = {"bf16": Rounding.RNE, "fp16": Rounding.RNE, "tf32": Rounding.RNA}


def _low_values(values: np.ndarray, fmt: str, accumulator: bool) -> np.ndarray:
    rounding, c_too = _LOW_INIT[fmt]
    if accumulator and not c_too:
        return values
    return get_format(fmt).round(values, rounding).astype(np.float32)


def _inputs(operation: str, x: np.ndarray, y: np.ndarray, k: int):
    """Host-side A row, B column and C of d0 for one operation ([N, k], [N, k], [N])."""
    n = len(x)
    a = np.zeros((n, k), np.float32)
    b = np.zeros((n, k), np.float32)
    c = np.zeros(n, np.float32)
    a[:, 0] = x
    if operation == "multiplication":
        b[:, 0] = y
    elif operation == "inner-product":
        a[:, 1] = y
        b[:, :2] = 1
    elif operation == "accumulation":
        b[:, 0] = 1
        c[:] = y
    else:
        raise ValueError(f"operation: expected one of {', '.join(OPERATIONS)}, got {operation!r}")
    return a, b, c


def _exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The exact d0 (float64 holds these one- and two-term results of FP32 values exactly)."""
    return (a.astype(np.float64) * b.astype(np.float64)).sum(axis=1) + c.astype(np.float64)


def _table_of(spec: InstructionSpec) -> Table | None:
    for table in TABLES:
        if spec.a_format.name == table.format and spec.d_format.name == table.cd_format \
                and spec.c_format.name == table.cd_format:
            return table
    return None


def profile(instruction: "str | InstructionSpec", operation: str, init: str, *, samples: int = 1000,
            rng: str = "paper", seed: int = 123456) -> list[dict]:
    """Profile one operation of one instruction; one row per reference (FP32, and FP32->FP16 for FP16 D).

    Rows follow the ``reproduce elementwise`` schema (``paper`` is None here; ``run`` fills it).
    """
    spec = get_instruction(instruction)
    table = _table_of(spec)
    if table is None:
        raise ValueError(f"instruction: {spec.name} is not a BF16/FP16/TF32 instruction with FP32 or FP16 C and D "
                         "(the element-wise study's setups)")
    if spec.k < 2:
        raise ValueError(f"instruction: {spec.name} has K={spec.k}; the inner product needs K >= 2")
    if init not in INITS:
        raise ValueError(f"init: expected one of {', '.join(INITS)}, got {init!r}")
    if samples < 1:
        raise ValueError(f"samples: must be >= 1, got {samples}")
    fmt = table.format
    values = make_normals(rng, seed).draw(2 * samples)
    x, y = values[0::2], values[1::2]
    if init == "low":
        x = _low_values(x, fmt, accumulator=False)
        y = _low_values(y, fmt, accumulator=(operation == "accumulation"))
    a, b, c = _inputs(operation, x, y, spec.k)

    # the device: FP32 operands converted as the paper's kernels do, then the unit model
    op_fmt = spec.a_format
    a_bits = op_fmt.from_float(a, _DEVICE_CONVERSION[fmt])
    b_bits = op_fmt.from_float(b, _DEVICE_CONVERSION[fmt])
    c_bits = spec.c_format.from_float(c, Rounding.RNE)
    from ..api import Instruction

    d = spec.d_format.to_float(Instruction(spec).dot_bits(a_bits, b_bits, c_bits))

    cpu = fp32_dot(a, b, c).astype(np.float64)
    exact_host = _exact(a, b, c)
    exact_device = _exact(op_fmt.to_float(a_bits), op_fmt.to_float(b_bits), spec.c_format.to_float(c_bits))
    references = {"fp32": cpu}
    if table.cd_format == "fp16":
        references["fp32-to-fp16"] = get_format("fp16").round(cpu)

    rows = []
    for ref_name in table.references:
        ref = references[ref_name]
        abs_err = np.abs(d - ref)
        nonzero = ref != 0
        rel_err = abs_err[nonzero] / np.abs(ref[nonzero])
        stats = {
            "total": float(abs_err.mean()),
            "conversion": float(np.abs(exact_device - exact_host).mean()),
            "unit_rounding": float(np.abs(d - exact_device).mean()),
            "reference_rounding": float(np.abs(ref - exact_host).mean()),
            "differs": float((d != ref).mean()),
        }
        cause, why = _explain(stats, spec, table, operation, init, ref_name)
        rows.append({
            "format": fmt, "cd_format": table.cd_format, "operation": operation, "init": init,
            "reference": ref_name,
            "mean_rel_error": float(rel_err.mean()) if rel_err.size else 0.0,
            "paper": None,
            "mean_abs_error": stats["total"],
            "max_abs_error": float(abs_err.max()),
            "differs_fraction": stats["differs"],
            "cause": cause, "explanation": why,
            "table": table.number, "instruction": spec.name, "samples": samples,
        })
    return rows


def _bits(fmt: FloatFormat) -> int:
    return fmt.man_bits + 1


def _explain(stats: dict, spec: InstructionSpec, table: Table, operation: str, init: str,
             reference: str) -> tuple[str, str]:
    """(cause, one-line reason) for an error, from the unit model and the error components."""
    model = spec.model
    op_fmt, out = spec.a_format, spec.d_format
    ref_bits = 11 if reference == "fp32-to-fp16" else 24
    total = stats["total"]
    if total == 0:
        if stats["unit_rounding"] == 0 and stats["reference_rounding"] == 0:
            if operation == "multiplication":
                need = 2 * _bits(op_fmt)
                return "none", (f"exact: two {_bits(op_fmt)}-bit significands multiply to {need} bits, "
                                f"{out.name} holds {_bits(out)}")
            return "none", f"exact: every sum fits the {_bits(out)} bits of {out.name}, nothing is rounded"
        return "none", (f"same rounding: the unit rounds the exact result to {out.name} "
                        f"({model.output_rounding.value.upper()}), as the reference does")
    share = {k: stats[k] / total for k in ("conversion", "unit_rounding", "reference_rounding")}
    if init == "fp32" and share["conversion"] >= 0.5:
        mode = _DEVICE_CONVERSION[table.format].value.upper()
        extra = (f", then its {out.name} output" if _bits(out) < ref_bits else "")
        return "input-conversion", (f"FP32 inputs rounded to {op_fmt.name} ({mode}, {_bits(op_fmt)}-bit "
                                    f"significand) on the device; the CPU keeps FP32{extra}")
    if _bits(out) < ref_bits:
        return "output-precision", (f"the unit writes {out.name} ({model.output_rounding.value.upper()}, "
                                    f"{_bits(out)}-bit significand); the reference keeps FP32")
    if model.output_rounding is not Rounding.RNE:
        return "output-rounding", (f"the unit {model.output_rounding.value.upper()}-rounds the exact sum "
                                   f"({model.frac_bits} bits kept below the largest term), the CPU rounds "
                                   f"to nearest: {stats['differs']:.1%} of samples differ by 1 ulp")
    return "other", f"{stats['differs']:.1%} of samples differ from the reference"


def resolve_instructions(names: list[str] | None, arch: str | None) -> dict[str, InstructionSpec]:
    """The instruction used for each table: the A100 default, another architecture's, or the user's.

    >>> resolve_instructions(None, "hopper")["XII"].name
    'hopper.mma.m16n8k8.f32.bf16.bf16.f32'
    """
    chosen: dict[str, InstructionSpec] = {}
    if arch is None:
        chosen = {t.number: get_instruction(t.instruction) for t in TABLES}
    else:
        specs = [s for s in all_instructions() if s.arch == arch]
        if not specs:
            raise ValueError(f"arch: no catalogued instructions for {arch!r}")
        for t in TABLES:
            fits = [s for s in specs if _table_of(s) == t and s.k >= 2 and s.c_entry == "fused"]
            if fits:
                # the paper's own shape where it exists, else the smallest K (one instruction)
                fits.sort(key=lambda s: (".m16n8k8." not in s.name, s.k, s.name))
                chosen[t.number] = fits[0]
        if not chosen:
            raise ValueError(f"arch: {arch!r} has no BF16/FP16/TF32 instruction with FP32/FP16 C and D")
    for name in names or ():
        spec = get_instruction(name)
        table = _table_of(spec)
        if table is None:
            raise ValueError(f"instruction: {spec.name} matches none of the tables (BF16, FP16 or TF32 operands "
                             "with FP32 C/D, or FP16 with FP16 C/D)")
        if spec.k < 2:
            raise ValueError(f"instruction: {spec.name} has K={spec.k}; the inner product needs K >= 2")
        chosen[table.number] = spec
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instruction", action="append", metavar="NAME",
                        help="use this instruction for the table of its formats (repeatable); "
                             "default: the A100 instructions the paper measured")
    parser.add_argument("--arch", help="take every table's instruction from this architecture (e.g. hopper)")
    parser.add_argument("--format", action="append", choices=("bf16", "fp16", "tf32"),
                        help="only these operand formats (repeatable)")
    parser.add_argument("--samples", type=int, default=None,
                        help="samples per cell (default: the paper's, 1000 for BF16/TF32 and 1024 for FP16)")
    parser.add_argument("--rng", choices=RNG_NAMES, default="paper",
                        help="'paper': mt19937 + libstdc++ normal_distribution<float> as in the paper's code; "
                             "'numpy': numpy's PCG64")


def run(args: argparse.Namespace) -> list[dict]:
    """All cells of tables XII-XV (or of the selected formats) as rows."""
    if args.samples is not None and args.samples < 1:
        raise ValueError(f"--samples: must be >= 1, got {args.samples}")
    chosen = resolve_instructions(args.instruction, args.arch)
    tables = [t for t in TABLES if t.number in chosen and (not args.format or t.format in args.format)]
    if not tables:
        raise ValueError("--format: no table left to run with these options")
    rows: list[dict] = []
    with Progress(len(tables) * len(INITS) * len(OPERATIONS), "elementwise", enabled=not args.quiet) as bar:
        for table in tables:
            for init in INITS:
                for index, operation in enumerate(OPERATIONS):
                    samples = args.samples or table.samples
                    for row in profile(chosen[table.number], operation, init, samples=samples, rng=args.rng,
                                       seed=args.seed):
                        row["paper"] = PAPER[(table.format, table.cd_format, row["reference"], init)][index]
                        rows.append(row)
                    bar.advance()
    return rows


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return "0" if v == 0 else f"{v:.3g}"


def _ratio(ours: float, paper: float | None) -> str:
    if paper is None:
        return "-"
    if paper == 0:
        return "equal" if ours == 0 else "paper 0"
    if ours == 0:
        return "ours 0"
    return f"x{ours / paper:.2f}"


def render(rows: list[dict], args: argparse.Namespace | None = None) -> str:
    """The tables as text, each cell next to the paper's value, with the unit model's reason."""
    out: list[str] = []
    header = (f"{'operation':<15}{'init':<6}{'reference':<14}{'mean abs err':>13}{'paper':>10}{'vs paper':>10}"
              f"{'mean rel err':>14}  why")
    for number in dict.fromkeys(r["table"] for r in rows):
        block = [r for r in rows if r["table"] == number]
        first = block[0]
        cd = "FP16" if first["cd_format"] == "fp16" else "FP32"
        out.append(f"Table {number}: {first['format'].upper()} inputs, {cd} C/D -- {first['instruction']}, "
                   f"{first['samples']} samples per cell")
        out.append(header)
        for r in block:
            out.append(f"{r['operation']:<15}{r['init']:<6}{r['reference']:<14}{_num(r['mean_abs_error']):>13}"
                       f"{_num(r['paper']):>10}{_ratio(r['mean_abs_error'], r['paper']):>10}"
                       f"{_num(r['mean_rel_error']):>14}  {r['explanation']}")
        out.append("")
    out.append("paper = Sun et al. (TPDS 2023) on an A100; their code averages |D_cpu - D_tc| (an absolute error).")
    return "\n".join(out)
