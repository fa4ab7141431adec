"""Deterministic, platform-independent operand generator shared by the device capture and the replay.

Inputs are drawn from splitmix64 (pure uint64 arithmetic) and mapped to values with exact
float64 operations only, then rounded to the operand format by tcnumerics' own conversion, so
the GPU machine and a CI machine produce the very same bit patterns from a seed without
shipping large operand matrices.

    >>> bits = operand_bits("bf16", 7, (2, 3))
    >>> bits.dtype, bits.shape
    (dtype('uint16'), (2, 3))
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

try:
    from tcnumerics.formats import get_format
except Exception:  # a half-edited package elsewhere in the tree must not stop a device capture
    _path = os.path.join(os.path.dirname(__file__), "..", "..", "src", "tcnumerics", "formats.py")
    _spec = importlib.util.spec_from_file_location("_tc_formats", _path)
    _formats = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_formats)
    get_format = _formats.get_format

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(seed: int, n: int) -> np.ndarray:
    """n pseudo-random uint64 words of stream ``seed``."""
    with np.errstate(over="ignore"):
        z = (np.arange(1, n + 1, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x100000001B3)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def normal_like(seed: int, n: int) -> np.ndarray:
    """Approximately N(0, 1) values (Irwin-Hall of four uniforms), computed exactly in float64."""
    u = (splitmix64(seed, 4 * n) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    u = u.reshape(4, n)
    return ((u[0] + u[1]) + (u[2] + u[3]) - 2.0) * 1.7320508075688772


def operand_bits(fmt: str, seed: int, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    """Bit patterns of ``fmt`` (RNE from ``scale * normal_like``); fp32 keeps all 23 fraction bits."""
    n = int(np.prod(shape))
    values = normal_like(seed, n) * scale
    return get_format(fmt).from_float(values).reshape(shape)
