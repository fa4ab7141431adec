"""``tcnumerics sweep``: run a sweep spec, or draw a results table's Pareto view.

    tcnumerics sweep SPEC.toml -o results.parquet [--scheduler ADDRESS|local] [--workers N]
    tcnumerics sweep plot results.parquet -o pareto.png [--x COL --y COL --line COL]

A malformed spec, an unreachable scheduler or an existing output is one line on stderr
and exit 2; an interrupted run keeps its journal and resumes when started again.

Example:
    >>> from tcnumerics.cli import main
    >>> main(["sweep", "no-such-spec.toml", "-o", "r.parquet"])
    2
"""

from __future__ import annotations

import sys

__all__ = ["register"]


def register(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="run a design-space sweep (SPEC.toml), or 'sweep plot RESULTS'")
    p.add_argument("spec", metavar="SPEC", help="the sweep spec (.toml or .json), or 'plot'")
    p.add_argument("results", nargs="?", metavar="RESULTS", help="with 'plot': the results table to draw")
    p.add_argument("-o", "--output", required=True,
                   help="results table to write (.parquet or .csv); with 'plot': the figure (.png, .pdf, .svg)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address (tcp://host:8786) or 'local' for a Dask LocalCluster; "
                        "default: a local process pool")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes (default: the machine's cores; 1 with --engine cuda)")
    p.add_argument("--engine", default=None,
                   help="where the arithmetic runs: auto, fast, reference, exact or cuda (default: the spec's "
                        "sweep.engine, else auto); every engine gives the same table")
    p.add_argument("--overwrite", action="store_true", help="replace an existing results table or figure")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true", help="validate the spec and print the number of tasks")
    p.add_argument("--x", default=None, help="plot: the column on the x axis (default: unit.frac_bits, ...)")
    p.add_argument("--y", default=None, help="plot: the metric (default: norm_rel_error, ...)")
    p.add_argument("--line", default=None, help="plot: the column whose values get one colour each")
    p.add_argument("--workload", default=None, help="plot: which workload's rows (default: the table's first)")
    p.set_defaults(func=_cmd_sweep)


def _cmd_sweep(args) -> int:
    if args.spec == "plot":
        return _cmd_plot(args)
    if args.results is not None:
        raise ValueError(f"sweep: unexpected argument {args.results!r} (did you mean 'sweep plot {args.results}'?)")
    from .grid import expand
    from .runner import run_sweep
    from .spec import load_spec

    spec = load_spec(args.spec)
    if args.dry_run:
        print(f"{args.spec}: {len(expand(spec))} tasks")
        return 0
    table = run_sweep(spec, args.output, scheduler=args.scheduler, workers=args.workers,
                      progress=not args.quiet, overwrite=args.overwrite, engine=args.engine)
    print(f"{args.output}: {len(table)} rows, {len(table.columns)} columns")
    return 0


def _cmd_plot(args) -> int:
    from .._files import check_output
    from .plotting import plot_pareto
    from .store import read_table

    if args.results is None:
        raise ValueError("sweep plot: give the results table (tcnumerics sweep plot results.parquet -o fig.png)")
    check_output(args.output, args.overwrite, "pass --overwrite")  # before reading and drawing
    table = read_table(args.results)
    plot_pareto(table, args.output, x=args.x, y=args.y, line=args.line, workload=args.workload,
                overwrite=args.overwrite)
    print(f"{args.output}: drawn from {args.results} ({len(table)} rows)", file=sys.stdout)
    return 0
