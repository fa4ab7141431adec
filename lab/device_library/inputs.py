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


def splitmix64(seed: int, n: int, index: np.ndarray | None = None) -> np.ndarray:
    """Words 0..n-1 (or the words at ``index``) of pseudo-random uint64 stream ``seed``."""
    i = np.arange(n, dtype=np.uint64) if index is None else np.asarray(index, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (i + np.uint64(1) + np.uint64(seed) * np.uint64(0x100000001B3)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def normal_like(seed: int, n: int, index: np.ndarray | None = None) -> np.ndarray:
    """Approximately N(0, 1) values (Irwin-Hall of four uniforms), computed exactly in float64.

    Element i uses words i, n + i, 2n + i and 3n + i of the stream; ``index`` picks elements.
    """
    i = np.arange(n, dtype=np.uint64) if index is None else np.asarray(index, dtype=np.uint64).ravel()
    words = np.concatenate([i + np.uint64(j * n) for j in range(4)])
    u = (splitmix64(seed, 0, words) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    u = u.reshape(4, len(i))
    return ((u[0] + u[1]) + (u[2] + u[3]) - 2.0) * 1.7320508075688772


def operand_bits(fmt: str, seed: int, shape: tuple[int, ...], scale: float = 1.0,
                 rows: np.ndarray | None = None, cols: np.ndarray | None = None) -> np.ndarray:
    """Bit patterns of ``fmt`` (RNE from ``scale * normal_like``); fp32 keeps all 23 fraction bits.

    ``rows`` / ``cols`` select a sub-matrix of a 2-D ``shape`` without generating the rest.

    >>> full = operand_bits("bf16", 3, (5, 7))
    >>> bool((operand_bits("bf16", 3, (5, 7), rows=[1, 4], cols=[0, 6]) == full[[1, 4]][:, [0, 6]]).all())
    True
    """
    n = int(np.prod(shape))
    if rows is None and cols is None:
        values = normal_like(seed, n) * scale
        return get_format(fmt).from_float(values).reshape(shape)
    R, C = shape
    r = np.arange(R) if rows is None else np.asarray(rows)
    c = np.arange(C) if cols is None else np.asarray(cols)
    index = (r[:, None] * C + c[None, :]).ravel()
    values = normal_like(seed, n, index) * scale
    return get_format(fmt).from_float(values).reshape(len(r), len(c))


# --- index-hashed operands (the survey): any element computable on its own, on the CPU or the GPU ---------
FIELD_BITS = 21  # three 21-bit fields of one splitmix64 word: an Irwin-Hall(3) value with up to 22 bits


def hashed_values(seed: int, n_cols: int, rows, cols, scale_log2: int = 0) -> np.ndarray:
    """float64 values of the logical matrix element (r, c) = hash(seed, r * n_cols + c), exact in FP32.

    Each value is ``(u1 + u2 + u3 - 3 * 2**20) * 2**(scale_log2 - 20)`` for three 21-bit fields of
    ``splitmix64(seed, index)``: approximately N(0, 1) (range [-3, 3)), at most 22 significant bits, so
    FP32 holds it exactly and rounding to BF16/FP16/FP8 is one RNE step, identical in torch and here.
    ``rows`` may be global row indices of a stacked [b * M, n_cols] operand.

    >>> v = hashed_values(5, 7, [0, 3], [1, 6])
    >>> v.shape, bool(np.all(np.abs(v) <= 3))
    ((2, 2), True)
    """
    r = np.asarray(rows, dtype=np.uint64).reshape(-1, 1)
    c = np.asarray(cols, dtype=np.uint64).reshape(1, -1)
    z = splitmix64(seed, 0, (r * np.uint64(n_cols) + c).ravel())
    mask = np.uint64((1 << FIELD_BITS) - 1)
    total = sum(((z >> np.uint64(FIELD_BITS * j)) & mask).astype(np.int64) for j in range(3))
    values = (total - 3 * 2 ** (FIELD_BITS - 1)).astype(np.float64) * 2.0 ** (scale_log2 - (FIELD_BITS - 1))
    return values.reshape(r.shape[0], c.shape[1])


def hashed_bits(fmt: str, seed: int, n_cols: int, rows, cols, scale_log2: int = 0) -> np.ndarray:
    """``hashed_values`` rounded to ``fmt`` (RNE), as bit patterns."""
    return get_format(fmt).from_float(hashed_values(seed, n_cols, rows, cols, scale_log2))
