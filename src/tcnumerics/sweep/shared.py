"""Inputs shared by a sweep's tasks: computed once a worker, not once a task.

A sweep crosses units with workloads, and every unit of a workload cell sees the same inputs
for a seed (``derive_seed`` takes the workload, not the unit): the operands, their
quantisation, the exact reference, a model's float64 evaluation.  ``shared_input`` keeps the
last few of them per process, so a worker that runs 56 designs on 4 seeds draws and
references each seed once.  At most ``MAX_ENTRIES`` entries and ``MAX_BYTES`` bytes are kept
(least recently used dropped first; a larger entry is not kept: a large sweep recomputes rather
than holds gigabytes).  Cached arrays are made read-only, so a task
that would write into one fails instead of changing the next task's input.

Example:
    >>> calls = []
    >>> make = lambda: calls.append(1) or len(calls)
    >>> shared_input(("doc", 1), make), shared_input(("doc", 1), make), len(calls)
    (1, 1, 1)
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable

import numpy as np

__all__ = ["shared_input", "MAX_ENTRIES", "MAX_BYTES"]

MAX_ENTRIES = 16
MAX_BYTES = 512 << 20
_cache: "OrderedDict[Hashable, tuple[object, int]]" = OrderedDict()  # key -> (value, its bytes)


def shared_input(key: Hashable, make: Callable[[], object]) -> object:
    """``make()``'s value for ``key``, kept for later tasks of this process (least recently used dropped first)."""
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key][0]
    value = make()
    size = _nbytes(value)
    if size <= MAX_BYTES:
        _freeze(value)
        _cache[key] = (value, size)
        while len(_cache) > MAX_ENTRIES or sum(n for _, n in _cache.values()) > MAX_BYTES:
            _cache.popitem(last=False)
    return value


def _freeze(value) -> None:
    for v in value if isinstance(value, (tuple, list)) else (value,):
        if isinstance(v, np.ndarray):
            v.flags.writeable = False


def _nbytes(value) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.nbytes
    if hasattr(value, "element_size"):  # a torch tensor
        return value.element_size() * value.numel()
    if hasattr(value, "parameters"):  # a torch module
        return sum(_nbytes(t) for t in value.parameters())
    return int(getattr(value, "nbytes", 0) or 0)
