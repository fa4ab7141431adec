"""Launching the fast engine's parallel numba kernels safely: in any thread, in forked children (private).

The ``parallel=True`` kernels are wrapped by ``fork_safe``.  A child
forked after its parent started numba's GNU OpenMP thread pool would be killed by numba on its
first parallel launch ("fork() called from a process already using GNU OpenMP"), so such a
child runs serial twins of the kernels (the same Python source compiled without
``parallel=True``, cached on disk under their own name): same bits, one core per process.
Under numba's workqueue layer, which aborts on concurrent launches, launches are serialised by
a lock; the OpenMP and TBB layers take concurrent calls from many threads as they are.

The first kernel a process runs from a cold numba cache says so once on standard error (its compilation takes
seconds, once per installation).

Example:
    >>> serial_only()
    False
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import types

import numba
from numba import njit

__all__ = ["fork_safe", "serial_only", "threads"]

_serial_only = False  # set in a child forked after its parent started numba's OpenMP threads
_launch_lock = threading.Lock()


def _threading_layer() -> str | None:
    """numba's threading layer, None before the first parallel launch chose one."""
    try:
        return numba.threading_layer()
    except ValueError:
        return None


def _after_fork_in_child() -> None:
    global _serial_only, _launch_lock
    # GNU OpenMP cannot run in a child forked after the parent used it; the other layers can
    _serial_only = _serial_only or _threading_layer() == "omp"
    _launch_lock = threading.Lock()  # a lock held by another parent thread would never be released here


os.register_at_fork(after_in_child=_after_fork_in_child)


def serial_only() -> bool:
    """Whether this process runs the serial twins of the parallel kernels (a child forked
    after its parent started numba's GNU OpenMP threads).

    >>> serial_only()
    False
    """
    return _serial_only


_compile_notice_given = False


def _compile_notice(kernel) -> None:
    """Say once on standard error when the first kernel a process runs is not in numba's disk cache: the
    compilation that follows takes seconds (once per installation), and silence would look like a hang."""
    global _compile_notice_given
    _compile_notice_given = True
    try:  # numba internals: the cache index a cached dispatcher would load; absent means it compiles now
        cold = not kernel.signatures and not os.path.exists(kernel._cache._cache_file._index_path)
    except AttributeError:
        return
    if cold:
        sys.stderr.write("tcnumerics: compiling the fast engine's numba kernels for their first use (up to a minute, "
                         "once; later runs load them from the cache)\n")
        sys.stderr.flush()


class fork_safe:
    """A ``parallel=True`` kernel that is safe to call from any thread and in forked children.

    Calls go to the parallel kernel, or, in a process where ``serial_only()`` holds, to its
    serial twin: the same Python function compiled with ``nogil=True`` and without
    ``parallel=True`` (``prange`` runs as ``range``), built on first use and cached on disk
    under the qualified name ``<name>_serial`` (numba's cache index does not tell the
    compile options apart).  Under the workqueue layer, launches take a process-wide lock.
    """

    def __init__(self, kernel) -> None:
        self.parallel = kernel
        self._serial = None
        self.__name__ = kernel.__name__
        self.__doc__ = kernel.__doc__

    def serial(self):
        """The serial twin (compiled or loaded from numba's cache on first call)."""
        if self._serial is None:
            py = self.parallel.py_func
            twin = types.FunctionType(py.__code__, py.__globals__, py.__name__ + "_serial", py.__defaults__,
                                      py.__closure__)
            twin.__qualname__ = py.__qualname__ + "_serial"
            twin.__doc__ = py.__doc__
            self._serial = njit(cache=True, nogil=True)(twin)
        return self._serial

    def __call__(self, *args):
        if not _compile_notice_given:
            _compile_notice(self.parallel)
        if _serial_only:
            return self.serial()(*args)
        layer = _threading_layer()
        if layer is None:  # the first launch starts numba's threads (and may pick workqueue)
            with _launch_lock, _torch_threads_kept():
                return self.parallel(*args)
        if layer == "workqueue":
            with _launch_lock:
                return self.parallel(*args)
        return self.parallel(*args)


@contextlib.contextmanager
def _torch_threads_kept():
    """Keep PyTorch's intra-op thread count across numba's first parallel launch.

    Starting its OpenMP threads, numba calls ``omp_set_num_threads(NUMBA_NUM_THREADS)`` on the launching
    thread; with both on one GNU OpenMP runtime that is also PyTorch's thread count from then on
    (``torch.get_num_threads()`` reads it).  Without this, a user's ``torch.set_num_threads(1)`` -- or PyTorch's
    default where it differs from numba's -- would silently change at the first tcnumerics call, and with it
    the bits of PyTorch's own thread-partitioned reductions: state that depends on which ran first.
    """
    torch = sys.modules.get("torch")
    get = getattr(torch, "get_num_threads", None)
    before = get() if callable(get) else None
    try:
        yield
    finally:
        if before is not None and get() != before:
            torch.set_num_threads(before)

def threads() -> int:
    """Threads the parallel kernels use in this process (1 where they run as serial twins)."""
    return 1 if _serial_only else numba.get_num_threads()
