"""Chain matrix multiplication (Sun et al., TPDS 2023, section 8, Fig. 17).

A 16 x K matrix A and K x K matrices B_1, B_2, ... of N(0, 1) values; each step computes
``D = A @ B_n`` with one MMA tile (m16n8k8 on the A100: K = 8, so D is again 16 x 8),
and D becomes the next A -- converted to the operand format on the way into the unit,
as the paper's kernels do.  A CPU chain in plain FP32 (``cpu_reference``) runs beside
it, and after N steps the error is the relative L2 (Frobenius) error of the paper's
code, ``||D_unit - D_cpu|| / ||D_unit||``, averaged over independent trials.

Init "low" makes A and every B representable in the operand format on the host (as in
``elementwise``); init "fp32" leaves them FP32 and lets the device round them (BF16,
FP16: RNE; TF32: ``cvt.rna``).  An FP16 chain overflows once an entry of D exceeds
65504 and turns into inf on its way into the next MMA: a trial that produced a
non-finite D has overflowed for good; ``rel_error`` is null from the first N at which
any trial has overflowed (the paper's program stops there).

Each trial here runs one chain of ``--length`` steps and reports every prefix N = 1, 2, ...
(the paper re-runs the chain from scratch for each N); the per-N averages estimate the
same quantity over independent trials.

Example:
    >>> rows = chain_rows("ampere.mma.m16n8k8.f32.bf16.bf16.f32", "fp32", trials=4, length=2)
    >>> [(r["N"], r["overflow"], r["rel_error"] > 1e-4) for r in rows]
    [(1, False, True), (2, False, True)]
"""

from __future__ import annotations

import argparse

import numpy as np

from ..api import Instruction
from ..catalog import all_instructions, get_instruction
from ..formats import get_format
from ..model import InstructionSpec
from .cpu_reference import fp32_matmul
from .elementwise import _DEVICE_CONVERSION, _low_values
from .plotting import check_plot_target, save_figure
from .progress import Progress
from .sampling import RNG_NAMES, make_normals

__all__ = ["FORMATS", "DEFAULT_INSTRUCTIONS", "chain_rows", "resolve_instructions", "add_arguments", "run",
           "render", "plot"]

FORMATS = ("tf32", "bf16", "fp16")
DEFAULT_INSTRUCTIONS = {
    "tf32": "ampere.mma.m16n8k8.f32.tf32.tf32.f32",
    "bf16": "ampere.mma.m16n8k8.f32.bf16.bf16.f32",
    "fp16": "ampere.mma.m16n8k8.f32.f16.f16.f32",
}
ROWS = 16  # M of the tile: A and D are 16 x K


def _format_of(spec: InstructionSpec) -> str | None:
    """The chain's operand format of an instruction, if it can run the chain (FP32 C and D, K = N)."""
    name = spec.a_format.name
    if name in FORMATS and spec.b_format == spec.a_format and spec.d_format.name == "fp32" \
            and spec.c_format.name == "fp32":
        return name
    return None


