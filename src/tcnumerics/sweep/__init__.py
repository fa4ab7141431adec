"""Design-space sweeps: units x workloads x seeds as independent tasks, one tidy table of results.

Rooms: ``spec`` (parse and validate), ``units`` (catalog entries with fields changed),
``grid`` (tasks and their spec-derived seeds), ``workloads`` (what is measured),
``exact`` (the exact GEMM reference), ``executors`` (local process pool, Dask),
``store`` (the resumable journal and the table), ``runner`` (the loop), ``plotting``.
Needs pandas (and pyarrow for Parquet): ``pip install -e ".[cluster]"``.

Example:
    >>> from tcnumerics.sweep import parse_spec, expand
    >>> spec = parse_spec({"units": {"entries": ["ampere.mma.m16n8k8.f32.bf16.bf16.f32"]},
    ...                    "workloads": [{"kind": "chain", "grid": {"length": [2, 4]}}], "sweep": {"seeds": 3}})
    >>> len(expand(spec))
    6
"""

from .grid import Task, derive_seed, expand
from .runner import run_sweep
from .spec import SpecError, SweepSpec, load_spec, parse_spec
from .units import build_unit
from .workloads import WORKLOADS, run_task

__all__ = ["SpecError", "SweepSpec", "Task", "WORKLOADS", "build_unit", "derive_seed", "expand", "load_spec",
           "parse_spec", "run_sweep", "run_task"]
