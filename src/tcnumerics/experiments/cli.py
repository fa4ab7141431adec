"""``tcnumerics reproduce <experiment>``: run one experiment from the command line.

Each experiment is a module ``tcnumerics.experiments.<name with - as _>`` exposing
``add_arguments(parser)``, ``run(args) -> list[dict]`` and optionally
``render(rows, args) -> str``.  Modules are imported only when their experiment runs,
so a missing or broken optional experiment never breaks the others.  Every experiment
gets ``--json`` (standard output holds one JSON array of rows and nothing else),
``--seed`` and ``--quiet`` (no progress bars on standard error).

Example:
    >>> sorted(EXPERIMENTS)
    ['chain', 'elementwise', 'fp8-accumulation', 'fp8-training', 'fused-vs-ieee', 'model-numerics']
    >>> module_name("fused-vs-ieee")
    'tcnumerics.experiments.fused_vs_ieee'
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from types import ModuleType

__all__ = ["EXPERIMENTS", "register", "module_name", "load_experiment", "build_parser", "run_experiment"]

# experiment name -> one-line description (the module name follows from the experiment name)
EXPERIMENTS = {
    "elementwise": "error of each operation of one MMA (Sun et al. tables XII-XV)",
    "chain": "relative error along a chain of MMAs (Sun et al. Fig. 17)",
    "fused-vs-ieee": "how a per-operation IEEE FP16 model differs from the fused units",
    "fp8-accumulation": "FP8 GEMM accumulation: fast accumulation vs promotion",
    "model-numerics": "a small PyTorch model evaluated and trained on emulated units (needs torch)",
    "fp8-training": "a byte-level GPT trained on emulated FP8/BF16 units, with error attribution (needs torch)",
}

DEFAULT_SEED = 123456  # the seed of every numeric benchmark of Sun et al.
PAPER_EXPERIMENTS = ("elementwise", "chain")  # those that reproduce Sun et al.'s figures (the others have no paper)


def module_name(experiment: str) -> str:
    """The module implementing ``experiment``."""
    return f"{__package__}.{experiment.replace('-', '_')}"


def load_experiment(experiment: str) -> ModuleType:
    """Import an experiment's module; a missing or incomplete one is a one-line CLI error."""
    from ..cli_errors import CLIError

    if experiment not in EXPERIMENTS:
        raise CLIError(f"reproduce: unknown experiment {experiment!r} (known: {', '.join(EXPERIMENTS)})", 2)
    name = module_name(experiment)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            raise CLIError(f"reproduce {experiment}: module {name} is not part of this installation", 2) from None
        raise CLIError(f"reproduce {experiment}: needs the missing module {exc.name!r}", 2) from None
    for attr in ("add_arguments", "run"):
        if not callable(getattr(module, attr, None)):
            raise CLIError(f"reproduce {experiment}: module {name} does not define {attr}()", 2)
    return module


def build_parser(experiment: str, module: ModuleType) -> argparse.ArgumentParser:
    """The full argument parser of one experiment (common options + the module's own)."""
    from ..cli_errors import OneLineParser

    parser = OneLineParser(prog=f"tcnumerics reproduce {experiment}", description=EXPERIMENTS[experiment])
    parser.add_argument("--json", action="store_true",
                        help="print one JSON array of result rows on standard output and nothing else")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"random seed (default {DEFAULT_SEED}"
                             + (", the paper's)" if experiment in PAPER_EXPERIMENTS else ")"))
    parser.add_argument("--quiet", action="store_true", help="no progress bars on standard error")
    module.add_arguments(parser)
    return parser


def register(subparsers) -> None:
    """Add ``reproduce`` and one sub-command per known experiment (options parsed on demand)."""
    p = subparsers.add_parser("reproduce", help="run an experiment (Sun et al.'s numeric study and more)",
                              description="Run an experiment; 'tcnumerics reproduce NAME --help' lists its options.")
    sub = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", parser_class=type(p))
    for experiment, text in EXPERIMENTS.items():
        # '+' as the only option prefix: every argument after the name (including
        # --help) is collected untouched and parsed once the module is imported
        e = sub.add_parser(experiment, help=text, add_help=False, prefix_chars="+")
        e.add_argument("options", nargs="*")
        e.set_defaults(func=_cmd_reproduce)
    p.set_defaults(func=_cmd_missing_experiment)


def _cmd_missing_experiment(args) -> int:
    from ..cli_errors import CLIError

    raise CLIError(f"reproduce: name an experiment ({', '.join(EXPERIMENTS)})", 2)


def _json_safe(value):
    """NaN and infinities are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def run_experiment(experiment: str, argv: list[str]) -> tuple[list[dict], argparse.Namespace, ModuleType]:
    """Parse ``argv`` for ``experiment`` and run it; returns (rows, args, module)."""
    module = load_experiment(experiment)
    args = build_parser(experiment, module).parse_args(argv)
    rows = module.run(args)
    return rows, args, module


def _cmd_reproduce(args) -> int:
    rows, exp_args, module = run_experiment(args.experiment, list(args.options))
    if exp_args.json:
        sys.stdout.write(json.dumps(_json_safe(rows), allow_nan=False) + "\n")
        return 0
    render = getattr(module, "render", None)
    sys.stdout.write((render(rows, exp_args) if callable(render) else _plain_table(rows)) + "\n")
    return 0


def _plain_table(rows: list[dict]) -> str:
    """A fixed-width table of every key, for experiments without their own ``render``."""
    if not rows:
        return "(no rows)"
    keys = list(dict.fromkeys(k for row in rows for k in row))

    def cell(v) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return "-" if v is None else str(v)

    table = [[cell(row.get(k)) for k in keys] for row in rows]
    widths = [max(len(k), *(len(r[i]) for r in table)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.ljust(w) for k, w in zip(keys, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in table]
    return "\n".join(lines)
