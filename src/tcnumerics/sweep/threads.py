"""Thread caps for a pool worker: every native thread pool in the process, not only the engine's.

A pool of W workers on C cores gives each worker C / W threads.  Capping numba alone is not
enough: numpy's OpenBLAS starts one thread per core in every worker, so W workers run W x C
BLAS threads whose spin-waits starve each other (measured on the 2-core CI machine: the
accumulator-design sweep took 69 s with 2 workers against 21 s with 1; 10.6 s once OpenBLAS
was capped too).  ``limit_threads`` caps numba, torch (when imported) and every OpenBLAS
loaded in the process (through its ``*_set_num_threads`` entry point), and sets the usual
environment variables for libraries loaded later.

Example (in a child process: it changes the process it runs in, as a pool worker wants):
    >>> import subprocess, sys
    >>> code = "import numpy; from tcnumerics.sweep.threads import limit_threads; print(limit_threads(1) >= 0)"
    >>> subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    'True'
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["limit_threads"]

_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_OPENBLAS_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads", "openblas_set_num_threads64_")
_applied: int | None = None


def limit_threads(n: int) -> int:
    """Cap this process's native thread pools at ``n`` threads; return how many OpenBLAS libraries were capped."""
    global _applied
    n = max(1, int(n))
    for name in _ENV:
        os.environ[name] = str(n)
    _limit_numba(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    capped = _limit_openblas(n) if _applied != n else 0
    _applied = n
    return capped


def _limit_numba(n: int) -> None:
    try:
        import numba
    except ImportError:
        return
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


def _loaded_libraries() -> list[str]:
    """Paths of the shared libraries mapped into this process (Linux); empty elsewhere."""
    try:
        with open("/proc/self/maps") as fh:
            return sorted({line.split(None, 5)[5].strip() for line in fh if line.count(" ") >= 5 and ".so" in line})
    except (OSError, IndexError):
        return []


def _limit_openblas(n: int) -> int:
    capped = 0
    for path in _loaded_libraries():
        if "openblas" not in os.path.basename(path).lower():
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, s) for s in _OPENBLAS_SETTERS if hasattr(lib, s)), None)
        if setter is not None:
            setter(ctypes.c_int(n))
            capped += 1
    return capped
