"""Running a sweep: expand the spec, skip journaled tasks, run the rest on an executor, write the table.

Example:
    >>> import os, tempfile
    >>> from tcnumerics.sweep.spec import parse_spec
    >>> spec = parse_spec({"units": {"base": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "grid": {"frac_bits": [8, 25]}},
    ...                    "workloads": [{"kind": "gemm_error", "M": 4, "N": 4, "K": 64}]})
    >>> out = os.path.join(tempfile.mkdtemp(), "r.csv")
    >>> table = run_sweep(spec, out, workers=1, progress=False)
    >>> table[["unit.frac_bits", "max_rel_error"]].shape, bool(table["max_rel_error"].is_monotonic_decreasing)
    ((2, 2), True)
"""

from __future__ import annotations

import functools
import os

from ..experiments.progress import Progress
from .executors import make_executor
from .grid import expand
from .spec import SweepSpec, check_engine, load_spec
from .store import ResultStore, read_table
from .workloads import run_task

__all__ = ["run_sweep"]


def run_sweep(spec: "SweepSpec | str | os.PathLike", output: "str | os.PathLike", *, scheduler: str | None = None,
              workers: int | None = None, executor=None, progress: bool = True, overwrite: bool = False,
              engine: str | None = None):
    """Run every task of ``spec`` not yet in ``output``'s journal; return the finished table (DataFrame).

    ``scheduler``: None (a local process pool of ``workers`` processes), ``"local"`` (a Dask
    LocalCluster) or a Dask scheduler address; or pass a ready ``executor``.  ``engine``: where the
    arithmetic runs (default: the spec's ``sweep.engine``, else "auto"); every engine gives the same table, so
    a sweep may be resumed on another.  With "cuda" the local pool defaults to one worker (one GPU).
    """
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    engine = spec.engine if engine is None else engine
    check_engine("engine", spec, engine)
    if engine == "cuda" and workers is None and scheduler is None:
        workers = 1
    tasks = expand(spec)
    store = ResultStore(output, digest=spec.digest, total=len(tasks), overwrite=overwrite)
    try:
        todo = [t for t in tasks if t.task_id not in store.done]
        if todo:
            own = executor is None
            executor = executor or make_executor(scheduler, workers)  # an unreachable scheduler fails here
        bar = Progress(len(tasks), f"sweep {spec.name}", enabled=progress)
        bar.advance(len(tasks) - len(todo))
        if todo:
            try:
                fn = functools.partial(run_task, threads=executor.threads, engine=engine)
                for _task, row in executor.run(fn, todo):
                    store.add(row)
                    bar.advance()
            finally:
                if own:
                    executor.close()
        bar.close()
    finally:
        store.close()
    store.finish()
    return read_table(store.output)
