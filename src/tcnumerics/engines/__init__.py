"""Engines that evaluate the unit model: ``reference`` (readable numpy, the specification),
``fast`` (compiled, bit-identical to the reference), ``cuda`` (the fast engine's bits on an
NVIDIA GPU, ``[gpu]`` extra) and ``exact`` (the mpmath/fractions oracle)."""

from __future__ import annotations

import numpy as np  # noqa: F401 - the doctests' np

from ..arrays import on_device
from .grid import grid_dot_bits  # noqa: F401 - re-exported: its public home since engines began

ENGINES = ("auto", "reference", "fast", "cuda", "exact")


def get_engine(name: str):
    """The module implementing ``dot_bits(spec, a, b, c)`` for an engine name."""
    if name not in ENGINES:
        raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    if name == "exact":
        from . import oracle

        return oracle
    if name == "cuda":
        from . import cuda

        return cuda
    if name in ("fast", "auto"):
        try:
            from . import fast
        except ImportError:
            if name == "fast":
                raise
        else:
            return fast
    from . import reference

    return reference


def resolve_engine(name: str, *arrays) -> str:
    """``"cuda"`` for ``"auto"`` when an input already lives on a GPU (CuPy array, torch CUDA tensor);
    otherwise ``name`` (validated).

    >>> resolve_engine("auto", np.zeros(3))
    'auto'
    """
    get_engine(name)
    if name == "auto" and any(_on_gpu(x) for x in arrays):
        return "cuda"
    return name


def _on_gpu(x) -> bool:
    module = type(x).__module__
    return on_device(x) or (module.startswith("torch") and bool(getattr(x, "is_cuda", False)))