def chain_rows(instruction: "str | InstructionSpec", init: str, *, trials: int = 100, length: int = 20,
               rng: str = "paper", seed: int = 123456, progress: Progress | None = None) -> list[dict]:
    """Run ``trials`` chains of ``length`` steps through ``instruction``; one row per N."""
    spec = get_instruction(instruction)
    fmt_name = _format_of(spec)
    if fmt_name is None:
        raise ValueError(f"instruction: {spec.name} cannot run the chain (needs TF32, BF16 or FP16 operands "
                         "with FP32 C and D)")
    if init not in ("low", "fp32"):
        raise ValueError(f"init: expected 'low' or 'fp32', got {init!r}")
    if trials < 1 or length < 1:
        raise ValueError(f"trials, length: must be >= 1, got {trials} and {length}")
    k = spec.k
    fmt = get_format(fmt_name)
    device_rounding = _DEVICE_CONVERSION[fmt_name]
    inst = Instruction(spec)

    # the paper's draw order within a trial: A row-major, then each B row-major
    draws = make_normals(rng, seed).draw(trials * (ROWS * k + length * k * k)).reshape(trials, -1)
    if init == "low":
        draws = _low_values(draws, fmt_name, accumulator=False)
    a_host = draws[:, :ROWS * k].reshape(trials, ROWS, k)
    b_all = draws[:, ROWS * k:].reshape(trials, length, k, k)

    a_cpu = a_host
    a_unit = a_host
    overflowed = np.zeros(trials, bool)
    rows = []
    zero_c = np.zeros(trials * ROWS * k, spec.c_format.container_dtype)
    for step in range(length):
        b = b_all[:, step]
        d_cpu = fp32_matmul(a_cpu, b)
        with np.errstate(over="ignore", invalid="ignore"):
            a_bits = fmt.from_float(a_unit, device_rounding)  # FP16: beyond 65504 becomes inf
            b_bits = fmt.from_float(b, device_rounding)
        # every (trial, row, column): row of A against column of B, zero accumulator
        rows_a = np.broadcast_to(a_bits[:, :, None, :], (trials, ROWS, k, k)).reshape(-1, k)
        cols_b = np.broadcast_to(np.swapaxes(b_bits, 1, 2)[:, None, :, :], (trials, ROWS, k, k)).reshape(-1, k)
        d_unit = spec.d_format.to_float(inst.dot_bits(rows_a, cols_b, zero_c)).reshape(trials, ROWS, k)
        finite = np.isfinite(d_unit).all(axis=(1, 2)) & np.isfinite(d_cpu).all(axis=(1, 2))
        overflowed |= ~finite
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            diff = np.sqrt(((d_unit - d_cpu.astype(np.float64)) ** 2).sum(axis=(1, 2)))
            norm = np.sqrt((d_unit ** 2).sum(axis=(1, 2)))
            err = diff / norm
        alive = ~overflowed
        rows.append({
            "format": fmt_name, "init": init, "N": step + 1,
            "rel_error": None if overflowed.any() else float(err.mean()),
            "overflow": bool(overflowed.any()),
            "overflowed_trials": int(overflowed.sum()),
            "rel_error_surviving": float(err[alive].mean()) if alive.any() else None,
            "instruction": spec.name, "trials": trials,
        })
        a_cpu = d_cpu
        a_unit = d_unit.astype(np.float32)
        if progress is not None:
            progress.advance()
    return rows


def resolve_instructions(names: list[str] | None, arch: str | None) -> dict[str, InstructionSpec]:
    """The instruction of each format's chain: the A100's, another architecture's, or the user's.

    >>> sorted(resolve_instructions(None, None))
    ['bf16', 'fp16', 'tf32']
    """
    if arch is None:
        chosen = {f: get_instruction(n) for f, n in DEFAULT_INSTRUCTIONS.items()}
    else:
        chosen = {}
        for spec in sorted(all_instructions(), key=lambda s: (".m16n8k8." not in s.name, s.k, s.name)):
            fmt = _format_of(spec)
            if spec.arch == arch and fmt and fmt not in chosen and spec.c_entry == "fused":
                chosen[fmt] = spec
        if not chosen:
            raise ValueError(f"arch: {arch!r} has no TF32/BF16/FP16 instruction with FP32 C and D")
    for name in names or ():
        spec = get_instruction(name)
        fmt = _format_of(spec)
        if fmt is None:
            raise ValueError(f"instruction: {spec.name} cannot run the chain (needs TF32, BF16 or FP16 operands "
                             "with FP32 C and D)")
        chosen[fmt] = spec
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials", type=int, default=100,
                        help="independent chains per format and init (default 100; the paper used 1000)")
    parser.add_argument("--length", type=int, default=20, help="longest chain N (default 20)")
    parser.add_argument("--instruction", action="append", metavar="NAME",
                        help="use this instruction for its operand format (repeatable); default: the A100's m16n8k8")
    parser.add_argument("--arch", help="take each format's instruction from this architecture (e.g. hopper)")
    parser.add_argument("--format", action="append", choices=FORMATS, help="only these formats (repeatable)")
    parser.add_argument("--rng", choices=RNG_NAMES, default="paper",
                        help="'paper' (mt19937 + libstdc++ normal_distribution<float>) or 'numpy' (PCG64)")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the figure (needs matplotlib: pip install "
                                                            "\"tcnumerics[plot]\")")
    parser.add_argument("--force", action="store_true", help="let --plot replace an existing file")


