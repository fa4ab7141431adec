"""Executors: where independent tasks run -- a local process pool, or a Dask cluster.

Both yield ``(item, result)`` pairs as tasks finish, in completion order; callers key
results by the item, so the order never reaches a result table.

* ``LocalExecutor(workers)`` -- a process pool whose workers start by *forkserver* (Linux)
  or *spawn*, not by a plain fork: a forked child of a parent that ran the compiled engine
  is safe (the engine switches it to serial kernels) but would compute on one thread only,
  while a forkserver/spawn worker keeps its share of the cores.  A worker that dies (killed, out of memory) breaks
  the pool; the pool is rebuilt and the unfinished tasks are submitted again (at most
  ``retries`` times each), so no finished result is lost and none is missing.
* ``DaskExecutor(address)`` -- a running ``dask.distributed`` scheduler (``tcp://host:8786``),
  or ``"local"`` for a ``LocalCluster`` of ``workers`` processes on this machine.  The
  scheduler re-runs the tasks of a worker that dies.

Example:
    >>> with LocalExecutor(workers=1) as ex:
    ...     sorted(r for _, r in ex.run(abs, [-2, 3]))
    [2, 3]
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable, Iterator

from .._extras import install_hint

__all__ = ["LocalExecutor", "DaskExecutor", "make_executor", "start_method"]


def start_method() -> str:
    """``forkserver`` where the platform has it, else ``spawn`` (never ``fork``)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _exit_with_parent(pid: int, interval: float = 1.0) -> None:
    """Pool worker initializer: exit once process ``pid`` is gone.

    A pool's workers outlive a parent killed with SIGKILL (they hold their own task queue
    open), so each one watches the parent and leaves instead of lingering as an orphan.
    """
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(interval)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # the pid now belongs to another user's process: ours is gone
                os._exit(1)

    threading.Thread(target=watch, name="tcnumerics-parent-watch", daemon=True).start()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under ``taskset``), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalExecutor:
    """A process pool on this machine (forkserver/spawn workers, rebuilt if a worker dies)."""

    def __init__(self, workers: int | None = None, retries: int = 3) -> None:
        cores = usable_cores()
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers: expected a positive integer, got {workers!r}")
        self.workers = workers or cores
        self.retries = retries
        self.threads = max(1, cores // self.workers)  # engine threads per worker
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "LocalExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> str:
        return f"local process pool, {self.workers} workers ({start_method()})"

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(start_method()),
                                   initializer=_exit_with_parent, initargs=(os.getpid(),))

    def run(self, fn: Callable, items: Iterable) -> Iterator[tuple]:
        """Yield ``(item, fn(item))`` as each finishes; exceptions raised by ``fn`` propagate."""
        pending = list(items)
        attempts = [0] * len(pending)
        todo = list(range(len(pending)))
        while todo:
            self._pool = self._pool or self._new_pool()
            futures = {self._pool.submit(fn, pending[i]): i for i in todo}
            todo = []
            broken = False
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for fut in done:
                    i = futures.pop(fut)
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        attempts[i] += 1
                        if attempts[i] > self.retries:
                            raise RuntimeError(f"a worker died {attempts[i]} times running task {i}") from None
                        todo.append(i)
                        continue
                    yield pending[i], result
            if broken:  # a worker died: the pool is unusable; start a fresh one for what is left
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskExecutor:
    """Tasks on a ``dask.distributed`` cluster: a scheduler address, or ``"local"`` for a LocalCluster."""

    def __init__(self, address: str, workers: int | None = None, retries: int = 3) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ValueError("--scheduler: needs dask.distributed, which is not installed: "
                             f"{install_hint('cluster')}") from None
        self._cluster = None
        if address == "local":
            n = workers or os.cpu_count() or 1
            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                         dashboard_address=None)
            address = self._cluster.scheduler_address
        try:
            self.client = Client(address, timeout="20s")
        except (OSError, TimeoutError) as exc:
            if self._cluster is not None:
                self._cluster.close()
            raise ValueError(f"--scheduler: cannot reach {address} ({exc})") from None
        self.address = address
        self.retries = retries
        self.threads = 1  # each Dask worker thread runs one task; the cluster's threads are the parallelism

    @property
    def workers(self) -> int:
        return len(self.client.scheduler_info().get("workers", {}))

    def __enter__(self) -> "DaskExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> str:
        return f"Dask scheduler {self.address}, {self.workers} workers"

    def run(self, fn: Callable, items: Iterable) -> Iterator[tuple]:
        from distributed import as_completed

        items = list(items)
        if not items:
            return
        futures = self.client.map(fn, items, pure=False, retries=self.retries)
        index = {f.key: i for i, f in enumerate(futures)}
        for fut, result in as_completed(futures, with_results=True):
            yield items[index[fut.key]], result
            fut.release()

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def make_executor(scheduler: str | None = None, workers: int | None = None) -> "LocalExecutor | DaskExecutor":
    """The executor for ``--scheduler`` / ``--workers``: none -> the local pool; an address or 'local' -> Dask."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"--workers: expected a positive integer, got {workers!r}")
    if scheduler:
        return DaskExecutor(scheduler, workers)
    return LocalExecutor(workers)
