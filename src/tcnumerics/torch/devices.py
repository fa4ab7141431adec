"""Which engine computes a call whose tensors live on a device: the GPU engine for CUDA tensors
when it is usable (CuPy importable and a GPU present), else the CPU engine on a host copy."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def gpu_engine_usable() -> bool:
    """True when ``engine="cuda"`` can run here: CuPy imports and sees at least one GPU.

    >>> isinstance(gpu_engine_usable(), bool)
    True
    """
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "copy to the CPU"
        return False


def engine_for(device_type: str, engine: str) -> str:
    """The engine for a call on ``device_type`` ("cpu", "cuda", ...) given the requested ``engine``.

    CUDA tensors with ``engine="auto"`` go to the GPU engine when it is usable; everything else
    keeps the requested engine (a CPU engine on a host copy).

    >>> engine_for("cpu", "auto")
    'auto'
    """
    if device_type == "cuda" and engine == "auto" and gpu_engine_usable():
        return "cuda"
    return engine