def run(args: argparse.Namespace) -> list[dict]:
    """Every format x init x N row; draws the figure when ``--plot`` is given."""
    if args.trials < 1:
        raise ValueError(f"--trials: must be >= 1, got {args.trials}")
    if not 1 <= args.length <= 200:
        raise ValueError(f"--length: must be in 1..200, got {args.length}")
    if args.plot:
        check_plot_target(args.plot, args.force)
    chosen = resolve_instructions(args.instruction, args.arch)
    formats = [f for f in FORMATS if f in chosen and (not args.format or f in args.format)]
    if not formats:
        raise ValueError("--format: no format left to run with these options")
    rows: list[dict] = []
    with Progress(len(formats) * 2 * args.length, "chain", enabled=not args.quiet) as bar:
        for fmt in formats:
            for init in ("low", "fp32"):
                rows += chain_rows(chosen[fmt], init, trials=args.trials, length=args.length, rng=args.rng,
                                   seed=args.seed, progress=bar)
    if args.plot:
        plot(rows, args.plot)
    return rows


def plot(rows: list[dict], path: str) -> None:
    """Relative error against N per format (solid: init low, dashed: init FP32), overflow marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"tf32": "tab:blue", "bf16": "tab:orange", "fp16": "tab:green"}
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for fmt in dict.fromkeys(r["format"] for r in rows):
        for init, style in (("low", "-"), ("fp32", "--")):
            series = [r for r in rows if r["format"] == fmt and r["init"] == init]
            if not series:
                continue
            ok = [r for r in series if r["rel_error"] is not None and r["rel_error"] > 0]
            label = f"{fmt.upper()}, init {'low precision' if init == 'low' else 'FP32'}"
            ax.plot([r["N"] for r in ok], [r["rel_error"] for r in ok], style, marker="o", ms=3,
                    color=colors.get(fmt), label=label)
            first = next((r for r in series if r["overflow"]), None)
            if first is not None and ok:
                ax.plot([first["N"]], [ok[-1]["rel_error"]], marker="x", ms=9, mew=2, color=colors.get(fmt))
                ax.annotate(f"overflow at N={first['N']}", (first["N"], ok[-1]["rel_error"]),
                            textcoords="offset points", xytext=(6, -12 if init == "low" else 6), fontsize=8,
                            color=colors.get(fmt))
    trials = rows[0]["trials"] if rows else 0
    archs = ", ".join(sorted({r["instruction"].split(".", 1)[0] for r in rows}))
    ax.set_yscale("log")
    lengths = sorted({r["N"] for r in rows})
    ax.set_xticks(lengths[::max(1, -(-len(lengths) // 10))])  # about ten integer ticks
    ax.set_xlabel("chain length N (MMAs)")
    ax.set_ylabel("relative L2 error vs CPU FP32")
    ax.set_title(f"Chain matmul through the modelled {archs} MMA ({trials} trials per point)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    save_figure(fig, path, 120)
    plt.close(fig)


def render(rows: list[dict], args: argparse.Namespace | None = None) -> str:
    """One line per N, one column per format and init; 'overflow' where the chain overflowed."""
    series = list(dict.fromkeys((r["format"], r["init"]) for r in rows))
    by_key = {(r["format"], r["init"], r["N"]): r for r in rows}
    lengths = sorted({r["N"] for r in rows})
    head = f"{'N':>3}" + "".join(f"{f.upper() + ' ' + i:>14}" for f, i in series)
    lines = [head]
    for n in lengths:
        cells = []
        for f, i in series:
            r = by_key.get((f, i, n))
            cells.append("-" if r is None else "overflow" if r["overflow"] else f"{r['rel_error']:.3g}")
        lines.append(f"{n:>3}" + "".join(f"{c:>14}" for c in cells))
    instructions = sorted({r["instruction"] for r in rows})
    trials = rows[0]["trials"] if rows else 0
    lines.append(f"relative L2 error ||D_unit - D_cpu|| / ||D_unit||, mean of {trials} trials; "
                 f"instructions: {', '.join(instructions)}")
    return "\n".join(lines)
